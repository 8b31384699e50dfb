"""`kite sim`: simulated nodes on the node agent's code against a `kite up` control plane.

200 nodes in one process sharing 8 connections, each request as its node (system:node:NAME by
impersonation, so the Node authorizer judges it), all turn Ready (kubectl get nodes); pods bound to
them run on their pod managers and fake runtimes (--pods-per-node) and report Running; the node
lifecycle controller marks none of them Unknown over a grace period of renewals; the requests go as
HTTP/2 streams (kite sim's default with --connections) and, when `kite up` restarts under them
(every connection lost), every node renews its Lease again; 1% killed and 1%
cut off the network through the control socket turn Unknown within grace + 1 s of it (the
controller's deadline heap marks a node when its deadline passes), as do nodes slowed past the
grace, while nodes slowed less and every other node stay Ready; all come back once revived,
healed and sped up."""
import calendar
import json
import socket
import time

import pytest

from conftest import Cluster, KiteProcess, _workdir, wait_for

NODES = 200
GRACE = 10   # --node-monitor-grace-period
LEASE = 8    # the simulated nodes' leaseDurationSeconds: renewed every 2 s
MONITOR = 5  # kite up's node monitor period
MARGIN = 8   # a loaded 2-core machine
PODS = 20


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    workdir = _workdir(tmp_path_factory, "sim")
    c = Cluster("up", workdir, extra_args=["--no-agent", "--node-monitor-grace-period", f"{GRACE}s"]).start()
    control = workdir / "sim.sock"
    p = KiteProcess(["sim", "--kubeconfig", str(c.kubeconfig), "--data-dir", str(c.data_dir), "--nodes", str(NODES),
                     "--name-prefix", "hollow", "--zones", "3", "--lease-duration", str(LEASE), "--ramp", "200",
                     "--connections", "8", "--pods-per-node", "5",
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
    # no log or metrics endpoint: port 0, so the server's metrics scraper and log proxy skip the node
    assert node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == 0
    # each node wrote as itself: the Lease's holder and the Node authorizer's own-object rule
    lease = json.loads(c.kubectl("get", "lease", "-n", "kube-node-lease", "hollow-00007", "-o", "json").stdout)
    assert lease["spec"]["holderIdentity"] == "hollow-00007"
    st = json.loads(control(sim[2], "stats"))
    assert st["registered"] == NODES and st["ready"] == NODES and st["failing"] == 0


@pytest.mark.slow  # a plain wait; the failure test watches the other nodes too
def test_no_false_unknown_over_a_grace_period(sim):
    c, _, _ = sim
    deadline = time.monotonic() + GRACE + MONITOR
    while time.monotonic() < deadline:
        r = ready_by_node(c)
        bad = {k: v for k, v in r.items() if v != "True"}
        assert not bad, bad
        time.sleep(1)


def test_pods_run_on_simulated_nodes(sim):
    c, _, ctl = sim
    c.kubectl("create", "deployment", "hollow-web", "--image=registry.example/web:1.0", f"--replicas={PODS}")

    def running():
        items = json.loads(c.kubectl("get", "pods", "-l", "app=hollow-web", "-o", "json").stdout)["items"]
        up = [p for p in items if p.get("status", {}).get("phase") == "Running"]
        return items if len(items) == PODS and len(up) == PODS else None
    pods = wait_for(running, 90, interval=1, what=f"{PODS} pods Running on simulated nodes")
    for p in pods:
        node = p["spec"]["nodeName"]
        assert node.startswith("hollow-"), node
        i = int(node.split("-")[1])
        # the hostIP is the node's own InternalIP, as its acknowledged status says
        assert p["status"]["hostIP"] == f"10.64.0.{i % 254 + 1}", (node, p["status"])
        assert p["status"].get("podIP"), p["status"]
        conds = {x["type"]: x["status"] for x in p["status"]["conditions"]}
        assert conds.get("Ready") == "True", p["status"]
        cs = p["status"]["containerStatuses"][0]
        assert "running" in cs["state"] and cs["ready"], cs
    c.kubectl("delete", "deployment", "hollow-web")
    wait_for(lambda: not json.loads(c.kubectl("get", "pods", "-l", "app=hollow-web", "-o", "json").stdout)["items"],
             90, interval=1, what="the pods gone")


def renew_times(c, name):
    """The node's Lease renewTime, as epoch seconds (None when it has none)."""
    rt = c.kubectl("get", "lease", "-n", "kube-node-lease", name, "-o", "jsonpath={.spec.renewTime}").stdout.strip()
    if not rt:
        return None
    whole, _, frac = rt.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + float("0." + (frac or "0"))


@pytest.mark.slow  # a slowed node's pods take ~20 s to start
def test_pod_work_does_not_hold_back_a_nodes_renewals(sim):
    """A kubelet renews its lease beside its pod workers: a node starting pods, each request of it
    slowed, still renews every LEASE/4 s (its pod manager steps on a lane of its own; on the
    agent's lane, the pods' starts and status writes held the renewal back past the grace)."""
    c, _, ctl = sim
    node, slow_ms, n = "hollow-00042", 700, 3
    assert control(ctl, f"slow {slow_ms} {node}") == "ok 1"
    try:
        for i in range(n):
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"slowpod-{i}", "namespace": "default"},
                   "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.example/web:1.0"}]}}
            c.kubectl("create", "-f", "-", input=json.dumps(pod))
        seen, deadline, running = [], time.monotonic() + 90, None
        while time.monotonic() < deadline:
            t = renew_times(c, node)
            if t and (not seen or t != seen[-1]):
                seen.append(t)
            if running is None:
                items = json.loads(c.kubectl("get", "pods", "-o", "json").stdout)["items"]
                up = [p for p in items if p["metadata"]["name"].startswith("slowpod-")
                      and p.get("status", {}).get("phase") == "Running"]
                if len(up) == n:
                    running = time.monotonic()
            elif time.monotonic() - running > LEASE / 2:
                break
            time.sleep(0.3)
        assert running is not None, "the slowed node's pods never all ran"
        gaps = [b - a for a, b in zip(seen, seen[1:])]
        assert gaps and max(gaps) < LEASE / 4 + 3, f"renewals of {node} while its pods started: gaps {gaps}"
        assert ready_by_node(c)[node] == "True"
    finally:
        control(ctl, f"slow 0 {node}")
        for i in range(n):
            c.kubectl("delete", "pod", f"slowpod-{i}", "--ignore-not-found", "--wait=false", check=False)


