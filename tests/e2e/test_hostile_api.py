"""Writes a hostile or careless client may try, answered as kube-apiserver 1.32 answers them:
a /status write keeps what the kind's upstream status strategy resets (a pod's ownerReferences,
which the garbage collector acts on; a Deployment's labels), a main-resource write never changes
status, a Node's pod CIDRs and provider ID never change once set, and resourceVersions from the
future are 504 Timeout "Too large resource version".
"""
import json

import pytest

from conftest import assert_status_body, node_manifest

PODS = "/api/v1/namespaces/default/pods"
DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
RSS = "/apis/apps/v1/namespaces/default/replicasets"
NODES = "/api/v1/nodes"
MERGE = "application/merge-patch+json"
OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "missing", "uid": "00000000-0000-0000-0000-000000000001",
         "controller": True}


def pod(name, labels=None):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def template(app):
    return {"metadata": {"labels": {"app": app}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


# ---------------------------------------------------------------- status strategies (item 2)

def test_pod_status_cannot_set_owner_references(api):
    api.ok("POST", PODS, pod("st-owner"))
    r = api.patch(f"{PODS}/st-owner/status",
                  {"metadata": {"ownerReferences": [OWNER], "labels": {"via": "status"}},
                   "spec": {"activeDeadlineSeconds": 5}, "status": {"phase": "Running"}}, ctype=MERGE)
    assert r.status == 200, r
    got = api.ok("GET", f"{PODS}/st-owner")
    assert "ownerReferences" not in got["metadata"], got["metadata"]
    assert "activeDeadlineSeconds" not in got["spec"], got["spec"]
    # what upstream's pod status strategy lets through: status, and labels
    assert got["status"]["phase"] == "Running", got["status"]
    assert got["metadata"]["labels"]["via"] == "status", got["metadata"]

    # a PUT of /status with the owner set: the same
    got["metadata"]["ownerReferences"] = [OWNER]
    got["status"]["phase"] = "Succeeded"
    r = api.put(f"{PODS}/st-owner/status", got)
    assert r.status == 200, r
    got = api.ok("GET", f"{PODS}/st-owner")
    assert "ownerReferences" not in got["metadata"] and got["status"]["phase"] == "Succeeded", got

    # owner references already set stay through a status write that drops them
    owned = pod("st-owned")
    owned["metadata"]["ownerReferences"] = [OWNER]
    api.ok("POST", PODS, owned)
    r = api.patch(f"{PODS}/st-owned/status", {"metadata": {"ownerReferences": None}}, ctype=MERGE)
    assert r.status == 200, r
    assert api.ok("GET", f"{PODS}/st-owned")["metadata"]["ownerReferences"][0]["uid"] == OWNER["uid"]


def test_deployment_status_keeps_labels(api):
    d = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "st-deploy", "labels": {"app": "d"}},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}}, "template": template("d")}}
    api.ok("POST", DEPLOYS, d)
    r = api.patch(f"{DEPLOYS}/st-deploy/status",
                  {"metadata": {"labels": {"app": "evil"}, "annotations": {"a": "b"}},
                   "spec": {"replicas": 7}, "status": {"observedGeneration": 1}}, ctype=MERGE)
    assert r.status == 200, r
    got = api.ok("GET", f"{DEPLOYS}/st-deploy")
    assert got["metadata"]["labels"] == {"app": "d"}, got["metadata"]
    assert got["metadata"]["annotations"]["a"] == "b", got["metadata"]  # upstream resets only labels
    assert got["spec"]["replicas"] == 1 and got["status"]["observedGeneration"] == 1, got


def test_replicaset_status_keeps_spec(api):
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "st-rs"},
          "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "r"}}, "template": template("r")}}
    api.ok("POST", RSS, rs)
    r = api.patch(f"{RSS}/st-rs/status", {"spec": {"replicas": 9}, "status": {"replicas": 0, "fullyLabeledReplicas": 0}},
                  ctype=MERGE)
    assert r.status == 200, r
    assert api.ok("GET", f"{RSS}/st-rs")["spec"]["replicas"] == 0


