"""The same requests, the same answers on SQLite and on etcd: hostile and odd requests (missing
namespaces, bad bytes, bogus continue tokens and resourceVersions, odd names and selectors) sent
to two apiservers, one on each store, that hold the same objects; their answers compared (status,
reason, message and the objects' names and fields, resourceVersions and uids aside).

Skipped when etcd is not installed."""
import base64
import json
import re
import subprocess
from urllib.parse import quote

import pytest

from conftest import ETCD_BIN, ETCD_MISSING, LEASES, Cluster, _workdir, free_port

pytestmark = pytest.mark.skipif(not ETCD_BIN, reason=ETCD_MISSING)

CMS = "/api/v1/namespaces/default/configmaps"
VOLATILE = {"resourceVersion", "uid", "creationTimestamp", "time", "deletionTimestamp", "continue",
            "remainingItemCount", "selfLink", "managedFields", "generateName"}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """An apiserver on SQLite and one on etcd, each with the same ConfigMaps and Leases."""
    cs = {s: Cluster("apiserver", _workdir(tmp_path_factory, f"parity-{s}"), store=s).start() for s in ("sqlite", "etcd")}
    apis = {s: c.api() for s, c in cs.items()}
    for api in apis.values():
        for i in range(5):
            api.ok("POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": f"p{i}", "labels": {"i": str(i), "odd": str(i % 2)}},
                                 "data": {"k": "v" * i}})
        api.ok("POST", LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                "metadata": {"name": "l0"}, "spec": {"holderIdentity": "h"}})
    yield cs, apis
    for s in cs:
        apis[s].close()
        cs[s].stop()


def scrub(x):
    """x without what differs between two stores by design (revisions, uids, times, tokens)."""
    if isinstance(x, dict):
        return {k: scrub(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [scrub(v) for v in x]
    return x


def answer(api, method, path, body=None, ctype=None, raw=None):
    if raw is not None:
        r = api.request(method, path, body=raw, ctype=ctype or "application/json")
    elif body is not None:
        r = api.request(method, path, body=json.dumps(body).encode(), ctype=ctype or "application/json")
    else:
        r = api.request(method, path)
    try:
        doc = json.loads(r.body)
    except ValueError:
        doc = r.body.decode(errors="replace")
    if isinstance(doc, dict) and doc.get("kind") == "Status":
        # a message naming a revision or a uid names each store's own
        doc["message"] = re.sub(r"\d{2,}", "N", re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "UID", doc.get("message", "")))
    return r.status, scrub(doc)


def same(pair, method, path, **kw):
    _, apis = pair
    a = answer(apis["sqlite"], method, path, **kw)
    b = answer(apis["etcd"], method, path, **kw)
    assert a == b, f"{method} {path}:\n sqlite: {a}\n etcd:   {b}"
    return a


def continue_token(api, path):
    return api.ok("GET", path)["metadata"]["continue"]


def forged(token, **changes):
    pad = "=" * (-len(token) % 4)
    try:
        doc = json.loads(base64.urlsafe_b64decode(token + pad))
    except ValueError:
        doc = {}
    doc.update(changes)
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")


MISSING_NS = [
    ("GET", "/api/v1/namespaces/nope/configmaps"),
    ("GET", "/api/v1/namespaces/nope/configmaps/x"),
    ("DELETE", "/api/v1/namespaces/nope/configmaps/x"),
    ("DELETE", "/api/v1/namespaces/nope/configmaps"),
    ("PATCH", "/api/v1/namespaces/nope/configmaps/x"),
    ("GET", "/api/v1/namespaces/nope"),
]


@pytest.mark.parametrize("method,path", MISSING_NS)
def test_missing_namespace(pair, method, path):
    kw = {"body": {"metadata": {"labels": {"a": "b"}}}, "ctype": "application/merge-patch+json"} \
        if method == "PATCH" else {}
    same(pair, method, path, **kw)


def test_create_and_update_in_missing_namespace(pair):
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "nope"}}
    same(pair, "POST", "/api/v1/namespaces/nope/configmaps", body=cm)
    same(pair, "PUT", "/api/v1/namespaces/nope/configmaps/x", body=cm)


