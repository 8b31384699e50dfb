"""Jobs and DaemonSets with real containers (`kite up`, runc): a Job runs `completions` pods at
most `parallelism` at once and completes; one whose pods fail is Failed past its backoffLimit;
`kubectl create job` + `kubectl wait --for=condition=complete`; a DaemonSet has a pod on every
node (kite up's own runs; a second registered node's waits for its scheduler, pinned to that
node). Needs root, runc, conmon and umoci."""
import json
import threading
import time

from conftest import create_node, delete_node_if_exists, parse_table
from test_pods_run import cluster, wait  # noqa: F401 (the module's kite up cluster)

NS = "default"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"
DS = f"/apis/apps/v1/namespaces/{NS}/daemonsets"


def job(name, command, completions=None, parallelism=None, backoff=None):
    spec = {"template": {"spec": {"restartPolicy": "Never",
                                  "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", command]}]}}}
    for k, v in (("completions", completions), ("parallelism", parallelism), ("backoffLimit", backoff)):
        if v is not None:
            spec[k] = v
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def job_pods(api, name):
    return api.get(f"/api/v1/namespaces/{NS}/pods?labelSelector=batch.kubernetes.io%2Fjob-name%3D{name}").json()["items"]


def condition(obj, type_):
    for c in obj.get("status", {}).get("conditions") or []:
        if c["type"] == type_ and c["status"] == "True":
            return c
    return None


def test_job_completions_with_parallelism(cluster):
    api = cluster.api()
    api.ok("POST", JOBS, job("j3", "sleep 1", completions=3, parallelism=2))
    most, stop = [0], threading.Event()

    def sample():
        a = cluster.api()
        while not stop.is_set():
            running = [p for p in job_pods(a, "j3")
                       if p["status"].get("phase") not in ("Succeeded", "Failed")
                       and not p["metadata"].get("deletionTimestamp")]
            most[0] = max(most[0], len(running))
            time.sleep(0.05)

    t = threading.Thread(target=sample)
    t.start()
    try:
        j = wait(lambda: (lambda o: o if condition(o, "Complete") else None)(api.get(f"{JOBS}/j3").json()), 90,
                 "job j3 Complete")
    finally:
        stop.set()
        t.join()
    st = j["status"]
    assert st["succeeded"] == 3 and st.get("failed", 0) == 0, st
    assert most[0] <= 2, f"{most[0]} pods ran at once"
    assert st["startTime"] and st["completionTime"], st
    types = [c["type"] for c in st["conditions"]]
    assert types.index("SuccessCriteriaMet") < types.index("Complete"), types
    assert not st.get("uncountedTerminatedPods", {}).get("succeeded"), st
    pods = job_pods(api, "j3")
    assert len(pods) == 3, [p["metadata"]["name"] for p in pods]
    for p in pods:  # counted, then let go
        assert "batch.kubernetes.io/job-tracking" not in (p["metadata"].get("finalizers") or []), p["metadata"]
        ref = p["metadata"]["ownerReferences"][0]
        assert ref["kind"] == "Job" and ref["name"] == "j3" and ref["controller"] is True, ref
    _, rows = parse_table(cluster.kubectl("get", "job", "j3").stdout)
    assert rows[0]["STATUS"] == "Complete" and rows[0]["COMPLETIONS"] == "3/3", rows


