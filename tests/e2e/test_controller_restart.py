"""Controller-manager restarts and leader changes leave the cluster's picture alone, against a bare
`kite apiserver` (pods stay Pending: no agent, no scheduler; the controllers only count them).

A controller-manager restarted under Deployments acts only once its informers have synced
(client-go's WaitForCacheSync): no pod created again, none deleted, one ReplicaSet per Deployment.
A leader frozen (SIGSTOP) past its lease writes nothing when thawed, before or after it notices
another took over (counted per user in the audit log, each controller-manager with a user of its
own); a sole leader frozen past every node's grace re-judges its nodes afresh instead of marking
them Unknown on deadlines that expired while it slept."""
import json
import re
import signal
import subprocess
import time
from datetime import datetime, timezone

import pytest

from conftest import KITE, Cluster, KiteProcess, create_node, wait_for

APPS = "/apis/apps/v1/namespaces/default"
FILLER_NS = "filler"
FILLER_PODS = 300  # pods elsewhere make the pod list slower than the ReplicaSet list
DEPLOYMENTS = 4
REPLICAS = 3


def start_cm(cluster, name, *extra):
    return KiteProcess(["controller-manager", "--kubeconfig", str(cluster.kubeconfig), "--leader-elect=false",
                        "--controllers", "replicaset,deployment,garbagecollector", *extra],
                       cluster.workdir, name).start()


def deployment(name):
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": REPLICAS, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}


def events(api, reason):
    items = api.ok("GET", "/api/v1/namespaces/default/events")["items"]
    return [e for e in items if e["reason"] == reason]


def pods(api):
    return api.ok("GET", "/api/v1/namespaces/default/pods")["items"]


