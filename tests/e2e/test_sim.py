"""`kite sim`: simulated nodes on the node agent's code against a `kite up` control plane.

200 nodes in one process, each as its own system:node:NAME, all turn Ready (kubectl get nodes);
the node lifecycle controller marks none of them Unknown over a grace period of renewals; 5 killed
through the control socket turn Unknown within grace + the controller's monitor period + a margin,
the others staying Ready, and they turn Ready again once revived."""
import json
import socket
import time

import pytest

from conftest import Cluster, KiteProcess, _workdir, wait_for

pytestmark = pytest.mark.slow

NODES = 200
GRACE = 10   # --node-monitor-grace-period
LEASE = 8    # the simulated nodes' leaseDurationSeconds: renewed every 2 s
MONITOR = 5  # kite up's node monitor period
MARGIN = 8   # a loaded 2-core machine


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    workdir = _workdir(tmp_path_factory, "sim")
    c = Cluster("up", workdir, extra_args=["--no-agent", "--node-monitor-grace-period", f"{GRACE}s"]).start()
    control = workdir / "sim.sock"
    p = KiteProcess(["sim", "--kubeconfig", str(c.kubeconfig), "--data-dir", str(c.data_dir), "--nodes", str(NODES),
                     "--name-prefix", "hollow", "--zones", "3", "--lease-duration", str(LEASE), "--ramp", "100",
                     "--control", str(control)], workdir, "sim").start()
    wait_for(control.exists, 30, what="the control socket")
    yield c, p, control
    code = p.stop()
    c.stop()
    assert code == 0, p.log_tail()


def control(path, line):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(str(path))
    s.sendall(line.encode() + b"\n")
    out = b""
    while not out.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
    s.close()
    return out.decode().strip()


def ready_by_node(c):
    items = json.loads(c.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    out = {}
    for n in items:
        conds = {x["type"]: x["status"] for x in n.get("status", {}).get("conditions", [])}
        out[n["metadata"]["name"]] = conds.get("Ready")
    return out


def test_all_nodes_ready(sim):
    c, p, _ = sim
    ready = wait_for(lambda: (lambda r: r if len(r) == NODES and all(v == "True" for v in r.values()) else None)(
        ready_by_node(c)), 180, interval=2, what=f"{NODES} Ready nodes")
    assert sorted(ready) == [f"hollow-{i:05d}" for i in range(NODES)]
    # kubectl's own view, the table a user reads
    lines = c.kubectl("get", "nodes", "--no-headers").stdout.split("\n")
    assert sum(1 for ln in lines if ln.split()[1:2] == ["Ready"]) == NODES
    node = json.loads(c.kubectl("get", "node", "hollow-00007", "-o", "json").stdout)
    labels = node["metadata"]["labels"]
    assert labels["topology.kubernetes.io/zone"] == "zone-1"
    assert labels["kubernetes.io/hostname"] == "hollow-00007"
    # synthetic machines: capacity and addresses differ from node to node
    caps = {json.loads(c.kubectl("get", "node", f"hollow-{i:05d}", "-o", "json").stdout)["status"]["capacity"]["cpu"]
            for i in range(4)}
    assert len(caps) == 4
    assert {"type": "InternalIP", "address": "10.64.0.8"} in node["status"]["addresses"]
    # each node wrote as itself: the Lease's holder and the Node authorizer's own-object rule
    lease = json.loads(c.kubectl("get", "lease", "-n", "kube-node-lease", "hollow-00007", "-o", "json").stdout)
    assert lease["spec"]["holderIdentity"] == "hollow-00007"
    st = json.loads(control(sim[2], "stats"))
    assert st["registered"] == NODES and st["ready"] == NODES and st["failing"] == 0


def test_no_false_unknown_over_a_grace_period(sim):
    c, _, _ = sim
    deadline = time.monotonic() + GRACE + MONITOR
    while time.monotonic() < deadline:
        r = ready_by_node(c)
        bad = {k: v for k, v in r.items() if v != "True"}
        assert not bad, bad
        time.sleep(1)


def test_killed_nodes_turn_unknown_and_come_back(sim):
    c, _, ctl = sim
    victims = [f"hollow-{i:05d}" for i in (3, 50, 99, 150, 199)]
    assert control(ctl, "kill " + " ".join(victims)) == "ok 5"
    t0 = time.monotonic()
    r = wait_for(lambda: (lambda r: r if all(r[v] == "Unknown" for v in victims) else None)(ready_by_node(c)),
                 GRACE + MONITOR + MARGIN, interval=0.5, what="the killed nodes Unknown")
    took = time.monotonic() - t0
    others = {k: v for k, v in r.items() if k not in victims and v != "True"}
    assert not others, others
    assert took >= GRACE - 1, f"marked Unknown after {took:.1f}s, before the grace period"
    st = json.loads(control(ctl, "stats"))
    assert st["dead"] == 5
    assert control(ctl, "revive " + " ".join(victims)) == "ok 5"
    r = wait_for(lambda: (lambda r: r if all(r[v] == "True" for v in victims) else None)(ready_by_node(c)), 60,
                 interval=0.5, what="the revived nodes Ready")
    assert all(v == "True" for v in r.values())


def test_control_refuses_unknown_names(sim):
    _, _, ctl = sim
    assert control(ctl, "kill hollow-00200").startswith("error: no simulated node")
    assert control(ctl, "kill nothing-1").startswith("error: no simulated node")
    assert control(ctl, "explode").startswith("error: unknown command")
    assert json.loads(control(ctl, "stats"))["dead"] == 0
