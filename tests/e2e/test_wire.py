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


# ---- content negotiation -----------------------------------------------------------------------

YAML_T = "application/yaml"
POML = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
POM = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


def test_yaml_answers_and_bodies(api):
    body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: wire-yaml\n  labels: {wire: \"y\"}\ndata:\n  a: \"1\"\n  b: 'true'\n"
    r = api.post("/api/v1/namespaces/default/configmaps", body, ctype=YAML_T, headers={"Accept": YAML_T})
    assert r.status == 201 and r.headers["content-type"] == YAML_T, r
    created = yaml.safe_load(r.body)
    assert created["data"] == {"a": "1", "b": "true"} and created["kind"] == "ConfigMap", created
    # the same object as JSON gives
    as_json = api.ok("GET", "/api/v1/namespaces/default/configmaps/wire-yaml")
    r = api.get("/api/v1/namespaces/default/configmaps/wire-yaml", headers={"Accept": YAML_T})
    assert r.status == 200 and r.headers["content-type"] == YAML_T, r
    assert yaml.safe_load(r.body) == as_json
    assert r.body.startswith(b"apiVersion: v1\n"), r.body  # keys sorted, as kube-apiserver writes YAML
    # update with a YAML body
    upd = r.body.decode().replace("a: \"1\"", "a: \"2\"")
    r = api.put("/api/v1/namespaces/default/configmaps/wire-yaml", upd, ctype=YAML_T)
    assert r.status == 200 and r.json()["data"]["a"] == "2", r
    # lists and errors (Status) too
    r = api.get("/api/v1/namespaces/default/configmaps?labelSelector=wire%3Dy", headers={"Accept": YAML_T})
    lst = yaml.safe_load(r.body)
    assert lst["kind"] == "ConfigMapList" and [i["metadata"]["name"] for i in lst["items"]] == ["wire-yaml"], lst
    r = api.get("/api/v1/namespaces/default/configmaps/nope", headers={"Accept": YAML_T})
    assert r.status == 404 and r.headers["content-type"] == YAML_T, r
    st = yaml.safe_load(r.body)
    assert st["kind"] == "Status" and st["code"] == 404 and st["reason"] == "NotFound", st
    # a malformed YAML body
    r = api.post("/api/v1/namespaces/default/configmaps", "metadata: [unclosed", ctype=YAML_T)
    assert r.status == 400 and r.json()["reason"] == "BadRequest", r
    # watches have no YAML framing: 406, as kube-apiserver
    r = api.get("/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1", headers={"Accept": YAML_T})
    assert r.status == 406, r


def test_quality_values_and_not_acceptable(api):
    path = "/api/v1/namespaces/default"
    cases = [("application/yaml;q=0.5, application/json;q=0.9", "application/json"),
             ("application/json;q=0.1, application/yaml", YAML_T),
             ("application/yaml;q=0, */*;q=0.2", "application/json"),
             ("text/html, application/yaml;q=0.3", YAML_T),
             (f"{PB};q=0.4, application/yaml;q=0.6", YAML_T),
             ("*/*;q=0.8, application/yaml", YAML_T)]
    for acc, want in cases:
        r = api.get(path, headers={"Accept": acc})
        assert r.status == 200 and r.headers["content-type"] == want, (acc, r.headers)
    for acc in ("text/html", "application/yaml;q=0", "application/json;as=Unknown;g=meta.k8s.io;v=v1",
                "application/json;as=PartialObjectMetadata;g=apps;v=v1",
                f"{PB};as=Table;g=meta.k8s.io;v=v1"):
        r = api.get(path, headers={"Accept": acc})
        assert r.status == 406, (acc, r)
        st = r.json()
        assert st["message"] == ("only the following media types are accepted: application/json, "
                                 "application/yaml, application/vnd.kubernetes.protobuf"), (acc, st)
    # an unsupported body type names the same list
    r = api.post("/api/v1/namespaces/default/configmaps", "x", ctype="text/plain")
    assert r.status == 415 and r.json()["message"].endswith(
        "accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"), r


def test_partial_object_metadata(api):
    for i in range(2):
        api.ok("POST", "/api/v1/namespaces/default/configmaps",
               {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"wire-pom-{i}", "labels": {"wire-pom": "y"}}, "data": {"secret": "x"}})
    lst = api.ok("GET", "/api/v1/namespaces/default/configmaps?labelSelector=wire-pom%3Dy", headers={"Accept": POML})
    assert lst["kind"] == "PartialObjectMetadataList" and lst["apiVersion"] == "meta.k8s.io/v1", lst
    assert lst["metadata"]["resourceVersion"], lst
    assert [set(i) for i in lst["items"]] == [{"kind", "apiVersion", "metadata"}] * 2, lst
    assert all(i["kind"] == "PartialObjectMetadata" and i["apiVersion"] == "meta.k8s.io/v1" for i in lst["items"])
    full = api.ok("GET", "/api/v1/namespaces/default/configmaps/wire-pom-0")
    assert lst["items"][0]["metadata"] == full["metadata"], (lst, full)
    # what a metadata informer sends: protobuf first, then JSON; v1beta1 is echoed
    one = api.ok("GET", "/api/v1/namespaces/default/configmaps/wire-pom-0",
                 headers={"Accept": POM.replace("v=v1", "v=v1beta1") + ", application/json"})
    assert one == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1beta1", "metadata": full["metadata"]}
    # a list asked for as one object, an object as a list: 406 as upstream
    r = api.get("/api/v1/namespaces/default/configmaps", headers={"Accept": POM})
    assert r.status == 406 and "you requested PartialObjectMetadata, but the requested object is a list" in r.json()["message"], r
    r = api.get("/api/v1/namespaces/default/configmaps/wire-pom-0", headers={"Accept": POML})
    assert r.status == 406 and "is not a list" in r.json()["message"], r
    # with a fallback the list asks for as PartialObjectMetadataList and a paged list keeps its metadata
    page = api.ok("GET", "/api/v1/namespaces/default/configmaps?limit=1",
                  headers={"Accept": f"{PB};as=PartialObjectMetadataList;g=meta.k8s.io;v=v1;q=0.1, {POML}"})
    assert page["kind"] == "PartialObjectMetadataList" and page["metadata"]["continue"], page
    # protobuf: {1 ListMeta, 2 repeated PartialObjectMetadata {1 ObjectMeta}}
    r = api.get("/api/v1/namespaces/default/configmaps?labelSelector=wire-pom%3Dy",
                headers={"Accept": f"{PB};as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, {POML}"})
    assert r.status == 200 and r.headers["content-type"] == PB, r
    av, kind, raw = unwrap(r.body)
    assert (av, kind) == ("meta.k8s.io/v1", "PartialObjectMetadataList")
    items = [v for n, v in read_fields(raw) if n == 2]
    names = [first(read_fields(first(read_fields(i), 1)), 1) for i in items]
    assert names == [b"wire-pom-0", b"wire-pom-1"], names
    assert all([n for n, _ in read_fields(i)] == [1] for i in items)  # metadata only
    # a watch's events carry PartialObjectMetadata
    evs = watch_lines(api.get("/api/v1/namespaces/default/configmaps?watch=true&labelSelector=wire-pom%3Dy"
                              "&timeoutSeconds=1", headers={"Accept": POM + ", application/json"}))
    assert [(e["type"], e["object"]["kind"], sorted(e["object"])) for e in evs] == \
        [("ADDED", "PartialObjectMetadata", ["apiVersion", "kind", "metadata"])] * 2, evs


