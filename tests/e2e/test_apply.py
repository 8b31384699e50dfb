"""Server-side apply (application/apply-patch+yaml) and managedFields, driven by the machine's
kubectl (`apply --server-side`, `--field-manager`, `--force-conflicts`, `--show-managed-fields`)
and by raw requests for what kubectl does not show (Status causes, 415/422 answers)."""
import json

import pytest

from conftest import assert_status_body

CM = "/api/v1/namespaces/default/configmaps"
APPLY = "application/apply-patch+yaml"


def managed(obj):
    return {(m["manager"], m["operation"]): m for m in obj["metadata"].get("managedFields", [])}


def get_cm(cluster, name):
    return json.loads(cluster.kubectl("get", "configmap", name, "-o", "json", "--show-managed-fields").stdout)


def apply(cluster, manager, manifest, *extra, check=True):
    return cluster.kubectl("apply", "--server-side", "--field-manager", manager, *extra, "-f", "-",
                           input=manifest, check=check)


def cm_yaml(name, data, labels=None):
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata:", f"  name: {name}"]
    if labels:
        lines.append("  labels:")
        lines += [f"    {k}: {v!r}" for k, v in labels.items()]
    lines.append("data:" + ("" if data else " {}"))
    lines += [f"  {k}: {v!r}" for k, v in data.items()]
    return "\n".join(lines) + "\n"


