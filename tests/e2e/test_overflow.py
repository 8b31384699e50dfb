"""Integer overflows a user with ordinary rights could reach (issue 29, items 7 and 8), each on
`kite up` with real pods under runc. Against the sanitizer build (make test-e2e-asan) UBSan
aborts the process at any signed overflow, so every test also checks that the cluster is still
alive with no sanitizer report in its log; each then checks the answer:

- a watch with timeoutSeconds=9300000000 stays open and streams (a timeout that large is never);
- DELETE with gracePeriodSeconds=INT64_MAX gives a deletionTimestamp in the far future
  (saturated, never wrapped into the past);
- an Event whose lastTimestamp is year 1 is expired by the TTL clean-up;
- a Node's Ready heartbeat of year 1 and its Lease renewTime of year 9999 are judged without harm;
- tolerationSeconds=INT64_MAX tolerates the taint for good (a 1 s toleration beside it is evicted);
- a Job's activeDeadlineSeconds=INT64_MAX never ends it;
- a cpu limit of 1e14 cores runs (no quota past what the kernel takes);
- terminationGracePeriodSeconds=INT64_MAX on a pod and on a liveness probe waits (SIGTERM only),
  and a force delete then ends the wait, as the kubelet's (at most 1 s more);
- a pod asking requests.memory 10Pi stays Pending with "Insufficient memory", as 1Pi does.
Needs root, runc, conmon and umoci."""
import http.client
import json
import os
import subprocess
import time
from datetime import datetime, timezone

import pytest

from conftest import KITE, create_node, runc_up_cluster, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NS = "default"
PODS = f"/api/v1/namespaces/{NS}/pods"
INT64_MAX = 9223372036854775807


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from runc_up_cluster(tmp_path_factory, "overflow", ["--event-ttl", "2s"])


def runc_ids(c):
    r = subprocess.run(["runc", "--root", str(c.data_dir / "agent" / "runc"), "list", "-q"],
                       capture_output=True, text=True)
    return set(r.stdout.split())


def survives(c):
    """The cluster (apiserver, controllers, scheduler and agent: one process) is alive and its
    log holds no sanitizer report."""
    report = c.proc.sanitizer_report()
    assert report is None, f"sanitizer report:\n{report[:8000]}"
    assert c.proc.alive(), f"kite up died:\n{c.proc.log_tail()}"
    r = c.api().get("/readyz")
    assert r.status == 200, r


def parse_time(s):
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


def get(c, path):
    r = c.api().get(path)
    return r.json() if r.status == 200 else None


def sh(script, **kw):
    return {"name": "c", "image": "busybox", "command": ["sh", "-c", script], **kw}


def make_pod(c, name, containers, node=None, **spec):
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": containers, **spec}}
    if node:
        body["spec"]["nodeName"] = node
    return c.api().ok("POST", PODS, body)


def running(c, name, timeout=30):
    return wait_for(lambda: (p := get(c, f"{PODS}/{name}")) and p["status"].get("phase") == "Running" and p,
                    timeout, what=f"{name} Running")


def force_delete(c, name):
    c.api().delete(f"{PODS}/{name}?gracePeriodSeconds=0")
    wait_for(lambda: get(c, f"{PODS}/{name}") is None, 40, what=f"{name} gone")


def events_of(c, name, reason=None):
    items = c.api().get(f"/api/v1/namespaces/{NS}/events").json()["items"]
    return [e for e in items if e["involvedObject"].get("name") == name and (not reason or e["reason"] == reason)]


def test_watch_timeout_past_int64_ns_stays_open(cluster):
    c = cluster
    conn = http.client.HTTPSConnection("127.0.0.1", c.port, context=c.identity.ctx, timeout=20)
    try:
        conn.request("GET", f"/api/v1/namespaces/{NS}/configmaps?watch=1&timeoutSeconds=9300000000",
                     headers={"Accept": "application/json"})
        r = conn.getresponse()
        assert r.status == 200, r.read()
        time.sleep(1.5)
        c.api().ok("POST", f"/api/v1/namespaces/{NS}/configmaps",
                   {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "watched"}})
        seen = []
        while True:
            line = r.readline()
            assert line, f"the watch ended early; events seen: {seen}"
            ev = json.loads(line)
            seen.append((ev["type"], ev["object"]["metadata"].get("name")))
            if seen[-1] == ("ADDED", "watched"):
                break
    finally:
        conn.close()
    survives(c)


