"""apps/v1 StatefulSet under `kite up`: stable names NAME-0..N-1 created in order (OrderedReady:
each once the one before is Ready) and removed from the highest; Parallel creates them at once;
a headless Service gives each its DNS name (NAME-0.SVC.NS.svc.cluster.local, from a pod);
RollingUpdate with a partition replaces only the ordinals at or above it; ControllerRevisions
and kubectl rollout history/undo/status; volumeClaimTemplates are refused (422); kubectl get
sts / get all. Needs root, runc, conmon, umoci, nft."""
import json
import os
import subprocess
import time

import pytest

from conftest import AGENT_FAST_FLAGS, KITE, Cluster, _workdir, delete_pods_now, end_containers
from test_service_proxy import ROOT, SERVE, needs_root, service_cidr, wait

NS = "default"
APPS = f"/apis/apps/v1/namespaces/{NS}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    needs_root()
    work = _workdir(tmp_path_factory, "sts")
    tar = os.path.join(os.path.dirname(KITE), "busybox.tar")
    if not os.path.exists(tar):
        tar = str(work / "busybox.tar")
        subprocess.run([os.path.join(ROOT, "scripts/make-busybox-image"), tar], check=True, capture_output=True)
    c = Cluster("up", work, extra_args=[*AGENT_FAST_FLAGS, "--service-cluster-ip-range", service_cidr()])
    r = subprocess.run([KITE, "images", "import", tar, "--root-dir", str(c.data_dir / "agent")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    c.start()
    yield c
    c.kubectl("delete", "statefulset", "--all", "--cascade=orphan", check=False)
    delete_pods_now(c, NS, timeout=60)
    c.stop()
    end_containers(c)  # a container its pod's deletion left running (seen after runs: a conmon of sts0)


def sts(name, replicas, policy="OrderedReady", readiness=None, service=None):
    ctr = {"name": "c", "image": "busybox", "command": ["sh", "-c", SERVE]}
    if readiness:
        ctr["readinessProbe"] = {"exec": {"command": readiness}, "periodSeconds": 1}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "serviceName": service or name, "podManagementPolicy": policy,
                     "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"terminationGracePeriodSeconds": 0, "containers": [ctr]}}}}


def pods(c, app):
    items = c.api().get(f"/api/v1/namespaces/{NS}/pods?labelSelector=app%3D{app}").json()["items"]
    return {p["metadata"]["name"]: p for p in items}


def ready(p):
    return any(x["type"] == "Ready" and x["status"] == "True" for x in p.get("status", {}).get("conditions", []))


def watch_order(c, app, done, timeout):
    """Polls the set's pods until done(pods); returns every distinct set of names seen."""
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ps = pods(c, app)
        names = sorted(n for n, p in ps.items() if not p["metadata"].get("deletionTimestamp"))
        if not seen or seen[-1] != names:
            seen.append(names)
        if done(ps):
            return seen
        time.sleep(0.1)
    pytest.fail(f"timed out; seen {seen}")


@pytest.mark.slow
def test_ordered_creation_dns_names_and_ordered_removal(cluster):
    c = cluster
    c.api().ok("POST", f"/api/v1/namespaces/{NS}/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"name": "http", "port": 8080}]}})
    c.api().ok("POST", f"{APPS}/statefulsets", sts("web", 3))
    seen = watch_order(c, "web", lambda ps: len(ps) == 3 and all(ready(p) for p in ps.values()), 90)
    # only ever a prefix of the ordinals, one more at a time
    for names in seen:
        assert names == [f"web-{i}" for i in range(len(names))], seen
    ps = pods(c, "web")
    # each later pod was created once the one before was Ready
    for i in (1, 2):
        prev = next(x for x in ps[f"web-{i-1}"]["status"]["conditions"] if x["type"] == "Ready")
        assert ps[f"web-{i}"]["metadata"]["creationTimestamp"] >= prev["lastTransitionTime"], ps
    p0 = ps["web-0"]
    assert p0["spec"]["hostname"] == "web-0" and p0["spec"]["subdomain"] == "web"
    assert p0["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "web-0"
    assert p0["metadata"]["labels"]["apps.kubernetes.io/pod-index"] == "0"
    ref = p0["metadata"]["ownerReferences"][0]
    assert ref["kind"] == "StatefulSet" and ref["name"] == "web" and ref["controller"]
    st = wait(lambda: (s := c.api().get(f"{APPS}/statefulsets/web").json()["status"]).get("readyReplicas") == 3 and s,
              30, "status")
    assert st["replicas"] == 3 and st["currentRevision"] == st["updateRevision"] and st["updatedReplicas"] == 3, st
    out = c.kubectl("get", "sts", "web").stdout.splitlines()
    assert out[0].split() == ["NAME", "READY", "AGE"] and out[1].split()[:2] == ["web", "3/3"], out
    assert "statefulset.apps/web" in c.kubectl("get", "all").stdout

    # the headless Service's per-pod names resolve from a pod, and reach that pod
    ip1 = ps["web-1"]["status"]["podIP"]
    c.api().ok("POST", f"/api/v1/namespaces/{NS}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sts-client"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "command": [
            "sh", "-c", "nslookup web-1.web.default.svc.cluster.local; echo ---; wget -qO- http://web-2.web:8080"]}]}})
    wait(lambda: c.api().get(f"/api/v1/namespaces/{NS}/pods/sts-client").json()["status"].get("phase")
         in ("Succeeded", "Failed"), 60, "client done")
    lookup, body = c.kubectl("logs", "sts-client").stdout.split("---\n")
    assert f"Address: {ip1}" in lookup, lookup
    assert body.strip() == "web-2", body

    # scaled down: the highest ordinal goes first
    c.kubectl("scale", "sts", "web", "--replicas=1")
    seen = watch_order(c, "web", lambda ps: list(ps) == ["web-0"], 60)
    assert all(names == [f"web-{i}" for i in range(len(names))] for names in seen), seen