@pytest.mark.slow
def test_two_managers_conflict_force_and_removal(apiserver):
    # apply creates the object; the manager owns exactly what it applied
    p = apply(apiserver, "mgr-a", cm_yaml("ssa1", {"k1": "a", "k2": "b"}, labels={"app": "x"}))
    assert "configmap/ssa1 serverside-applied" in p.stdout, p.stdout
    obj = get_cm(apiserver, "ssa1")
    assert obj["data"] == {"k1": "a", "k2": "b"}
    m = managed(obj)
    assert list(m) == [("mgr-a", "Apply")], m
    e = m[("mgr-a", "Apply")]
    assert e["apiVersion"] == "v1" and e["fieldsType"] == "FieldsV1" and e["time"].endswith("Z"), e
    assert e["fieldsV1"] == {"f:data": {"f:k1": {}, "f:k2": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}, e

    # managedFields are hidden unless asked for (kubectl strips them itself)
    plain = json.loads(apiserver.kubectl("get", "configmap", "ssa1", "-o", "json").stdout)
    assert "managedFields" not in plain["metadata"]

    # a second manager changing k1: kubectl's conflict error, nothing written
    p = apply(apiserver, "mgr-b", cm_yaml("ssa1", {"k1": "z", "k3": "c"}), check=False)
    assert p.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "mgr-a": .data.k1' in p.stderr, p.stderr
    assert "--force-conflicts" in p.stderr, p.stderr
    assert get_cm(apiserver, "ssa1")["data"] == {"k1": "a", "k2": "b"}

    # --force-conflicts takes k1 over
    apply(apiserver, "mgr-b", cm_yaml("ssa1", {"k1": "z", "k3": "c"}), "--force-conflicts")
    obj = get_cm(apiserver, "ssa1")
    assert obj["data"] == {"k1": "z", "k2": "b", "k3": "c"}
    m = managed(obj)
    assert m[("mgr-a", "Apply")]["fieldsV1"] == {"f:data": {"f:k2": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}
    assert m[("mgr-b", "Apply")]["fieldsV1"] == {"f:data": {"f:k1": {}, "f:k3": {}}}

    # mgr-a drops k2 and the label from its configuration: both go
    apply(apiserver, "mgr-a", cm_yaml("ssa1", {}))
    obj = get_cm(apiserver, "ssa1")
    assert obj["data"] == {"k1": "z", "k3": "c"}, obj
    assert "app" not in obj["metadata"].get("labels", {}), obj
    # ... but a field another manager also applied stays when one of them drops it
    apply(apiserver, "mgr-a", cm_yaml("ssa1", {"k3": "c"}))         # same value: shared, no conflict
    apply(apiserver, "mgr-a", cm_yaml("ssa1", {}))
    assert get_cm(apiserver, "ssa1")["data"] == {"k1": "z", "k3": "c"}


def test_equal_values_are_shared_and_reapply_is_a_noop(apiserver, api):
    apply(apiserver, "one", cm_yaml("ssa2", {"x": "1"}))
    apply(apiserver, "two", cm_yaml("ssa2", {"x": "1"}))             # same value: no conflict
    obj = get_cm(apiserver, "ssa2")
    m = managed(obj)
    assert m[("one", "Apply")]["fieldsV1"] == m[("two", "Apply")]["fieldsV1"] == {"f:data": {"f:x": {}}}
    rv = obj["metadata"]["resourceVersion"]
    apply(apiserver, "two", cm_yaml("ssa2", {"x": "1"}))
    assert get_cm(apiserver, "ssa2")["metadata"]["resourceVersion"] == rv, "an apply that changes nothing writes nothing"


def test_conflicts_with_several_fields_and_managers(api):
    def cm(mgr, data, force=""):
        return api.patch(f"{CM}/ssa-multi?fieldManager={mgr}{force}", json.dumps(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa-multi"}, "data": data}), ctype=APPLY)
    assert cm("m1", {"a": "1", "b": "1"}).status == 201
    assert cm("m2", {"c": "1"}).status == 200
    st = assert_status_body(cm("m3", {"a": "2", "b": "2", "c": "2"}), 409, "Conflict")
    assert st["message"] == ('Apply failed with 3 conflicts: conflicts with "m1":\n- .data.a\n- .data.b\n'
                             'conflicts with "m2":\n- .data.c'), st
    assert [(c["field"], c["message"]) for c in st["details"]["causes"]] == [
        (".data.a", 'conflict with "m1"'), (".data.b", 'conflict with "m1"'), (".data.c", 'conflict with "m2"')], st
    r = cm("m3", {"a": "2", "b": "2", "c": "2"}, "&force=true")
    assert r.status == 200, r.body
    assert list(managed(r.json())) == [("m3", "Apply")], "the forced fields leave m1 and m2, whose sets are now empty"


def test_updates_are_recorded_per_manager(apiserver, api):
    k = apiserver.kubectl
    k("create", "configmap", "upd", "--from-literal=a=1")
    obj = get_cm(apiserver, "upd")
    m = managed(obj)
    assert list(m) == [("kubectl-create", "Update")], m
    assert m[("kubectl-create", "Update")]["fieldsV1"] == {"f:data": {"f:a": {}}}, m
    k("label", "configmap", "upd", "l=v")
    k("patch", "configmap", "upd", "-p", '{"data":{"a":"2","b":"3"}}')
    m = managed(get_cm(apiserver, "upd"))
    assert m[("kubectl-label", "Update")]["fieldsV1"] == {"f:metadata": {"f:labels": {"f:l": {}}}}, m
    assert m[("kubectl-patch", "Update")]["fieldsV1"] == {"f:data": {"f:a": {}, "f:b": {}}}, m
    assert ("kubectl-create", "Update") not in m, "a field changed by an Update leaves its old manager's set"

    # without fieldManager, the manager is the User-Agent up to its '/'
    r = api.patch(CM + "/upd", {"data": {"c": "4"}}, headers={"User-Agent": "my-tool/1.0 (linux)"})
    assert r.status == 200, r.body
    m = managed(r.json())
    assert m[("my-tool", "Update")]["fieldsV1"] == {"f:data": {"f:c": {}}}, m

    # an apply of a field an Update set conflicts with it, named with its version
    r = api.patch(CM + "/upd?fieldManager=applier", json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "upd"}, "data": {"c": "5"}}), ctype=APPLY)
    st = assert_status_body(r, 409, "Conflict")
    assert st["message"] == 'Apply failed with 1 conflict: conflict with "my-tool" using v1: .data.c', st
    assert st["details"]["causes"] == [{"reason": "FieldManagerConflict", "message": 'conflict with "my-tool" using v1',
                                        "field": ".data.c"}], st


def test_update_managers_are_capped_at_ten(api):
    """As upstream: beyond 10 Update entries the oldest are merged into "ancient-changes"."""
    r = api.post(CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "many"}})
    assert r.status == 201, r.body
    for i in range(13):
        r = api.patch(f"{CM}/many?fieldManager=m{i:02d}", {"data": {f"k{i:02d}": "v"}})
        assert r.status == 200, r.body
    entries = r.json()["metadata"]["managedFields"]
    updates = [m for m in entries if m["operation"] == "Update"]
    assert len(updates) == 10, [m["manager"] for m in updates]
    names = {m["manager"] for m in updates}
    assert "ancient-changes" in names, names
    assert {f"m{i:02d}" for i in range(9, 13)} <= names, "the newest managers keep their entries"
    owned = {}
    for m in updates:
        for k in m["fieldsV1"].get("f:data", {}):
            assert k not in owned, f"{k} owned by {owned.get(k)} and {m['manager']}"
            owned[k] = m["manager"]
    assert sorted(owned) == [f"f:k{i:02d}" for i in range(13)], "every field still has exactly one manager"
    bucket = next(m for m in updates if m["manager"] == "ancient-changes")
    assert len(bucket["fieldsV1"]["f:data"]) >= 4, bucket
    # a later write by a merged manager gets an entry of its own again
    r = api.patch(f"{CM}/many?fieldManager=m00", {"data": {"k00": "w"}})
    m = {e["manager"]: e for e in r.json()["metadata"]["managedFields"]}
    assert m["m00"]["fieldsV1"] == {"f:data": {"f:k00": {}}}, m
    assert "f:k00" not in m["ancient-changes"]["fieldsV1"]["f:data"], m["ancient-changes"]
    assert len([e for e in m.values() if e["operation"] == "Update"]) == 10


