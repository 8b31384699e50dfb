"""The scheduler and pod GC as separate processes, the way a multi-machine cluster runs them:
`kite apiserver`, `kite controller-manager` (grace 3 s, pod GC orphan delay 3 s) and
`kite scheduler` with their own identities, and real `kite agent`s running busybox under runc.

A pod asking for more cpu than any node has stays Pending with upstream's FailedScheduling
message and PodScheduled=False; nodeSelector and required node affinity are honoured; a cordoned
node gets no new pods and keeps its running one, and uncordoning it places the waiting pods at
once; `kubectl delete node` of a killed machine gets its pods collected after the orphan delay; a
dead machine fenced with the out-of-service taint has its pods force-deleted. Needs root, runc,
conmon and umoci."""
import json
import os
import shutil
import subprocess
import time

import pytest

from conftest import AGENT_FAST_FLAGS, KITE, Cluster, KiteProcess, _workdir, pod_network_flags, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NS = "default"
PODS = f"/api/v1/namespaces/{NS}/pods"
GRACE = 3
ORPHAN_DELAY = 3


class Agents:
    """Real agents against the test's apiserver, each with its own root dir, bridge and CIDR."""

    def __init__(self, cluster, tar):
        self.cluster, self.tar, self.procs = cluster, tar, {}

    def start(self, name):
        root = self.cluster.workdir / f"agent-{name}"
        root.mkdir(exist_ok=True)
        r = subprocess.run([KITE, "images", "import", self.tar, "--root-dir", str(root)], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        p = subprocess.run([KITE, "kubeconfig", "--data-dir", str(self.cluster.data_dir), "--node", name],
                           capture_output=True, text=True, timeout=20)
        assert p.returncode == 0, p.stderr
        kc = self.cluster.workdir / f"{name}.kubeconfig"
        kc.write_text(p.stdout)
        net = pod_network_flags()
        proc = KiteProcess(["agent", "--kubeconfig", str(kc), "--node-name", name, "--root-dir", str(root), "--port", "0",
                            *net, *AGENT_FAST_FLAGS], self.cluster.workdir, f"agent-{name}").start()
        self.procs[name] = (proc, root, net[net.index("--pod-bridge") + 1])
        api = self.cluster.api()
        wait_for(lambda: ready(api, name), 20, what=f"node {name} Ready")
        return proc

    def cleanup(self):
        for proc, root, bridge in self.procs.values():
            proc.stop()
            # containers outlive their agent by design (a killed agent's above all): end them
            rr = str(root / "runc")
            ids = subprocess.run(["runc", "--root", rr, "list", "-q"], capture_output=True, text=True).stdout.split()
            for cid in ids:
                subprocess.run(["runc", "--root", rr, "kill", cid, "KILL"], capture_output=True)
            time.sleep(0.3)
            for cid in ids:
                subprocess.run(["runc", "--root", rr, "delete", "--force", cid], capture_output=True)
            # a killed agent never unmounted its pods' root filesystems
            with open("/proc/mounts") as f:
                mounts = [line.split()[1] for line in f if line.split()[1].startswith(str(root) + "/")]
            for m in sorted(mounts, reverse=True):
                subprocess.run(["umount", "-l", m], capture_output=True)
            if os.path.exists(f"/sys/class/net/{bridge}"):
                subprocess.run(["ip", "link", "del", bridge], capture_output=True)


def ready(api, node):
    r = api.get(f"/api/v1/nodes/{node}")
    if r.status != 200:
        return False
    conds = r.json().get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if os.geteuid() != 0 or not all(shutil.which(x) for x in ("runc", "conmon", "umoci")):
        pytest.skip("needs root, runc, conmon and umoci (scripts/install-deps)")
    work = _workdir(tmp_path_factory, "sched")
    tar = os.path.join(os.path.dirname(KITE), "busybox.tar")
    if not os.path.exists(tar):
        tar = str(work / "busybox.tar")
        subprocess.run([os.path.join(ROOT, "scripts/make-busybox-image"), tar], check=True, capture_output=True)
    c = Cluster("apiserver", work).start()
    c.cm = KiteProcess(["controller-manager", "--kubeconfig", str(c.data_dir / "controller-manager.kubeconfig"),
                        "--node-monitor-grace-period", f"{GRACE}s", "--node-monitor-period", "1s",
                        "--pod-gc-orphan-delay", f"{ORPHAN_DELAY}s"], work, "controller-manager").start()
    c.sched = KiteProcess(["scheduler", "--kubeconfig", str(c.data_dir / "scheduler.kubeconfig")], work,
                          "scheduler").start()
    c.agents = Agents(c, tar)
    c.agents.start("sched-a")
    c.agents.start("sched-b")
    yield c
    c.agents.cleanup()
    c.sched.stop()
    c.cm.stop()
    c.stop()


def make_pod(c, name, cpu=None, selector=None, on=None, image="busybox"):
    spec = {"containers": [{"name": "c", "image": image, "command": ["sleep", "3600"]}],
            "terminationGracePeriodSeconds": 1}
    if cpu:
        spec["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    if selector:
        spec["nodeSelector"] = selector
    if on:  # required node affinity on the node's name (matchFields)
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [on]}]}]}}}
    return c.api().ok("POST", PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})


