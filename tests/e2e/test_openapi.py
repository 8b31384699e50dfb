"""OpenAPI v2/v3 generated from the kinds' schemas, read by the machine's kubectl (explain,
create --validate), and fieldValidation (Ignore, Warn, Strict) on create, update and patch."""
import json

import pytest

from conftest import LEASES, assert_status_body

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def lease_yaml(name, extra_spec=""):
    return (f"apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: {name}\n  namespace: default\n"
            f"spec:\n  holderIdentity: h\n{extra_spec}")


# ---------------------------------------------------------------- explain
def test_explain_kind(apiserver):
    out = apiserver.kubectl("explain", "node").stdout
    assert "KIND:       Node" in out
    assert "VERSION:    v1" in out
    for field in ("apiVersion\t<string>", "metadata\t<ObjectMeta>", "spec\t<NodeSpec>", "status\t<NodeStatus>"):
        assert field in out, out
    out = apiserver.kubectl("explain", "leases").stdout
    assert "GROUP:      coordination.k8s.io" in out and "spec\t<LeaseSpec>" in out, out


def test_explain_nested_field(apiserver):
    out = apiserver.kubectl("explain", "pod.spec.containers.resources").stdout
    assert "FIELD: resources <ResourceRequirements>" in out, out
    assert "limits\t<map[string]Quantity>" in out and "requests\t<map[string]Quantity>" in out, out
    out = apiserver.kubectl("explain", "node.status.conditions").stdout
    assert "FIELD: conditions <[]NodeCondition>" in out, out
    assert "type\t<string> -required-" in out and "lastHeartbeatTime\t<string>" in out, out
    out = apiserver.kubectl("explain", "events.regarding", "--api-version=events.k8s.io/v1").stdout
    assert "<ObjectReference>" in out, out


def test_explain_recursive(apiserver):
    out = apiserver.kubectl("explain", "lease.spec", "--recursive").stdout
    for field in ("holderIdentity\t<string>", "leaseDurationSeconds\t<integer>", "renewTime\t<string>",
                  "leaseTransitions\t<integer>", "preferredHolder\t<string>"):
        assert field in out, out
    out = apiserver.kubectl("explain", "pod.spec", "--recursive").stdout
    assert "containers\t<[]Container> -required-" in out, out
    assert "      containerPort\t<integer> -required-" in out, out


def test_explain_unknown_field(apiserver):
    p = apiserver.kubectl("explain", "node.spec.nosuch", check=False)
    assert p.returncode != 0
    assert "nosuch" in p.stderr, p.stderr


# ---------------------------------------------------------------- documents and caching
def test_v3_index_hash_etag_and_304(api):
    r = api.get("/openapi/v3")
    assert r.status == 200
    paths = r.json()["paths"]
    assert set(paths) >= {"api/v1", "apis/coordination.k8s.io/v1", "apis/events.k8s.io/v1"}
    url = paths["api/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/api/v1?hash=")
    h = url.split("hash=")[1]
    r = api.get(url)
    assert r.status == 200
    assert r.headers["etag"] == f'"{h}"'
    assert r.headers["cache-control"] == "public, immutable"
    doc = r.json()
    assert doc["openapi"] == "3.0.0"
    node = doc["components"]["schemas"]["io.k8s.api.core.v1.Node"]
    assert node["x-kubernetes-group-version-kind"] == [{"group": "", "kind": "Node", "version": "v1"}]
    r = api.get(url, headers={"If-None-Match": f'"{h}"'})
    assert r.status == 304 and r.body == b""
    r = api.get("/openapi/v3/api/v1", headers={"If-None-Match": '"stale"'})
    assert r.status == 200 and r.headers["cache-control"] == "no-cache, private"
    r = api.get("/openapi/v3/api/v1?hash=0123")
    assert r.status == 301 and r.headers["location"] == url
    assert api.get("/openapi/v3/apis/nosuch.example.com/v1").status == 404


PB_V2 = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"