BAD_BYTES = [
    b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b\xff"}}',
    b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bb"},"data":{"k":"\xc3\x28"}}',
    b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bc"},"data":{"k":"a\\u0000b"}}',
    b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bd"},"data":{"k\\u0000":"v"}}',
    b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"be"},"data":{"k":"\\ud800"}}',
    b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bf","labels":{"a":"\xe2\x82"}}}',
    b'\xef\xbb\xbf{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bg"}}',
    b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bh"},"data":{"k":"v"}} trailing',
    b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bi","resourceVersion":"12\xff"}}',
    b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bj"},"binaryData":{"k":"not base64!"}}',
]


@pytest.mark.parametrize("i", range(len(BAD_BYTES)))
def test_bad_bytes_in_bodies(pair, i):
    same(pair, "POST", CMS, raw=BAD_BYTES[i])
    # and what either stored reads back alike
    same(pair, "GET", CMS)


def test_bad_bytes_in_paths_and_queries(pair):
    for path in (f"{CMS}/%ff", f"{CMS}/a%00b", f"{CMS}?labelSelector=%ff", f"{CMS}?fieldSelector=metadata.name%3D%ff",
                 f"{CMS}/..", f"{CMS}/a%2Fb", "/api/v1/namespaces/%ff/configmaps", f"{CMS}?limit=%ff"):
        same(pair, "GET", path)


def test_bogus_continue_tokens(pair):
    _, apis = pair
    for tok in ("garbage", "", "%ff", "e30", base64.b64encode(b"\xff\xfe").decode(), "x" * 5000,
                forged("eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ", rv=-1, start="p1"),
                forged("e30", v="meta.k8s.io/v1", rv=1, start="p1"),
                forged("e30", v="meta.k8s.io/v1", rv=10 ** 30, start="p1")):
        same(pair, "GET", f"{CMS}?limit=2&continue={quote(tok)}")
    # a real token with its revision or key changed
    for s in ("sqlite", "etcd"):
        tok = continue_token(apis[s], f"{CMS}?limit=2")
        assert tok
    toks = {s: continue_token(apis[s], f"{CMS}?limit=2") for s in ("sqlite", "etcd")}
    answers = {}
    for s, api in apis.items():
        answers[s] = [answer(api, "GET", f"{CMS}?limit=2&continue={quote(t)}") for t in (
            toks[s], forged(toks[s], start="../../secrets/"), forged(toks[s], start="p3\x00"),
            forged(toks[s], rv=0), forged(toks[s], rv="abc"), forged(toks[s], v="meta.k8s.io/v2"))]
        # a token from a list of one resource used on another
        answers[s].append(answer(api, "GET", f"{LEASES}?limit=2&continue={quote(toks[s])}"))
        # a token with another label selector than the first page's
        answers[s].append(answer(api, "GET", f"{CMS}?limit=2&labelSelector=odd%3D1&continue={quote(toks[s])}"))
    for i, (a, b) in enumerate(zip(answers["sqlite"], answers["etcd"])):
        assert a == b, f"probe {i}:\n sqlite: {a}\n etcd:   {b}"


@pytest.mark.parametrize("query", [
    "resourceVersion=abc", "resourceVersion=-1", "resourceVersion=0", "resourceVersion=1&resourceVersionMatch=Exact",
    "resourceVersion=99999999&resourceVersionMatch=NotOlderThan", "resourceVersionMatch=Exact",
    "resourceVersion=18446744073709551616", "limit=-1", "limit=0", "limit=abc", "limit=1&resourceVersion=0",
    "labelSelector=i%20in%20(1,3)", "labelSelector=odd!%3D1,i", "fieldSelector=metadata.name%3Dp2",
    "fieldSelector=metadata.namespace%3Ddefault", "fieldSelector=metadata.namespace%3Dother",
    "fieldSelector=spec.nope%3D1", "watch=1&resourceVersion=abc", "timeoutSeconds=abc",
])
def test_list_queries(pair, query):
    same(pair, "GET", f"{CMS}?{query}")


