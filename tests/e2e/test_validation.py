"""Bytes and values the API refuses, as kube-apiserver's decoder does (400 BadRequest), by create,
update and patch: text that is not UTF-8, strings with NUL, unparsable times, integers out of
their field's range, values of the wrong JSON type, malformed quantities. Stored, each made every
later list unreadable to python3-kubernetes or `kubectl describe node`; after them the lists
must still parse."""
import json

import pytest

from conftest import LEASES, assert_status_body, create_node, delete_node_if_exists, node_manifest

# the same answers on both stores: every test of the module's apiserver runs on SQLite and on etcd
pytestmark = pytest.mark.both_stores

NODE = "e2e-valid-node"
LEASE = "e2e-valid-lease"
MARK = "@@MARK@@"


@pytest.fixture(scope="module", autouse=True)
def objects(api):
    create_node(api, NODE)
    api.ok("POST", LEASES, lease_body(LEASE))
    yield
    delete_node_if_exists(api, NODE)
    api.delete(f"{LEASES}/{LEASE}")


def lease_body(name, **spec):
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"holderIdentity": "h", "leaseDurationSeconds": 40, **spec}}


def raw(obj, replacement):
    """JSON text of obj with the string MARK's text (quotes included) replaced by raw bytes."""
    return json.dumps(obj).encode().replace(json.dumps(MARK).encode(), replacement)


def three_ways(api, kind, field_setter, replacement):
    """Sends the bad value by create, update and merge patch; yields each response."""
    if kind == "node":
        new = node_manifest("e2e-valid-new")
        field_setter(new)
        yield api.post("/api/v1/nodes", raw(new, replacement), ctype="application/json")
        cur = api.ok("GET", f"/api/v1/nodes/{NODE}")
        field_setter(cur)
        yield api.put(f"/api/v1/nodes/{NODE}", raw(cur, replacement), ctype="application/json")
        patch = {}
        field_setter(patch)
        yield api.patch(f"/api/v1/nodes/{NODE}", raw(patch, replacement), ctype="application/merge-patch+json")
        yield api.patch(f"/api/v1/nodes/{NODE}/status", raw(patch, replacement), ctype="application/merge-patch+json")
    else:
        new = lease_body("e2e-valid-new")
        field_setter(new)
        yield api.post(LEASES, raw(new, replacement), ctype="application/json")
        cur = api.ok("GET", f"{LEASES}/{LEASE}")
        field_setter(cur)
        yield api.put(f"{LEASES}/{LEASE}", raw(cur, replacement), ctype="application/json")
        patch = {}
        field_setter(patch)
        yield api.patch(f"{LEASES}/{LEASE}", raw(patch, replacement), ctype="application/merge-patch+json")


def setpath(*path):
    def setter(obj):
        o = obj
        for k in path[:-1]:
            o = o.setdefault(k, {})
        o[path[-1]] = MARK
    return setter


def assert_untouched(api):
    assert api.get("/api/v1/nodes/e2e-valid-new").status == 404
    assert api.get(f"{LEASES}/e2e-valid-new").status == 404


# ---- text that is not UTF-8 ----------------------------------------------------------------

@pytest.mark.parametrize("bad", [b'"x\xff\xfey"', b'"\xed\xa0\x80"', b'"\xc0\x80"', b'"\xf4\x90\x80\x80"'],
                         ids=["ff-fe", "surrogate", "overlong", "past-10ffff"])
@pytest.mark.parametrize("kind", ["node", "lease"])
def test_invalid_utf8_refused(api, kind, bad):
    for r in three_ways(api, kind, setpath("metadata", "annotations", "a"), bad):
        st = assert_status_body(r, 400, "BadRequest")
        assert "utf-8" in st["message"].lower(), st
    assert_untouched(api)


def test_invalid_utf8_in_key_refused(api):
    body = json.dumps(node_manifest("e2e-valid-new")).encode().replace(b'"labels": {', b'"labels": {"k\xff": "v", ')
    assert_status_body(api.post("/api/v1/nodes", body, ctype="application/json"), 400, "BadRequest")
    assert_untouched(api)


def test_unpaired_surrogate_escape_becomes_replacement_character(api):
    """As Go's decoder (and json-c): \\ud800 alone decodes to U+FFFD, valid UTF-8."""
    r = api.patch(f"/api/v1/nodes/{NODE}", b'{"metadata":{"annotations":{"sur":"a\\ud800b"}}}',
                  ctype="application/merge-patch+json")
    assert r.status == 200, r
    assert api.ok("GET", f"/api/v1/nodes/{NODE}")["metadata"]["annotations"]["sur"] == "a\ufffdb"
    api.ok("PATCH", f"/api/v1/nodes/{NODE}", b'{"metadata":{"annotations":{"sur":null}}}',
           ctype="application/merge-patch+json")


