"""Kubernetes' protobuf wire format (application/vnd.kubernetes.protobuf): kubectl's generator
commands send it, typed clients ask for it first; `protoc --decode_raw` reads what kite answers."""
import base64
import json
import shutil
import subprocess

import pytest

PB = "application/vnd.kubernetes.protobuf"


# ---- a minimal protobuf writer/reader, independent of kite's ----------------------------------

def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def fld(num, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    if isinstance(payload, int):
        return varint(num << 3) + varint(payload)
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def envelope(api_version, kind, raw):
    return b"k8s\0" + fld(1, fld(1, api_version) + fld(2, kind)) + fld(2, raw) + fld(3, b"") + fld(4, b"")


def read_fields(b):
    """[(number, value)] of one message: ints for varints, bytes for length-delimited."""
    out, i = [], 0
    while i < len(b):
        tag, i = _uvarint(b, i)
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            v, i = _uvarint(b, i)
        elif wt == 2:
            n, i = _uvarint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise AssertionError(f"wire type {wt}")
        out.append((num, v))
    return out


def _uvarint(b, i):
    x = shift = 0
    while True:
        c = b[i]
        i += 1
        x |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return x, i


def first(fields, num):
    return next(v for n, v in fields if n == num)


def unwrap(body):
    assert body[:4] == b"k8s\0", body[:40]
    f = read_fields(body[4:])
    tm = read_fields(first(f, 1))
    return first(tm, 1).decode(), first(tm, 2).decode(), first(f, 2)


def decode_raw(data):
    """protoc --decode_raw: a real protobuf peer's reading of data."""
    protoc = shutil.which("protoc")
    if not protoc:
        pytest.skip("protoc not installed (scripts/install-deps installs protobuf-compiler)")
    p = subprocess.run([protoc, "--decode_raw"], input=data, capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout.decode()


# ---- kubectl -------------------------------------------------------------------------------

def test_kubectl_generators_send_protobuf(apiserver):
    k = apiserver.kubectl
    assert "namespace/t1 created" in k("create", "namespace", "t1").stdout
    assert "configmap/c created" in k("-n", "t1", "create", "configmap", "c", "--from-literal=a=b").stdout
    assert "secret/s created" in k("-n", "t1", "create", "secret", "generic", "s", "--from-literal=a=b").stdout
    assert "serviceaccount/sa created" in k("-n", "t1", "create", "serviceaccount", "sa").stdout

    ns = json.loads(k("get", "ns", "t1", "-o", "json").stdout)
    assert ns["metadata"]["name"] == "t1" and ns["status"]["phase"] == "Active", ns
    assert ns["metadata"]["uid"] and ns["metadata"]["creationTimestamp"], ns
    assert "generateName" not in ns["metadata"] and "selfLink" not in ns["metadata"], ns
    cm = json.loads(k("-n", "t1", "get", "configmap", "c", "-o", "json").stdout)
    assert cm["data"] == {"a": "b"}, cm
    sec = json.loads(k("-n", "t1", "get", "secret", "s", "-o", "json").stdout)
    assert sec["data"] == {"a": base64.b64encode(b"b").decode()} and sec["type"] == "Opaque", sec
    sa = json.loads(k("-n", "t1", "get", "serviceaccount", "sa", "-o", "json").stdout)
    assert sa["metadata"]["name"] == "sa" and sa["metadata"]["namespace"] == "t1", sa


# ---- responses --------------------------------------------------------------------------------

def test_get_and_list_answer_protobuf(apiserver, api):
    api.ok("POST", "/api/v1/namespaces/default/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pb-get", "labels": {"x": "y"}},
        "data": {"k": "v"}, "binaryData": {"b": base64.b64encode(b"\x00\x01\xff").decode()}})
    r = api.get("/api/v1/namespaces/default/configmaps/pb-get", headers={"Accept": PB + ", application/json"})
    assert r.status == 200 and r.headers["content-type"] == PB, r
    av, kind, raw = unwrap(r.body)
    assert (av, kind) == ("v1", "ConfigMap")
    text = decode_raw(r.body[4:])
    assert '2: "ConfigMap"' in text and '1: "pb-get"' in text, text
    cm = read_fields(raw)
    meta = read_fields(first(cm, 1))
    assert first(meta, 1) == b"pb-get" and first(meta, 3) == b"default"
    assert read_fields(first(meta, 11)) == [(1, b"x"), (2, b"y")]           # labels: a map entry
    assert read_fields(first(meta, 8))[0][0] == 1                            # creationTimestamp {1 seconds}
    assert read_fields(first(cm, 2)) == [(1, b"k"), (2, b"v")]              # data
    assert read_fields(first(cm, 3)) == [(1, b"b"), (2, b"\x00\x01\xff")]   # binaryData: raw bytes

    r = api.get("/api/v1/namespaces/default/configmaps?labelSelector=x%3Dy",
                headers={"Accept": "application/json;q=0.9, " + PB})
    assert r.status == 200 and r.headers["content-type"] == PB, r
    av, kind, raw = unwrap(r.body)
    assert (av, kind) == ("v1", "ConfigMapList")
    lst = read_fields(raw)
    assert first(read_fields(first(lst, 1)), 2).isdigit()                   # ListMeta.resourceVersion
    items = [v for n, v in lst if n == 2]
    assert len(items) == 1 and first(read_fields(first(read_fields(items[0]), 1)), 1) == b"pb-get"
    decode_raw(r.body[4:])

    # JSON preferred by q, or only JSON accepted: JSON
    r = api.get("/api/v1/namespaces/default/configmaps/pb-get",
                headers={"Accept": "application/json;q=0.5, " + PB + ";q=0.4"})
    assert r.status == 200 and r.headers["content-type"] == "application/json" and r.json()["data"] == {"k": "v"}
    # a human-readable Table stays JSON
    r = api.get("/api/v1/namespaces/default/configmaps",
                headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io, " + PB})
    assert r.status == 200 and r.json()["kind"] == "Table", r


def test_errors_answer_protobuf_status(api):
    r = api.get("/api/v1/namespaces/default/configmaps/nope", headers={"Accept": PB + ", application/json"})
    assert r.status == 404 and r.headers["content-type"] == PB, r
    av, kind, raw = unwrap(r.body)
    assert (av, kind) == ("v1", "Status")
    st = read_fields(raw)
    assert first(st, 2) == b"Failure" and first(st, 4) == b"NotFound" and first(st, 6) == 404
    assert b'configmaps "nope" not found' == first(st, 3)
    details = read_fields(first(st, 5))
    assert first(details, 1) == b"nope" and first(details, 3) == b"configmaps"
    assert "404" in decode_raw(r.body[4:])


def test_not_acceptable(api):
    for acc in ("application/cbor", "application/vnd.kubernetes.protobuf;q=0, application/cbor",
                "application/json;q=0"):
        r = api.get("/api/v1/namespaces", headers={"Accept": acc})
        assert r.status == 406, (acc, r)
        st = r.json()
        assert st["reason"] == "NotAcceptable" and st["code"] == 406
        assert st["message"] == ("only the following media types are accepted: application/json, "
                                 "application/yaml, application/vnd.kubernetes.protobuf"), st
    # wildcards and no Accept at all: JSON
    for h in ({"Accept": "*/*"}, {"Accept": "application/*"}, {"Accept": ""}):
        r = api.get("/api/v1/namespaces/default", headers=h)
        assert r.status == 200 and r.json()["kind"] == "Namespace", (h, r)


# ---- request bodies ---------------------------------------------------------------------------

def test_protobuf_create_update_delete(api):
    meta = fld(1, "pb-body") + fld(2, "") + fld(3, "") + fld(8, b"")
    body = envelope("v1", "ConfigMap", fld(1, meta) + fld(2, fld(1, "a") + fld(2, "1")) + fld(4, 0))
    r = api.post("/api/v1/namespaces/default/configmaps", body, ctype=PB,
                 headers={"Accept": PB + ", application/json"})
    assert r.status == 201 and r.headers["content-type"] == PB, r
    created = read_fields(unwrap(r.body)[2])
    uid = first(read_fields(first(created, 1)), 5).decode()
    got = api.ok("GET", "/api/v1/namespaces/default/configmaps/pb-body")
    assert got["data"] == {"a": "1"} and got["immutable"] is False, got
    assert "generateName" not in got["metadata"], got

    # update: the resourceVersion travels in ObjectMeta (6)
    rv = got["metadata"]["resourceVersion"]
    body = envelope("v1", "ConfigMap", fld(1, fld(1, "pb-body") + fld(6, rv)) + fld(2, fld(1, "a") + fld(2, "2")))
    r = api.put("/api/v1/namespaces/default/configmaps/pb-body", body, ctype=PB)
    assert r.status == 200, r
    assert api.ok("GET", "/api/v1/namespaces/default/configmaps/pb-body")["data"] == {"a": "2"}

    # DeleteOptions: preconditions {1 uid} that do not match -> 409, then kubectl drain's empty one
    opts = envelope("v1", "DeleteOptions", fld(1, 0) + fld(2, fld(1, "not-" + uid)))
    r = api.delete("/api/v1/namespaces/default/configmaps/pb-body", body=opts, ctype=PB)
    assert r.status == 409 and "Precondition failed" in r.json()["message"], r
    drain = bytes.fromhex("6b3873000a130a027631120d44656c6574654f7074696f6e7312001a002200")
    r = api.delete("/api/v1/namespaces/default/configmaps/pb-body", body=drain, ctype=PB)
    assert r.status == 200, r
    assert api.get("/api/v1/namespaces/default/configmaps/pb-body").status == 404


def test_malformed_protobuf_refused(api):
    cases = [
        (b'{"kind":"ConfigMap"}', 400, "k8s"),                                        # no magic
        (envelope("v1", "ConfigMap", fld(1, fld(1, "x"))[:-1]), 400, "unexpected EOF"),  # truncated
        (envelope("v1", "ConfigMap", b"\x20" + b"\x80" * 10 + b"\x01"), 400, "integer overflow"),
        (envelope("v1", "ConfigMap", fld(4, "yes")), 400, "wrong wireType"),          # bool as bytes
        (b"k8s\0" + fld(2, b"") + fld(3, "gzip"), 415, "gzip"),                       # compressed
    ]
    for body, code, words in cases:
        r = api.post("/api/v1/namespaces/default/configmaps", body, ctype=PB)
        assert r.status == code and words in r.json()["message"], (body, r)
    # a field kite keeps untyped (a node's configSource) cannot be read from protobuf: 415, send JSON
    node = envelope("v1", "Node", fld(1, fld(1, "pb-node")) + fld(2, fld(6, b"")))
    r = api.post("/api/v1/nodes", node, ctype=PB)
    assert r.status == 415 and "configSource" in r.json()["message"], r
    # a pod's probes are typed: a livenessProbe (Container 10: {1 ProbeHandler {1 exec {1 command}}, 4
    # periodSeconds}) is read from protobuf
    probe = fld(1, fld(1, fld(1, "cat") + fld(1, "/tmp/ok"))) + fld(4, 7)
    pod = envelope("v1", "Pod", fld(1, fld(1, "p")) + fld(2, fld(2, fld(1, "c") + fld(2, "busybox") + fld(10, probe))))
    r = api.post("/api/v1/namespaces/default/pods", pod, ctype=PB)
    assert r.status == 201, r
    assert r.json()["spec"]["containers"][0]["livenessProbe"]["exec"] == {"command": ["cat", "/tmp/ok"]}, r.json()
    assert r.json()["spec"]["containers"][0]["livenessProbe"]["periodSeconds"] == 7