def test_writes_with_odd_preconditions(pair):
    for rv in ("abc", "-1", "99999999", "0", "1"):
        same(pair, "PUT", f"{CMS}/p1", body={"apiVersion": "v1", "kind": "ConfigMap",
                                                "metadata": {"name": "p1", "resourceVersion": rv}, "data": {"k": "v"}})
        same(pair, "DELETE", f"{CMS}/p1", body={"kind": "DeleteOptions", "apiVersion": "v1",
                                                   "preconditions": {"resourceVersion": rv}})
    same(pair, "DELETE", f"{CMS}/p1", body={"kind": "DeleteOptions", "apiVersion": "v1",
                                               "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})
    same(pair, "PATCH", f"{CMS}/p2", body={"metadata": {"resourceVersion": "5"}, "data": {"x": "y"}},
         ctype="application/merge-patch+json")


def test_names_at_the_edges(pair):
    for name in ("a" * 253, "a" * 254, "a.b-c", "-a", "A", "a..b"):
        same(pair, "POST", CMS, body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
        same(pair, "GET", f"{CMS}/{name}")
    # a name that is a prefix of others lists and gets only itself
    same(pair, "GET", f"{CMS}?fieldSelector=metadata.name%3Dp")
    same(pair, "GET", f"{CMS}/p")
    same(pair, "GET", "/api/v1/configmaps?labelSelector=i")


def test_reads_and_watches_at_an_old_revision(pair):
    """A list and a watch at the revision of a past write see the store as it was then: each store
    at its own revision, the same objects and events."""
    _, apis = pair
    answers = {}
    for s, api in apis.items():
        rv = api.ok("POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "old-0"}})[
            "metadata"]["resourceVersion"]
        api.ok("PUT", f"{CMS}/old-0", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "old-0"},
                                       "data": {"a": "1"}})
        api.ok("POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "old-1"}})
        api.ok("DELETE", f"{CMS}/old-0")
        got = [answer(api, "GET", f"{CMS}?resourceVersion={rv}&resourceVersionMatch=Exact"),
               answer(api, "GET", f"{CMS}?resourceVersion={rv}&resourceVersionMatch=Exact&limit=2"),
               answer(api, "GET", f"{CMS}/old-0?resourceVersion={rv}"),
               answer(api, "GET", f"{CMS}?resourceVersion={int(rv) + 1000}&resourceVersionMatch=Exact")]
        r = api.request("GET", f"{CMS}?watch=1&resourceVersion={rv}&timeoutSeconds=1&fieldSelector="
                               "metadata.name%3Dold-0")
        got.append((r.status, [scrub(json.loads(line)) for line in r.body.splitlines() if line.strip()]))
        answers[s] = got
    for i, (a, b) in enumerate(zip(answers["sqlite"], answers["etcd"])):
        assert a == b, f"probe {i}:\n sqlite: {a}\n etcd:   {b}"


@pytest.mark.parametrize("store", ["sqlite", "etcd"])
def test_values_sealed_under_another_key_are_refused(tmp_path, store):
    """Secrets sealed under another encryption key: the apiserver refuses to start on both stores
    (on etcd it started and served the API without them, as if they had been deleted)."""
    c = Cluster("apiserver", tmp_path, store=store).start()
    c.api().ok("POST", "/api/v1/namespaces/default/secrets",
               {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"}})
    c.stop()
    (c.data_dir / "pki" / "encryption.key").write_bytes(b"\x01" * 32)
    args = list(c.proc.args)
    args[args.index("--listen") + 1] = f"127.0.0.1:{free_port()}"
    p = subprocess.run(args, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert p.returncode == 1 and "do not open with this encryption key" in p.stderr, p