def get_pod(c, name):
    r = c.api().get(f"{PODS}/{name}")
    return r.json() if r.status == 200 else None


def node_of(c, name):
    return ((get_pod(c, name) or {}).get("spec") or {}).get("nodeName")


def running_on(c, name, node, timeout=30):
    def check():
        p = get_pod(c, name)
        return p and p["spec"].get("nodeName") == node and p["status"].get("phase") == "Running"
    wait_for(check, timeout, what=f"{name} Running on {node}")


def cond(pod, t):
    return next((x for x in (pod or {}).get("status", {}).get("conditions", []) if x["type"] == t), None)


def events(c, name, reason):
    out = c.kubectl("get", "events", "-n", NS, "--field-selector", f"involvedObject.name={name},reason={reason}",
                    "-o", "json").stdout
    return json.loads(out)["items"]


def delete_pods(c, *names):
    for n in names:
        c.api().delete(f"{PODS}/{n}")


def unschedulable_message(c, name, timeout=15):
    wait_for(lambda: events(c, name, "FailedScheduling"), timeout, what=f"FailedScheduling for {name}")
    p = wait_for(lambda: (p := get_pod(c, name)) and cond(p, "PodScheduled") and p, timeout, what="PodScheduled")
    ps = cond(p, "PodScheduled")
    assert ps["status"] == "False" and ps["reason"] == "Unschedulable", ps
    assert p["status"]["phase"] == "Pending" and not p["spec"].get("nodeName")
    ev = events(c, name, "FailedScheduling")[-1]
    assert ev["type"] == "Warning" and ev["source"]["component"] == "default-scheduler", ev
    assert ev["message"] == ps["message"], (ev["message"], ps["message"])
    return ps["message"]


def test_pod_too_big_stays_pending(cluster):
    c = cluster
    make_pod(c, "huge", cpu="1000")
    msg = unschedulable_message(c, "huge")
    assert msg == ("0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: "
                   "2 No preemption victims found for incoming pod."), msg
    # kubectl shows it as users know it
    out = c.kubectl("describe", "pod", "huge").stdout
    assert "FailedScheduling" in out and "0/2 nodes are available: 2 Insufficient cpu." in out, out
    time.sleep(2)
    assert node_of(c, "huge") is None
    delete_pods(c, "huge")
    # the scheduler leads through its Lease, as kube-scheduler
    lease = c.api().ok("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler")
    assert lease["spec"].get("holderIdentity"), lease