# ---- protobuf watch streams --------------------------------------------------------------------

def _uvarint(b, i):
    x = shift = 0
    while True:
        c = b[i]
        i += 1
        x |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return x, i


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


def first(fields, num):
    return next(v for n, v in fields if n == num)


def unwrap(body):
    """(apiVersion, kind, raw message) of a k8s\\0 envelope."""
    assert body[:4] == b"k8s\x00", body[:16]
    unk = read_fields(body[4:])
    tm = read_fields(first(unk, 1))
    return first(tm, 1).decode(), first(tm, 2).decode(), first(unk, 2)


def frames(body):
    """The length-prefixed frames of a protobuf watch stream."""
    out, i = [], 0
    while i < len(body):
        n = struct.unpack(">I", body[i:i + 4])[0]
        out.append(body[i + 4:i + 4 + n])
        i += 4 + n
    assert i == len(body), "trailing bytes"
    return out


def test_protobuf_watch_frames(api):
    for i in range(2):
        api.ok("POST", LEASES, lease(f"wire-pbw-{i}", {"wire-pbw": "y"}))
    r = api.get(f"{LEASES}?{WL}&labelSelector=wire-pbw%3Dy&timeoutSeconds=1",
                headers={"Accept": f"{PB};stream=watch, application/json"})
    assert r.status == 200 and r.headers["content-type"] == f"{PB};stream=watch", r
    evs = []
    for f in frames(r.body):
        ev = read_fields(f)                              # metav1.WatchEvent {1 type, 2 RawExtension}
        typ = first(ev, 1).decode()
        raw = first(read_fields(first(ev, 2)), 1)        # RawExtension {1 raw}: the enveloped object
        evs.append((typ, unwrap(raw)))
    assert [t for t, _ in evs] == ["ADDED", "ADDED", "BOOKMARK"], evs
    (av, kind, lease_raw) = evs[0][1]
    assert (av, kind) == ("coordination.k8s.io/v1", "Lease")
    meta = read_fields(first(read_fields(lease_raw), 1))
    assert first(meta, 1) == b"wire-pbw-0" and first(meta, 3) == b"default"
    assert first(read_fields(first(read_fields(lease_raw), 2)), 1) == b"wire-pbw-0"  # spec.holderIdentity
    # the bookmark's annotation: ObjectMeta.annotations (12) {1 key, 2 value}
    bm_meta = read_fields(first(read_fields(evs[2][1][2]), 1))
    assert read_fields(first(bm_meta, 12)) == [(1, b"k8s.io/initial-events-end"), (2, b"true")], bm_meta
    if shutil.which("protoc"):
        out = subprocess.run(["protoc", "--decode_raw"], input=frames(r.body)[0], capture_output=True, timeout=10)
        assert out.returncode == 0, out.stderr
        assert b'1: "ADDED"' in out.stdout, out.stdout
    # a plain protobuf Accept selects the framed stream as well; JSON stays the default
    r = api.get(f"{LEASES}?watch=true&labelSelector=wire-pbw%3Dy&timeoutSeconds=1", headers={"Accept": PB})
    assert r.headers["content-type"] == f"{PB};stream=watch" and len(frames(r.body)) == 2, r
    r = api.get(f"{LEASES}?watch=true&labelSelector=wire-pbw%3Dy&timeoutSeconds=1")
    assert r.headers["content-type"] == "application/json" and len(watch_lines(r)) == 2, r