def test_ordered_ready_waits_parallel_does_not(cluster):
    c = cluster
    never = ["false"]
    c.api().ok("POST", f"{APPS}/statefulsets", sts("par", 3, "Parallel", readiness=never))
    c.api().ok("POST", f"{APPS}/statefulsets", sts("ord", 3, "OrderedReady", readiness=never))
    wait(lambda: len(pods(c, "par")) == 3, 30, "three Parallel pods though none is Ready")
    wait(lambda: pods(c, "ord").get("ord-0", {}).get("status", {}).get("phase") == "Running", 30, "ord-0 running")
    time.sleep(3)  # a second pod would come at once: the controller acts on every status change
    assert list(pods(c, "ord")) == ["ord-0"]
    for n in ("par", "ord"):
        c.kubectl("delete", "sts", n, "--cascade=background")
    wait(lambda: not pods(c, "par") and not pods(c, "ord"), 60, "collected")


def test_rolling_update_with_partition(cluster):
    c = cluster
    c.api().ok("POST", f"{APPS}/statefulsets", sts("roll", 3, "Parallel"))
    wait(lambda: len(ps := pods(c, "roll")) == 3 and all(ready(p) for p in ps.values()), 60, "three ready")
    before = {n: p["metadata"]["labels"]["controller-revision-hash"] for n, p in pods(c, "roll").items()}
    assert len(set(before.values())) == 1
    c.kubectl("patch", "sts", "roll", "--type=merge", "-p", json.dumps({"spec": {
        "updateStrategy": {"rollingUpdate": {"partition": 2}},
        "template": {"metadata": {"annotations": {"rev": "2"}}}}}))
    upd = wait(lambda: (s := c.api().get(f"{APPS}/statefulsets/roll").json()["status"]).get("updatedReplicas") == 1
               and s.get("readyReplicas") == 3 and s, 60, "roll-2 updated")
    ps = pods(c, "roll")
    assert ps["roll-2"]["metadata"]["labels"]["controller-revision-hash"] == upd["updateRevision"] != before["roll-2"]
    assert ps["roll-2"]["metadata"]["annotations"]["rev"] == "2"
    for n in ("roll-0", "roll-1"):
        assert ps[n]["metadata"]["labels"]["controller-revision-hash"] == before[n], ps[n]["metadata"]
    assert upd["currentRevision"] == before["roll-0"] and upd["currentReplicas"] == 2, upd
    c.kubectl("patch", "sts", "roll", "--type=merge", "-p", '{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}')
    st = wait(lambda: (s := c.api().get(f"{APPS}/statefulsets/roll").json()["status"]).get("updatedReplicas") == 3
              and s.get("readyReplicas") == 3 and s, 90, "all updated")
    assert st["currentRevision"] == st["updateRevision"], st