def test_main_resource_write_keeps_status(api):
    api.ok("POST", PODS, pod("st-main"))
    api.ok("PATCH", f"{PODS}/st-main/status", {"status": {"phase": "Running"}}, ctype=MERGE)
    cur = api.ok("GET", f"{PODS}/st-main")
    cur["status"]["phase"] = "Failed"
    cur["metadata"]["labels"]["x"] = "y"
    r = api.put(f"{PODS}/st-main", cur)
    assert r.status == 200, r
    got = api.ok("GET", f"{PODS}/st-main")
    assert got["status"]["phase"] == "Running" and got["metadata"]["labels"]["x"] == "y", got
    r = api.patch(f"{PODS}/st-main", {"status": {"phase": "Succeeded"}}, ctype=MERGE)
    assert r.status == 200 and api.ok("GET", f"{PODS}/st-main")["status"]["phase"] == "Running", r


# ---------------------------------------------------------------- node spec (item 3)

def node_invalid(resp, name, field, what):
    st = assert_status_body(resp, 422, "Invalid")
    msg = f'{field}: Forbidden: node updates may not change {what} except from "" to valid'
    assert st["message"] == f'Node "{name}" is invalid: {msg}', st
    assert st["details"]["causes"] == [{"reason": "FieldValueForbidden", "message": msg.split(": ", 1)[1],
                                        "field": field}], st


def test_node_pod_cidr_and_provider_id_are_immutable(api):
    n = node_manifest("cidr-a")
    n["spec"] = {"podCIDR": "10.10.0.0/24", "podCIDRs": ["10.10.0.0/24"], "providerID": "kite://cidr-a"}
    api.ok("POST", NODES, n)
    for body, field, what in [
        ({"spec": {"podCIDR": "10.77.0.0/24"}}, "spec.podCIDRs", "podCIDR"),
        ({"spec": {"podCIDR": "10.77.0.0/24", "podCIDRs": ["10.77.0.0/24"]}}, "spec.podCIDRs", "podCIDR"),
        ({"spec": {"podCIDRs": None, "podCIDR": None}}, "spec.podCIDRs", "podCIDR"),
        ({"spec": {"providerID": "kite://other"}}, "spec.providerID", "providerID"),
        ({"spec": {"providerID": None}}, "spec.providerID", "providerID"),
    ]:
        node_invalid(api.patch(f"{NODES}/cidr-a", body, ctype=MERGE), "cidr-a", field, what)
    got = api.ok("GET", f"{NODES}/cidr-a")["spec"]
    assert (got["podCIDR"], got["podCIDRs"], got["providerID"]) == ("10.10.0.0/24", ["10.10.0.0/24"], "kite://cidr-a")
    # a write naming a new podCIDRs but the old podCIDR keeps the old (podCIDR wins, as upstream's conversion)
    r = api.patch(f"{NODES}/cidr-a", {"spec": {"podCIDRs": ["10.77.0.0/24"]}}, ctype=MERGE)
    assert r.status == 200, r
    got = api.ok("GET", f"{NODES}/cidr-a")["spec"]
    assert got["podCIDR"] == "10.10.0.0/24" and got["podCIDRs"] == ["10.10.0.0/24"], got
    # through /status the spec is not the writer's at all
    r = api.patch(f"{NODES}/cidr-a/status", {"spec": {"podCIDR": "10.77.0.0/24", "providerID": "x://y"}}, ctype=MERGE)
    assert r.status == 200, r
    assert api.ok("GET", f"{NODES}/cidr-a")["spec"]["podCIDR"] == "10.10.0.0/24"


def test_node_pod_cidr_and_provider_id_may_be_set_once(api):
    api.ok("POST", NODES, node_manifest("cidr-b"))
    r = api.patch(f"{NODES}/cidr-b", {"spec": {"podCIDR": "10.20.0.0/24", "providerID": "kite://cidr-b"}}, ctype=MERGE)
    assert r.status == 200, r
    got = api.ok("GET", f"{NODES}/cidr-b")["spec"]
    assert got["podCIDRs"] == ["10.20.0.0/24"] and got["providerID"] == "kite://cidr-b", got
    node_invalid(api.patch(f"{NODES}/cidr-b", {"spec": {"podCIDR": "10.21.0.0/24"}}, ctype=MERGE), "cidr-b",
                 "spec.podCIDRs", "podCIDR")
