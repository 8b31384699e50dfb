"""Error handling over raw HTTPS (http.client/ssl with the admin client certificate).

Every error must be a meta/v1 Status with the HTTP code repeated in it, as kube-apiserver sends."""
import json
import socket
import ssl
import threading
import time

import pytest

from conftest import LEASES, Cluster, assert_status_body, create_node, delete_node_if_exists

# the same answers on both stores: every test of the module's apiserver runs on SQLite and on etcd
pytestmark = pytest.mark.both_stores


def lease(name, holder="h"):
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 40}}


@pytest.mark.parametrize("body", [b'{"kind":', b"not json at all", b'{"apiVersion":"v1","kind":"Node","metadata":[}'])
def test_malformed_json_400(api, body):
    r = api.post("/api/v1/nodes", body, ctype="application/json")
    assert_status_body(r, 400, "BadRequest")


def test_wrong_kind_in_body_400(api):
    r = api.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
    assert r.status == 400, r
    assert_status_body(r, 400, "BadRequest")


def test_name_mismatch_put_400(api):
    create_node(api, "e2e-err-put")
    try:
        body = api.ok("GET", "/api/v1/nodes/e2e-err-put")
        body["metadata"]["name"] = "other-name"
        r = api.put("/api/v1/nodes/e2e-err-put", body)
        st = assert_status_body(r, 400, "BadRequest")
        assert "does not match the name on the URL" in st["message"], st
    finally:
        delete_node_if_exists(api, "e2e-err-put")


@pytest.mark.parametrize("method,path,ctype", [
    ("POST", "/api/v1/nodes", "text/plain"),
    ("POST", "/api/v1/nodes", "application/x-www-form-urlencoded"),
    ("PATCH", "/api/v1/nodes/e2e-err-415", "application/json"),
    ("PATCH", "/api/v1/nodes/e2e-err-415", "text/plain"),
])
def test_unsupported_media_type_415(api, method, path, ctype):
    create_node(api, "e2e-err-415")
    try:
        r = api.request(method, path, body=b'{"metadata":{"labels":{"a":"b"}}}', ctype=ctype)
        assert_status_body(r, 415, "UnsupportedMediaType")
        assert "a" not in (api.ok("GET", "/api/v1/nodes/e2e-err-415")["metadata"].get("labels") or {})
    finally:
        delete_node_if_exists(api, "e2e-err-415")


def _read_response(t, deadline):
    """Reads one HTTP response (headers + Content-Length body, or until close) from TLS socket t."""
    buf = b""
    while time.monotonic() < deadline:
        t.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            b = t.recv(65536)
        except (socket.timeout, ssl.SSLError, ConnectionResetError):
            break
        if not b:
            break
        buf += b
        if b"\r\n\r\n" in buf:
            head, _, rest = buf.partition(b"\r\n\r\n")
            if head.split(b" ")[1:2] == [b"100"]:
                return head + b"\r\n\r\n"
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:") and len(rest) >= int(line.split(b":")[1]):
                    return buf
    return buf


def raw_exchange(ctx, port, data, read_timeout=10, body=None):
    """Sends data on a fresh TLS connection and returns what the server sent back (one response).

    With body: data are the request headers (with Expect: 100-continue, as curl and Go clients send
    for large bodies); the body follows only after "100 Continue" (or after 2 s of silence), so an
    early final answer (413) is read before the server closes the connection."""
    s = socket.create_connection(("127.0.0.1", port), timeout=read_timeout)
    t = ctx.wrap_socket(s)
    try:
        t.sendall(data)
        if body is not None:
            first = _read_response(t, time.monotonic() + 2)
            if first and first.split(b" ")[1:2] != [b"100"]:
                return first
            try:
                t.settimeout(read_timeout)
                t.sendall(body)
            except OSError:
                pass
        return _read_response(t, time.monotonic() + read_timeout)
    finally:
        t.close()


def parse_raw(resp):
    head, _, body = resp.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for l in lines[1:]:
        k, _, v = l.partition(b":")
        headers[k.strip().lower().decode()] = v.strip().decode()
    return status, headers, body


