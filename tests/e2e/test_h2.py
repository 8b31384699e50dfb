"""HTTP/2 on the apiserver's port (ALPN h2): curl --http2 for GETs, a watch and many requests
multiplexed on one connection, kubectl (HTTP/2 by default) with a watch, and the --http2=false
kill switch. HTTP/1.1 clients (the python client, urllib) are covered by the other modules."""
import json
import os
import shutil
import subprocess
import threading
import time

import pytest

from conftest import LEASES, Cluster, wait_for

pytestmark = pytest.mark.skipif(not shutil.which("curl"), reason="curl not installed")


def curl_h2(cluster, *args, timeout=20):
    pki = cluster.data_dir / "pki"
    cmd = ["curl", "-sS", "--http2", "--cacert", str(pki / "ca.crt"), "--cert", str(pki / "admin.crt"),
           "--key", str(pki / "admin.key"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def url(cluster, path):
    return f"https://127.0.0.1:{cluster.port}{path}"


def lease(name):
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"holderIdentity": name}}


def test_get_over_h2(apiserver):
    r = curl_h2(apiserver, "-w", "\n%{http_version} %{http_code}", url(apiserver, "/api/v1/namespaces"))
    assert r.returncode == 0, r.stderr
    body, _, tail = r.stdout.rpartition("\n")
    assert tail == "2 200", tail
    names = [n["metadata"]["name"] for n in json.loads(body)["items"]]
    assert "default" in names and "kube-system" in names


def test_errors_over_h2_are_status_objects(apiserver):
    r = curl_h2(apiserver, "-w", "\n%{http_version} %{http_code}", url(apiserver, LEASES + "/nope"))
    body, _, tail = r.stdout.rpartition("\n")
    assert tail == "2 404", tail
    assert json.loads(body)["reason"] == "NotFound"


def test_write_over_h2(apiserver, api):
    r = curl_h2(apiserver, "-X", "POST", "-H", "Content-Type: application/json", "-d", json.dumps(lease("h2-post")),
                "-w", "\n%{http_version} %{http_code}", url(apiserver, LEASES))
    body, _, tail = r.stdout.rpartition("\n")
    assert tail == "2 201", (tail, body)
    assert api.ok("GET", LEASES + "/h2-post")["spec"]["holderIdentity"] == "h2-post"


def test_watch_stream_over_h2(apiserver, api):
    out = {}

    def watch():
        out["r"] = curl_h2(apiserver, "-N", "-w", "\n%{http_version}",
                           url(apiserver, LEASES + "?watch=1&timeoutSeconds=4&fieldSelector=metadata.name%3Dh2-watched"))

    t = threading.Thread(target=watch)
    t.start()
    time.sleep(1)  # the watch is open (a later event is what it must see)
    api.ok("POST", LEASES, lease("h2-watched"))
    api.ok("DELETE", LEASES + "/h2-watched")
    t.join(30)
    r = out["r"]
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().split("\n")
    assert lines[-1] == "2", lines[-1]
    events = [json.loads(l) for l in lines[:-1] if l.strip()]
    assert [e["type"] for e in events] == ["ADDED", "DELETED"], events
    assert all(e["object"]["metadata"]["name"] == "h2-watched" for e in events)


def test_many_parallel_requests_share_one_connection(apiserver):
    n = 60
    urls = [a for i in range(n) for a in ("-o", "/dev/null", url(apiserver, f"/api/v1/namespaces/default?i={i}"))]
    r = curl_h2(apiserver, "--parallel", "--parallel-max", "50",
                "-w", "%{http_version} %{http_code} %{num_connects}\n", *urls, timeout=60)
    assert r.returncode == 0, r.stderr
    rows = [l.split() for l in r.stdout.strip().split("\n")]
    assert len(rows) == n, r.stdout
    assert all(v == "2" and code == "200" for v, code, _ in rows), rows
    # one TLS connection for all of them: the others were multiplexed on it
    assert sum(int(c) for _, _, c in rows) == 1, rows