def test_status_writes_are_tracked_as_subresource(apiserver, api):
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ssa-node"}}
    api.ok("POST", "/api/v1/nodes?fieldManager=maker", node)
    r = api.patch("/api/v1/nodes/ssa-node/status?fieldManager=agent",
                  {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "R"}]}})
    assert r.status == 200, r.body
    m = {(e["manager"], e["operation"], e.get("subresource")): e for e in r.json()["metadata"]["managedFields"]}
    e = m[("agent", "Update", "status")]
    assert e["fieldsV1"] == {"f:status": {"f:conditions": {'k:{"type":"Ready"}': {
        ".": {}, "f:reason": {}, "f:status": {}, "f:type": {}}}}}, e
    assert ("maker", "Update", None) in m
    # a status write that changes nothing leaves the object (and its resourceVersion) alone
    rv = r.json()["metadata"]["resourceVersion"]
    r = api.patch("/api/v1/nodes/ssa-node/status?fieldManager=agent",
                  {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "R"}]}})
    assert r.status == 200 and r.json()["metadata"]["resourceVersion"] == rv
    api.delete("/api/v1/nodes/ssa-node")


def test_apply_to_pod_containers_merges_by_name(apiserver, api):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ssa-pod"},
           "spec": {"containers": [{"name": "c1", "image": "busybox"}, {"name": "c2", "image": "busybox"}]}}
    r = api.patch("/api/v1/namespaces/default/pods/ssa-pod?fieldManager=a", json.dumps(pod), ctype=APPLY)
    assert r.status == 201, r.body                                      # apply creates
    # another manager sets c2's image: containers merge by name, c1 untouched
    r = api.patch("/api/v1/namespaces/default/pods/ssa-pod?fieldManager=b&force=true", json.dumps(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ssa-pod"},
         "spec": {"containers": [{"name": "c2", "image": "busybox:2"}]}}), ctype=APPLY)
    assert r.status == 200, r.body
    got = r.json()
    assert [(c["name"], c["image"]) for c in got["spec"]["containers"]] == [("c1", "busybox"), ("c2", "busybox:2")]
    m = managed(got)
    assert m[("b", "Apply")]["fieldsV1"] == {"f:spec": {"f:containers": {'k:{"name":"c2"}': {
        ".": {}, "f:image": {}, "f:name": {}}}}}, m
    assert "f:image" not in m[("a", "Apply")]["fieldsV1"]["f:spec"]["f:containers"]['k:{"name":"c2"}'], m
    api.delete("/api/v1/namespaces/default/pods/ssa-pod?gracePeriodSeconds=0")


