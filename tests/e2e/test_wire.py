"""The wire as Kubernetes clients see it: field selectors over Kubernetes' field sets, list
metadata (remainingItemCount), `kubectl events --for`, watch-list (sendInitialEvents), and content
negotiation (YAML, PartialObjectMetadata, quality values, protobuf watch frames)."""
import json
import shutil
import struct
import subprocess
import threading
import time

import pytest
import yaml

from conftest import LEASES, create_node, node_name_of_machine, wait_for

PB = "application/vnd.kubernetes.protobuf"


def lease(name, labels=None):
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
            "spec": {"holderIdentity": name}}


def watch_lines(resp):
    assert resp.status == 200, resp
    return [json.loads(line) for line in resp.body.splitlines() if line.strip()]


# ---- field selectors ---------------------------------------------------------------------------

def test_field_selector_absent_bool_is_false(apiserver, api):
    create_node(api, "wire-sched")
    create_node(api, "wire-cordoned", unschedulable=True)
    out = apiserver.kubectl("get", "nodes", "--field-selector", "spec.unschedulable=false", "-o", "name").stdout
    assert "node/wire-sched" in out.split(), out
    assert "node/wire-cordoned" not in out.split(), out
    out = apiserver.kubectl("get", "nodes", "--field-selector", "spec.unschedulable=true", "-o", "name").stdout
    assert out.split() == ["node/wire-cordoned"], out
    out = apiserver.kubectl("get", "nodes", "--field-selector", "spec.unschedulable!=true", "-o", "name").stdout
    assert "node/wire-sched" in out.split() and "node/wire-cordoned" not in out.split(), out