def pb_fields(data):
    """The (field number, value) pairs of one protobuf message: bytes for length-delimited
    fields, ints for varints (the only wire types gnostic's Document uses here)."""
    out, i = [], 0

    def varint():
        nonlocal i
        v = shift = 0
        while True:
            b = data[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return v
    while i < len(data):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            out.append((field, varint()))
        elif wire == 2:
            n = varint()
            out.append((field, data[i:i + n]))
            i += n
        else:
            raise AssertionError(f"unexpected wire type {wire} for field {field}")
    return out


def pb_get(data, field):
    return [v for f, v in pb_fields(data) if f == field]


def pb_named(data, field):
    """A gnostic map (repeated Named* {name 1, value 2}) as a dict of name -> value bytes."""
    return {pb_get(e, 1)[0].decode(): pb_get(e, 2)[0] for e in pb_get(data, field)}


def test_v2_json_and_protobuf(api):
    r = api.get("/openapi/v2")
    assert r.status == 200
    doc = r.json()
    assert doc["swagger"] == "2.0"
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in doc["definitions"]
    lease = doc["definitions"]["io.k8s.api.coordination.v1.Lease"]
    assert lease["properties"]["metadata"]["$ref"] == "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    etag = r.headers["etag"]
    assert api.get("/openapi/v2", headers={"If-None-Match": etag}).status == 304

    # client-go's OpenAPISchema asks for gnostic's protobuf alone, as kube-apiserver serves it
    r = api.get("/openapi/v2", headers={"Accept": PB_V2})
    assert r.status == 200, r
    assert r.headers["content-type"] == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    assert r.headers["etag"] != etag
    assert api.get("/openapi/v2", headers={"Accept": PB_V2, "If-None-Match": r.headers["etag"]}).status == 304
    pb = r.body
    assert pb_get(pb, 1) == [b"2.0"]
    # definitions (9): the same schemas, a $ref (1) and its properties (25)
    defs = pb_named(pb_get(pb, 9)[0], 1)
    assert set(defs) == set(doc["definitions"])
    props = pb_named(pb_get(defs["io.k8s.api.coordination.v1.Lease"], 25)[0], 1)
    assert pb_get(props["metadata"], 1) == [b"#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]
    # paths (8: Paths.path 2): a PATCH (8) carries the kind (a vendor extension, YAML) and fieldValidation
    paths = pb_named(pb_get(pb, 8)[0], 2)
    assert set(paths) == set(doc["paths"])
    patch = pb_get(paths["/api/v1/namespaces/{namespace}/configmaps/{name}"], 8)[0]
    ext = {pb_get(e, 1)[0].decode(): pb_get(pb_get(e, 2)[0], 2)[0].decode() for e in pb_get(patch, 13)}
    assert json.loads(ext["x-kubernetes-group-version-kind"]) == {"group": "", "kind": "ConfigMap", "version": "v1"}
    names = set()
    for item in pb_get(patch, 8):  # ParametersItem.parameter.non_body_parameter.query_parameter_sub_schema.name
        for param in pb_get(item, 1):
            for nb in pb_get(param, 2):
                for q in pb_get(nb, 3):
                    names.add(pb_get(q, 4)[0].decode())
    assert {"fieldValidation", "fieldManager", "dryRun"} <= names, names

    # JSON preferred where the client lists it first; neither form: 406
    r = api.get("/openapi/v2", headers={"Accept": f"application/json, {PB_V2}"})
    assert r.status == 200 and r.headers["content-type"] == "application/json"
    assert_status_body(api.get("/openapi/v2", headers={"Accept": "application/yaml"}), 406, "NotAcceptable")


SAR = """apiVersion: authorization.k8s.io/v1
kind: SubjectAccessReview
spec:
  user: alice
  resourceAttributes:
    verb: get
    resource: pods
    namespace: default
"""


@pytest.mark.parametrize("validate", [None, "--validate=strict", "--validate=true"])
def test_kubectl_create_subject_access_review(apiserver, validate):
    """A kind without PATCH (the reviews): kubectl validates it on the client with the v2
    document (protobuf) after listing CRDs, then creates it."""
    args = ["create", "-f", "-", "-o", "json"] + ([validate] if validate else [])
    p = apiserver.kubectl(*args, input=SAR)
    out = json.loads(p.stdout)
    assert out["kind"] == "SubjectAccessReview" and out["status"]["allowed"] is False, out
    p = apiserver.kubectl(*args, input=SAR.replace("  user: alice", "  user: alice\n  bogus: 1"), check=False)
    assert p.returncode != 0 and "bogus" in p.stderr, p.stderr


def test_custom_resource_definitions_are_read_only_and_empty(apiserver, api):
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    got = api.ok("GET", crds)
    assert got["kind"] == "CustomResourceDefinitionList" and got["items"] == [], got
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"}, "spec": {}}
    assert_status_body(api.post(crds, crd), 405, "MethodNotAllowed")
    assert_status_body(api.delete(f"{crds}/widgets.example.com"), 405, "MethodNotAllowed")
    assert "No resources found" in apiserver.kubectl("get", "crd").stderr


# ---------------------------------------------------------------- field validation
def test_kubectl_create_validate_strict_rejects_unknown_field(apiserver, api):
    p = apiserver.kubectl("create", "--validate=strict", "-f", "-", input=lease_yaml("oa-strict", "  bogus: 1\n"),
                          check=False)
    assert p.returncode != 0
    assert 'strict decoding error: unknown field "spec.bogus"' in p.stderr, p.stderr
    assert api.get(f"{LEASES}/oa-strict").status == 404


def test_kubectl_create_validate_warn_creates_with_warning(apiserver, api):
    p = apiserver.kubectl("create", "--validate=warn", "-f", "-", input=lease_yaml("oa-warn", "  bogus: 1\n"))
    assert 'Warning: unknown field "spec.bogus"' in p.stderr, p.stderr
    obj = api.ok("GET", f"{LEASES}/oa-warn")
    assert obj["spec"] == {"holderIdentity": "h"}, "the unknown field is dropped"


def test_kubectl_create_validate_false_drops_silently(apiserver, api):
    p = apiserver.kubectl("create", "--validate=false", "-f", "-", input=lease_yaml("oa-ignore", "  bogus: 1\n"))
    assert "Warning" not in p.stderr, p.stderr
    assert "bogus" not in api.ok("GET", f"{LEASES}/oa-ignore")["spec"]


def lease(name, **spec):
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"holderIdentity": "h", **spec}}