def test_delete_grace_int64_max_is_far_future(cluster):
    c = cluster
    make_pod(c, "grace-max", [sh("exec sleep 3600")], node="nowhere")  # a node nobody runs: nothing kills it
    before = datetime.now(timezone.utc)
    r = c.api().delete(f"{PODS}/grace-max?gracePeriodSeconds={INT64_MAX}")
    assert r.status == 200, r
    md = r.json()["metadata"]
    assert md["deletionGracePeriodSeconds"] == INT64_MAX
    at = parse_time(md["deletionTimestamp"])
    assert at.year >= 2100, f"deletionTimestamp {md['deletionTimestamp']} must be far ahead of {before}"
    survives(c)
    force_delete(c, "grace-max")


def test_event_of_year_1_expires(cluster):
    c = cluster
    ev = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "ancient", "namespace": NS},
          "involvedObject": {"kind": "Pod", "name": "p", "namespace": NS}, "reason": "Old", "message": "m",
          "type": "Normal", "count": 1, "firstTimestamp": "0001-01-01T00:00:00Z",
          "lastTimestamp": "0001-01-01T00:00:00Z", "source": {"component": "e2e"}}
    c.api().ok("POST", f"/api/v1/namespaces/{NS}/events", ev)
    # the TTL clean-up runs every 10 s (--event-ttl 2s here)
    wait_for(lambda: c.api().get(f"/api/v1/namespaces/{NS}/events/ancient").status == 404 or not c.proc.alive(),
             40, what="the year-1 event expired")
    survives(c)


def test_node_heartbeat_year_1_and_lease_year_9999(cluster):
    c = cluster
    api = c.api()
    create_node(api, "n-ancient")
    node = api.ok("GET", "/api/v1/nodes/n-ancient")
    for cnd in node["status"]["conditions"]:
        if cnd["type"] == "Ready":
            cnd["lastHeartbeatTime"] = "0001-01-01T00:00:00Z"
            cnd["lastTransitionTime"] = "0001-01-01T00:00:00Z"
    api.ok("PUT", "/api/v1/nodes/n-ancient/status", node)
    api.ok("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
           {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "n-ancient"},
            "spec": {"holderIdentity": "n-ancient", "leaseDurationSeconds": 40,
                     "renewTime": "9999-12-31T23:59:59.999999Z"}})
    # node states are computed every 2 s, the node lifecycle controller looks every 5 s
    wait_for(lambda: 'kite_node_state{node="n-ancient"' in c.api().get("/metrics").body.decode() or not c.proc.alive(),
             20, what="a state for n-ancient")
    time.sleep(6)
    survives(c)
    lease = api.ok("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n-ancient")
    assert lease["spec"]["renewTime"] == "9999-12-31T23:59:59.999999Z"
    out = subprocess.run([KITE, "nodes", "--kubeconfig", str(c.kubeconfig)], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0 and "n-ancient" in out.stdout, out


def test_toleration_seconds_int64_max_tolerates_for_good(cluster):
    c = cluster
    api = c.api()
    create_node(api, "n-taint")

    def tol(seconds):
        return [{"key": "e2e/x", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}]
    make_pod(c, "tol-forever", [sh("sleep 3600")], node="n-taint", tolerations=tol(INT64_MAX))
    make_pod(c, "tol-short", [sh("sleep 3600")], node="n-taint", tolerations=tol(1))
    api.patch("/api/v1/nodes/n-taint", {"spec": {"taints": [{"key": "e2e/x", "effect": "NoExecute"}]}})
    # the 1 s toleration shows that eviction runs; the INT64_MAX one must outlast it
    wait_for(lambda: (p := get(c, f"{PODS}/tol-short")) is None or p["metadata"].get("deletionTimestamp")
             or not c.proc.alive(), 20, what="tol-short evicted")
    time.sleep(3)
    survives(c)
    p = get(c, f"{PODS}/tol-forever")
    assert p is not None and "deletionTimestamp" not in p["metadata"], p
    force_delete(c, "tol-forever")
    api.delete(f"{PODS}/tol-short?gracePeriodSeconds=0")


def test_job_active_deadline_int64_max_never_ends(cluster):
    c = cluster
    c.api().ok("POST", f"/apis/batch/v1/namespaces/{NS}/jobs",
               {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "forever"},
                "spec": {"activeDeadlineSeconds": INT64_MAX, "backoffLimit": 0,
                         "template": {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                                               "containers": [sh("exec sleep 3600")]}}}})
    job = wait_for(lambda: (j := get(c, f"/apis/batch/v1/namespaces/{NS}/jobs/forever"))
                   and j.get("status", {}).get("startTime") and j.get("status", {}).get("active") and j
                   or not c.proc.alive(), 30, what="the Job started")
    time.sleep(3)
    survives(c)
    job = get(c, f"/apis/batch/v1/namespaces/{NS}/jobs/forever")
    conds = [x["type"] for x in job["status"].get("conditions", [])]
    assert not {"Failed", "FailureTarget"} & set(conds), job["status"]
    c.api().delete(f"/apis/batch/v1/namespaces/{NS}/jobs/forever?propagationPolicy=Background")