def test_scheduled_event_and_selector(cluster):
    c = cluster
    c.kubectl("label", "node", "sched-b", "disk=ssd")
    make_pod(c, "on-ssd", selector={"disk": "ssd"})
    make_pod(c, "on-nvme", selector={"disk": "nvme"})
    running_on(c, "on-ssd", "sched-b")
    ev = events(c, "on-ssd", "Scheduled")
    assert ev and ev[0]["message"] == "Successfully assigned default/on-ssd to sched-b", ev
    assert cond(get_pod(c, "on-ssd"), "PodScheduled")["status"] == "True"
    msg = unschedulable_message(c, "on-nvme")
    assert msg == ("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: "
                   "0/2 nodes are available: 2 Preemption is not helpful for scheduling."), msg
    # the label arrives: the waiting pod is placed without anyone touching it
    c.kubectl("label", "node", "sched-a", "disk=nvme")
    running_on(c, "on-nvme", "sched-a")
    delete_pods(c, "on-ssd", "on-nvme")


def test_cordoned_node_keeps_its_pods_and_gets_no_new_ones(cluster):
    c = cluster
    make_pod(c, "resident", on="sched-a")
    running_on(c, "resident", "sched-a")
    c.kubectl("cordon", "sched-a")
    make_pod(c, "pinned", on="sched-a")
    msg = unschedulable_message(c, "pinned")
    # the pinned pod fails on sched-b's affinity and on sched-a being cordoned (its
    # node.kubernetes.io/unschedulable taint too, once the lifecycle controller adds it)
    assert msg.startswith("0/2 nodes are available: ") and "1 node(s) were unschedulable" in msg, msg
    assert "1 node(s) didn't match Pod's node affinity/selector" in msg, msg
    free = [f"free-{i}" for i in range(4)]
    for n in free:
        make_pod(c, n)
    for n in free:
        running_on(c, n, "sched-b")
    p = get_pod(c, "resident")
    assert p["status"]["phase"] == "Running" and p["spec"]["nodeName"] == "sched-a"
    t0 = time.monotonic()
    c.kubectl("uncordon", "sched-a")
    running_on(c, "pinned", "sched-a")
    print(f"pinned pod placed {time.monotonic() - t0:.2f}s after uncordon")
    delete_pods(c, "resident", "pinned", *free)


def test_deleted_dead_node_pods_collected(cluster):
    c = cluster
    agent = c.agents.start("sched-c")
    make_pod(c, "doomed", on="sched-c")
    running_on(c, "doomed", "sched-c")
    agent.kill9()
    c.kubectl("delete", "node", "sched-c")
    t0 = time.monotonic()
    # quarantined: still there just after
    time.sleep(1)
    assert get_pod(c, "doomed") is not None, "collected before the orphan delay"
    wait_for(lambda: get_pod(c, "doomed") is None, ORPHAN_DELAY + 10, what="orphaned pod collected")
    took = time.monotonic() - t0
    print(f"orphan collected {took:.2f}s after the node was deleted")
    assert took >= ORPHAN_DELAY - 0.5, took


def test_out_of_service_taint_force_deletes(cluster):
    c = cluster
    agent = c.agents.start("sched-d")
    make_pod(c, "fenced", on="sched-d")
    running_on(c, "fenced", "sched-d")
    agent.kill9()
    api = c.api()
    wait_for(lambda: not ready(api, "sched-d"), GRACE + 10, what="sched-d no longer Ready")
    time.sleep(1)
    p = get_pod(c, "fenced")
    assert p and not p["metadata"].get("deletionTimestamp"), "tolerates unreachable for 300 s: still there"
    # what an operator does once the machine is known to be off (non-graceful node shutdown)
    c.kubectl("taint", "node", "sched-d", "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute")
    wait_for(lambda: get_pod(c, "fenced") is None, 15, what="fenced pod force-deleted")
    # its replacement cannot go to the fenced node
    make_pod(c, "after-fence", on="sched-d")
    msg = unschedulable_message(c, "after-fence")
    assert "untolerated taint {node.kubernetes.io/out-of-service: nodeshutdown}" in msg or \
        "untolerated taint {node.kubernetes.io/unreachable: }" in msg, msg
    delete_pods(c, "after-fence")