def test_adopts_its_orphaned_pods(cluster):
    c = cluster
    c.api().ok("POST", f"{APPS}/statefulsets", sts("adopt", 2, "Parallel"))
    wait(lambda: len(ps := pods(c, "adopt")) == 2 and all(ready(p) for p in ps.values()), 60, "two ready")
    uids = {n: p["metadata"]["uid"] for n, p in pods(c, "adopt").items()}
    c.kubectl("delete", "sts", "adopt", "--cascade=orphan")
    wait(lambda: all(not p["metadata"].get("ownerReferences") for p in pods(c, "adopt").values()), 30, "orphaned pods")
    # a pod that is not a member by name (the set's name, a dash, an ordinal) stays an orphan
    c.api().ok("POST", f"/api/v1/namespaces/{NS}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "adopt-x", "labels": {"app": "adopt"}},
        "spec": {"terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", SERVE]}]}})
    made = c.api().ok("POST", f"{APPS}/statefulsets", sts("adopt", 2, "Parallel"))
    ps = wait(lambda: (ps := pods(c, "adopt")) and all(
        (p["metadata"].get("ownerReferences") or [{}])[0].get("uid") == made["metadata"]["uid"]
        for n, p in ps.items() if n != "adopt-x") and ps, 30, "the pods adopted")
    # the same pods (not made again), now the new set's, counted in its status
    assert {n: p["metadata"]["uid"] for n, p in ps.items() if n != "adopt-x"} == uids, ps.keys()
    ref = ps["adopt-0"]["metadata"]["ownerReferences"][0]
    assert ref["kind"] == "StatefulSet" and ref["controller"] is True and ref["blockOwnerDeletion"] is True, ref
    assert not ps["adopt-x"]["metadata"].get("ownerReferences"), ps["adopt-x"]["metadata"]
    wait(lambda: c.api().get(f"{APPS}/statefulsets/adopt").json().get("status", {}).get("readyReplicas") == 2, 30,
         "the set counting its adopted pods")
    c.kubectl("delete", "sts", "adopt", "--cascade=background")
    c.kubectl("delete", "pod", "adopt-x", "--grace-period=0", "--force")
    wait(lambda: not pods(c, "adopt"), 60, "collected")