def test_field_label_not_supported(api):
    for path, label in [("/api/v1/nodes", "metadata.namespace"), ("/api/v1/nodes", "spec.nodeName"),
                        ("/api/v1/namespaces", "metadata.namespace"), (LEASES, "spec.holderIdentity"),
                        ("/api/v1/pods", "status.hostIP")]:
        r = api.get(f"{path}?fieldSelector={label}%3Dx")
        assert r.status == 400, (path, label, r)
        st = r.json()
        assert st["reason"] == "BadRequest" and st["message"] == f"field label not supported: {label}", st
    # the ones upstream's conversion funcs take
    for path, label in [("/api/v1/pods", "spec.host"), ("/api/v1/pods", "spec.hostNetwork"),
                        ("/api/v1/namespaces", "status.phase"), ("/api/v1/secrets", "type"),
                        ("/api/v1/events", "source"), (LEASES, "metadata.namespace")]:
        assert api.get(f"{path}?fieldSelector={label}%3Dx").status == 200, (path, label)
    # a pod with no hostNetwork is selected by spec.hostNetwork=false
    api.ok("POST", "/api/v1/namespaces/default/pods",
           {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "wire-p"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    names = [p["metadata"]["name"] for p in
             api.ok("GET", "/api/v1/namespaces/default/pods?fieldSelector=spec.hostNetwork%3Dfalse")["items"]]
    assert "wire-p" in names, names


# ---- list metadata -----------------------------------------------------------------------------

def test_remaining_item_count(api):
    for i in range(5):
        api.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": f"wire-ric-{i}", "labels": {"wire-ric": "y"}}})
    total = len(api.ok("GET", "/api/v1/namespaces")["items"])
    page = api.ok("GET", "/api/v1/namespaces?limit=2")
    assert len(page["items"]) == 2
    assert page["metadata"]["continue"]
    assert page["metadata"]["remainingItemCount"] == total - 2, page["metadata"]
    seen = 2
    while page["metadata"].get("continue"):
        page = api.ok("GET", f"/api/v1/namespaces?limit=2&continue={page['metadata']['continue']}")
        seen += len(page["items"])
        if page["metadata"].get("continue"):
            assert page["metadata"]["remainingItemCount"] == total - seen, page["metadata"]
        else:
            assert "remainingItemCount" not in page["metadata"], page["metadata"]
    assert seen == total
    # unset with a selector (how many would match is unknown), and on an untruncated list
    page = api.ok("GET", "/api/v1/namespaces?limit=2&labelSelector=wire-ric%3Dy")
    assert page["metadata"]["continue"] and "remainingItemCount" not in page["metadata"], page["metadata"]
    page = api.ok("GET", "/api/v1/namespaces?limit=2&fieldSelector=status.phase%3DActive")
    assert page["metadata"]["continue"] and "remainingItemCount" not in page["metadata"], page["metadata"]
    assert "remainingItemCount" not in api.ok("GET", "/api/v1/namespaces")["metadata"]
    # as a Table too
    t = api.ok("GET", "/api/v1/namespaces?limit=1", headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    assert t["kind"] == "Table" and t["metadata"]["remainingItemCount"] == total - 1, t["metadata"]


# ---- events --for ------------------------------------------------------------------------------

def test_kubectl_events_for_node_finds_agent_events(up_cluster):
    node = node_name_of_machine()
    api = up_cluster.api()

    def agent_event():
        evs = api.ok("GET", "/api/v1/namespaces/default/events")["items"]
        return [e for e in evs if e["involvedObject"].get("kind") == "Node" and e["involvedObject"]["name"] == node]
    evs = wait_for(agent_event, 30, what="an event about the node")
    assert all(e["involvedObject"].get("apiVersion") == "v1" for e in evs), evs
    out = up_cluster.kubectl("events", "--for", f"node/{node}").stdout
    assert any(e["reason"] in out for e in evs), out
    assert "No events found" not in out, out
    api.close()


# ---- watch-list (sendInitialEvents) ------------------------------------------------------------

WL = "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"


def test_watch_list_initial_events_then_annotated_bookmark(api):
    sel = "labelSelector=wire-wl%3Dy"
    for i in range(3):
        api.ok("POST", LEASES, lease(f"wire-wl-{i}", {"wire-wl": "y"}))
    rv = api.ok("GET", f"{LEASES}?{sel}")["metadata"]["resourceVersion"]
    # with no resourceVersion (a consistent read), with "0", and with the list's: the same state
    for q in ("", "&resourceVersion=0", f"&resourceVersion={rv}"):
        evs = watch_lines(api.get(f"{LEASES}?{WL}&{sel}&timeoutSeconds=1{q}"))
        assert [e["type"] for e in evs[:3]] == ["ADDED"] * 3, (q, evs)
        assert sorted(e["object"]["metadata"]["name"] for e in evs[:3]) == [f"wire-wl-{i}" for i in range(3)]
        end = evs[3]
        assert end["type"] == "BOOKMARK", (q, evs)
        md = end["object"]["metadata"]
        assert md["annotations"] == {"k8s.io/initial-events-end": "true"}, end
        assert int(md["resourceVersion"]) >= int(rv), (end, rv)
        assert end["object"]["kind"] == "Lease", end
        # nothing else but (periodic) bookmarks
        assert all(e["type"] == "BOOKMARK" for e in evs[4:]), evs
    # changes after the bookmark follow it
    got = {}

    def watch():
        got["r"] = api2.get(f"{LEASES}?{WL}&{sel}&timeoutSeconds=2&resourceVersion={rv}")
    api2 = api.__class__(api.host, api.port, api.ctx)
    t = threading.Thread(target=watch)
    t.start()
    time.sleep(0.5)
    api.ok("POST", LEASES, lease("wire-wl-late", {"wire-wl": "y"}))
    t.join()
    api2.close()
    evs = watch_lines(got["r"])
    kinds = [(e["type"], e["object"]["metadata"].get("name")) for e in evs if e["type"] != "BOOKMARK" or
             e["object"]["metadata"].get("annotations")]
    assert kinds[-2:] == [("BOOKMARK", None), ("ADDED", "wire-wl-late")], evs


def test_watch_list_without_bookmarks_and_send_initial_events_false(api):
    sel = "labelSelector=wire-wl2%3Dy"
    rv = api.ok("POST", LEASES, lease("wire-wl2-a", {"wire-wl2": "y"}))["metadata"]["resourceVersion"]
    # as kube-apiserver: the initial events, but no end bookmark unless bookmarks were allowed
    evs = watch_lines(api.get(f"{LEASES}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                              f"&{sel}&timeoutSeconds=1"))
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [("ADDED", "wire-wl2-a")], evs
    # sendInitialEvents=false: no initial state, from now (no resourceVersion) or from the one given
    evs = watch_lines(api.get(f"{LEASES}?watch=true&sendInitialEvents=false&resourceVersionMatch=NotOlderThan"
                              f"&{sel}&timeoutSeconds=1"))
    assert evs == [], evs
    evs = watch_lines(api.get(f"{LEASES}?watch=true&sendInitialEvents=false&resourceVersionMatch=NotOlderThan"
                              f"&{sel}&timeoutSeconds=1&resourceVersion={int(rv) - 1}"))
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [("ADDED", "wire-wl2-a")], evs
    # a resourceVersion the server has not reached
    r = api.get(f"{LEASES}?{WL}&resourceVersion=999999999")
    assert r.status == 504 and r.json()["reason"] == "Timeout", r


@pytest.mark.parametrize("query,errors", [
    ("watch=true&sendInitialEvents=true", [
        ("resourceVersionMatch", "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")]),
    ("watch=true&sendInitialEvents=true&resourceVersionMatch=Exact&resourceVersion=5", [
        ("resourceVersionMatch", "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"),
        ("resourceVersionMatch", 'Unsupported value: "Exact": supported values: "NotOlderThan"')]),
    ("watch=true&resourceVersionMatch=NotOlderThan&resourceVersion=5", [
        ("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")]),
    ("sendInitialEvents=true", [("sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list")]),
    ("resourceVersionMatch=NotOlderThan", [
        ("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided")]),
    ("resourceVersionMatch=Exact&resourceVersion=0", [
        ("resourceVersionMatch", 'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"')]),
])
def test_list_options_rules(api, query, errors):
    """ValidateListOptions' rules and kube-apiserver's answer to them: 422 Invalid about ListOptions."""
    r = api.get(f"{LEASES}?{query}")
    assert r.status == 422, r
    st = r.json()
    assert st["reason"] == "Invalid" and st["details"]["kind"] == "ListOptions", st
    assert st["details"]["group"] == "meta.k8s.io", st
    assert [(c["field"], c["message"]) for c in st["details"]["causes"]] == errors, st
    summary = [f"{f}: {m}" for f, m in errors]
    want = summary[0] if len(summary) == 1 else "[" + ", ".join(summary) + "]"
    assert st["message"] == f'ListOptions.meta.k8s.io "" is invalid: {want}', st
