"""Services carry traffic: `kite up`'s node agent routes ClusterIPs and NodePorts to the
Service's ready endpoints with nftables (one table of the cluster's own, --proxy-table), from
pods and from the host; replicas share the load; a Service without endpoints refuses at once;
a clean stop (and `kite agent --cleanup`) leaves no table. Needs root, runc, conmon, umoci, nft."""
import os
import shutil
import socket
import subprocess
import time

import pytest

from conftest import KITE, runc_up_cluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NS = "default"
# each pod serves its own name: requests show which endpoint answered; SIGTERM ends it at once
# (a PID 1 without a handler ignores it, and a terminating pod that still serves keeps its
# place in the Service until its grace period ends, as kube-proxy's serving-terminating rule)
SERVE = "mkdir -p /www; hostname > /www/index.html; trap 'kill $!; exit 0' TERM; httpd -f -p 8080 -h /www & wait"
_NETS = iter(range(1, 1 << 30))


def needs_root():
    if os.geteuid() != 0 or not all(shutil.which(b) for b in ("runc", "conmon", "umoci", "nft")):
        pytest.skip("needs root, runc, conmon, umoci and nft (scripts/install-deps)")


def service_cidr():
    """A service range of this test's own: two clusters' ClusterIPs never collide in the kernel."""
    return f"172.{16 + os.getpid() % 16}.{next(_NETS) % 256}.0/24"


def tables():
    return subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, check=True).stdout


def wait(fn, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}; last: {last!r}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    needs_root()
    c = None
    for c in runc_up_cluster(tmp_path_factory, "proxy", ["--service-cluster-ip-range", service_cidr()],
                             before_stop=lambda c: c.kubectl("delete", "deployment", "--all", check=False)):
        yield c
    # a clean stop removes the cluster's table
    assert f"table ip {c.proxy_table}\n" not in tables()


def http_get(ip, port, timeout=3):
    """(body, None) or (None, the exception), and how long it took."""
    t0 = time.monotonic()
    try:
        with socket.create_connection((ip, port), timeout=timeout) as s:
            s.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
            data = b""
            while chunk := s.recv(4096):
                data += chunk
        return data.split(b"\r\n\r\n", 1)[-1].decode().strip(), None, time.monotonic() - t0
    except OSError as e:
        return None, e, time.monotonic() - t0


def all_ips(c, svc):
    items = c.api().get(f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices"
                        f"?labelSelector=kubernetes.io%2Fservice-name%3D{svc}").json().get("items", [])
    return [a for s in items for e in s.get("endpoints") or [] for a in e["addresses"]]


def ready_ips(c, svc):
    items = c.api().get(f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices"
                        f"?labelSelector=kubernetes.io%2Fservice-name%3D{svc}").json().get("items", [])
    return sorted(a for s in items for e in s.get("endpoints") or []
                  if (e.get("conditions") or {}).get("ready") for a in e["addresses"])


def pod_names(c, app):
    items = c.api().get(f"/api/v1/namespaces/{NS}/pods?labelSelector=app%3D{app}").json()["items"]
    return sorted(p["metadata"]["name"] for p in items if p["status"].get("phase") == "Running"
                  and not p["metadata"].get("deletionTimestamp"))


def client_pod(c, name, ip, port):
    """A pod that asks ip:port for / once; its log is the answer's body (busybox's nc: its
    static wget crashes resolving in this image)."""
    c.api().ok("POST", f"/api/v1/namespaces/{NS}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "busybox", "command": ["sh", "-c", f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 {ip} {port} | tail -n 1"]}]}})
    wait(lambda: c.api().get(f"/api/v1/namespaces/{NS}/pods/{name}").json()["status"].get("phase")
         in ("Succeeded", "Failed"), 40, f"{name} done")
    return c.kubectl("logs", name).stdout.strip()


@pytest.mark.slow
def test_cluster_ip_from_host_and_pod_balances_and_refuses_without_endpoints(cluster):
    c = cluster
    c.kubectl("create", "deployment", "web", "--image=busybox", "--", "sh", "-c", SERVE)
    c.kubectl("expose", "deployment", "web", "--port", "80", "--target-port", "8080")
    cip = c.api().get(f"/api/v1/namespaces/{NS}/services/web").json()["spec"]["clusterIP"]
    wait(lambda: len(ready_ips(c, "web")) == 1, 60, "one ready endpoint")
    # from the host (the output hook)
    body = wait(lambda: http_get(cip, 80)[0], 20, f"an answer from {cip}:80 on the host")
    assert body == pod_names(c, "web")[0]
    # from another pod (prerouting: pod -> gateway -> DNAT -> the endpoint on the same bridge)
    assert client_pod(c, "client1", cip, 80) == pod_names(c, "web")[0]

    c.kubectl("scale", "deployment", "web", "--replicas=3")
    wait(lambda: len(ready_ips(c, "web")) == 3, 60, "three ready endpoints")
    names = set(wait(lambda: len(pod_names(c, "web")) == 3 and pod_names(c, "web"), 20, "three pods"))
    seen = set()
    for _ in range(300):
        body, err, _t = http_get(cip, 80)
        if body:
            seen.add(body)
        if seen == names:
            break
    assert seen == names, f"answers from {seen}, pods {names}"

    c.kubectl("scale", "deployment", "web", "--replicas=0")
    wait(lambda: not all_ips(c, "web"), 60, "no endpoints")
    # refused at once (a reject, not a black hole that times out)
    def refused():
        body, err, took = http_get(cip, 80, timeout=5)
        return isinstance(err, ConnectionRefusedError) and took
    took = wait(refused, 20, f"{cip}:80 refused")
    # a reject answers at once; a black hole would run into the 5 s timeout (the bound leaves
    # room for a loaded machine: 1.02 s was seen under the parallel sanitizer suite)
    assert took < 3.0, took


def test_node_port_on_the_node_address(cluster):
    c = cluster
    c.kubectl("create", "deployment", "np", "--image=busybox", "--", "sh", "-c", SERVE)
    c.kubectl("expose", "deployment", "np", "--type", "NodePort", "--port", "80", "--target-port", "8080")
    port = c.api().get(f"/api/v1/namespaces/{NS}/services/np").json()["spec"]["ports"][0]["nodePort"]
    node = c.api().get(f"/api/v1/nodes/{c.node}").json()
    ip = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    wait(lambda: len(ready_ips(c, "np")) == 1, 60, "one ready endpoint")
    body = wait(lambda: http_get(ip, port)[0], 20, f"an answer from {ip}:{port}")
    assert body == pod_names(c, "np")[0]
    # kube-proxy's nftables mode serves node ports on the node's addresses, not on loopback
    assert http_get("127.0.0.1", port, timeout=2)[0] is None


@pytest.mark.slow
def test_agent_cleanup_removes_only_its_table():
    needs_root()
    mine, other = f"kite-proxy-t{os.getpid()}", f"other-t{os.getpid()}"
    for t in (mine, other):
        subprocess.run(["nft", "add", "table", "ip", t], check=True)
    try:
        r = subprocess.run([KITE, "agent", "--cleanup", "--proxy-table", mine], capture_output=True, text=True,
                           timeout=20)
        assert r.returncode == 0, r.stderr
        out = tables()
        assert f"table ip {mine}\n" not in out and f"table ip {other}\n" in out
        # nothing to remove is no error
        r = subprocess.run([KITE, "agent", "--cleanup", "--proxy-table", mine], capture_output=True, text=True,
                           timeout=20)
        assert r.returncode == 0, r.stderr
    finally:
        for t in (mine, other):
            subprocess.run(["nft", "delete", "table", "ip", t], capture_output=True)
