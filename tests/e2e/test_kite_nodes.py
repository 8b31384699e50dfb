"""`kite nodes`: every way a machine and its Node drift apart, each produced here for real and seen
in `kite nodes -o json`, its table, /metrics (kite_node_state{node,state} 1) and as an event on the
Node. Machines are simulated agents with their own node credentials (kite kubeconfig --node):
they register, post status and renew their Lease. A bare `kite apiserver` (--node-stale-after 8s)
and `kite controller-manager` with grace 3 s. Also --node-cleanup-after: a Node Unknown that long
is deleted."""
import json
import signal
import subprocess
import threading
import time
from datetime import datetime, timezone

import pytest

from conftest import KITE, Api, Cluster, KiteProcess, TLSIdentity, node_manifest, wait_for

GRACE = 3
STALE = 8
FAST = ["--node-monitor-grace-period", f"{GRACE}s", "--node-startup-grace-period", "4s", "--node-monitor-period", "1s"]
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


def micro_now():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Machine:
    """A node agent as far as the API sees one: its own credential (system:node:NAME) registers
    the Node, renews its Lease every 0.5 s and may post status, until stopped."""

    def __init__(self, cluster, name, register=True):
        self.cluster, self.name = cluster, name
        kc = cluster.workdir / f"{name}.kubeconfig"
        subprocess.run([KITE, "kubeconfig", "--data-dir", str(cluster.data_dir), "--node", name, "-o", str(kc)],
                       check=True, capture_output=True, timeout=30)
        ctx = TLSIdentity(kc, cluster.workdir).ctx
        self.api = Api("127.0.0.1", cluster.port, ctx)
        self.renew_api = Api("127.0.0.1", cluster.port, ctx)  # the renewal thread's own connection
        if register:
            self.register()
        self.api.ok("POST", LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                     "metadata": {"name": name, "namespace": "kube-node-lease"},
                                     "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                                              "renewTime": micro_now()}})
        self.renewing = threading.Event()
        self.renewing.set()
        self.quit = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def register(self):
        return self.api.ok("POST", "/api/v1/nodes", node_manifest(self.name))

    def loop(self):
        while not self.quit.is_set():
            if self.renewing.is_set():
                self.renew_api.patch(f"{LEASES}/{self.name}", {"spec": {"renewTime": micro_now()}},
                               ctype="application/merge-patch+json")
            time.sleep(0.5)

    def not_ready(self, reason, message):
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.api.ok("PATCH", f"/api/v1/nodes/{self.name}/status",
                    {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": reason, "message": message,
                                                "lastHeartbeatTime": now, "lastTransitionTime": now}]}},
                    ctype="application/strategic-merge-patch+json")

    def close(self):
        self.quit.set()
        self.thread.join(5)
        self.api.close()
        self.renew_api.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster("apiserver", tmp_path_factory.mktemp("kitenodes"), extra_args=["--node-stale-after", f"{STALE}s"]).start()
    cm = KiteProcess(["controller-manager", "--kubeconfig", str(c.kubeconfig), *FAST], c.workdir, "cm").start()
    yield c
    cm.stop()
    c.stop()


