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
