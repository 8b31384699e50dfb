"""Namespace deletion as Kubernetes does it: the DELETE answers at once with the namespace
Terminating; the namespace controller (`kite controller-manager`, in-process in `kite up`)
empties it with deletecollections and removes its finalizer; what it cannot delete shows in
the namespace's conditions. Preconditions are checked before anything happens; the system
namespaces cannot be deleted; nothing is created in a terminating namespace."""
import json

import pytest

from conftest import KiteProcess, wait_for


def ns_body(name):
    return json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}).encode()


def lease_body(name, finalizers=None):
    meta = {"name": name}
    if finalizers:
        meta["finalizers"] = finalizers
    return json.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                       "spec": {"holderIdentity": "x"}}).encode()


@pytest.fixture
def cluster(fresh_apiserver):
    """An apiserver and a controller-manager against it."""
    cm = KiteProcess(["controller-manager", "--kubeconfig", str(fresh_apiserver.kubeconfig)],
                     fresh_apiserver.workdir, "controller-manager").start()
    wait_for(lambda: b"controller-manager: running" in cm.log_path.read_bytes(), 15, what="controller-manager up")
    yield fresh_apiserver
    assert cm.stop() == 0


def test_namespace_delete(cluster):
    api = cluster.api()
    assert api.post("/api/v1/namespaces", ns_body("team-a"), ctype="application/json").status == 201
    leases = "/apis/coordination.k8s.io/v1/namespaces/team-a/leases"
    for i in range(20):
        assert api.post(leases, lease_body(f"l{i}"), ctype="application/json").status == 201

    bad = json.dumps({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "not-the-uid"}}).encode()
    r = api.request("DELETE", "/api/v1/namespaces/team-a", body=bad, ctype="application/json")
    assert r.status == 409, r.body
    assert api.get(f"{leases}/l1").status == 200, "a failed precondition deletes nothing"

    r = api.request("DELETE", "/api/v1/namespaces/team-a")
    assert r.status == 200, r.body
    ns = r.json()
    assert ns["status"]["phase"] == "Terminating" and ns["metadata"]["deletionTimestamp"], ns
    assert ns["spec"]["finalizers"] == ["kubernetes"], ns
    wait_for(lambda: api.get("/api/v1/namespaces/team-a").status == 404, 15, what="namespace gone")
    assert api.get(f"{leases}/l1").status == 404
    assert api.get(leases).json()["items"] == []

    r = api.request("DELETE", "/api/v1/namespaces/kube-system")
    assert r.status == 403 and r.json()["reason"] == "Forbidden", r.body
    assert r.json()["message"] == 'namespaces "kube-system" is forbidden: this namespace may not be deleted'
    assert api.get("/api/v1/namespaces/kube-system").status == 200


def test_content_held_by_finalizers_shows_in_conditions(cluster):
    api = cluster.api()
    assert api.post("/api/v1/namespaces", ns_body("team-b"), ctype="application/json").status == 201
    leases = "/apis/coordination.k8s.io/v1/namespaces/team-b/leases"
    assert api.post(leases, lease_body("held", ["example.com/hold"]), ctype="application/json").status == 201
    assert api.post(leases, lease_body("free"), ctype="application/json").status == 201
    assert api.request("DELETE", "/api/v1/namespaces/team-b").status == 200

    def conditions():
        st = api.get("/api/v1/namespaces/team-b").json().get("status", {})
        return {c["type"]: c for c in st.get("conditions", [])}
    wait_for(lambda: conditions().get("NamespaceFinalizersRemaining", {}).get("status") == "True", 15,
             what="finalizers-remaining condition")
    c = conditions()
    assert c["NamespaceContentRemaining"]["status"] == "True"
    assert c["NamespaceContentRemaining"]["message"] == \
        "Some resources are remaining: leases.coordination.k8s.io has 1 resource instances", c
    assert c["NamespaceFinalizersRemaining"]["message"] == \
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances", c
    assert c["NamespaceDeletionContentFailure"]["status"] == "False", c
    assert api.get(f"{leases}/free").status == 404
    held = api.get(f"{leases}/held").json()
    assert held["metadata"]["deletionTimestamp"], held

    # nothing new in a terminating namespace
    r = api.post(leases, lease_body("new"), ctype="application/json")
    assert r.status == 403 and r.json()["reason"] == "Forbidden", r.body
    assert "because it is being terminated" in r.json()["message"], r.body

    # the finalizer goes: the lease goes, then the namespace
    r = api.patch(f"{leases}/held", {"metadata": {"finalizers": None}}, ctype="application/merge-patch+json")
    assert r.status == 200, r.body
    wait_for(lambda: api.get("/api/v1/namespaces/team-b").status == 404, 40, what="namespace gone")


def test_namespaces_are_not_deleted_as_a_collection(cluster):
    api = cluster.api()
    r = api.request("DELETE", "/api/v1/namespaces")
    assert r.status == 405, r.body
    assert api.get("/api/v1/namespaces/default").status == 200


@pytest.mark.slow
def test_deletecollection_answers_what_it_deleted(cluster):
    api = cluster.api()
    leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    for i in range(1200):  # more than one batch of deletes in flight
        assert api.post(leases, json.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                             "metadata": {"name": f"dc-{i}", "labels": {"dc": "yes"}}}).encode(),
                        ctype="application/json").status == 201
    assert api.post(leases, lease_body("keep"), ctype="application/json").status == 201
    r = api.request("DELETE", leases + "?labelSelector=dc%3Dyes&dryRun=All")
    assert r.status == 200 and len(r.json()["items"]) == 1200
    assert len(api.get(leases + "?labelSelector=dc%3Dyes").json()["items"]) == 1200, "a dry run deletes nothing"
    r = api.request("DELETE", leases + "?labelSelector=dc%3Dyes")
    assert r.status == 200, r.body
    assert sorted(i["metadata"]["name"] for i in r.json()["items"]) == sorted(f"dc-{i}" for i in range(1200))
    assert api.get(leases + "?labelSelector=dc%3Dyes").json()["items"] == []
    assert api.get(f"{leases}/keep").status == 200