@pytest.mark.slow
def test_restarted_controller_manager_creates_no_surplus_pods(fresh_apiserver):
    c = fresh_apiserver
    api = c.api()
    api.ok("POST", "/api/v1/namespaces", {"metadata": {"name": FILLER_NS}})
    for i in range(FILLER_PODS):
        api.ok("POST", f"/api/v1/namespaces/{FILLER_NS}/pods",
               {"metadata": {"name": f"f{i}"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    names = [f"web{i}" for i in range(DEPLOYMENTS)]
    for n in names:
        api.ok("POST", f"{APPS}/deployments", deployment(n))
    want = DEPLOYMENTS * REPLICAS
    cm = start_cm(c, "cm")
    try:
        wait_for(lambda: len(pods(api)) == want and len(events(api, "SuccessfulCreate")) == want, 30,
                 what=f"{want} pods created")
        for round_ in range(3):
            cm.stop()
            cm.start()
            wait_for(lambda: b"controllers running" in cm.log_path.read_bytes().rsplit(b"=== start", 1)[-1], 10,
                     what="the controllers running again")
            # a restarted controller that acts before its caches fill creates within a second
            time.sleep(3)
            created = events(api, "SuccessfulCreate")
            assert len(created) == want, f"round {round_}: {len(created)} creates for {want} pods"
            assert not events(api, "SuccessfulDelete"), f"round {round_}: pods deleted"
            assert len(pods(api)) == want
            rs = api.ok("GET", f"{APPS}/replicasets")["items"]
            assert len(rs) == DEPLOYMENTS, [r["metadata"]["name"] for r in rs]
            for n in names:
                d = api.ok("GET", f"{APPS}/deployments/{n}")
                assert not d["status"].get("collisionCount"), d["status"]
    finally:
        assert cm.stop() == 0


# ---- a deposed leader writes nothing ------------------------------------------------------------

CM_LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"
LEASE_S = 2
LE = ["--leader-elect-lease-duration", f"{LEASE_S}s", "--leader-elect-renew-deadline", "1500ms",
      "--leader-elect-retry-period", "250ms"]
GRACE = 3
NODE_FLAGS = ["--node-monitor-grace-period", f"{GRACE}s", "--node-startup-grace-period", f"{GRACE + 1}s",
              "--node-monitor-period", "1s"]
WRITES = {"create", "update", "patch", "delete", "deletecollection"}
ROUNDS = 20  # the count; both counts run in the slow tier (over 15 s under ASan: make test-slow, CI)
SHORT_ROUNDS = 2
PAUSES = 6


def audit_events(path):
    out = []
    for f in sorted(path.parent.iterdir()):
        for line in f.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a line being written
    return out


def micro(ts):
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


def user_kubeconfig(c, user):
    path = c.workdir / f"{user}.kubeconfig"
    subprocess.run([KITE, "kubeconfig", "--data-dir", str(c.data_dir), "--user", user, "--group", "system:masters",
                    "-o", str(path)], check=True, capture_output=True, timeout=30)
    return path


def identity_of(cm):
    m = re.search(rb"leader election as (\S+) on lease", cm.log_path.read_bytes())
    return m and m.group(1).decode()


def holder(api):
    r = api.get(CM_LEASE)
    return r.json()["spec"].get("holderIdentity") if r.status == 200 else None


def stale_writes(events, user, start, end):
    """Writes by user received in [start, end) (wall seconds), but the election's own."""
    return [(e["verb"], e.get("requestURI")) for e in events
            if e["stage"] == "ResponseComplete" and e["user"].get("username") == user and e["verb"] in WRITES
            and start <= micro(e["requestReceivedTimestamp"]) < end
            and not (e.get("objectRef", {}).get("resource") == "leases"
                     and e["objectRef"].get("namespace") == "kube-system")]


@pytest.fixture
def audited_apiserver(tmp_path):
    audit = tmp_path / "audit" / "audit.log"
    c = Cluster("apiserver", tmp_path, extra_args=["--audit-log-path", str(audit)]).start()
    c.audit_log = audit
    yield c
    c.stop()


@pytest.mark.slow
@pytest.mark.parametrize("rounds", [SHORT_ROUNDS, ROUNDS], ids=["short", "full"])
def test_deposed_leader_writes_nothing(audited_apiserver, rounds):
    """Two controller-managers; the leader is frozen (SIGSTOP) past its lease and past every
    node's grace, the other takes over, and the frozen one is thawed: it must not write (mark
    nodes Unknown, taint them, set pods Ready=False, post events) before it notices it lost the
    lease. ROUNDS freezes, the roles swapping each time."""
    from test_node_lifecycle import FakeKubelet, make_pod
    c = audited_apiserver
    api = c.api()
    kubelets = []
    for n in ("n1", "n2"):
        create_node(api, n)
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        api.ok("PATCH", f"/api/v1/nodes/{n}/status", {"status": {"conditions": [
            {"type": "Ready", "status": "True", "lastHeartbeatTime": now, "lastTransitionTime": now,
             "reason": "KubeletReady", "message": "up"}]}}, ctype="application/strategic-merge-patch+json")
        kubelets.append(FakeKubelet(c, n))
        make_pod(api, f"p-{n}", n)
    cms = {}
    for user in ("cm-a", "cm-b"):
        cms[user] = KiteProcess(["controller-manager", "--kubeconfig", str(user_kubeconfig(c, user)), *LE,
                                 *NODE_FLAGS], c.workdir, user).start()
    try:
        ids = {u: wait_for(lambda u=u: identity_of(cm), 10, what=f"{u} a candidate") for u, cm in cms.items()}
        by_id = {i: u for u, i in ids.items()}
        leader = by_id[wait_for(lambda: holder(api) in by_id and holder(api), 10, what="a leader")]
        windows = []  # (user, from, to): the user is not the leader in between
        for round_ in range(rounds):
            other = "cm-b" if leader == "cm-a" else "cm-a"
            # both settled: the leader's controllers run, the nodes are Ready
            wait_for(lambda: (lambda log: log.count(b"controllers running") > log.count(b"controllers stopped"))(
                cms[leader].log_path.read_bytes()), 10, what=f"round {round_}: the leader's controllers")
            if windows:
                windows[-1] = (windows[-1][0], windows[-1][1], time.time() + LEASE_S / 2)
            cms[leader].signal(signal.SIGSTOP)
            wait_for(lambda: holder(api) == ids[other], LEASE_S + 5, interval=0.05, what=f"round {round_}: takeover")
            time.sleep(GRACE + 0.5)  # every node deadline of the frozen one has passed
            thawed = time.time()
            cms[leader].signal(signal.SIGCONT)
            windows.append((leader, thawed, None))
            leader = other
        time.sleep(2)
        windows[-1] = (windows[-1][0], windows[-1][1], time.time())
        events = audit_events(c.audit_log)
        bad = [(i, u, w) for i, (u, t0, t1) in enumerate(windows) for w in stale_writes(events, u, t0, t1)]
        assert not bad, f"writes by a deposed leader: {bad[:20]}"
        # and the picture stayed true: every node Ready, no unreachable taint, no pod marked not Ready
        for n in ("n1", "n2"):
            node = api.ok("GET", f"/api/v1/nodes/{n}")
            ready = next(x for x in node["status"]["conditions"] if x["type"] == "Ready")
            assert ready["status"] == "True", (n, ready)
            assert not node["spec"].get("taints"), node["spec"]
        assert any(stale_writes(events, u, 0, time.time()) for u in cms), "the leaders wrote nothing at all"
    finally:
        for cm in cms.values():
            cm.signal(signal.SIGCONT)
        for k in kubelets:
            k.close()
        for cm in cms.values():
            assert cm.stop() == 0


@pytest.mark.slow  # over 30 s under ASan: the slow tier (make test-slow, CI)
def test_paused_sole_leader_rejudges_nodes_afresh(audited_apiserver):
    """The only controller-manager frozen past its renew deadline and every node's grace keeps
    its lease (nobody else wants it), but what it knew is stale: it stops its controllers,
    starts them afresh, and no healthy node is marked Unknown."""
    from test_node_lifecycle import FakeKubelet
    c = audited_apiserver
    api = c.api()
    create_node(api, "n1")
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    api.ok("PATCH", "/api/v1/nodes/n1/status", {"status": {"conditions": [
        {"type": "Ready", "status": "True", "lastHeartbeatTime": now, "lastTransitionTime": now,
         "reason": "KubeletReady", "message": "up"}]}}, ctype="application/strategic-merge-patch+json")
    kubelet = FakeKubelet(c, "n1")
    cm = KiteProcess(["controller-manager", "--kubeconfig", str(user_kubeconfig(c, "cm-a")), *LE, *NODE_FLAGS],
                     c.workdir, "cm-a").start()
    try:
        wait_for(lambda: b"controllers running" in cm.log_path.read_bytes(), 10, what="controllers")
        time.sleep(1)
        for round_ in range(PAUSES):
            cm.signal(signal.SIGSTOP)
            time.sleep(GRACE + 1)
            thawed = time.time()
            cm.signal(signal.SIGCONT)
            time.sleep(1.5)
            node = api.ok("GET", "/api/v1/nodes/n1")
            ready = next(x for x in node["status"]["conditions"] if x["type"] == "Ready")
            assert ready["status"] == "True", ready
            assert not node["spec"].get("taints"), node["spec"]
            marks = [w for w in stale_writes(audit_events(c.audit_log), "cm-a", thawed, time.time())
                     if w[1].startswith("/api/v1/nodes")]
            assert not marks, f"round {round_}: {marks}"
        # each pause past the renew deadline restarted the controllers (a fresh observation)
        wait_for(lambda: cm.log_path.read_bytes().count(b"controllers running") == PAUSES + 1, 10,
                 what="a fresh start after each pause")
    finally:
        cm.signal(signal.SIGCONT)
        kubelet.close()
        assert cm.stop() == 0