def report(c):
    p = subprocess.run([KITE, "nodes", "--kubeconfig", str(c.kubeconfig), "-o", "json"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    return {i["name"]: i for i in json.loads(p.stdout)["items"]}


def metric_states(c):
    text = c.api().get("/metrics").body.decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("kite_node_state{"):
            labels = dict(kv.split("=", 1) for kv in line[len("kite_node_state{"):line.index("}")].split(","))
            assert line.endswith(" 1"), line
            out[labels["node"].strip('"')] = labels["state"].strip('"')
    return out


def node_events(c, name, reason):
    items = c.api().ok("GET", "/api/v1/namespaces/default/events")["items"]
    return [e for e in items if e["involvedObject"]["name"] == name and e["reason"] == reason
            and e["source"].get("component") == "kite-apiserver"]


def expect(c, name, state, timeout=20, event=True):
    """name reaches state in the report, in /metrics (the next pass), and as an event."""
    wait_for(lambda: report(c).get(name, {}).get("state") == state, timeout, what=f"{name} {state} (kite nodes)")
    wait_for(lambda: metric_states(c).get(name) == state, 10, what=f"{name} {state} (/metrics)")
    if event:
        wait_for(lambda: node_events(c, name, state), 10, what=f"{name} {state} event")
    return report(c)[name]


def test_healthy_and_table(cluster):
    c = cluster
    m = Machine(c, "h1")
    try:
        item = expect(c, "h1", "Healthy", event=False)
        assert "Ready True" in item["evidence"] and "lease renewed" in item["evidence"]
        p = subprocess.run([KITE, "nodes", "--kubeconfig", str(c.kubeconfig)], capture_output=True, text=True, timeout=30)
        assert p.returncode == 0 and p.stdout.split("\n")[0].split() == ["NAME", "STATE", "EVIDENCE"]
        assert any(line.split()[:2] == ["h1", "Healthy"] for line in p.stdout.splitlines())
    finally:
        m.close()


def test_not_ready_with_agent_reason(cluster):
    c = cluster
    m = Machine(c, "nr1")
    try:
        m.not_ready("KubeletNotReady", "container runtime is down")
        item = expect(c, "nr1", "NotReady")
        assert "KubeletNotReady: container runtime is down" in item["evidence"]
    finally:
        m.close()


def test_unreachable_then_stale(cluster):
    c = cluster
    m = Machine(c, "u1")
    try:
        expect(c, "u1", "Healthy", event=False)
        m.renewing.clear()
        item = expect(c, "u1", "Unreachable", timeout=GRACE + 10)
        assert "NodeStatusUnknown" in item["evidence"] and "lease renewed" in item["evidence"]
        item = expect(c, "u1", "StaleObject", timeout=STALE + 10)
        assert f"longer than {STALE}s" in item["evidence"]
    finally:
        m.close()


def test_never_reported(cluster):
    c = cluster
    c.api().ok("POST", "/api/v1/nodes", node_manifest("nev", with_status=False))
    item = expect(c, "nev", "NeverReported")
    assert "no Ready condition" in item["evidence"] or "NodeStatusNeverUpdated" in item["evidence"]


def test_cordoned_and_draining(cluster):
    c = cluster
    api = c.api()
    m = Machine(c, "d1")
    try:
        expect(c, "d1", "Healthy", event=False)
        api.ok("PATCH", "/api/v1/nodes/d1", {"spec": {"unschedulable": True}},
               ctype="application/strategic-merge-patch+json")
        item = expect(c, "d1", "Cordoned")
        assert "cordoned" in item["evidence"]
        api.ok("POST", "/api/v1/namespaces/default/pods",
               {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "on-d1"},
                "spec": {"nodeName": "d1", "containers": [{"name": "c", "image": "busybox"}]}})
        # deleted gracefully: it stays terminating until its agent confirms the end, which this one never does
        api.ok("DELETE", "/api/v1/namespaces/default/pods/on-d1")
        item = expect(c, "d1", "Draining")
        assert "1 of its 1 pods being deleted" in item["evidence"]
        api.request("DELETE", "/api/v1/namespaces/default/pods/on-d1", body={"gracePeriodSeconds": 0})
        expect(c, "d1", "Cordoned")
    finally:
        m.close()


def test_reregistered(cluster):
    c = cluster
    api = c.api()
    m = Machine(c, "rr1")
    try:
        expect(c, "rr1", "Healthy", event=False)
        time.sleep(2.5)  # a pass of the server has seen the first object's uid
        api.ok("DELETE", "/api/v1/nodes/rr1")
        m.register()  # the agent that kept running registers again
        item = expect(c, "rr1", "Reregistered")
        assert "deleted and created again" in item["evidence"]
    finally:
        m.close()


def test_orphan_machine(cluster):
    c = cluster
    api = c.api()
    m = Machine(c, "or1")
    try:
        expect(c, "or1", "Healthy", event=False)
        api.ok("DELETE", "/api/v1/nodes/or1")
        item = expect(c, "or1", "OrphanMachine")
        assert "no Node object" in item["evidence"]
        assert "/leases/or1" in item["evidence"], item
        assert not item["hasNode"]
    finally:
        m.close()


def test_node_cleanup_after(fresh_apiserver):
    c = fresh_apiserver
    cm = KiteProcess(["controller-manager", "--kubeconfig", str(c.kubeconfig), *FAST, "--node-cleanup-after", "2s"],
                     c.workdir, "cm-cleanup").start()
    m = Machine(c, "gone1")
    keep = Machine(c, "kept1")
    try:
        time.sleep(1)
        m.renewing.clear()
        t0 = time.monotonic()
        wait_for(lambda: c.api().get("/api/v1/nodes/gone1").status == 404, GRACE + 2 + 10, what="gone1 deleted")
        # not before grace + cleanup-after, less the renewal period (0.5 s: the last renewal may
        # precede t0) and a second (Ready's lastTransitionTime, which the cleanup counts from,
        # has whole seconds)
        assert time.monotonic() - t0 >= GRACE + 2 - 1.5
        ev = [e for e in c.api().ok("GET", "/api/v1/namespaces/default/events")["items"]
              if e["reason"] == "DeletingNode" and e["involvedObject"]["name"] == "gone1"]
        assert ev and "--node-cleanup-after" in ev[0]["message"]
        assert c.api().get("/api/v1/nodes/kept1").status == 200
    finally:
        m.close()
        keep.close()
        cm.stop()


def test_draining_held_by_a_budget(cluster):
    """kubectl drain against a PodDisruptionBudget: every eviction refused (429), no pod deleted;
    the node is Draining while the refusals come, not Cordoned."""
    c = cluster
    api = c.api()
    m = Machine(c, "pdb1")
    pods = "/api/v1/namespaces/default/pods"
    pdbs = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
    try:
        expect(c, "pdb1", "Healthy", event=False)
        api.ok("POST", pods, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "held-1", "labels": {"app": "held"}},
                              "spec": {"nodeName": "pdb1", "containers": [{"name": "c", "image": "busybox"}]}})
        # running (an eviction of a pending pod ignores budgets)
        api.ok("PATCH", f"{pods}/held-1/status", {"status": {"phase": "Running"}},
               ctype="application/merge-patch+json")
        api.ok("POST", pdbs, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "held"},
                              "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "held"}}}})
        api.ok("PATCH", "/api/v1/nodes/pdb1", {"spec": {"unschedulable": True}},
               ctype="application/strategic-merge-patch+json")
        expect(c, "pdb1", "Cordoned")
        ev = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "held-1", "namespace": "default"}}
        r = api.post(f"{pods}/held-1/eviction", ev)
        assert r.status == 429, r
        item = expect(c, "pdb1", "Draining")
        assert "eviction of default/held-1 refused" in item["evidence"] and "429" in item["evidence"], item
        assert api.get(f"{pods}/held-1").json()["metadata"].get("deletionTimestamp") is None
    finally:
        api.request("DELETE", f"{pods}/held-1", body={"gracePeriodSeconds": 0})
        api.request("DELETE", f"{pdbs}/held")
        m.close()