def test_raw_strict_is_400_naming_the_fields(api):
    body = lease("oa-raw", bogus=1)
    body["metadata"]["extra"] = "x"
    r = api.post(f"{LEASES}?fieldValidation=Strict", body)
    assert_status_body(r, 400, "BadRequest")
    assert r.json()["message"] == ('Lease in version "v1" cannot be handled as a Lease: strict decoding error: '
                                   'unknown field "metadata.extra", unknown field "spec.bogus"')
    # update and patch too
    api.ok("POST", LEASES, lease("oa-raw"))
    r = api.patch(f"{LEASES}/oa-raw?fieldValidation=Strict", {"spec": {"nope": True}},
                  ctype="application/merge-patch+json")
    assert_status_body(r, 400, "BadRequest")
    assert 'unknown field "spec.nope"' in r.json()["message"]
    cur = api.ok("GET", f"{LEASES}/oa-raw")
    cur["spec"]["nope"] = 1
    r = api.put(f"{LEASES}/oa-raw?fieldValidation=Strict", cur)
    assert_status_body(r, 400, "BadRequest")
    # a nested list element, and a ConfigMap's top level: in the body's order
    r = api.post(f"{CONFIGMAPS}?fieldValidation=Strict",
                 {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "oa-cm", "ownerReferences": [
                     {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u", "colour": "red"}]}, "dataa": {}})
    assert_status_body(r, 400, "BadRequest")
    assert r.json()["message"].endswith(
        'strict decoding error: unknown field "metadata.ownerReferences[0].colour", unknown field "dataa"'), r.body


def test_raw_default_warns_and_drops(api):
    r = api.post(LEASES, lease("oa-default", bogus=1))
    assert r.status == 201, r
    assert r.headers["warning"] == '299 - "unknown field \\"spec.bogus\\""'
    assert "bogus" not in r.json()["spec"]
    r = api.patch(f"{LEASES}/oa-default", {"spec": {"other": 2}}, ctype="application/merge-patch+json")
    assert r.status == 200 and r.headers["warning"] == '299 - "unknown field \\"spec.other\\""'
    assert "other" not in api.ok("GET", f"{LEASES}/oa-default")["spec"]
    r = api.post(f"{LEASES}?fieldValidation=Ignore", lease("oa-ignored", bogus=1))
    assert r.status == 201 and "warning" not in r.headers
    r = api.post(f"{LEASES}?fieldValidation=Loud", lease("oa-bad-directive"))
    assert_status_body(r, 422, "Invalid")
    assert 'fieldValidation: Unsupported value: "Loud"' in r.json()["message"]


def test_partial_schemas_keep_what_they_do_not_list(api):
    """A pod's volume sources are not transcribed: they are kept, never warned about."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "oa-pod", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "busybox"}],
                    "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1Mi"}}]}}
    r = api.post("/api/v1/namespaces/default/pods?fieldValidation=Strict", pod)
    assert r.status == 201, r
    assert r.json()["spec"]["volumes"][0]["emptyDir"] == {"sizeLimit": "1Mi"}


def test_duplicate_fields(api):
    text = ('{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"oa-dup","namespace":"default"},'
            '"spec":{"holderIdentity":"a","leaseDurationSeconds":1,"holderIdentity":"b"},'
            '"x":[{"a":1,"a":2}]}')
    r = api.post(f"{LEASES}?fieldValidation=Strict", text, ctype="application/json")
    assert_status_body(r, 400, "BadRequest")
    assert r.json()["message"].endswith(
        'strict decoding error: unknown field "x", duplicate field "spec.holderIdentity", duplicate field "x[0].a"'), r.body
    r = api.post(LEASES, text, ctype="application/json")
    assert r.status == 201, r
    assert r.json()["spec"]["holderIdentity"] == "b", "the last one wins, as Go's decoder"
    r = api.patch(f"{LEASES}/oa-dup", '{"spec":{"leaseDurationSeconds":2,"leaseDurationSeconds":3}}',
                  ctype="application/merge-patch+json")
    assert r.status == 200 and r.headers["warning"] == '299 - "duplicate field \\"spec.leaseDurationSeconds\\""'
    assert r.json()["spec"]["leaseDurationSeconds"] == 3


def test_duplicate_fields_of_updates(api):
    """A PUT's repeated keys are named whichever way its body was parsed (a float in it goes to
    json-c's tokener), and a body without any gets no warning."""
    obj = api.ok("POST", LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                  "metadata": {"name": "oa-dup-put", "namespace": "default"},
                                  "spec": {"holderIdentity": "a"}})
    rv = obj["metadata"]["resourceVersion"]
    head = ('{"apiVersion":"coordination.k8s.io/v1","kind":"Lease",'
            f'"metadata":{{"name":"oa-dup-put","namespace":"default","resourceVersion":"{rv}"}},')
    for extra, unknown in (("", ""), (',"x":1.5', 'unknown field "x", ')):
        text = head + '"spec":{"holderIdentity":"a","leaseDurationSeconds":1,"holderIdentity":"b"}' + extra + '}'
        r = api.put(f"{LEASES}/oa-dup-put?fieldValidation=Strict", text, ctype="application/json")
        assert_status_body(r, 400, "BadRequest")
        assert r.json()["message"].endswith(
            f'strict decoding error: {unknown}duplicate field "spec.holderIdentity"'), r.body
        r = api.put(f"{LEASES}/oa-dup-put", text, ctype="application/json")
        assert r.status == 200, r
        assert r.headers["warning"].startswith("299 - ") and 'duplicate field \\"spec.holderIdentity\\"' in r.headers["warning"]
        assert r.json()["spec"]["holderIdentity"] == "b"
        rv = r.json()["metadata"]["resourceVersion"]
        head = ('{"apiVersion":"coordination.k8s.io/v1","kind":"Lease",'
                f'"metadata":{{"name":"oa-dup-put","namespace":"default","resourceVersion":"{rv}"}},')
    # keys the same only once decoded, inside a field the kind does not have: that field is named
    text = head + '"spec":{"holderIdentity":"c","leaseDurationSeconds":2},"metadata2":{"a":1,"\\u0061":2}}'
    r = api.put(f"{LEASES}/oa-dup-put?fieldValidation=Strict", text, ctype="application/json")
    assert_status_body(r, 400, "BadRequest")
    assert r.json()["message"].endswith('strict decoding error: unknown field "metadata2"'), r.body
    text = head + '"spec":{"holderIdentity":"c","leaseDurationSeconds":2}}'
    r = api.put(f"{LEASES}/oa-dup-put?fieldValidation=Strict", text, ctype="application/json")
    assert r.status == 200 and "warning" not in r.headers, r
    assert r.json()["spec"]["holderIdentity"] == "c"
