"""Namespace deletion: preconditions are checked before anything is deleted; the namespace's
objects go with it; the system namespaces cannot be deleted."""
import json


def ns_body(name):
    return json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}).encode()


def lease_body(name):
    return json.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
                       "spec": {"holderIdentity": "x"}}).encode()


def test_namespace_delete(fresh_apiserver):
    api = fresh_apiserver.api()
    assert api.post("/api/v1/namespaces", ns_body("team-a"), ctype="application/json").status == 201
    leases = "/apis/coordination.k8s.io/v1/namespaces/team-a/leases"
    assert api.post(leases, lease_body("l1"), ctype="application/json").status == 201

    bad = json.dumps({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "not-the-uid"}}).encode()
    r = api.request("DELETE", "/api/v1/namespaces/team-a", body=bad, ctype="application/json")
    assert r.status == 409, r.body
    assert api.get(f"{leases}/l1").status == 200, "a failed precondition deletes nothing"

    r = api.request("DELETE", "/api/v1/namespaces/team-a")
    assert r.status == 200, r.body
    assert api.get("/api/v1/namespaces/team-a").status == 404
    assert api.get(f"{leases}/l1").status == 404

    r = api.request("DELETE", "/api/v1/namespaces/kube-system")
    assert r.status == 403 and r.json()["reason"] == "Forbidden", r.body
    assert api.get("/api/v1/namespaces/kube-system").status == 200
