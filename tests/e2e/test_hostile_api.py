"""Writes a hostile or careless client may try, answered as kube-apiserver 1.32 answers them:
a /status write keeps what the kind's upstream status strategy resets (a pod's ownerReferences,
which the garbage collector acts on; a Deployment's labels), a main-resource write never changes
status, a Node's pod CIDRs and provider ID never change once set, and resourceVersions from the
future are 504 Timeout "Too large resource version".
"""
import base64
import json
import threading
import time

import pytest

from conftest import assert_status_body, node_manifest

# the same answers on both stores: every test of the module's apiserver runs on SQLite and on etcd
pytestmark = pytest.mark.both_stores

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


# ---------------------------------------------------------------- resourceVersions from the future (item 9)

CMS = "/api/v1/namespaces/default/configmaps"
INT64_MAX = 9223372036854775807


def too_large(resp, want):
    st = assert_status_body(resp, 504, "Timeout")
    assert st["message"].startswith(f"Timeout: Too large resource version: {want}, current: "), st
    assert st["details"] == {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                             "retryAfterSeconds": 1}, st
    assert resp.headers.get("retry-after") == "1", resp.headers


def cm(name):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}


def forged_continue(token, rv):
    raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    raw["rv"] = rv
    return base64.urlsafe_b64encode(json.dumps(raw).encode()).decode().rstrip("=")


def test_list_at_a_future_revision_is_504(api):
    for i in range(3):
        api.ok("POST", CMS, cm(f"fut-{i}"))
    too_large(api.get(f"{CMS}?resourceVersionMatch=Exact&resourceVersion={INT64_MAX}"), INT64_MAX)
    cur = int(api.ok("GET", CMS)["metadata"]["resourceVersion"])
    too_large(api.get(f"{CMS}?resourceVersionMatch=Exact&resourceVersion={cur + 1000}"), cur + 1000)
    too_large(api.get(f"{CMS}?resourceVersionMatch=NotOlderThan&resourceVersion={INT64_MAX}"), INT64_MAX)
    first = api.ok("GET", f"{CMS}?limit=1")
    tok = first["metadata"]["continue"]
    for rv in (cur + 1000, INT64_MAX):
        too_large(api.get(f"{CMS}?limit=1&continue={forged_continue(tok, rv)}"), rv)
    # the genuine token still reads its page
    assert len(api.ok("GET", f"{CMS}?limit=1&continue={tok}")["items"]) == 1


def test_watch_from_a_future_revision_waits_for_it(apiserver, api):
    cur = int(api.ok("GET", CMS)["metadata"]["resourceVersion"])
    want = cur + 3
    events, errors = [], []

    def watch():
        try:
            w = apiserver.api()
            r = w.get(f"{CMS}?watch=1&resourceVersion={want}&timeoutSeconds=4")
            events.extend(json.loads(line) for line in r.body.decode().splitlines() if line.strip())
            w.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=watch)
    t.start()
    time.sleep(0.5)
    for i in range(5):
        api.ok("POST", CMS, cm(f"watch-fut-{i}"))
    t.join(15)
    assert not errors, errors
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert all(e["type"] == "ADDED" for e in events), events
    # only what happened after the revision asked for: nothing at or before it
    assert rvs and min(rvs) > want, (want, rvs)
    assert [e["object"]["metadata"]["name"] for e in events] == ["watch-fut-3", "watch-fut-4"], events


def test_watch_with_initial_events_from_a_future_revision_is_504(api):
    too_large(api.get(f"{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                      f"&allowWatchBookmarks=true&resourceVersion={INT64_MAX}"), INT64_MAX)
