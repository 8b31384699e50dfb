"""kubectl cordon, uncordon and drain against `kite up` with real containers: cordon marks the node
unschedulable and the node lifecycle controller taints it node.kubernetes.io/unschedulable;
drain --ignore-daemonsets --delete-emptydir-data evicts every pod (controller-owned ones and an
emptyDir one) through pods/eviction and waits for them to be gone; a PodDisruptionBudget whose
minAvailable is the number of its pods (status kept by the disruption controller) blocks the
drain, kubectl printing the 429's reason and retrying every 5 s, until the budget is deleted.
A DaemonSet-owned pod is left alone when the cluster serves DaemonSets (skipped otherwise).
Needs root, runc, conmon and umoci."""
import os
import select
import time
import uuid

import pytest

from conftest import runc_up_cluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NS = "default"
PODS = f"/api/v1/namespaces/{NS}/pods"
PDBS = f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets"
BUDGET_MSG = "Cannot evict pod as it would violate the pod's disruption budget."


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from runc_up_cluster(tmp_path_factory, "drain")


def wait(fn, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}; last: {last!r}")


def owner(kind="Widget", name="web-w", api_version="example.com/v1"):
    # A controller of a kind kite does not serve: kubectl drain counts the pod as managed (no
    # --force), and the garbage collector leaves it, as it watches no such owners (an owner of a
    # kind it does watch - a StatefulSet or ReplicaSet that does not exist - gets its dependents
    # collected, as upstream)
    return [{"apiVersion": api_version, "kind": kind, "name": name, "uid": str(uuid.uuid4()), "controller": True}]


def make_pod(c, name, labels=None, volumes=None, owners=None):
    spec = {"nodeName": c.node, "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"],
                            "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1}}]}
    if volumes:
        spec["volumes"] = volumes
        spec["containers"][0]["volumeMounts"] = [{"name": v["name"], "mountPath": f"/mnt/{v['name']}"} for v in volumes]
    meta = {"name": name, "labels": labels or {}, "ownerReferences": owners if owners is not None else owner()}
    c.api().ok("POST", PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})


def ready(c, name):
    r = c.api().get(f"{PODS}/{name}")
    if r.status != 200:
        return False
    return any(x["type"] == "Ready" and x["status"] == "True" for x in r.json().get("status", {}).get("conditions", []))


def pods_on_node(c):
    items = c.api().get(f"/api/v1/pods?fieldSelector=spec.nodeName%3D{c.node}").json()["items"]
    return sorted(p["metadata"]["name"] for p in items)


def node(c):
    return c.api().ok("GET", f"/api/v1/nodes/{c.node}")


def has_unschedulable_taint(c):
    return any(t["key"] == "node.kubernetes.io/unschedulable" and t["effect"] == "NoSchedule"
               for t in node(c)["spec"].get("taints", []))


def test_cordon_uncordon(cluster):
    c = cluster
    out = c.kubectl("cordon", c.node).stdout
    assert f"node/{c.node} cordoned" in out
    assert node(c)["spec"].get("unschedulable") is True
    wait(lambda: has_unschedulable_taint(c), 10, "the unschedulable taint")
    assert "SchedulingDisabled" in c.kubectl("get", "node", c.node).stdout
    assert "already cordoned" in c.kubectl("cordon", c.node).stdout
    out = c.kubectl("uncordon", c.node).stdout
    assert f"node/{c.node} uncordoned" in out
    assert "unschedulable" not in node(c)["spec"]
    wait(lambda: not has_unschedulable_taint(c), 10, "the unschedulable taint to go")