def test_body_too_large_413(apiserver, api):
    big = b'{"apiVersion":"v1","kind":"Node","metadata":{"name":"e2e-big","annotations":{"a":"' + \
          b"x" * (3 * 1024 * 1024 + 16) + b'"}}}'
    req = (b"POST /api/v1/nodes HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           b"Accept: application/json\r\nExpect: 100-continue\r\nContent-Length: " + str(len(big)).encode() +
           b"\r\n\r\n")
    resp = raw_exchange(apiserver.identity.ctx, apiserver.port, req, body=big)
    assert resp, "no response to an oversized body"
    status, headers, body = parse_raw(resp)
    assert status == 413, resp[:500]
    st = json.loads(body)
    assert st["kind"] == "Status" and st["code"] == 413 and st["reason"] == "RequestEntityTooLarge", st
    assert api.get("/api/v1/nodes/e2e-big").status == 404
    # just under the limit is accepted by the transport (and then rejected by validation: annotations
    # are limited to 256 KiB in total) -> 422, not 413
    mid = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "e2e-big", "annotations": {"a": "x" * (2 * 1024 * 1024)}}}
    r = api.post("/api/v1/nodes", mid)
    st = assert_status_body(r, 422, "Invalid")
    assert any(c.get("field") == "metadata.annotations" and "Too long" in c.get("message", "")
               for c in st["details"]["causes"]), st


def test_object_too_large_to_store_413(api):
    # A body under the 3 MiB request limit whose object is over the store's 1.5 MiB (etcd's
    # request limit): 413, not kube-apiserver's 500, and nothing is stored.
    def images(n, tag):
        return [{"names": [f"registry.example/{tag}/image-{i:05d}:" + "v" * 200], "sizeBytes": 1000 + i}
                for i in range(n)]
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "e2e-huge"},
            "status": {"images": images(8000, "a")}}  # ~1.9 MB
    delete_node_if_exists(api, "e2e-huge")
    st = assert_status_body(api.post("/api/v1/nodes", node), 413, "RequestEntityTooLarge")
    assert "too large to store" in st["message"] and "1572864" in st["message"], st
    assert api.get("/api/v1/nodes/e2e-huge").status == 404
    assert assert_status_body(api.post("/api/v1/nodes?dryRun=All", node), 413, "RequestEntityTooLarge")
    # An object that fits, then a status patch that would take it over the limit: refused, unchanged.
    node["status"]["images"] = images(4000, "a")  # ~0.95 MB
    r = api.post("/api/v1/nodes", node)
    assert r.status == 201, r.body[:300]
    rv = r.json()["metadata"]["resourceVersion"]
    patch = {"status": {"images": images(4000, "a") + images(3000, "b")}}
    assert_status_body(api.patch("/api/v1/nodes/e2e-huge/status", patch, ctype="application/merge-patch+json"),
                       413, "RequestEntityTooLarge")
    got = api.get("/api/v1/nodes/e2e-huge").json()
    assert got["metadata"]["resourceVersion"] == rv and len(got["status"]["images"]) == 4000
    # and the object is still writable
    r = api.patch("/api/v1/nodes/e2e-huge", {"metadata": {"labels": {"x": "y"}}}, ctype="application/merge-patch+json")
    assert r.status == 200, r.body[:300]
    assert api.delete("/api/v1/nodes/e2e-huge").status == 200


