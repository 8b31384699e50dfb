"""The node lifecycle controller, taint eviction and leader election of `kite controller-manager`,
against a bare apiserver. Nodes here are API objects with Leases the test renews (a fake kubelet
that can be stopped), with short periods: grace 3 s, startup grace 4 s.

A node whose renewals stop turns Ready=Unknown (reason NodeStatusUnknown) within grace + 1 s, gets
the unreachable NoSchedule and NoExecute taints, its pods get Ready=False, and a pod tolerating the
taint for 2 s is deleted after them with a DisruptionTarget condition, while one with the default
300 s stays; a node that never posted status is marked NodeStatusNeverUpdated after the startup
grace; when renewals and status come back the taints go. Two controller-managers: one holds the
Lease kube-system/kube-controller-manager, and the other takes over within the lease duration of
the first being killed."""
import subprocess
import threading
import time
from datetime import datetime, timezone

import pytest

from conftest import KITE, KiteProcess, create_node, wait_for

GRACE = 3
STARTUP = 4
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
CM_LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"
FAST = ["--node-monitor-grace-period", f"{GRACE}s", "--node-startup-grace-period", f"{STARTUP}s",
        "--node-monitor-period", "1s"]


def micro_now():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def sec_now():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeKubelet:
    """Renews a node's Lease every 0.5 s on its own connection until stopped."""

    def __init__(self, cluster, name):
        self.api = cluster.api()
        self.name = name
        self.running = threading.Event()
        self.quit = threading.Event()
        self.api.ok("POST", LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                     "metadata": {"name": name, "namespace": "kube-node-lease"},
                                     "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                                              "renewTime": micro_now()}})
        self.running.set()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.quit.is_set():
            if self.running.is_set():
                self.api.patch(f"{LEASES}/{self.name}", {"spec": {"renewTime": micro_now()}},
                               ctype="application/merge-patch+json")
            time.sleep(0.5)

    def stop_renewing(self):
        self.running.clear()
        time.sleep(0.6)  # a renewal in flight lands before the clock starts
        return time.monotonic()

    def resume(self):
        """Renews again and posts Ready=True with a new heartbeat, as a kubelet coming back."""
        now = sec_now()
        conds = [{"type": t, "status": s, "lastHeartbeatTime": now, "lastTransitionTime": now, "reason": r,
                  "message": "back"} for t, s, r in (("Ready", "True", "KubeletReady"),
                                                     ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                                                     ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                                                     ("PIDPressure", "False", "KubeletHasSufficientPID"))]
        self.api.ok("PATCH", f"/api/v1/nodes/{self.name}/status", {"status": {"conditions": conds}},
                    ctype="application/strategic-merge-patch+json")
        self.running.set()

    def close(self):
        self.quit.set()
        self.thread.join(5)
        self.api.close()


def make_pod(api, name, node, toleration_s=None):
    spec = {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}
    if toleration_s is not None:
        spec["tolerations"] = [{"key": f"node.kubernetes.io/{k}", "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": toleration_s} for k in ("unreachable", "not-ready")]
    api.ok("POST", "/api/v1/namespaces/default/pods",
           {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
    now = sec_now()
    api.ok("PATCH", f"/api/v1/namespaces/default/pods/{name}/status",
           {"status": {"phase": "Running", "conditions": [
               {"type": "Ready", "status": "True", "lastTransitionTime": now},
               {"type": "ContainersReady", "status": "True", "lastTransitionTime": now}]}},
           ctype="application/strategic-merge-patch+json")


def cond(obj, t):
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == t), None)


def taints(node):
    return {(t["key"], t["effect"]) for t in node.get("spec", {}).get("taints") or []}


def events(api, reason, name):
    items = api.ok("GET", "/api/v1/events")["items"]
    return [e for e in items if e["reason"] == reason and e["involvedObject"]["name"] == name]


def start_cm(cluster, name, *extra):
    cm = KiteProcess(["controller-manager", "--kubeconfig", str(cluster.kubeconfig), *FAST, *extra],
                     cluster.workdir, name).start()
    return cm


@pytest.mark.slow
def test_dead_node_marked_tainted_and_evicted(fresh_apiserver):
    c = fresh_apiserver
    api = c.api()
    zone = {"topology.kubernetes.io/region": "r1", "topology.kubernetes.io/zone": "a"}
    create_node(api, "n1", labels=zone)
    create_node(api, "n2", labels=zone)  # stays healthy: the zone is not fully disrupted
    create_node(api, "n3", labels={"topology.kubernetes.io/zone": "b"}, with_status=False)  # never posts status
    k1, k2 = FakeKubelet(c, "n1"), FakeKubelet(c, "n2")
    make_pod(api, "fast", "n1", toleration_s=2)
    make_pod(api, "slow", "n1")  # the default 300 s tolerations
    cm = start_cm(c, "cm")
    try:
        wait_for(lambda: events(api, "RegisteredNode", "n1"), 10, what="RegisteredNode event")
        ev = events(api, "RegisteredNode", "n1")[0]
        assert ev["involvedObject"]["kind"] == "Node" and ev["involvedObject"]["apiVersion"] == "v1", ev
        assert ev["message"] == "Registered Node n1 in Controller" and ev["source"]["component"] == "node-controller"
        time.sleep(GRACE + 1)
        n1 = api.ok("GET", "/api/v1/nodes/n1")
        assert cond(n1, "Ready")["status"] == "True", "a renewing node stays Ready"
        assert not taints(n1)
        hb = cond(n1, "Ready")["lastHeartbeatTime"]

        # the never-updated node: all four conditions Unknown after the startup grace
        n3 = wait_for(lambda: (lambda n: cond(n, "Ready") and n)(api.ok("GET", "/api/v1/nodes/n3")), STARTUP + 3,
                      what="n3 marked")
        for t in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure"):
            cc = cond(n3, t)
            assert cc["status"] == "Unknown" and cc["reason"] == "NodeStatusNeverUpdated", cc
            assert cc["message"] == "Kubelet never posted node status.", cc
            assert cc["lastHeartbeatTime"] == n3["metadata"]["creationTimestamp"], cc

        t0 = k1.stop_renewing()
        n1 = wait_for(lambda: (lambda n: cond(n, "Ready")["status"] == "Unknown" and n)(
            api.ok("GET", "/api/v1/nodes/n1")), GRACE + 5, interval=0.05, what="n1 Unknown")
        took = time.monotonic() - t0
        assert took <= GRACE + 1 + 0.6, f"marked {took:.2f} s after the last renewal"
        for t in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure"):
            cc = cond(n1, t)
            assert cc["status"] == "Unknown" and cc["reason"] == "NodeStatusUnknown", cc
            assert cc["message"] == "Kubelet stopped posting node status.", cc
        assert cond(n1, "Ready")["lastHeartbeatTime"] == hb, "the last heartbeat is kept"
        assert cond(n2 := api.ok("GET", "/api/v1/nodes/n2"), "Ready")["status"] == "True", n2

        n1 = wait_for(lambda: (lambda n: {("node.kubernetes.io/unreachable", "NoSchedule"),
                                          ("node.kubernetes.io/unreachable", "NoExecute")} <= taints(n) and n)(
            api.ok("GET", "/api/v1/nodes/n1")), 5, what="unreachable taints")
        assert all(t.get("timeAdded") for t in n1["spec"]["taints"]), n1["spec"]["taints"]
        wait_for(lambda: events(api, "NodeNotReady", "n1"), 5, what="NodeNotReady event")
        assert events(api, "NodeNotReady", "n1")[0]["message"] == "Node n1 status is now: NodeNotReady"

        for p in ("fast", "slow"):
            wait_for(lambda: cond(api.ok("GET", f"/api/v1/namespaces/default/pods/{p}"), "Ready")["status"] == "False",
                     5, what=f"{p} Ready=False")
        # fast tolerates the taint for 2 s: then the DisruptionTarget condition and the delete
        tainted = time.monotonic()

        def evicted():
            r = api.get("/api/v1/namespaces/default/pods/fast")
            return r.status == 404 or r.json()["metadata"].get("deletionTimestamp")
        wait_for(evicted, 8, what="fast evicted")
        assert time.monotonic() - tainted >= 1.0, "not before its tolerationSeconds"
        r = api.get("/api/v1/namespaces/default/pods/fast")
        if r.status == 200:
            dt = cond(r.json(), "DisruptionTarget")
            assert dt and dt["status"] == "True" and dt["reason"] == "DeletionByTaintManager", r.json()["status"]
            assert dt["message"] == "Taint manager: deleting due to NoExecute taint"
        slow = api.ok("GET", "/api/v1/namespaces/default/pods/slow")
        assert not slow["metadata"].get("deletionTimestamp"), "300 s of toleration are not over"
        assert not cond(slow, "DisruptionTarget")

        out = c.kubectl("describe", "node", "n1").stdout
        assert "node.kubernetes.io/unreachable:NoExecute" in out and "node.kubernetes.io/unreachable:NoSchedule" in out, out
        assert "NodeStatusUnknown" in out and "Kubelet stopped posting node status." in out, out

        # the kubelet comes back: Ready again, taints gone, and the slow pod's deletion cancelled
        k1.resume()
        wait_for(lambda: not taints(api.ok("GET", "/api/v1/nodes/n1")), 5, what="taints removed")
        time.sleep(GRACE + 1)
        n1 = api.ok("GET", "/api/v1/nodes/n1")
        assert cond(n1, "Ready")["status"] == "True" and not taints(n1), n1
        assert not api.ok("GET", "/api/v1/namespaces/default/pods/slow")["metadata"].get("deletionTimestamp")

        api.ok("DELETE", "/api/v1/nodes/n3")
        wait_for(lambda: events(api, "RemovingNode", "n3"), 5, what="RemovingNode event")
    finally:
        k1.close()
        k2.close()
        assert cm.stop() == 0


def test_cordoned_node_gets_unschedulable_taint(fresh_apiserver):
    c = fresh_apiserver
    api = c.api()
    create_node(api, "c1")
    k = FakeKubelet(c, "c1")
    cm = start_cm(c, "cm")
    try:
        c.kubectl("cordon", "c1")
        wait_for(lambda: ("node.kubernetes.io/unschedulable", "NoSchedule") in taints(api.ok("GET", "/api/v1/nodes/c1")),
                 10, what="unschedulable taint")
        c.kubectl("uncordon", "c1")
        wait_for(lambda: not taints(api.ok("GET", "/api/v1/nodes/c1")), 10, what="taint removed")
    finally:
        k.close()
        assert cm.stop() == 0


def test_controllers_flag_turns_node_lifecycle_off(fresh_apiserver):
    """--controllers=*,-nodelifecycle: a silent, cordoned node keeps its Ready condition and gets no
    taint, while the other controllers (the namespace controller here) still run."""
    c = fresh_apiserver
    api = c.api()
    create_node(api, "q1")
    cm = start_cm(c, "cm", "--controllers=*,-nodelifecycle")
    try:
        api.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "q-ns"}})
        c.kubectl("cordon", "q1")
        api.ok("DELETE", "/api/v1/namespaces/q-ns")
        wait_for(lambda: api.get("/api/v1/namespaces/q-ns").status == 404, 10, what="namespace finalized")
        time.sleep(STARTUP + 2)  # past the startup grace: the controller, were it on, would have marked it
        node = api.ok("GET", "/api/v1/nodes/q1")
        assert cond(node, "Ready")["status"] == "True"
        assert not taints(node)
    finally:
        assert cm.stop() == 0


