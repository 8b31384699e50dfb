"""PodDisruptionBudgets (policy/v1) and the pods/eviction subresource against a bare `kite
apiserver`: the budget's schema, validation and Table, and evictions judged as upstream's
eviction REST: no budget deletes the pod, a budget not yet observed or with no disruption left
answers 429 TooManyRequests with the DisruptionBudget cause, one that allows it is taken down by
one with the pod in disruptedPods, an unready pod follows unhealthyPodEvictionPolicy, two budgets
answer 500, and pending or terminal pods go without asking. Budget status is written by hand
here (no controller runs); test_drain.py has the controller and kubectl drain."""
import pytest

from conftest import assert_status_body

NS = "default"
PDBS = f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets"
PODS = f"/api/v1/namespaces/{NS}/pods"
BUDGET_MSG = "Cannot evict pod as it would violate the pod's disruption budget."


def make_pod(api, name, labels, phase="Running", ready=True):
    api.ok("POST", PODS, {"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": name, "labels": labels},
                          "spec": {"nodeName": "n-nowhere", "containers": [{"name": "c", "image": "busybox"}]}})
    conds = [{"type": "Ready", "status": "True" if ready else "False"}]
    api.ok("PATCH", f"{PODS}/{name}/status", {"status": {"phase": phase, "conditions": conds}},
           ctype="application/merge-patch+json")


def make_pdb(api, name, selector, status=None, **spec):
    spec = {"selector": {"matchLabels": selector}, **spec}
    obj = api.ok("POST", PDBS, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                "metadata": {"name": name}, "spec": spec})
    if status is not None:
        status = {"observedGeneration": obj["metadata"]["generation"], "currentHealthy": 0, "desiredHealthy": 0,
                  "expectedPods": 0, "disruptionsAllowed": 0, **status}
        obj = api.ok("PUT", f"{PDBS}/{name}/status", {**obj, "status": status})
    return obj