def test_chunked_body_too_large_413(apiserver):
    # the limit applies to chunked bodies too, where there is no Content-Length to check up front
    chunk = b"x" * (1024 * 1024)
    parts = [b'{"apiVersion":"v1","kind":"Node","metadata":{"name":"e2e-big2","annotations":{"a":"']
    parts += [chunk] * 4
    parts.append(b'"}}}')
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"
    req = (b"POST /api/v1/nodes HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           b"Expect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n")
    resp = raw_exchange(apiserver.identity.ctx, apiserver.port, req, body=body)
    assert resp, "no response to an oversized chunked body"
    status, _, body = parse_raw(resp)
    assert status == 413, resp[:500]


def causes(st):
    return st.get("details", {}).get("causes", [])


def test_invalid_node_names_422(api):
    r = api.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "Bad_Name"}})
    st = assert_status_body(r, 422, "Invalid")
    assert st["details"]["name"] == "Bad_Name" and st["details"]["kind"] == "Node", st
    assert st["message"].startswith('Node "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": '
                                    "a lowercase RFC 1123 subdomain must consist of"), st
    c = causes(st)
    assert c and c[0]["field"] == "metadata.name" and c[0]["reason"] == "FieldValueInvalid", st
    assert c[0]["message"].startswith('Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain'), st

    long_name = "a" * 254
    r = api.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": long_name}})
    st = assert_status_body(r, 422, "Invalid")
    assert any(x["field"] == "metadata.name" and "must be no more than 253 characters" in x["message"]
               for x in causes(st)), st

    r = api.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {}})
    st = assert_status_body(r, 422, "Invalid")
    assert any(x["field"] == "metadata.name" and x["reason"] == "FieldValueRequired" for x in causes(st)), st
    assert api.get("/api/v1/nodes/Bad_Name").status == 404


def test_invalid_lease_name_422(api):
    r = api.post(LEASES, lease("UPPER"))
    st = assert_status_body(r, 422, "Invalid")
    assert st["details"]["group"] == "coordination.k8s.io" and st["details"]["kind"] == "Lease", st
    assert st["message"].startswith('Lease.coordination.k8s.io "UPPER" is invalid: metadata.name'), st


@pytest.mark.parametrize("labels,frag", [
    ({"bad key": "v"}, "bad key"),
    ({"k": "v" * 64}, "must be no more than 63 characters"),
    ({"k": "-v"}, "-v"),
    ({"a" * 64: "v"}, "name part must be no more than 63 characters"),
])
def test_invalid_labels_422(api, labels, frag):
    r = api.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                   "metadata": {"name": "e2e-bad-labels", "labels": labels}})
    st = assert_status_body(r, 422, "Invalid")
    assert any(x["field"] == "metadata.labels" and x["reason"] == "FieldValueInvalid" and frag in x["message"]
               for x in causes(st)), st
    assert api.get("/api/v1/nodes/e2e-bad-labels").status == 404


def test_invalid_label_on_update_422(api):
    create_node(api, "e2e-err-upd")
    try:
        r = api.patch("/api/v1/nodes/e2e-err-upd", {"metadata": {"labels": {"ok": "bad value"}}})
        st = assert_status_body(r, 422, "Invalid")
        assert any(x["field"] == "metadata.labels" for x in causes(st)), st
    finally:
        delete_node_if_exists(api, "e2e-err-upd")


@pytest.mark.parametrize("query", ["labelSelector=a%20in%20(", "labelSelector=!!a", "labelSelector=a%3Db%3Dc",
                                   "fieldSelector=spec.nope%3Dx"])
def test_invalid_selector_400(api, query):
    r = api.get("/api/v1/nodes?" + query)
    assert_status_body(r, 400, "BadRequest")


@pytest.mark.parametrize("path", ["/api/v1/foos", "/api/v1/namespaces/default/foos/x",
                                  "/apis/nope.example.com/v1/things", "/apis/coordination.k8s.io/v9/leases",
                                  "/totally/unknown"])
def test_unknown_resource_404(api, path):
    r = api.get(path)
    st = assert_status_body(r, 404, "NotFound")
    assert st["message"] == "the server could not find the requested resource", st


def test_object_not_found_404(api):
    r = api.get("/api/v1/nodes/e2e-nope")
    st = assert_status_body(r, 404, "NotFound")
    assert st["message"] == 'nodes "e2e-nope" not found'
    # kube-apiserver omits the empty group (omitempty); an explicit "" means the same to clients
    assert {k: v for k, v in st["details"].items() if v != ""} == {"name": "e2e-nope", "kind": "nodes"}, st
    r = api.get(LEASES + "/nope")
    st = assert_status_body(r, 404, "NotFound")
    assert st["message"] == 'leases.coordination.k8s.io "nope" not found'
    assert st["details"] == {"name": "nope", "group": "coordination.k8s.io", "kind": "leases"}, st
    r = api.get("/api/v1/namespaces/no-such-ns/events/x")
    assert_status_body(r, 404, "NotFound")


