"""A node cut off from the apiserver and back: the picture must come true again.

A real `kite agent` (runc) reaches `kite apiserver` only through a TCP proxy the test can cut.
With the connection cut, the controller-manager marks the node Unknown and its pod Ready=False
(so the pod's EndpointSlice endpoint turns not ready); with the connection back, the agent's
status resync repairs the pod's conditions within a resync period, and the endpoint is ready
again. Needs root, runc, conmon and umoci, as test_pods_run.py."""
import os
import select
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import AGENT_FAST_FLAGS, KITE, Cluster, KiteProcess, free_port, pod_network_flags, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODE = "e2e-partition"
NS = "default"
GRACE = 3
CM_FAST = ["--node-monitor-grace-period", f"{GRACE}s", "--node-startup-grace-period", "4s",
           "--node-monitor-period", "1s"]


class TcpProxy:
    """Forwards 127.0.0.1:port to 127.0.0.1:upstream until cut: cutting closes every open
    connection and refuses new ones (accepted and closed at once) until restored."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.port = free_port()
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", self.port))
        self.lsock.listen(64)
        self.cut_flag = threading.Event()
        self.quit = threading.Event()
        self.lock = threading.Lock()
        self.pairs = []
        threading.Thread(target=self.accept_loop, daemon=True).start()

    def accept_loop(self):
        self.lsock.settimeout(0.2)
        while not self.quit.is_set():
            try:
                c, _ = self.lsock.accept()
            except (socket.timeout, OSError):
                continue
            if self.cut_flag.is_set():
                c.close()
                continue
            try:
                u = socket.create_connection(("127.0.0.1", self.upstream), timeout=5)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.pairs.append((c, u))
            threading.Thread(target=self.pump, args=(c, u), daemon=True).start()

    def pump(self, a, b):
        socks = [a, b]
        try:
            while not self.quit.is_set() and not self.cut_flag.is_set():
                r, _, _ = select.select(socks, [], [], 0.2)
                for s in r:
                    data = s.recv(65536)
                    if not data:
                        return
                    (b if s is a else a).sendall(data)
        except OSError:
            pass
        finally:
            for s in socks:
                try:
                    s.close()
                except OSError:
                    pass

    def cut(self):
        self.cut_flag.set()
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for pair in pairs:
            for s in pair:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def restore(self):
        self.cut_flag.clear()

    def close(self):
        self.quit.set()
        self.cut()
        self.lsock.close()


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60)


def runc_ids(root):
    return set(run("runc", "--root", str(root), "list", "-q").stdout.split())


def cond(obj, t):
    st = (obj or {}).get("status")
    return next((c for c in (st.get("conditions") or [] if isinstance(st, dict) else []) if c["type"] == t), {})


@pytest.fixture
def partitioned_node(tmp_path):
    if os.geteuid() != 0 or not shutil.which("runc") or not shutil.which("conmon") or not shutil.which("umoci"):
        pytest.skip("needs root, runc, conmon and umoci (scripts/install-deps)")
    tar = os.path.join(os.path.dirname(KITE), "busybox.tar")
    if not os.path.exists(tar):
        tar = str(tmp_path / "busybox.tar")
        subprocess.run([os.path.join(ROOT, "scripts/make-busybox-image"), tar], check=True, capture_output=True)
    root = tmp_path / "agent-root"
    r = run(KITE, "images", "import", tar, "--root-dir", str(root))
    assert r.returncode == 0, r.stderr
    c = Cluster("apiserver", tmp_path).start()
    proxy = TcpProxy(c.port)
    p = run(KITE, "kubeconfig", "--data-dir", str(c.data_dir), "--node", NODE)
    assert p.returncode == 0, p.stderr
    kc = tmp_path / "node.kubeconfig"
    kc.write_text(p.stdout.replace(f"https://127.0.0.1:{c.port}", f"https://127.0.0.1:{proxy.port}"))
    net = pod_network_flags()
    agent = KiteProcess(["agent", "--kubeconfig", str(kc), "--node-name", NODE, "--root-dir", str(root),
                         "--port", "0", *net, *AGENT_FAST_FLAGS], tmp_path, "agent").start()
    cm = KiteProcess(["controller-manager", "--kubeconfig", str(c.kubeconfig), *CM_FAST], tmp_path, "cm").start()
    c.agent, c.cm, c.proxy = agent, cm, proxy
    try:
        yield c
    finally:
        proxy.restore()
        api = c.api()
        for pod in api.get(f"/api/v1/namespaces/{NS}/pods").json().get("items", []):
            api.delete(f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}?gracePeriodSeconds=0")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and api.get(f"/api/v1/namespaces/{NS}/pods").json().get("items"):
            time.sleep(0.2)
        api.close()
        # the containers killed while the agent runs, so that it removes them and their rootfs
        # mounts (an agent stopped first leaves them, by design, for its next start)
        runc_root = root / "runc"
        for cid in runc_ids(runc_root):
            run("runc", "--root", str(runc_root), "kill", cid, "KILL")
        while time.monotonic() < deadline + 20 and agent.alive() and runc_ids(runc_root):
            time.sleep(0.1)
        agent.stop()
        cm.stop()
        proxy.close()
        c.stop()
        for cid in runc_ids(runc_root):
            run("runc", "--root", str(runc_root), "kill", cid, "KILL")
        time.sleep(0.3)
        for cid in runc_ids(runc_root):
            run("runc", "--root", str(runc_root), "delete", "--force", cid)
        for line in reversed(Path("/proc/mounts").read_text().splitlines()):
            if str(tmp_path) in line.split()[1]:
                run("umount", "-l", line.split()[1])
        bridge = net[net.index("--pod-bridge") + 1]
        if os.path.exists(f"/sys/class/net/{bridge}"):
            run("ip", "link", "del", bridge)


def endpoint_ready(api, svc):
    items = api.ok("GET", f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices?labelSelector="
                          f"kubernetes.io/service-name%3D{svc}")["items"]
    eps = [e for s in items for e in s.get("endpoints") or []]
    return eps[0]["conditions"].get("ready") if len(eps) == 1 else None


@pytest.mark.slow  # 22 s under the sanitizers
def test_pod_ready_again_after_partition(partitioned_node):
    c = partitioned_node
    api = c.api()
    wait_for(lambda: cond(api.get(f"/api/v1/nodes/{NODE}").json(), "Ready").get("status") == "True", 30,
             what="node Ready\n" + c.agent.log_tail())
    api.ok("POST", f"/api/v1/namespaces/{NS}/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}})
    api.ok("POST", f"/api/v1/namespaces/{NS}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 1, "containers": [
            {"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]}})
    wait_for(lambda: cond(api.get(f"/api/v1/namespaces/{NS}/pods/web").json(), "Ready").get("status") == "True",
             30, what="pod Ready\n" + c.agent.log_tail())
    wait_for(lambda: endpoint_ready(api, "web") is True, 15, what="endpoint ready")

    c.proxy.cut()
    wait_for(lambda: cond(api.get(f"/api/v1/nodes/{NODE}").json(), "Ready").get("status") == "Unknown",
             GRACE + 15, what="node Unknown")
    pod = wait_for(lambda: (p := api.get(f"/api/v1/namespaces/{NS}/pods/web").json())
                   and cond(p, "Ready").get("status") == "False" and p, 15, what="pod marked not ready")
    assert pod["status"]["phase"] == "Running", pod["status"]
    assert cond(pod, "ContainersReady").get("status") == "True", pod["status"]["conditions"]
    wait_for(lambda: endpoint_ready(api, "web") is False, 15, what="endpoint not ready during the partition")

    c.proxy.restore()
    wait_for(lambda: cond(api.get(f"/api/v1/nodes/{NODE}").json(), "Ready").get("status") == "True", 20,
             what="node Ready again")
    # the agent's status resync (10 s) repairs what the controller wrote while it was away
    wait_for(lambda: cond(api.get(f"/api/v1/namespaces/{NS}/pods/web").json(), "Ready").get("status") == "True",
             25, what="pod Ready again\n" + c.agent.log_tail())
    wait_for(lambda: endpoint_ready(api, "web") is True, 15, what="endpoint ready again")
    # once repaired, the agent's copy and the server's agree: no further status writes
    rv = api.ok("GET", f"/api/v1/namespaces/{NS}/pods/web")["metadata"]["resourceVersion"]
    time.sleep(12)
    assert api.ok("GET", f"/api/v1/namespaces/{NS}/pods/web")["metadata"]["resourceVersion"] == rv
    assert c.agent.alive() and c.cm.alive()
    api.close()