def test_job_backoff_limit_exceeded(cluster):
    api = cluster.api()
    api.ok("POST", JOBS, job("jfail", "exit 3", backoff=1))
    j = wait(lambda: (lambda o: o if condition(o, "Failed") else None)(api.get(f"{JOBS}/jfail").json()), 90,
             "job jfail Failed")
    st = j["status"]
    failed = condition(j, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded", failed
    assert condition(j, "FailureTarget")["reason"] == "BackoffLimitExceeded", st
    assert st["failed"] == 2 and not st.get("active"), st  # backoffLimit 1: the second failure ends it
    assert "completionTime" not in st, st
    pods = job_pods(api, "jfail")
    assert len(pods) == 2 and all(p["status"]["phase"] == "Failed" for p in pods), pods
    # the replacement waited out the 10 s back-off after the first failure
    starts = sorted(p["metadata"]["creationTimestamp"] for p in pods)
    assert starts[0] != starts[1], starts
    _, rows = parse_table(cluster.kubectl("get", "job", "jfail").stdout)
    assert rows[0]["STATUS"] == "Failed", rows
    ev = api.get(f"/api/v1/namespaces/{NS}/events?fieldSelector=involvedObject.name%3Djfail").json()["items"]
    assert any(e["reason"] == "BackoffLimitExceeded" and e["type"] == "Warning" for e in ev), [e["reason"] for e in ev]


def test_kubectl_create_job_and_wait(cluster):
    cluster.kubectl("create", "job", "hello", "--image=busybox", "--", "sh", "-c", "echo hello")
    p = cluster.kubectl("wait", "--for=condition=complete", "job/hello", "--timeout=60s", timeout=70)
    assert "condition met" in p.stdout, p.stdout
    pods = job_pods(cluster.api(), "hello")
    assert len(pods) == 1 and pods[0]["status"]["phase"] == "Succeeded", pods
    _, rows = parse_table(cluster.kubectl("get", "jobs").stdout)
    hello = [r for r in rows if r["NAME"] == "hello"][0]
    assert hello["STATUS"] == "Complete" and hello["COMPLETIONS"] == "1/1" and hello["DURATION"], hello


def test_daemonset_pod_on_every_node(cluster):
    api = cluster.api()
    other = "e2e-ds-second"
    create_node(api, other)
    try:
        api.ok("POST", DS, {
            "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d1"},
            "spec": {"selector": {"matchLabels": {"app": "d1"}},
                     "template": {"metadata": {"labels": {"app": "d1"}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox",
                                                           "command": ["sleep", "3600"]}]}}}})

        def placed():
            pods = api.get(f"/api/v1/namespaces/{NS}/pods?labelSelector=app%3Dd1").json()["items"]
            by = {}
            for p in pods:
                terms = p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
                    "nodeSelectorTerms"]
                by[terms[0]["matchFields"][0]["values"][0]] = p
            return by if set(by) == {cluster.node, other} else None

        by = wait(placed, 30, "a daemon pod per node")
        mine = wait(lambda: (lambda p: p if p["status"].get("phase") == "Running" else None)(
            api.get(f"/api/v1/namespaces/{NS}/pods/{by[cluster.node]['metadata']['name']}").json()), 60,
            "the local daemon pod Running")
        assert mine["spec"]["nodeName"] == cluster.node
        # the binder leaves the other node's pod to a scheduler: never bound to the wrong node
        theirs = api.get(f"/api/v1/namespaces/{NS}/pods/{by[other]['metadata']['name']}").json()
        assert theirs["spec"].get("nodeName") in (None, "", other), theirs["spec"].get("nodeName")
        keys = {(t.get("key"), t.get("effect")) for t in mine["spec"]["tolerations"]}
        for k in ("not-ready", "unreachable"):
            assert (f"node.kubernetes.io/{k}", "NoExecute") in keys, keys
        for k in ("disk-pressure", "memory-pressure", "pid-pressure", "unschedulable"):
            assert (f"node.kubernetes.io/{k}", "NoSchedule") in keys, keys
        ds = wait(lambda: (lambda o: o if o.get("status", {}).get("numberReady") == 1 else None)(
            api.get(f"{DS}/d1").json()), 60, "numberReady 1")
        st = ds["status"]
        assert st["desiredNumberScheduled"] == 2 and st["currentNumberScheduled"] == 2, st
        assert st["numberMisscheduled"] == 0 and st["observedGeneration"] == 1, st
        _, rows = parse_table(cluster.kubectl("get", "ds", "d1").stdout)
        assert rows[0]["DESIRED"] == "2" and rows[0]["READY"] == "1", rows
    finally:
        api.delete(f"{DS}/d1")
        for p in api.get(f"/api/v1/namespaces/{NS}/pods?labelSelector=app%3Dd1").json()["items"]:
            api.delete(f"/api/v1/namespaces/{NS}/pods/{p['metadata']['name']}")
        delete_node_if_exists(api, other)