def test_method_not_allowed_405(api):
    r = api.request("POST", "/api/v1/nodes/e2e-x", body={"apiVersion": "v1", "kind": "Node",
                                                         "metadata": {"name": "e2e-x"}})
    assert_status_body(r, 405, "MethodNotAllowed")


@pytest.mark.parametrize("query", ["resourceVersion=abc", "watch=true&resourceVersion=abc", "limit=abc"])
def test_bad_resource_version_400(api, query):
    r = api.get("/api/v1/nodes?" + query)
    assert_status_body(r, 400)


def test_watch_too_old_resource_version_410(fresh_apiserver):
    """After more changes than the watch cache keeps, a watch from the first revision is Expired."""
    api = fresh_apiserver.api()
    first = api.ok("POST", LEASES, lease("e2e-old"))
    first_rv = int(first["metadata"]["resourceVersion"])
    for k in range(8):
        api.ok("POST", LEASES, lease(f"e2e-old-{k}"))
    n = 4200 + 200  # the watch cache ring holds 4096 changes by default (KITE_WCACHE_RING_DEFAULT)
    errs = []

    def writer(k):
        a = fresh_apiserver.api()
        try:
            for i in range(k, n, 8):
                # one lease per thread: this test is about the watch window, not update races
                body = lease(f"e2e-old-{k}", holder=f"h{i}")
                r = a.put(LEASES + f"/e2e-old-{k}", body)
                if r.status != 200:
                    errs.append(r)
                    return
        finally:
            a.close()

    ths = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(timeout=240)
    assert not errs, errs[:3]
    r = api.get(f"{LEASES}?watch=true&resourceVersion={first_rv}&timeoutSeconds=2")
    if r.status == 200:
        # kube-apiserver's cacher answers 200 and sends one ERROR event carrying the Status
        ev = json.loads(r.body.split(b"\n")[0])
        assert ev["type"] == "ERROR", ev
        st = ev["object"]
        assert st["kind"] == "Status" and st["code"] == 410 and st["reason"] == "Expired", st
        assert "too old resource version" in st["message"], st
    else:
        st = assert_status_body(r, 410, "Expired")
        assert "too old resource version" in st["message"], st
    # the current state is still served
    assert api.ok("GET", LEASES)["items"][0]["spec"]["holderIdentity"].startswith("h")
    api.close()


def test_future_resource_version(api):
    """A list/get at a revision far in the future: kube-apiserver waits briefly, then answers 504
    "Too large resource version" (reason Timeout) rather than returning stale data."""
    r = api.get("/api/v1/nodes?resourceVersion=999999999&resourceVersionMatch=NotOlderThan")
    st = assert_status_body(r, 504, "Timeout")
    assert "Too large resource version" in st["message"], st


def test_no_credentials_401(apiserver):
    anon = apiserver.api(with_client_cert=False)
    r = anon.get("/api/v1/nodes")
    st = assert_status_body(r, 401, "Unauthorized")
    assert st["message"] == "Unauthorized"
    anon.close()
    bad = apiserver.api(token="not-a-valid-token", with_client_cert=False)
    r = bad.get("/api/v1/nodes")
    assert_status_body(r, 401, "Unauthorized")
    bad.close()


def test_token_auth_file(tmp_path):
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('e2e-admin-token,e2e-admin,1001,"system:masters"\n'
                      'e2e-user-token,e2e-user,1002,"some-group,other-group"\n')
    c = Cluster("apiserver", tmp_path, extra_args=["--token-auth-file", str(tokens)]).start()
    try:
        admin = c.api(token="e2e-admin-token", with_client_cert=False)
        assert admin.get("/api/v1/nodes").status == 200
        admin.close()
        wrong = c.api(token="e2e-admin-token-x", with_client_cert=False)
        assert_status_body(wrong.get("/api/v1/nodes"), 401, "Unauthorized")
        wrong.close()
        user = c.api(token="e2e-user-token", with_client_cert=False)
        r = user.get("/api/v1/nodes")
        # authenticated but not authorized: 403 with kube-apiserver's message
        st = assert_status_body(r, 403, "Forbidden")
        assert st["message"] == ('nodes is forbidden: User "e2e-user" cannot list resource "nodes" in API group "" '
                                 'at the cluster scope'), st
        user.close()
    finally:
        c.stop()