# ---- NUL -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["node", "lease"])
@pytest.mark.parametrize("where", [("metadata", "annotations", "a"), ("metadata", "labels", "a")])
def test_nul_in_string_refused(api, kind, where):
    for r in three_ways(api, kind, setpath(*where), b'"x\\u0000y"'):
        st = assert_status_body(r, 400, "BadRequest")
        assert "NUL" in st["message"], st
    assert_untouched(api)
    meta = api.ok("GET", f"/api/v1/nodes/{NODE}")["metadata"]
    assert (meta.get(where[1]) or {}).get("a") in (None,), meta


def test_nul_in_name_refused_not_truncated(api):
    body = raw(node_manifest("e2e-valid-new"), b"").replace(b'"name": "e2e-valid-new"', b'"name": "a\\u0000b"')
    st = assert_status_body(api.post("/api/v1/nodes", body, ctype="application/json"), 400, "BadRequest")
    assert "NUL" in st["message"], st
    assert api.get("/api/v1/nodes/a").status == 404


def test_nul_in_key_refused(api):
    """json-c cuts a key at its NUL: without the check this stored annotation "x"."""
    r = api.patch(f"/api/v1/nodes/{NODE}", b'{"metadata":{"annotations":{"x\\u0000y":"v"}}}',
                  ctype="application/merge-patch+json")
    assert_status_body(r, 400, "BadRequest")
    assert "x" not in (api.ok("GET", f"/api/v1/nodes/{NODE}")["metadata"].get("annotations") or {})


# ---- times -----------------------------------------------------------------------------------

@pytest.mark.parametrize("bad,words", [
    (b'"garbage"', 'parsing time "garbage" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "garbage" as "2006"'),
    (b'12345', "cannot unmarshal number"),
    (b'""', 'parsing time ""'),
    (b'"2024-02-30T00:00:00.000000Z"', "day out of range"),
    (b'"10000-01-01T00:00:00.000000Z"', "parsing time"),
    (b'"2024-01-01T24:00:00.000000Z"', "hour out of range"),
    (b'"2024-01-01 00:00:00Z"', "parsing time"),
])
@pytest.mark.parametrize("field", ["renewTime", "acquireTime"])
def test_lease_bad_time_refused(api, bad, words, field):
    for r in three_ways(api, "lease", setpath("spec", field), bad):
        st = assert_status_body(r, 400, "BadRequest")
        assert st["message"].startswith('Lease in version "v1" cannot be handled as a Lease: '), st
        assert words in st["message"], st
    assert_untouched(api)


def test_node_condition_bad_time_refused(api):
    cur = api.ok("GET", f"/api/v1/nodes/{NODE}")
    cur["status"]["conditions"][0]["lastHeartbeatTime"] = "yesterday"
    st = assert_status_body(api.put(f"/api/v1/nodes/{NODE}/status", cur), 400, "BadRequest")
    assert 'parsing time "yesterday"' in st["message"], st
    # a strategic merge patch's result is decoded by the unstructured converter: 422 quoting the patch
    patch = {"status": {"conditions": [{"type": "Ready", "lastTransitionTime": "2024-13-01T00:00:00Z"}]}}
    st = assert_status_body(api.patch(f"/api/v1/nodes/{NODE}/status", patch), 422, "Invalid")
    assert st["message"] == (' "" is invalid: patch: Invalid value: "map[status:map[conditions:[map[lastTransitionTime:'
                             '2024-13-01T00:00:00Z type:Ready]]]]": parsing time "2024-13-01T00:00:00Z": month out of range'), st


def test_event_bad_times_refused(api):
    ev = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e2e-valid-ev", "namespace": "default"},
          "involvedObject": {"kind": "Node", "name": NODE}, "reason": "R", "message": "m", "type": "Normal"}
    for field, value in [("firstTimestamp", "garbage"), ("lastTimestamp", 5), ("eventTime", "2024-02-30T00:00:00Z")]:
        r = api.post("/api/v1/namespaces/default/events", {**ev, field: value})
        assert_status_body(r, 400, "BadRequest")
    r = api.post("/api/v1/namespaces/default/events", {**ev, "series": {"count": 2, "lastObservedTime": "x"}})
    assert_status_body(r, 400, "BadRequest")
    v1 = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e2e-valid-ev", "namespace": "default"},
          "regarding": {"kind": "Node", "name": NODE}, "reason": "R", "note": "m", "type": "Normal",
          "eventTime": "garbage", "reportingController": "e2e", "reportingInstance": "e2e", "action": "A"}
    st = assert_status_body(api.post("/apis/events.k8s.io/v1/namespaces/default/events", v1), 400, "BadRequest")
    assert st["message"].startswith('Event in version "v1" cannot be handled as a Event: '), st
    assert api.get("/api/v1/namespaces/default/events/e2e-valid-ev").status == 404