def test_apply_requests_refused_as_upstream(api):
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa-bad"}})
    st = assert_status_body(api.patch(CM + "/ssa-bad", body, ctype=APPLY), 422, "Invalid")
    assert st["message"] == 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch', st
    st = assert_status_body(api.patch(CM + "/ssa-bad?fieldManager=x", body, ctype="application/apply-patch+cbor"), 415)
    assert "application/apply-patch+yaml" in st["message"], st
    st = assert_status_body(api.patch(CM + "/ssa-bad?force=true", {"data": {}}), 422, "Invalid")
    assert "force: Forbidden: may not be specified for non-apply patch" in st["message"], st
    st = assert_status_body(api.patch(CM + "/ssa-bad?fieldManager=x", "a: [", ctype=APPLY), 400, "BadRequest")
    st = assert_status_body(api.patch(CM + "/ssa-bad?fieldManager=x", json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa-bad", "managedFields": [{}]}}),
        ctype=APPLY), 400, "BadRequest")
    assert "managedFields must be nil" in st["message"], st
    st = assert_status_body(api.patch(CM + "/ssa-bad?fieldManager=" + "m" * 129, body, ctype=APPLY), 422, "Invalid")
    assert "fieldManager: Too long: may not be more than 128 bytes" in st["message"], st
    # YAML bodies are applied as JSON ones
    r = api.patch(CM + "/ssa-yaml?fieldManager=y", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa-yaml\n"
                  "data:\n  a: b\n", ctype=APPLY)
    assert r.status == 201 and r.json()["data"] == {"a": "b"}, r.body


def test_client_side_apply_still_works(apiserver):
    manifest = cm_yaml("csa", {"x": "1"})
    apiserver.kubectl("apply", "-f", "-", input=manifest)
    apiserver.kubectl("apply", "-f", "-", input=manifest.replace("'1'", "'2'"))
    obj = get_cm(apiserver, "csa")
    assert obj["data"] == {"x": "2"}
    assert "kubectl.kubernetes.io/last-applied-configuration" in obj["metadata"]["annotations"]
    m = managed(obj)
    assert ("kubectl-client-side-apply", "Update") in m, m


def test_protobuf_clients_see_managed_fields(apiserver, api):
    # kubectl's generators send protobuf bodies; the write is recorded, protobuf reads carry it
    apiserver.kubectl("create", "namespace", "ssa-pb")
    ns = json.loads(apiserver.kubectl("get", "ns", "ssa-pb", "-o", "json", "--show-managed-fields").stdout)
    assert [e["manager"] for e in ns["metadata"]["managedFields"]] == ["kubectl-create"], ns
    r = api.get("/api/v1/namespaces/ssa-pb", headers={"Accept": "application/vnd.kubernetes.protobuf"})
    assert r.status == 200 and r.body[:4] == b"k8s\x00", r
    assert b"kubectl-create" in r.body and b"FieldsV1" in r.body
    # and the python client still reads objects that carry them
    v1 = apiserver.python_client()
    got = v1.read_namespace("ssa-pb")
    assert got.metadata.managed_fields[0].manager == "kubectl-create"
    assert got.metadata.managed_fields[0].operation == "Update"


def test_list_map_keys_of_several_fields(api):
    """Service ports are keyed by port and protocol (x-kubernetes-list-map-keys), so 53/TCP and
    53/UDP are two items with their own owners; a missing protocol keys as its default, TCP."""
    svc = "/api/v1/namespaces/default/services"
    body = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "dns"},
            "spec": {"selector": {"app": "dns"}, "ports": [{"name": "tcp", "port": 53},
                                                            {"name": "udp", "port": 53, "protocol": "UDP"}]}}
    r = api.patch(svc + "/dns?fieldManager=a", json.dumps(body), ctype=APPLY)
    assert r.status == 201, r.body
    ports = managed(r.json())[("a", "Apply")]["fieldsV1"]["f:spec"]["f:ports"]
    assert set(ports) == {'k:{"port":53,"protocol":"TCP"}', 'k:{"port":53,"protocol":"UDP"}'}, ports
    # another manager applies only the UDP port's name: it shares that item, and drops nothing
    other = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "dns"},
             "spec": {"ports": [{"name": "udp", "port": 53, "protocol": "UDP"}]}}
    r = api.patch(svc + "/dns?fieldManager=b", json.dumps(other), ctype=APPLY)
    assert r.status == 200, r.body
    assert [(p["port"], p["protocol"]) for p in r.json()["spec"]["ports"]] == [(53, "TCP"), (53, "UDP")]
    ports_b = managed(r.json())[("b", "Apply")]["fieldsV1"]["f:spec"]["f:ports"]
    assert set(ports_b) == {'k:{"port":53,"protocol":"UDP"}'}, ports_b
    r = api.get("/openapi/v3/api/v1")
    port_list = r.json()["components"]["schemas"]["io.k8s.api.core.v1.ServiceSpec"]["properties"]["ports"]
    assert port_list["x-kubernetes-list-map-keys"] == ["port", "protocol"], port_list
    assert port_list["x-kubernetes-patch-merge-key"] == "port", port_list