def test_controllers_flag_rejects_an_unknown_name(fresh_apiserver):
    c = fresh_apiserver
    p = subprocess.run([KITE, "controller-manager", "--kubeconfig", str(c.kubeconfig), "--controllers=*,-bogus"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0
    assert '"bogus" is not in the list of known controllers' in p.stderr


def holder(api):
    r = api.get(CM_LEASE)
    return r.json()["spec"] if r.status == 200 else None


@pytest.mark.parametrize("how", ["kill", "term"])
def test_leader_election_handover(fresh_apiserver, how):
    c = fresh_apiserver
    api = c.api()
    duration = 4
    le = ["--leader-elect-lease-duration", f"{duration}s", "--leader-elect-renew-deadline", "3s",
          "--leader-elect-retry-period", "250ms"]
    a = start_cm(c, "cm-a", *le)
    spec = wait_for(lambda: holder(api), 10, what="a leader")
    b = start_cm(c, "cm-b", *le)
    try:
        first = spec["holderIdentity"]
        assert spec["leaseDurationSeconds"] == duration and spec["leaseTransitions"] == 0, spec
        assert spec["acquireTime"] and spec["renewTime"], spec
        wait_for(lambda: b"leader election as" in b.log_path.read_bytes(), 10, what="b a candidate")
        time.sleep(2)
        spec = holder(api)
        assert spec["holderIdentity"] == first, "the leader keeps the lease while it renews"
        assert b"controllers running" not in b.log_path.read_bytes(), "the candidate runs no controller"
        renewed = spec["renewTime"]
        wait_for(lambda: holder(api)["renewTime"] != renewed, 3, what="a renewal")
        if how == "kill":
            a.kill9()
        else:
            assert a.stop() == 0
        dead = time.monotonic()
        spec = wait_for(lambda: (lambda s: s["holderIdentity"] not in ("", first) and s)(holder(api)),
                        duration + 5, interval=0.05, what="takeover")
        took = time.monotonic() - dead
        # client-go's bound: the candidate saw the last renewal up to one jittered retry period
        # (2.2 x 250 ms) after it, and tries again up to one more after the lease ran out; a
        # leader stopped with SIGTERM releases the lease, so the next attempt takes it
        limit = duration + 1.5 if how == "kill" else 1.5
        assert took <= limit, f"took over after {took:.2f} s"
        assert spec["leaseTransitions"] >= 1, spec
        wait_for(lambda: b"controllers running" in b.log_path.read_bytes(), 5, what="b runs the controllers")
    finally:
        a.stop()
        assert b.stop() == 0


def test_killed_agent_in_the_only_zone(fresh_apiserver, tmp_path):
    """A real `kite agent` killed with SIGKILL: its node turns Unknown within grace + 1 s of its
    last renewal and gets the unreachable NoSchedule taint; it is the only node, so every zone
    is fully disrupted and no NoExecute taint goes on, and its pod (tolerating 1 s) is not
    evicted. The agent back: Ready, taints gone."""
    import signal as _signal
    from test_agent import start_agent
    c = fresh_apiserver
    api = c.api()
    agent = start_agent(c, "solo", tmp_path)
    cm = start_cm(c, "cm")
    try:
        wait_for(lambda: (cond(api.ok("GET", "/api/v1/nodes/solo"), "Ready") or {}).get("status") == "True"
                 if api.get("/api/v1/nodes/solo").status == 200 else False, 20, what="agent Ready")
        make_pod(api, "p", "solo", toleration_s=1)
        time.sleep(GRACE + 1)
        assert cond(api.ok("GET", "/api/v1/nodes/solo"), "Ready")["status"] == "True"
        renew = api.ok("GET", f"{LEASES}/solo")["spec"]["renewTime"]
        wait_for(lambda: api.ok("GET", f"{LEASES}/solo")["spec"]["renewTime"] != renew, 3, interval=0.02,
                 what="a renewal")
        agent.signal(_signal.SIGKILL)
        t0 = time.monotonic()
        n = wait_for(lambda: (lambda n: cond(n, "Ready")["status"] == "Unknown" and n)(
            api.ok("GET", "/api/v1/nodes/solo")), GRACE + 5, interval=0.05, what="Unknown")
        took = time.monotonic() - t0
        assert took <= GRACE + 1, f"marked {took:.2f} s after the kill"
        assert cond(n, "Ready")["reason"] == "NodeStatusUnknown", n["status"]["conditions"]
        wait_for(lambda: ("node.kubernetes.io/unreachable", "NoSchedule") in taints(api.ok("GET", "/api/v1/nodes/solo")),
                 5, what="NoSchedule taint")
        time.sleep(3)
        assert ("node.kubernetes.io/unreachable", "NoExecute") not in taints(api.ok("GET", "/api/v1/nodes/solo"))
        pod = api.ok("GET", "/api/v1/namespaces/default/pods/p")
        assert not pod["metadata"].get("deletionTimestamp"), "no eviction when every zone is down"
        assert b"master disruption mode" in cm.log_path.read_bytes()
        agent.proc.wait(timeout=10)
        agent.start()
        wait_for(lambda: cond(api.ok("GET", "/api/v1/nodes/solo"), "Ready")["status"] == "True", 20,
                 what="Ready again")
        wait_for(lambda: not taints(api.ok("GET", "/api/v1/nodes/solo")), 10, what="taints gone")
    finally:
        agent.stop()
        assert cm.stop() == 0