def test_keepalive_survives_errors(api):
    api.close()
    conn = api.connect()
    sock = None
    seq = [("GET", "/api/v1/nodes/e2e-none", None, None, 404),
           ("POST", "/api/v1/nodes", b'{"bad json', "application/json", 400),
           ("POST", "/api/v1/nodes", json.dumps({"apiVersion": "v1", "kind": "Node",
                                                  "metadata": {"name": "Bad"}}).encode(), "application/json", 422),
           ("PATCH", "/api/v1/nodes/x", b"{}", "text/plain", 415),
           ("GET", "/api/v1/foos", None, None, 404),
           ("GET", "/api/v1/nodes", None, None, 200)]
    for method, path, body, ctype, want in seq:
        h = {"Accept": "application/json"}
        if ctype:
            h["Content-Type"] = ctype
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        data = r.read()
        assert r.status == want, (method, path, r.status, data[:300])
        assert not r.will_close, f"server closed the keep-alive connection after {r.status} on {path}"
        if sock is None:
            sock = conn.sock
        assert conn.sock is sock, "connection was replaced"
        if want >= 400:
            st = json.loads(data)
            assert st["kind"] == "Status" and st["code"] == want
    api.close()


def test_garbage_on_tls_socket(apiserver, api):
    ctx = apiserver.identity.ctx
    # 1. garbage inside a TLS session: the server answers 400 or closes, and keeps serving
    for junk in (b"\x00\xff\xfe garbage\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"A" * 100000 + b"\r\n\r\n",
                 b"GET /api/v1/nodes HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n"):
        resp = raw_exchange(ctx, apiserver.port, junk, read_timeout=5)
        if resp:
            assert resp.startswith(b"HTTP/1.1 "), resp[:300]
            status = int(resp.split(b" ")[1])
            assert 400 <= status < 500 or status == 505, resp[:300]
    # 2. plain-text HTTP and random bytes on the TLS port, and a TLS handshake cut in half
    for junk in (b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n", bytes(range(256)) * 4, b"\x16\x03\x01\x02\x00\x01"):
        s = socket.create_connection(("127.0.0.1", apiserver.port), timeout=5)
        try:
            s.sendall(junk)
            s.settimeout(3)
            try:
                s.recv(4096)
            except (socket.timeout, ConnectionResetError):
                pass
        finally:
            s.close()
    # 3. a connection that opens and sends nothing must not block others
    idle = socket.create_connection(("127.0.0.1", apiserver.port), timeout=5)
    try:
        fresh = apiserver.api()
        r = fresh.get("/readyz")
        assert r.status == 200 and r.body == b"ok"
        assert fresh.get("/api/v1/nodes").status == 200
        fresh.close()
    finally:
        idle.close()
    assert apiserver.proc.alive()


def test_create_in_missing_namespace_404_many_times(apiserver, api):
    """Every refusal runs many times: a double free in an error path survives a single request
    (creating in a missing namespace freed the request's name twice and crashed the server
    after a few requests; under ASan on the first)."""
    for i in range(40):
        r = api.post("/apis/coordination.k8s.io/v1/namespaces/e2e-nosuchns/leases",
                     {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": f"x{i}"}})
        st = assert_status_body(r, 404, "NotFound")
        assert st["message"] == 'namespaces "e2e-nosuchns" not found', st
        # the Status is about the namespace, not the lease (kube-apiserver: kind "namespaces", no group)
        assert st["details"] == {"name": "e2e-nosuchns", "kind": "namespaces"}, st
    manifest = '{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"k"}}'
    for _ in range(3):
        p = apiserver.kubectl("-n", "e2e-nosuchns", "create", "-f", "-", "--validate=false", input=manifest,
                              check=False)
        assert p.returncode == 1, p
        assert 'namespaces "e2e-nosuchns" not found' in p.stderr, p.stderr
    assert apiserver.proc.alive()
    assert api.get("/readyz").status == 200