def test_validation(cluster):
    api = cluster.api()
    bad = sts("claims", 1)
    bad["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": "data"},
                                            "spec": {"accessModes": ["ReadWriteOnce"],
                                                     "resources": {"requests": {"storage": "1Gi"}}}}]
    r = api.post(f"{APPS}/statefulsets", bad)
    assert r.status == 422, r.body
    assert "spec.volumeClaimTemplates: Forbidden: not supported" in r.json()["message"], r.json()
    bad = sts("pmp", 1, "Sometimes")
    r = api.post(f"{APPS}/statefulsets", bad)
    assert r.status == 422 and 'spec.podManagementPolicy: Unsupported value: "Sometimes"' in r.json()["message"]
    # defaults, and the fields an update may not change
    made = api.ok("POST", f"{APPS}/statefulsets", {**sts("dflt", 0), "spec": {
        k: v for k, v in sts("dflt", 0)["spec"].items() if k != "podManagementPolicy"}})
    assert made["spec"]["podManagementPolicy"] == "OrderedReady"
    assert made["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    made["spec"]["serviceName"] = "other"
    del made["metadata"]["resourceVersion"]  # the controller may have written its status since
    r = api.put(f"{APPS}/statefulsets/dflt", made)
    assert r.status == 422 and "spec: Forbidden: updates to statefulset spec for fields other than" in r.json()["message"]
    api.delete(f"{APPS}/statefulsets/dflt")


def revisions(c, app):
    items = c.api().get(f"{APPS}/controllerrevisions?labelSelector=app%3D{app}").json()["items"]
    return {r["metadata"]["name"]: r for r in items}


@pytest.mark.slow  # six rollouts: ~30 s
def test_controller_revisions_rollout_history_undo_status(cluster):
    c = cluster
    spec = sts("hist", 1, "Parallel")
    spec["spec"]["revisionHistoryLimit"] = 2
    # kubectl compares templates as Go writes JSON, which escapes "&": none in this one
    spec["spec"]["template"]["spec"]["containers"][0]["command"] = ["sleep", "3600"]
    made = c.api().ok("POST", f"{APPS}/statefulsets", spec)
    out = c.kubectl("rollout", "status", "sts/hist", "--timeout=60s").stdout
    st = c.api().get(f"{APPS}/statefulsets/hist").json()["status"]
    r1 = st["updateRevision"]
    # kubectl's verdict for a RollingUpdate with a partition (0 by default)
    assert out.endswith("partitioned roll out complete: 1 new pods have been updated...\n"), out
    # the revision: SET-HASH, controlled by the set, the template's labels and its hash label
    revs = revisions(c, "hist")
    assert list(revs) == [r1] and st["currentRevision"] == r1, (revs, st)
    rev = revs[r1]
    assert rev["revision"] == 1 and r1 == "hist-" + rev["metadata"]["labels"]["controller.kubernetes.io/hash"]
    ref = rev["metadata"]["ownerReferences"][0]
    assert ref["kind"] == "StatefulSet" and ref["uid"] == made["metadata"]["uid"] and ref["controller"] is True
    assert rev["data"]["spec"]["template"]["$patch"] == "replace"
    assert rev["data"]["spec"]["template"]["metadata"] == {"creationTimestamp": None, "labels": {"app": "hist"}}
    assert pods(c, "hist")["hist-0"]["metadata"]["labels"]["controller-revision-hash"] == r1
    table = c.kubectl("get", "controllerrevisions", "-l", "app=hist").stdout.splitlines()
    assert table[0].split() == ["NAME", "CONTROLLER", "REVISION", "AGE"], table
    assert table[1].split()[:3] == [r1, "statefulset.apps/hist", "1"], table

    def rollout(*patch_args):
        if patch_args:
            c.kubectl(*patch_args)
        c.kubectl("rollout", "status", "sts/hist", "--timeout=60s")
        s = c.api().get(f"{APPS}/statefulsets/hist").json()
        assert s["status"]["currentRevision"] == s["status"]["updateRevision"], s["status"]
        p = pods(c, "hist")["hist-0"]
        assert p["metadata"]["labels"]["controller-revision-hash"] == s["status"]["updateRevision"]
        return s

    s = rollout("patch", "sts", "hist", "--type=merge", "-p",
                '{"spec":{"template":{"metadata":{"annotations":{"rev":"two"}}}}}')
    r2 = s["status"]["updateRevision"]
    assert r2 != r1 and revisions(c, "hist")[r2]["revision"] == 2
    hist = c.kubectl("rollout", "history", "sts/hist").stdout.split()
    assert hist[:3] == ["statefulset.apps/hist", "REVISION", "CHANGE-CAUSE"] and hist[3::2] == ["1", "2"], hist
    assert "two" not in c.kubectl("rollout", "history", "sts/hist", "--revision=1").stdout
    assert "rev: two" in c.kubectl("rollout", "history", "sts/hist", "--revision=2").stdout

    # undo: back to revision 1's template, which becomes revision 3 (same name, renumbered)
    assert "rolled back" in c.kubectl("rollout", "undo", "sts/hist").stdout
    s = rollout()
    assert s["status"]["updateRevision"] == r1 and "annotations" not in s["spec"]["template"]["metadata"], s
    wait(lambda: revisions(c, "hist")[r1]["revision"] == 3, 10, "revision 1 renumbered 3")
    assert c.kubectl("rollout", "history", "sts/hist").stdout.split()[3::2] == ["2", "3"]
    assert "skipped rollback" in c.kubectl("rollout", "undo", "sts/hist", "--to-revision=3").stdout
    c.kubectl("rollout", "undo", "sts/hist", "--to-revision=2")
    s = rollout()
    assert s["status"]["updateRevision"] == r2 and s["spec"]["template"]["metadata"]["annotations"] == {"rev": "two"}
    r = c.kubectl("rollout", "undo", "sts/hist", "--to-revision=9", check=False)
    assert r.returncode != 0 and "unable to find specified revision 9 in history" in r.stderr, r.stderr

    # revisionHistoryLimit 2: of the revisions no pod runs, only the newest two are kept
    s = rollout("patch", "sts", "hist", "--type=merge", "-p",
                '{"spec":{"template":{"metadata":{"annotations":{"rev":"three"}}}}}')
    r3 = s["status"]["updateRevision"]
    wait(lambda: sorted((r["revision"], n) for n, r in revisions(c, "hist").items()) ==
         [(3, r1), (4, r2), (5, r3)], 10, "three revisions")
    s = rollout("patch", "sts", "hist", "--type=merge", "-p",
                '{"spec":{"template":{"metadata":{"annotations":{"rev":"four"}}}}}')
    r4 = s["status"]["updateRevision"]
    wait(lambda: sorted((r["revision"], n) for n, r in revisions(c, "hist").items()) ==
         [(4, r2), (5, r3), (6, r4)], 10, "the oldest revision deleted")
    # orphaned (the set deleted with --cascade=orphan), the revisions are adopted by the set made
    # again, and its history goes on from them
    c.kubectl("delete", "sts", "hist", "--cascade=orphan")
    wait(lambda: all(not r["metadata"].get("ownerReferences") for r in revisions(c, "hist").values()), 30,
         "orphaned revisions")
    spec["spec"]["template"]["metadata"]["annotations"] = {"rev": "four"}
    again = c.api().ok("POST", f"{APPS}/statefulsets", spec)
    wait(lambda: all((r["metadata"].get("ownerReferences") or [{}])[0].get("uid") == again["metadata"]["uid"]
                     for r in revisions(c, "hist").values()), 30, "revisions adopted")
    s = rollout()
    assert s["status"]["updateRevision"] == r4 and revisions(c, "hist")[r4]["revision"] == 6, s["status"]
    # the set's revisions go with it
    c.kubectl("delete", "sts", "hist", "--cascade=background")
    wait(lambda: not pods(c, "hist") and not revisions(c, "hist"), 60, "pods and revisions collected")
