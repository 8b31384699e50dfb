"""`kubectl logs` end to end: the API server proxies pods/log to the node agent's HTTPS log
endpoint (the Node's daemonEndpoints port), which reads the CRI-format files conmon writes for
real runc containers and serves only the API server's kubelet-client certificate. Needs root,
runc, conmon and umoci, as test_pods_run.py."""
import glob
import http.client
import os
import shutil
import ssl
import subprocess
import time

import pytest

from conftest import AGENT_FAST_FLAGS, KITE, Cluster, TLSIdentity, _workdir, delete_pods_now, end_containers
from test_pods_run import NS, sh, status_of, wait
from test_pods_run import pod as run_pod


def pod(c, name, containers, restart="Always"):
    # sh as pid 1 ignores SIGTERM: a short grace period keeps the clean-up short
    return run_pod(c, name, containers, restart=restart, grace=1)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if os.geteuid() != 0 or not shutil.which("runc") or not shutil.which("conmon") or not shutil.which("umoci"):
        pytest.skip("needs root, runc, conmon and umoci (scripts/install-deps)")
    work = _workdir(tmp_path_factory, "logs")
    tar = os.path.join(os.path.dirname(KITE), "busybox.tar")
    if not os.path.exists(tar):
        tar = str(work / "busybox.tar")
        subprocess.run([os.path.join(ROOT, "scripts/make-busybox-image"), tar], check=True, capture_output=True)
    # --port 0: any free port, reported in the Node's daemonEndpoints; --stream-buffer 16 KiB
    # (256 KiB by default): exec's flow control (test_pods_exec.py) turns at every few messages
    c = Cluster("up", work, extra_args=[*AGENT_FAST_FLAGS, "--port", "0", "--stream-buffer", "16384"])
    r = subprocess.run([KITE, "images", "import", tar, "--root-dir", str(c.data_dir / "agent")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    c.start()
    node = wait(lambda: (c.api().get("/api/v1/nodes").json().get("items") or [None])[0], 20, "node")
    c.node = node["metadata"]["name"]
    c.agent_port = wait(lambda: c.api().get(f"/api/v1/nodes/{c.node}").json()["status"]
                        .get("daemonEndpoints", {}).get("kubeletEndpoint", {}).get("Port"), 20, "agent port")
    yield c
    delete_pods_now(c, NS)
    c.stop()
    end_containers(c)


def running(c, name):
    return wait(lambda: (s := status_of(c, name)).get("phase") == "Running" and s, 20, f"{name} Running")


def test_port_zero_reports_real_port(cluster):
    assert 0 < cluster.agent_port < 65536 and cluster.agent_port != 10250


def test_logs_tail_timestamps_container(cluster):
    c = cluster
    pod(c, "two", [sh("a", "echo a1; echo a2; echo a3; echo a4 >&2; sleep 3600"),
                   sh("b", "echo b-only; sleep 3600")], restart="Never")
    running(c, "two")
    wait(lambda: c.kubectl("logs", "two", "-c", "a", check=False).stdout.count("\n") >= 4, 10, "a's 4 lines")
    assert c.kubectl("logs", "two", "-c", "a").stdout == "a1\na2\na3\na4\n"  # stdout and stderr, in order
    assert c.kubectl("logs", "two", "-c", "b").stdout == "b-only\n"
    assert c.kubectl("logs", "two", "-c", "a", "--tail=2").stdout == "a3\na4\n"
    assert c.kubectl("logs", "two", "-c", "a", "--tail=0").stdout == ""
    assert c.kubectl("logs", "two", "-c", "a", "--limit-bytes=4").stdout == "a1\na2"[:4]
    assert c.kubectl("logs", "two", "-c", "a", "--since=1h").stdout == "a1\na2\na3\na4\n"
    ts = c.kubectl("logs", "two", "-c", "a", "--timestamps").stdout.splitlines()
    assert [l.split(" ", 1)[1] for l in ts] == ["a1", "a2", "a3", "a4"]
    for l in ts:
        t = l.split(" ", 1)[0]
        assert t.startswith("20") and t.endswith("Z") and "T" in t, l


def test_logs_single_container_and_errors(cluster):
    c = cluster
    pod(c, "one", [sh("c", "echo hello; echo world; sleep 3600")], restart="Never")
    running(c, "one")
    wait(lambda: c.kubectl("logs", "one", check=False).stdout == "hello\nworld\n", 10, "one's log")
    # several containers, none named: kube-apiserver's 400 (kubectl itself picks the first one,
    # so the raw API shows it)
    r = c.api().get(f"/api/v1/namespaces/{NS}/pods/two/log")
    assert r.status == 400, r
    assert r.json()["reason"] == "BadRequest"
    assert r.json()["message"] == "a container name must be specified for pod two, choose one of: [a b]"
    r = c.api().get(f"/api/v1/namespaces/{NS}/pods/one/log?container=nope")
    assert r.status == 400 and r.json()["message"] == "container nope is not valid for pod one", r
    p = c.kubectl("logs", "one", "-c", "nope", check=False)  # kubectl checks this one itself too
    assert p.returncode != 0 and "container nope is not valid for pod one" in p.stderr, p.stderr
    p = c.kubectl("logs", "missing", check=False)
    assert p.returncode != 0 and "NotFound" in p.stderr and 'pods "missing" not found' in p.stderr
    # a pod on no node
    c.api().ok("POST", f"/api/v1/namespaces/{NS}/pods",
               {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "unbound"},
                "spec": {"schedulerName": "nobody", "containers": [sh("c", "true")]}})
    r = c.api().get(f"/api/v1/namespaces/{NS}/pods/unbound/log")
    assert r.status == 400 and r.json()["message"] == "pod unbound does not have a host assigned", r
    # a container that cannot start yet (its image is missing)
    pod(c, "waiting", [{"name": "c", "image": "no-such-image:1"}], restart="Never")
    wait(lambda: status_of(c, "waiting").get("containerStatuses"), 15, "waiting status")
    p = c.kubectl("logs", "waiting", check=False)
    assert p.returncode != 0
    assert 'Error from server (BadRequest): container "c" in pod "waiting" is waiting to start:' in p.stderr, p.stderr


def test_logs_follow(cluster):
    c = cluster
    pod(c, "follow", [sh("c", "echo first; sleep 4; echo second; sleep 1; echo third; exit 0")], restart="Never")
    running(c, "follow")
    k = c.kubectl_popen("logs", "-f", "follow")
    time.sleep(1.5)
    assert k.poll() is None, k.communicate()  # still following: "second" is not written yet
    out, err = k.communicate(timeout=30)
    assert k.returncode == 0, err
    # lines written after kubectl started, and kubectl ends when the container exits
    assert out == "first\nsecond\nthird\n", (out, err)
    # it ended because the container did: the pod completes (its status follows a moment later)
    wait(lambda: status_of(c, "follow").get("phase") == "Succeeded", 10, "follow Succeeded")
    # a follower that goes away ends its stream in the apiserver and the agent; both go on serving
    pod(c, "long", [sh("c", "echo up; sleep 3600")], restart="Never")
    running(c, "long")
    for _ in range(3):
        k = c.kubectl_popen("logs", "-f", "long")
        assert k.stdout.readline() == "up\n"
        k.terminate()
        k.wait(timeout=10)
    assert c.kubectl("logs", "long").stdout == "up\n"
    # following a container that already ended prints its log and ends at once
    t0 = time.monotonic()
    assert c.kubectl("logs", "-f", "follow").stdout == "first\nsecond\nthird\n"
    assert time.monotonic() - t0 < 5


def test_logs_previous(cluster):
    c = cluster
    pod(c, "restarts", [sh("c", "echo run-$(cat /proc/uptime | cut -d' ' -f1); sleep 1; exit 3")], restart="Always")
    wait(lambda: (cs := (status_of(c, "restarts").get("containerStatuses") or [{}])[0]).get("restartCount", 0) >= 1
         and cs, 40, "a restart")
    prev = c.kubectl("logs", "restarts", "--previous").stdout
    assert prev.startswith("run-") and prev.count("\n") == 1, prev
    cur = wait(lambda: (o := c.kubectl("logs", "restarts", check=False).stdout) and o, 15, "current log")
    assert cur.startswith("run-") and cur != prev, (cur, prev)
    # a second restart (after the 10 s back-off): the attempt before the previous one goes, its
    # log with it; the current and the previous attempts' files stay
    wait(lambda: (cs := (status_of(c, "restarts").get("containerStatuses") or [{}])[0]).get("restartCount", 0) >= 2
         and cs, 40, "a second restart")
    uid = c.api().get(f"/api/v1/namespaces/{NS}/pods/restarts").json()["metadata"]["uid"]
    logdir = log_dir(c, "restarts", uid)
    files = wait(lambda: (f := sorted(os.listdir(os.path.join(logdir, "c")))) == ["1.log", "2.log"] and f, 10,
                 "the two last attempts' logs")
    assert files == ["1.log", "2.log"]
    pod(c, "norestart", [sh("c", "echo once; sleep 3600")], restart="Never")
    running(c, "norestart")
    p = c.kubectl("logs", "norestart", "--previous", check=False)
    assert p.returncode != 0
    assert 'previous terminated container "c" in pod "norestart" not found' in p.stderr, p.stderr


def log_dir(c, name, uid):
    found = glob.glob(str(c.data_dir / "agent" / "**" / f"{NS}_{name}_{uid}"), recursive=True)
    assert len(found) == 1, found
    return found[0]


def test_deleted_pod_takes_its_logs(cluster):
    c = cluster
    pod(c, "gone", [sh("c", "echo bye; sleep 3600")], restart="Never")
    running(c, "gone")
    uid = c.api().get(f"/api/v1/namespaces/{NS}/pods/gone").json()["metadata"]["uid"]
    d = log_dir(c, "gone", uid)
    assert os.path.exists(os.path.join(d, "c", "0.log"))
    c.api().delete(f"/api/v1/namespaces/{NS}/pods/gone")
    wait(lambda: c.api().get(f"/api/v1/namespaces/{NS}/pods/gone").status == 404, 30, "gone deleted")
    wait(lambda: not os.path.exists(d), 10, "its log dir removed")


def agent_get(c, ctx, path):
    conn = http.client.HTTPSConnection("127.0.0.1", c.agent_port, context=ctx, timeout=10)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def test_agent_endpoint_refuses_other_clients(cluster, tmp_path):
    c = cluster
    path = f"/containerLogs/{NS}/one/c"
    # a node's own identity (signed by the cluster CA): authenticated, not allowed
    kc = tmp_path / "node.kubeconfig"
    r = subprocess.run([KITE, "kubeconfig", "--data-dir", str(c.data_dir), "--node", c.node],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    kc.write_text(r.stdout)
    ctx = TLSIdentity(str(kc), str(tmp_path)).ctx
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the agent's serving cert is self-signed
    status, body = agent_get(c, ctx, path)
    assert status == 403, body
    assert f"user=system:node:{c.node}" in body.decode()
    # the admin (system:masters) is not the API server either
    ctx = TLSIdentity(str(c.kubeconfig), str(tmp_path)).ctx
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    assert agent_get(c, ctx, path)[0] == 403
    # a certificate of another CA, and none at all
    other = tmp_path / "other"
    subprocess.run([KITE, "certs", "--data-dir", str(other)], check=True, capture_output=True, timeout=30)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(str(other / "pki" / "admin.crt"), str(other / "pki" / "admin.key"))
    assert agent_get(c, ctx, path)[0] == 401
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    assert agent_get(c, ctx, path)[0] == 401
    # the API server's own kubelet-client certificate reads the log
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    pki = c.data_dir / "pki"
    ctx.load_cert_chain(str(pki / "kubelet-client.crt"), str(pki / "kubelet-client.key"))
    status, body = agent_get(c, ctx, path)
    assert status == 200 and body == b"hello\nworld\n", (status, body)