def test_cpu_limit_1e14_runs(cluster):
    c = cluster
    make_pod(c, "cpu-huge", [sh("exec sleep 3600", resources={"requests": {"cpu": "100m"},
                                                              "limits": {"cpu": "100000000000000"}})], node=c.node)
    wait_for(lambda: (p := get(c, f"{PODS}/cpu-huge")) and p["status"].get("phase") == "Running" or not c.proc.alive(),
             30, what="cpu-huge Running")
    survives(c)
    force_delete(c, "cpu-huge")


def test_pod_grace_int64_max_waits(cluster):
    c = cluster
    # sleep is the container's pid 1: SIGTERM leaves it running, only SIGKILL at the grace's end stops it
    before = runc_ids(c)
    make_pod(c, "tg-max", [sh("exec sleep 3600")], node=c.node, terminationGracePeriodSeconds=INT64_MAX)
    running(c, "tg-max")
    mine = runc_ids(c) - before
    r = c.api().delete(f"{PODS}/tg-max")
    assert r.status == 200, r
    assert parse_time(r.json()["metadata"]["deletionTimestamp"]).year >= 2100, r.json()["metadata"]
    wait_for(lambda: events_of(c, "tg-max", "Killing") or not c.proc.alive(), 20, what="Killing event")
    time.sleep(3)
    survives(c)
    p = get(c, f"{PODS}/tg-max")
    assert p is not None and "running" in p["status"]["containerStatuses"][0]["state"], p and p["status"]
    # a force delete ends the wait, as the kubelet's: killed within a second, then removed
    force_delete(c, "tg-max")
    wait_for(lambda: not (runc_ids(c) & mine), 20, what="tg-max's containers removed")
    survives(c)


def test_probe_grace_int64_max_waits(cluster):
    c = cluster
    probe = {"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 1,
             "terminationGracePeriodSeconds": INT64_MAX}
    before = runc_ids(c)
    make_pod(c, "probe-max", [sh("exec sleep 3600", livenessProbe=probe)], node=c.node,
             terminationGracePeriodSeconds=2)
    running(c, "probe-max")
    mine = runc_ids(c) - before
    wait_for(lambda: any("failed liveness probe" in e["message"] for e in events_of(c, "probe-max", "Killing"))
             or not c.proc.alive(), 30, what="the liveness probe's Killing event")
    time.sleep(3)
    survives(c)
    p = get(c, f"{PODS}/probe-max")
    cs = p["status"]["containerStatuses"][0]
    assert "running" in cs["state"] and cs.get("restartCount", 0) == 0, cs
    force_delete(c, "probe-max")
    wait_for(lambda: not (runc_ids(c) & mine), 20, what="probe-max's containers removed")
    survives(c)


@pytest.mark.parametrize("memory", ["1Pi", "10Pi"])
def test_memory_request_past_int64_milli_stays_pending(cluster, memory):
    c = cluster
    name = f"mem-{memory.lower()}"
    make_pod(c, name, [sh("sleep 3600", resources={"requests": {"memory": memory}})])
    wait_for(lambda: events_of(c, name, "FailedScheduling") or (get(c, f"{PODS}/{name}") or {}).get("spec", {}).get("nodeName")
             or not c.proc.alive(), 20, what=f"{name} judged by the scheduler")
    survives(c)
    p = get(c, f"{PODS}/{name}")
    assert not p["spec"].get("nodeName"), f"{memory} must fit no node: bound to {p['spec'].get('nodeName')}"
    assert p["status"]["phase"] == "Pending"
    msgs = [e["message"] for e in events_of(c, name, "FailedScheduling")]
    assert msgs and all("Insufficient memory" in m for m in msgs), msgs
    assert msgs[-1].startswith("0/") and " Insufficient memory." in msgs[-1], msgs
    force_delete(c, name)