def test_drain_evicts_all(cluster):
    c = cluster
    make_pod(c, "web-1", {"app": "web"})
    make_pod(c, "web-2", {"app": "web"})
    make_pod(c, "scratch", {"app": "scratch"}, volumes=[{"name": "tmp", "emptyDir": {}}])
    for n in ("web-1", "web-2", "scratch"):
        wait(lambda n=n: ready(c, n), 60, f"{n} ready")
    p = c.kubectl("drain", c.node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=90s", timeout=120)
    out = p.stdout + p.stderr
    for n in ("web-1", "web-2", "scratch"):
        assert f"evicting pod {NS}/{n}" in out, out
        assert f"pod/{n} evicted" in out, out
    assert f"node/{c.node} drained" in out, out
    assert pods_on_node(c) == []
    assert node(c)["spec"].get("unschedulable") is True
    c.kubectl("uncordon", c.node)


@pytest.mark.slow
def test_drain_waits_on_budget(cluster):
    c = cluster
    make_pod(c, "guarded-1", {"app": "guarded"})
    make_pod(c, "guarded-2", {"app": "guarded"})
    for n in ("guarded-1", "guarded-2"):
        wait(lambda n=n: ready(c, n), 60, f"{n} ready")
    c.api().ok("POST", PDBS, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                              "metadata": {"name": "guarded"},
                              "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "guarded"}}}})
    # the disruption controller's status: 2 healthy of 2 desired, nothing allowed
    st = wait(lambda: (lambda s: s if s.get("observedGeneration") == 1 and s.get("currentHealthy") == 2 else None)(
        c.api().ok("GET", f"{PDBS}/guarded").get("status", {})), 20, "budget status")
    assert (st["desiredHealthy"], st["expectedPods"], st["disruptionsAllowed"]) == (2, 2, 0)
    assert "guarded   2               N/A               0" in c.kubectl("get", "pdb").stdout
    proc = c.kubectl_popen("drain", c.node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s")
    try:
        fd = proc.stderr.fileno()
        deadline = time.monotonic() + 20
        text = ""
        while time.monotonic() < deadline and text.count("will retry after 5s") < 4:
            if select.select([fd], [], [], 0.5)[0]:
                text += os.read(fd, 65536).decode()
        # both pods refused, each retried at least once (5 s apart)
        assert text.count("will retry after 5s") >= 4, text
        assert f"(will retry after 5s): {BUDGET_MSG}" in text, text
        assert pods_on_node(c) == ["guarded-1", "guarded-2"]
        assert proc.poll() is None, "drain must keep retrying"
        c.api().ok("DELETE", f"{PDBS}/guarded")
        out, rest = proc.communicate(timeout=60)
        rest = rest or ""
        assert proc.returncode == 0, (out, text + rest)
        assert f"node/{c.node} drained" in out
        assert pods_on_node(c) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        c.kubectl("uncordon", c.node)


def serves(c, group_version, plural):
    r = c.api().get(f"/apis/{group_version}")
    return r.status == 200 and any(x["name"] == plural for x in r.json().get("resources", []))


def test_drain_leaves_daemonset_pods(cluster):
    c = cluster
    if not serves(c, "apps/v1", "daemonsets"):
        pytest.skip("this cluster serves no DaemonSets (apps/v1)")
    ds = c.api().ok("POST", f"/apis/apps/v1/namespaces/{NS}/daemonsets", {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent-ds"},
        "spec": {"selector": {"matchLabels": {"app": "agent-ds"}},
                 "template": {"metadata": {"labels": {"app": "agent-ds"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox",
                                                       "command": ["sleep", "3600"]}]}}}})
    # the DaemonSet controller puts its one pod on the node
    def ds_pod():
        items = c.api().get(f"/api/v1/namespaces/{NS}/pods?labelSelector=app%3Dagent-ds").json()["items"]
        return items[0]["metadata"]["name"] if items else None
    ds_name = wait(ds_pod, 60, "the DaemonSet's pod")
    wait(lambda: ready(c, ds_name), 60, f"{ds_name} ready")
    make_pod(c, "plain", {"app": "plain"})
    wait(lambda: ready(c, "plain"), 60, "plain ready")
    p = c.kubectl("drain", c.node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=90s", timeout=120)
    out = p.stdout + p.stderr
    assert "ignoring DaemonSet-managed Pods" in out and ds_name in out, out
    names = pods_on_node(c)
    assert "plain" not in names and ds_name in names
    c.kubectl("uncordon", c.node)
    c.api().request("DELETE", f"/apis/apps/v1/namespaces/{NS}/daemonsets/agent-ds")