def test_times_stored_in_canonical_form(api):
    """Times are stored as Kubernetes serializes them: MicroTime with six fractional digits
    (Go clients parse exactly six), Time to the second, both in UTC."""
    r = api.patch(f"{LEASES}/{LEASE}", {"spec": {"renewTime": "2024-01-01T02:00:00+02:00",
                                                 "acquireTime": "2024-01-01T00:00:00.1234567Z"}},
                  ctype="application/merge-patch+json")
    assert r.status == 200, r
    spec = api.ok("GET", f"{LEASES}/{LEASE}")["spec"]
    assert spec["renewTime"] == "2024-01-01T00:00:00.000000Z", spec
    assert spec["acquireTime"] == "2024-01-01T00:00:00.123456Z", spec


# ---- numbers, types, quantities ------------------------------------------------------------------

@pytest.mark.parametrize("bad,words", [
    (b"99999999999999999999999", "json: cannot unmarshal number into Go struct field "
                                 "LeaseSpec.spec.leaseDurationSeconds of type int32"),
    (b"2147483648", "json: cannot unmarshal number 2147483648 into Go struct field "
                    "LeaseSpec.spec.leaseDurationSeconds of type int32"),
    (b"1.5", "cannot unmarshal number 1.5 into"),
    (b'"40"', "json: cannot unmarshal string into Go struct field LeaseSpec.spec.leaseDurationSeconds of type int32"),
    (b"{}", "cannot unmarshal object into"),
])
def test_lease_duration_type_and_range(api, bad, words):
    for r in three_ways(api, "lease", setpath("spec", "leaseDurationSeconds"), bad):
        st = assert_status_body(r, 400, "BadRequest")
        assert words in st["message"], st
    assert_untouched(api)
    assert api.ok("GET", f"{LEASES}/{LEASE}")["spec"]["leaseDurationSeconds"] == 40


@pytest.mark.parametrize("path,bad,words", [
    (("spec", "unschedulable"), b'"yes"', "cannot unmarshal string into Go struct field NodeSpec.spec.unschedulable of type bool"),
    (("spec", "taints"), b'{"key":"a"}', "cannot unmarshal object into Go struct field NodeSpec.spec.taints of type []v1.Taint"),
    (("metadata", "labels"), b'["a"]', "cannot unmarshal array into Go struct field ObjectMeta.metadata.labels of type map[string]string"),
    (("metadata", "labels", "a"), b"5", "cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"),
    (("metadata", "finalizers"), b'"x"', "cannot unmarshal string into Go struct field ObjectMeta.metadata.finalizers"),
    (("status", "capacity", "memory"), b'"1.5.5Gi"', "quantities must match the regular expression "
                                                      "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
    (("status", "allocatable", "cpu"), b'"ten"', "quantities must match"),
    (("status", "daemonEndpoints", "kubeletEndpoint", "Port"), b"4294967296", "of type int32"),
    (("status", "nodeInfo", "kernelVersion"), b"6", "NodeSystemInfo.status.nodeInfo.kernelVersion of type string"),
])
def test_node_field_types(api, path, bad, words):
    for r in three_ways(api, "node", setpath(*path), bad):
        st = assert_status_body(r, 400, "BadRequest")
        assert st["message"].startswith('Node in version "v1" cannot be handled as a Node: '), st
        assert words in st["message"], st
    assert_untouched(api)


def test_quantity_given_as_number_is_stored_as_string(api):
    r = api.patch(f"/api/v1/nodes/{NODE}/status", {"status": {"capacity": {"pods": 110}}},
                  ctype="application/merge-patch+json")
    assert r.status == 200, r
    assert api.ok("GET", f"/api/v1/nodes/{NODE}")["status"]["capacity"]["pods"] == "110"


# ---- clients still read everything ---------------------------------------------------------------

def test_lists_still_parse_and_describe_works(apiserver, api):
    from kubernetes import client
    core = apiserver.python_client()
    names = [n.metadata.name for n in core.list_node().items]
    assert NODE in names, names
    core.list_namespaced_event("default")
    coord = client.CoordinationV1Api(apiserver.python_api_client())
    leases = {x.metadata.name: x for x in coord.list_namespaced_lease("default").items}
    assert leases[LEASE].spec.lease_duration_seconds == 40
    out = apiserver.kubectl("describe", "node", NODE).stdout
    assert "Capacity:" in out and "memory:" in out, out
    apiserver.kubectl("get", "lease", "-n", "default", LEASE, "-o", "yaml")