def test_lease_expired_without_controller_manager(fresh_apiserver_grace, tmp_path):
    """No controller-manager: a real agent frozen (SIGSTOP) stays Ready True in its Node, but its
    lease stops; the report says LeaseExpired within the lease's term + a pass, not Healthy."""
    c = fresh_apiserver_grace
    kc = tmp_path / "lx.kubeconfig"
    subprocess.run([KITE, "kubeconfig", "--data-dir", str(c.data_dir), "--node", "lx1", "-o", str(kc)],
                   check=True, capture_output=True, timeout=30)
    agent = KiteProcess(["agent", "--kubeconfig", str(kc), "--node-name", "lx1", "--root-dir", str(tmp_path / "root"),
                         "--port", "0", "--node-status-update-frequency", "1s",
                         "--node-lease-duration-seconds", str(LX_LEASE)], tmp_path, "agent-lx1").start()
    try:
        expect(c, "lx1", "Healthy", event=False)
        agent.signal(signal.SIGSTOP)
        t0 = time.monotonic()
        item = expect(c, "lx1", "LeaseExpired", timeout=LX_LEASE + 10)
        # not before the lease's term (less the renewal period: the last renewal may precede t0)
        assert time.monotonic() - t0 >= LX_LEASE - 1.5, item
        assert "Ready True" in item["evidence"] and "no node lifecycle controller" in item["evidence"], item
        node = c.api().ok("GET", "/api/v1/nodes/lx1")
        assert [x["status"] for x in node["status"]["conditions"] if x["type"] == "Ready"] == ["True"]
        agent.signal(signal.SIGCONT)
        expect(c, "lx1", "Healthy", timeout=LX_LEASE + 10)
    finally:
        agent.signal(signal.SIGCONT)
        agent.stop()


LX_LEASE = 3


@pytest.fixture
def fresh_apiserver_grace(tmp_path):
    """`kite apiserver` alone, with a grace period shorter than the agent's lease."""
    c = Cluster("apiserver", tmp_path, extra_args=["--node-monitor-grace-period", "2s"]).start()
    yield c
    c.stop()
