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
