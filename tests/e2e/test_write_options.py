"""Write options as kube-apiserver reads them, and its wire details clients compare byte for byte:
dryRun carried in a body (DeleteOptions of DELETE and deletecollection, an Eviction's
deleteOptions: `kubectl drain --dry-run=server`) never acts; an update whose
metadata.resourceVersion is "0" is unconditional (`kubectl replace` of a manifest that carries
it); every JSON body ends with a newline (the python client's FailToCreateError text); a strategic
merge patch whose result does not decode answers with the unstructured converter's words."""
import json

import pytest

from conftest import assert_status_body, create_node, node_manifest

# the same answers on both stores: every test of the module's apiserver runs on SQLite and on etcd
pytestmark = pytest.mark.both_stores

NS = "default"
PODS = f"/api/v1/namespaces/{NS}/pods"
CMS = f"/api/v1/namespaces/{NS}/configmaps"


def pod(name, node=None, labels=None):
    spec = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def cm(name, data=None, labels=None):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels or {}},
            "data": data or {"a": "1"}}


def untouched(api, path):
    o = api.ok("GET", path)
    assert "deletionTimestamp" not in o["metadata"], o["metadata"]
    return o


# ---- dryRun in bodies ---------------------------------------------------------------------

def test_delete_body_dry_run_does_not_delete(api):
    api.ok("POST", CMS, cm("dr-body"))
    r = api.request("DELETE", f"{CMS}/dr-body", body={"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]})
    assert r.status == 200, r
    untouched(api, f"{CMS}/dr-body")
    # a pod (graceful deletion) is not marked terminating either
    api.ok("POST", PODS, pod("dr-body-pod", node="dr-node"))
    r = api.request("DELETE", f"{PODS}/dr-body-pod", body={"dryRun": ["All"], "gracePeriodSeconds": 0})
    assert r.status == 200, r
    untouched(api, f"{PODS}/dr-body-pod")
    # the query's dryRun still counts when a body carries other options
    r = api.request("DELETE", f"{CMS}/dr-body?dryRun=All", body={"gracePeriodSeconds": 0})
    assert r.status == 200, r
    untouched(api, f"{CMS}/dr-body")
    api.ok("DELETE", f"{CMS}/dr-body")
    assert api.get(f"{CMS}/dr-body").status == 404


def test_delete_body_dry_run_unsupported_value_422(api):
    api.ok("POST", CMS, cm("dr-bad"))
    r = api.request("DELETE", f"{CMS}/dr-bad", body={"dryRun": ["Yes"]})
    st = assert_status_body(r, 422, "Invalid")
    assert st["message"] == ('DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"Yes"}: '
                             'supported values: "All"'), st
    r = api.request("POST", f"{CMS}?dryRun=Yes", body=cm("dr-bad-2"))
    st = assert_status_body(r, 422, "Invalid")
    assert st["message"] == ('CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"Yes"}: '
                             'supported values: "All"'), st
    assert api.get(f"{CMS}/dr-bad-2").status == 404
    untouched(api, f"{CMS}/dr-bad")


def test_deletecollection_body_dry_run(api):
    for n in ("dc-1", "dc-2"):
        api.ok("POST", CMS, cm(n, labels={"set": "dc"}))
    r = api.request("DELETE", f"{CMS}?labelSelector=set%3Ddc", body={"dryRun": ["All"]})
    assert r.status == 200, r
    assert sorted(i["metadata"]["name"] for i in r.json()["items"]) == ["dc-1", "dc-2"]
    for n in ("dc-1", "dc-2"):
        untouched(api, f"{CMS}/{n}")


def test_eviction_delete_options_dry_run(api):
    api.ok("POST", PODS, pod("ev-dry", node="ev-node"))
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "ev-dry", "namespace": NS},
            "deleteOptions": {"dryRun": ["All"]}}
    r = api.post(f"{PODS}/ev-dry/eviction", body)
    assert r.status == 201, r
    untouched(api, f"{PODS}/ev-dry")
    # the same without dryRun evicts
    del body["deleteOptions"]
    assert api.post(f"{PODS}/ev-dry/eviction", body).status == 201
    o = api.get(f"{PODS}/ev-dry")
    assert o.status == 404 or "deletionTimestamp" in o.json()["metadata"], o


def test_kubectl_drain_dry_run_server_evicts_nothing(apiserver, api):
    c = apiserver
    create_node(api, "drain-dry")
    for n in ("dd-1", "dd-2"):
        api.ok("POST", PODS, pod(n, node="drain-dry"))
    p = c.kubectl("drain", "drain-dry", "--dry-run=server", "--force", "--timeout=30s", timeout=60)
    out = p.stdout + p.stderr
    assert "server dry run" in out, out
    for n in ("dd-1", "dd-2"):
        untouched(api, f"{PODS}/{n}")
    assert not api.ok("GET", "/api/v1/nodes/drain-dry")["spec"].get("unschedulable")


# ---- resourceVersion "0" on update --------------------------------------------------------

def test_update_with_resource_version_zero_is_unconditional(apiserver, api):
    api.ok("POST", CMS, cm("rv0", data={"a": "1"}))
    body = cm("rv0", data={"a": "2"})
    body["metadata"]["resourceVersion"] = "0"
    o = api.ok("PUT", f"{CMS}/rv0", body)
    assert o["data"] == {"a": "2"} and o["metadata"]["resourceVersion"] not in ("", "0")
    # kubectl replace of a manifest that carries it
    body["data"] = {"a": "3"}
    c = apiserver
    c.kubectl("replace", "-f", "-", input=json.dumps(body))
    assert api.ok("GET", f"{CMS}/rv0")["data"] == {"a": "3"}
    # a stale version is still a conflict
    body["metadata"]["resourceVersion"] = "1"
    assert_status_body(api.put(f"{CMS}/rv0", body), 409, "Conflict")