def evict(api, name, body_name=None, **opts):
    body = {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": body_name or name, "namespace": NS}, **opts}
    return api.request("POST", f"{PODS}/{name}/eviction", body=body)


def gone_or_terminating(api, name):
    r = api.get(f"{PODS}/{name}")
    return r.status == 404 or "deletionTimestamp" in r.json()["metadata"]


@pytest.fixture(autouse=True)
def clean(api):
    yield
    api.request("DELETE", f"{PDBS}")
    for p in api.get(PODS).json()["items"]:
        api.request("DELETE", f"{PODS}/{p['metadata']['name']}", body={"gracePeriodSeconds": 0})


def test_pdb_kind_discovery_schema_and_table(api):
    res = api.ok("GET", "/apis/policy/v1")["resources"]
    pdb = next(r for r in res if r["name"] == "poddisruptionbudgets")
    assert pdb["shortNames"] == ["pdb"] and pdb["kind"] == "PodDisruptionBudget" and pdb["namespaced"]
    assert any(r["name"] == "poddisruptionbudgets/status" for r in res)
    obj = make_pdb(api, "web", {"app": "web"}, minAvailable="50%")
    assert obj["metadata"]["generation"] == 1 and obj["spec"]["minAvailable"] == "50%"
    t = api.ok("GET", f"{PDBS}", headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    assert [c["name"] for c in t["columnDefinitions"]] == ["Name", "Min Available", "Max Unavailable",
                                                           "Allowed Disruptions", "Age"]
    assert t["rows"][0]["cells"][:4] == ["web", "50%", "N/A", 0]


@pytest.mark.parametrize("spec,field", [
    ({"minAvailable": 1, "maxUnavailable": 1}, "spec"),
    ({"minAvailable": -1}, "spec.minAvailable"),
    ({"maxUnavailable": "150%"}, "spec.maxUnavailable"),
    ({"minAvailable": "half"}, "spec.minAvailable"),
    ({"minAvailable": 1, "unhealthyPodEvictionPolicy": "Sometimes"}, "spec.unhealthyPodEvictionPolicy"),
])
def test_pdb_validation(api, spec, field):
    r = api.request("POST", PDBS, body={"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                        "metadata": {"name": "bad"}, "spec": {"selector": {}, **spec}})
    body = assert_status_body(r, 422, "Invalid")
    assert [c["field"] for c in body["details"]["causes"]] == [field]


def test_evict_without_budget_deletes(api):
    make_pod(api, "lone", {"app": "lone"})
    r = evict(api, "lone")
    assert r.status == 201, r.body
    assert r.json()["status"] == "Success"
    pod = api.get(f"{PODS}/lone")
    # bound to a node: graceful, with the DisruptionTarget condition of an eviction
    assert pod.status == 200 and "deletionTimestamp" in pod.json()["metadata"]
    dt = next(c for c in pod.json()["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (dt["status"], dt["reason"], dt["message"]) == ("True", "EvictionByEvictionAPI", "Eviction API: evicting")


def test_evict_name_mismatch(api):
    make_pod(api, "a1", {"app": "a"})
    assert_status_body(evict(api, "a1", body_name="other"), 400, "BadRequest")


def test_budget_not_observed_is_429(api):
    make_pod(api, "w1", {"app": "w"})
    make_pdb(api, "w", {"app": "w"}, minAvailable=1)
    body = assert_status_body(evict(api, "w1"), 429, "TooManyRequests")
    assert body["message"] == BUDGET_MSG
    assert body["details"]["causes"] == [{"reason": "DisruptionBudget",
                                          "message": "The disruption budget w is still being processed by the server."}]


def test_budget_exhausted_is_429_then_allowed_decrements(api):
    for i in range(2):
        make_pod(api, f"b{i}", {"app": "b"})
    make_pdb(api, "b", {"app": "b"}, {"currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 2}, minAvailable=2)
    r = evict(api, "b0")
    body = assert_status_body(r, 429, "TooManyRequests")
    assert "Retry-After" not in r.headers
    assert body["details"]["causes"][0]["message"] == "The disruption budget b needs 2 healthy pods and has 2 currently"
    assert not gone_or_terminating(api, "b0")
    # one disruption allowed: the first eviction takes it, the second is refused
    pdb = api.ok("GET", f"{PDBS}/b")
    pdb["status"].update(disruptionsAllowed=1, desiredHealthy=1)
    api.ok("PUT", f"{PDBS}/b/status", pdb)
    assert evict(api, "b0").status == 201
    assert gone_or_terminating(api, "b0")
    st = api.ok("GET", f"{PDBS}/b")["status"]
    assert st["disruptionsAllowed"] == 0 and list(st["disruptedPods"]) == ["b0"]
    cond = next(c for c in st["conditions"] if c["type"] == "DisruptionAllowed")
    assert (cond["status"], cond["reason"]) == ("False", "InsufficientPods")
    assert_status_body(evict(api, "b1"), 429, "TooManyRequests")


def test_dry_run_eviction_changes_nothing(api):
    make_pod(api, "d0", {"app": "d"})
    make_pdb(api, "d", {"app": "d"}, {"currentHealthy": 1, "desiredHealthy": 0, "expectedPods": 1,
                                      "disruptionsAllowed": 1}, maxUnavailable=1)
    r = api.request("POST", f"{PODS}/d0/eviction?dryRun=All",
                    body={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "d0"}})
    assert r.status == 201, r.body
    assert not gone_or_terminating(api, "d0")
    assert api.ok("GET", f"{PDBS}/d")["status"]["disruptionsAllowed"] == 1


def test_unhealthy_pod_policy(api):
    make_pod(api, "u0", {"app": "u"}, ready=False)
    make_pdb(api, "u", {"app": "u"}, {"currentHealthy": 0, "desiredHealthy": 1, "expectedPods": 1}, minAvailable=1)
    # IfHealthyBudget (the default): the budget is not met, so even an unready pod is guarded
    assert_status_body(evict(api, "u0"), 429, "TooManyRequests")
    pdb = api.ok("GET", f"{PDBS}/u")
    pdb["spec"]["unhealthyPodEvictionPolicy"] = "AlwaysAllow"
    api.ok("PUT", f"{PDBS}/u", pdb)
    assert evict(api, "u0").status == 201
    assert gone_or_terminating(api, "u0")


def test_two_budgets_is_500(api):
    make_pod(api, "t0", {"app": "t", "tier": "x"})
    make_pdb(api, "t1", {"app": "t"}, {"disruptionsAllowed": 1}, minAvailable=0)
    make_pdb(api, "t2", {"tier": "x"}, {"disruptionsAllowed": 1}, minAvailable=0)
    r = evict(api, "t0")
    assert r.status == 500
    assert r.json()["message"] == "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."


@pytest.mark.parametrize("phase", ["Pending", "Succeeded", "Failed"])
def test_pending_and_terminal_pods_ignore_budgets(api, phase):
    make_pod(api, "p0", {"app": "p"}, phase=phase)
    make_pdb(api, "p", {"app": "p"}, {"desiredHealthy": 1}, minAvailable=1)
    assert evict(api, "p0").status == 201
    assert gone_or_terminating(api, "p0")


def _ld(field, payload):
    """A protobuf length-delimited field (lengths < 128 here)."""
    assert len(payload) < 128
    return bytes([field << 3 | 2, len(payload)]) + payload


def test_protobuf_eviction_body(api):
    make_pod(api, "pb0", {"app": "pb"})
    make_pdb(api, "pb", {"app": "pb"}, {"desiredHealthy": 1, "currentHealthy": 1, "expectedPods": 1}, minAvailable=1)
    meta = _ld(1, b"pb0") + _ld(3, NS.encode())
    raw = _ld(1, meta) + _ld(2, b"")
    body = b"k8s\x00" + _ld(1, _ld(1, b"policy/v1") + _ld(2, b"Eviction")) + _ld(2, raw)
    r = api.request("POST", f"{PODS}/pb0/eviction", body=body, ctype="application/vnd.kubernetes.protobuf")
    assert_status_body(r, 429, "TooManyRequests")
    pdb = api.ok("GET", f"{PDBS}/pb")
    pdb["status"]["disruptionsAllowed"] = 1
    api.ok("PUT", f"{PDBS}/pb/status", pdb)
    r = api.request("POST", f"{PODS}/pb0/eviction", body=body, ctype="application/vnd.kubernetes.protobuf")
    assert r.status == 201, r.body
    assert gone_or_terminating(api, "pb0")