def test_client_side_to_server_side_apply_migration(apiserver):
    """kubectl apply, then kubectl apply --server-side with a field changed: no conflict (the
    fields the last-applied annotation holds go to "kubectl"), and kubectl's migration JSON patch
    of /metadata/managedFields is accepted: kubectl-client-side-apply owns nothing afterwards."""
    c = apiserver
    c.kubectl("apply", "-f", "-", input=cm_yaml("csa2ssa", {"k1": "a", "k2": "b"}, labels={"app": "x"}))
    before = managed(get_cm(c, "csa2ssa"))
    assert ("kubectl-client-side-apply", "Update") in before, before
    p = c.kubectl("apply", "--server-side", "-f", "-", input=cm_yaml("csa2ssa", {"k1": "changed", "k2": "b"},
                                                                    labels={"app": "x"}), check=False)
    assert p.returncode == 0, p.stderr
    assert "serverside-applied" in p.stdout and "conflict" not in p.stderr and "migration" not in p.stderr, p
    obj = get_cm(c, "csa2ssa")
    assert obj["data"] == {"k1": "changed", "k2": "b"}
    m = managed(obj)
    assert ("kubectl-client-side-apply", "Update") not in m, m
    own = m[("kubectl", "Apply")]["fieldsV1"]
    assert own == {"f:data": {"f:k1": {}, "f:k2": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}, own
    # kubectl keeps the annotation under a manager of its own, so applies do not prune it
    assert m[("kubectl-last-applied", "Apply")]["fieldsV1"] == \
        {"f:metadata": {"f:annotations": {"f:kubectl.kubernetes.io/last-applied-configuration": {}}}}, m
    # the annotation follows what "kubectl" applied
    la = json.loads(obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert la["data"] == {"k1": "changed", "k2": "b"}, la
    # a field another manager set is still a conflict for "kubectl"
    c.kubectl("patch", "configmap", "csa2ssa", "--field-manager", "other", "-p", '{"data":{"k2":"other"}}')
    p = c.kubectl("apply", "--server-side", "-f", "-", input=cm_yaml("csa2ssa", {"k1": "changed", "k2": "b"},
                                                                    labels={"app": "x"}), check=False)
    assert p.returncode != 0 and "conflict" in p.stderr, p


def test_client_written_managed_fields(api):
    """managedFields a client writes replace the stored ones when they decode ([{}] resets them);
    ones that do not decode leave the stored ones."""
    api.ok("POST", f"{CM}?fieldManager=creator", {"apiVersion": "v1", "kind": "ConfigMap",
                                                   "metadata": {"name": "mfw"}, "data": {"a": "1"}})
    entry = {"manager": "someone", "operation": "Apply", "apiVersion": "v1", "time": "2030-01-01T00:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}
    o = api.ok("PATCH", f"{CM}/mfw", [{"op": "replace", "path": "/metadata/managedFields", "value": [entry]}],
               ctype="application/json-patch+json")
    assert [(m["manager"], m["operation"]) for m in o["metadata"]["managedFields"]] == [("someone", "Apply")], o
    bad = dict(entry, operation="Delete")
    o = api.ok("PATCH", f"{CM}/mfw", {"metadata": {"managedFields": [bad]}}, ctype="application/merge-patch+json")
    assert [(m["manager"], m["operation"]) for m in o["metadata"]["managedFields"]] == [("someone", "Apply")], o
    o = api.ok("PATCH", f"{CM}/mfw", {"metadata": {"managedFields": [{}]}}, ctype="application/merge-patch+json")
    assert "managedFields" not in o["metadata"], o