def cond_ready(c, names):
    """{name: (status, lastTransitionTime as epoch seconds)} of the Ready condition."""
    items = json.loads(c.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    out = {}
    for n in items:
        if n["metadata"]["name"] not in names:
            continue
        for x in n["status"]["conditions"]:
            if x["type"] == "Ready":
                t = calendar.timegm(time.strptime(x["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ"))
                out[n["metadata"]["name"]] = (x["status"], t)
    return out


@pytest.mark.slow  # waits out the grace period (over 40 s)
def test_failures_are_detected_without_false_positives(sim):
    c, _, ctl = sim
    killed = ["hollow-00003", "hollow-00150"]        # 1% of the nodes
    cut = ["hollow-00050", "hollow-00199"]           # 1% lose the network
    stalled = ["hollow-00077"]                       # each request held past the grace
    slowed = ["hollow-00011", "hollow-00120"]        # each request held 300 ms: still on time
    down = killed + cut + stalled
    t0 = time.time()
    assert control(ctl, "kill " + " ".join(killed)) == "ok 2"
    assert control(ctl, "partition " + " ".join(cut)) == "ok 2"
    assert control(ctl, f"slow {(GRACE + 5) * 1000} " + " ".join(stalled)) == "ok 1"
    assert control(ctl, "slow 300 " + " ".join(slowed)) == "ok 2"
    st = json.loads(control(ctl, "stats"))
    assert (st["dead"], st["partitioned"], st["slow"]) == (2, 2, 3)

    def all_down():
        r = ready_by_node(c)
        false = {k: v for k, v in r.items() if k not in down and v != "True"}
        assert not false, f"false Unknown: {false}"
        return r if all(r[v] == "Unknown" for v in down) else None
    wait_for(all_down, GRACE + MONITOR + MARGIN, interval=0.5, what="the failed nodes Unknown")
    # when the controller marked them, by its own clock (whole seconds: a lower bound)
    marks = cond_ready(c, set(down))
    renew = LEASE / 4
    for name in killed + cut:
        status, t = marks[name]
        assert status == "Unknown"
        assert t - t0 <= GRACE + 1, f"{name} marked Unknown {t - t0:.1f}s after it failed (grace {GRACE}s)"
        assert t - t0 >= GRACE - renew - 2, f"{name} marked Unknown {t - t0:.1f}s after it failed, before the grace"
    # the slowed nodes renewed throughout
    assert all(v == "True" for k, v in ready_by_node(c).items() if k in slowed)

    assert control(ctl, "revive " + " ".join(killed)) == "ok 2"
    assert control(ctl, "heal " + " ".join(cut)) == "ok 2"
    assert control(ctl, "slow 0 " + " ".join(stalled + slowed)) == "ok 3"
    r = wait_for(lambda: (lambda r: r if all(v == "True" for v in r.values()) else None)(ready_by_node(c)),
                 GRACE + 30, interval=0.5, what="every node Ready again")
    assert len(r) == NODES
    st = json.loads(control(ctl, "stats"))
    assert (st["dead"], st["partitioned"], st["slow"]) == (0, 0, 0)


def test_control_refuses_unknown_names(sim):
    _, _, ctl = sim
    assert control(ctl, "kill hollow-00200").startswith("error: no simulated node")
    assert control(ctl, "kill nothing-1").startswith("error: no simulated node")
    assert control(ctl, "explode").startswith("error: unknown command")
    assert json.loads(control(ctl, "stats"))["dead"] == 0


def leases_renewed_since(c, t):
    """Names of the simulated nodes whose Lease was renewed at or after t (epoch seconds)."""
    items = json.loads(c.kubectl("get", "leases", "-n", "kube-node-lease", "-o", "json").stdout)["items"]
    out = set()
    for x in items:
        name, rt = x["metadata"]["name"], x.get("spec", {}).get("renewTime")
        if not name.startswith("hollow-") or not rt:
            continue
        whole, _, frac = rt.rstrip("Z").partition(".")
        secs = calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + float("0." + (frac or "0"))
        if secs >= t:
            out.add(name)
    return out


def test_http2_streams_survive_a_server_restart(sim):
    c, p, ctl = sim
    st = json.loads(control(ctl, "stats"))
    assert st["protocol"] == "HTTP/2", st
    h2 = st["http2"]
    # every registration and renewal was answered on an HTTP/2 stream (nghttp2 parsed its frames),
    # the 64 lanes' requests multiplexed over at most the 8 connections
    assert h2["streams"] >= st["registrations"] + st["renewals"] >= 2 * NODES, st
    assert 1 <= st["openConnections"] <= 8 and h2["connectionsOpened"] >= 1, st
    opened = h2["connectionsOpened"]
    c.stop()
    time.sleep(1)  # the nodes' requests fail meanwhile (connection refused) and back off
    c.restart()
    t = time.time()
    want = {f"hollow-{i:05d}" for i in range(NODES)}
    wait_for(lambda: want <= leases_renewed_since(c, t), 2 * LEASE + MARGIN, interval=0.5,
             what="every node's Lease renewed after the restart")
    st = json.loads(control(ctl, "stats"))
    assert st["http2"]["connectionsLost"] >= 1 and st["http2"]["connectionsOpened"] > opened, st
    assert p.alive()