# ---- the JSON encoder's newline -----------------------------------------------------------

def test_json_bodies_end_with_newline(api):
    api.ok("POST", CMS, cm("nl"))
    for path in (f"{CMS}/nl", CMS, "/api/v1/namespaces/default/configmaps/missing-nl"):
        r = api.get(path)
        assert r.body.endswith(b"}\n"), (path, r.body[-40:])
    r = api.post(CMS, cm("nl"))
    assert r.status == 409 and r.body.endswith(b"}\n"), r
    # raw documents are written as they are
    assert not api.get("/version").body.endswith(b"\n")


def test_python_create_from_yaml_conflict_text(apiserver, tmp_path):
    from kubernetes import utils
    f = tmp_path / "cm.yaml"
    f.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: py-conflict\n  namespace: default\ndata:\n  a: '1'\n")
    client = apiserver.python_api_client()
    utils.create_from_yaml(client, str(f))
    with pytest.raises(utils.FailToCreateError) as e:
        utils.create_from_yaml(client, str(f))
    assert str(e.value) == ('Error from server (Conflict): {"kind":"Status","apiVersion":"v1","metadata":{},'
                            '"status":"Failure","message":"configmaps \\"py-conflict\\" already exists",'
                            '"reason":"AlreadyExists","details":{"name":"py-conflict","kind":"configmaps"},'
                            '"code":409}\n')


# ---- a strategic merge patch that does not decode -----------------------------------------

def test_smp_labels_string_cannot_restore_map(apiserver, api):
    api.ok("POST", CMS, cm("smp-bad"))
    r = api.patch(f"{CMS}/smp-bad", {"metadata": {"labels": "invalid"}})
    st = assert_status_body(r, 422, "Invalid")
    assert st["message"] == (' "" is invalid: patch: Invalid value: "map[metadata:map[labels:invalid]]": '
                             'cannot restore map from string'), st
    assert st["details"] == {"causes": [{"reason": "FieldValueInvalid", "field": "patch",
                                         "message": 'Invalid value: "map[metadata:map[labels:invalid]]": '
                                                    'cannot restore map from string'}]}, st
    # kubectl's own test (test-cmd: "Patch fails with type restore error and exit code 1")
    p = apiserver.kubectl("patch", "configmap", "smp-bad", "-p", '{"metadata":{"labels":"invalid"}}', check=False)
    assert p.returncode == 1 and "cannot restore map from string" in p.stderr, p
    # Go's formatting of the patch: sorted keys, bare strings, numbers as %v prints them
    r = api.patch(f"{CMS}/smp-bad", {"data": {"b": 1.5e6}, "metadata": {"labels": {"x": "y"}, "annotations": [1, True]}})
    st = assert_status_body(r, 422, "Invalid")
    assert st["message"] == (' "" is invalid: patch: Invalid value: "map[data:map[b:1.5e+06] metadata:'
                             'map[annotations:[1 true] labels:map[x:y]]]": cannot restore map from slice'), st
    # the decoder's 400 stays for bodies that are not patches
    body = cm("smp-bad")
    body["metadata"]["labels"] = "invalid"
    assert_status_body(api.put(f"{CMS}/smp-bad", body), 400, "BadRequest")


def test_deletecollection_body_propagation_policy(api):
    """deletecollection takes DeleteOptions' propagationPolicy as a DELETE does: Orphan puts the
    orphan finalizer on each owner (here no garbage collector runs, so they stay, being deleted)."""
    rs = "/apis/apps/v1/namespaces/default/replicasets"
    for n in ("orph-1", "orph-2"):
        api.ok("POST", rs, {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                            "metadata": {"name": n, "labels": {"set": "orph"}},
                            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": n}},
                                     "template": {"metadata": {"labels": {"app": n}},
                                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
    r = api.request("DELETE", f"{rs}?labelSelector=set%3Dorph", body={"propagationPolicy": "Orphan"})
    assert r.status == 200, r
    for n in ("orph-1", "orph-2"):
        o = api.ok("GET", f"{rs}/{n}")
        assert "orphan" in o["metadata"].get("finalizers", []) and "deletionTimestamp" in o["metadata"], o["metadata"]
    r = api.request("DELETE", f"{rs}?labelSelector=set%3Dorph", body={"propagationPolicy": "Sideways"})
    st = assert_status_body(r, 422, "Invalid")
    assert "propagationPolicy: Unsupported value" in st["message"], st


def test_field_manager_unprintable_422(api):
    r = api.post(f"{CMS}?fieldManager=a%01b", cm("fm-bad"))
    st = assert_status_body(r, 422, "Invalid")
    assert st["message"] == ('CreateOptions.meta.k8s.io "" is invalid: fieldManager: Invalid value: "a\\x01b": '
                             'invalid character U+0001 (at position 1)'), st
    assert st["details"]["group"] == "meta.k8s.io" and st["details"]["kind"] == "CreateOptions", st


def test_delete_body_dry_run_wrong_type_400(api):
    api.ok("POST", CMS, cm("dr-type"))
    st = assert_status_body(api.request("DELETE", f"{CMS}/dr-type", body={"dryRun": "All"}), 400, "BadRequest")
    assert st["message"] == "json: cannot unmarshal string into Go struct field DeleteOptions.dryRun of type []string", st
    st = assert_status_body(api.request("DELETE", f"{CMS}/dr-type", body={"dryRun": [1]}), 400, "BadRequest")
    assert st["message"] == "json: cannot unmarshal number into Go struct field DeleteOptions.dryRun of type string", st
    untouched(api, f"{CMS}/dr-type")