def test_kubectl_speaks_h2_and_watches(apiserver, api):
    env = {**apiserver.kubectl_env(), "GODEBUG": "http2debug=1"}
    r = subprocess.run(["kubectl", "get", "ns", "-o", "name"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "namespace/default" in r.stdout.split()
    assert "http2: Transport creating client conn" in r.stderr, r.stderr[-2000:]
    w = subprocess.Popen(["kubectl", "get", "leases", "-n", "default", "--watch", "-o", "name",
                          "--request-timeout", "20s"], env=apiserver.kubectl_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        api.ok("POST", LEASES, lease("h2-kubectl"))
        seen = []

        def saw():
            line = w.stdout.readline()
            seen.append(line.strip())
            return "lease.coordination.k8s.io/h2-kubectl" in seen

        wait_for(saw, 20, what="kubectl --watch to show the new lease")
    finally:
        w.kill()
        w.wait()


@pytest.fixture
def h1_only(tmp_path):
    c = Cluster("apiserver", tmp_path, extra_args=["--http2=false"]).start()
    yield c
    c.stop()


def test_kill_switch_serves_http11(h1_only):
    r = curl_h2(h1_only, "-w", "\n%{http_version} %{http_code}", url(h1_only, "/api/v1/namespaces"))
    assert r.stdout.rpartition("\n")[2] == "1.1 200", r.stdout[-200:]
    r = subprocess.run(["kubectl", "get", "ns", "-o", "name"], env=h1_only.kubectl_env(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "namespace/default" in r.stdout.split(), r.stderr


@pytest.fixture(scope="module")
def pod_on_a_node(apiserver, api):
    """A pod bound to a node whose agent port answers nothing (connection refused): what an exec
    reaches is told by its answer (400 before the agent is dialled, 500 "error dialing backend" after)."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there
    api.ok("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "h2-node"}})
    node = api.ok("GET", "/api/v1/nodes/h2-node")
    node["status"] = {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                      "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}
    api.ok("PUT", "/api/v1/nodes/h2-node/status", node)
    api.ok("POST", "/api/v1/namespaces/default/pods",
           {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "h2-pod"},
            "spec": {"nodeName": "h2-node", "containers": [{"name": "c", "image": "busybox"}]}})
    return port


EXEC = "/api/v1/namespaces/default/pods/h2-pod/exec?command=true&stdout=true"
WS_HEADERS = ["-H", "Connection: Upgrade", "-H", "Upgrade: websocket", "-H", "Sec-WebSocket-Version: 13",
              "-H", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "-H", "Sec-WebSocket-Protocol: v5.channel.k8s.io"]


def test_exec_over_h2_is_answered_as_kube_apiserver_does(apiserver, pod_on_a_node):
    """HTTP/2 has no Upgrade. An exec request over h2 without upgrade headers is answered at once,
    400 "Upgrade request required" as kube-apiserver's UpgradeAwareHandler; one carrying the
    HTTP/1.1 connection headers (Connection, Upgrade) is malformed in HTTP/2 (RFC 9113 8.2.2) and
    its stream is reset with PROTOCOL_ERROR, as Go's HTTP/2 server does; neither hangs, and the
    connection serves other streams. The same upgrade over HTTP/1.1 goes on to the node's agent."""
    r = curl_h2(apiserver, "-X", "POST", "-w", "\n%{http_version} %{http_code}", url(apiserver, EXEC))
    body, _, tail = r.stdout.rpartition("\n")
    assert tail == "2 400", (tail, r.stderr)
    st = json.loads(body)
    assert st["kind"] == "Status" and st["reason"] == "BadRequest" and st["message"] == "Upgrade request required", st
    # the WebSocket handshake's headers over h2 (nghttp sends them as given)
    t0 = time.monotonic()
    r = subprocess.run(["nghttp", "-v", "-H", "connection: Upgrade", "-H", "upgrade: websocket",
                        "--cert", str(apiserver.data_dir / "pki" / "admin.crt"),
                        "--key", str(apiserver.data_dir / "pki" / "admin.key"), url(apiserver, EXEC)],
                       capture_output=True, text=True, timeout=30) if shutil.which("nghttp") else None
    if r is not None:
        assert time.monotonic() - t0 < 10
        assert "The negotiated protocol: h2" in r.stdout, r.stdout[-3000:]
        assert "recv RST_STREAM" in r.stdout and "PROTOCOL_ERROR" in r.stdout, r.stdout[-3000:]
    r = curl_h2(apiserver, "-w", "\n%{http_version} %{http_code}", url(apiserver, "/version"))
    assert r.stdout.rpartition("\n")[2] == "2 200"  # the server goes on
    # over HTTP/1.1 the upgrade is taken to the agent (here: nobody listens)
    r = subprocess.run(["curl", "-sS", "--http1.1", "--cacert", str(apiserver.data_dir / "pki" / "ca.crt"),
                        "--cert", str(apiserver.data_dir / "pki" / "admin.crt"),
                        "--key", str(apiserver.data_dir / "pki" / "admin.key"), *WS_HEADERS,
                        "-w", "\n%{http_version} %{http_code}", url(apiserver, EXEC)],
                       capture_output=True, text=True, timeout=30)
    body, _, tail = r.stdout.rpartition("\n")
    assert tail == "1.1 500", (tail, r.stderr)
    assert f"error dialing backend: dial tcp 127.0.0.1:{pod_on_a_node}: connect: connection refused" in body, body


def test_kubectl_execs_over_http11_beside_h2(apiserver, pod_on_a_node):
    """kubectl 1.32 speaks HTTP/2 to the apiserver for its GETs and opens its exec stream over a
    connection of its own that negotiates HTTP/1.1 (the WebSocket dialer offers no h2; the SPDY
    fallback asks for http/1.1): its exec reaches the agent's dial, not the h2 answer (400)."""
    env = {**apiserver.kubectl_env(), "GODEBUG": "http2debug=1"}
    r = subprocess.run(["kubectl", "exec", "h2-pod", "--", "true"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "http2: Transport creating client conn" in r.stderr, r.stderr[-2000:]  # the GET of the pod: h2
    assert "error dialing backend" in r.stderr and "Upgrade request required" not in r.stderr, r.stderr[-2000:]
