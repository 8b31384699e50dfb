"""kubectl against `kite apiserver`, on nodes the tests create themselves.

Expected outputs are what kubectl 1.32 prints against kube-apiserver (the server computes the
Table cells; upstream printers.go printNode: Status from the Ready condition only — "Ready",
"NotReady" for False/Unknown, "Unknown" when there is no Ready condition — plus
",SchedulingDisabled" when spec.unschedulable)."""
import json
import re
import threading
import time

import pytest

from conftest import AGE_RE, create_node, delete_node_if_exists, node_manifest, parse_table, wait_for

NODE_HEADERS = ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
WIDE_HEADERS = NODE_HEADERS + ["INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"]


@pytest.fixture
def node(api, request):
    """A fresh Ready node named after the test (deleted afterwards)."""
    name = "e2e-" + re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40]
    delete_node_if_exists(api, name)
    create_node(api, name, labels={"e2e": "yes"})
    yield name
    delete_node_if_exists(api, name)


def get_row(apiserver, name, *extra):
    out = apiserver.kubectl("get", "nodes", name, *extra).stdout
    headers, rows = parse_table(out)
    assert len(rows) == 1, out
    return headers, rows[0]


def test_get_nodes_table(apiserver, api):
    create_node(api, "e2e-node-1", labels={"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/infra": ""})
    create_node(api, "e2e-node-2", ready="False")
    create_node(api, "e2e-node-3", with_status=False)
    try:
        out = apiserver.kubectl("get", "nodes").stdout
        headers, rows = parse_table(out)
        assert headers == NODE_HEADERS, out
        by = {r["NAME"]: r for r in rows}
        assert {"e2e-node-1", "e2e-node-2", "e2e-node-3"} <= set(by), out
        assert by["e2e-node-1"]["STATUS"] == "Ready"
        assert by["e2e-node-1"]["ROLES"] == "infra,worker"  # sorted, comma-joined
        assert by["e2e-node-1"]["VERSION"] == "v1.32.4"
        assert by["e2e-node-2"]["STATUS"] == "NotReady"
        assert by["e2e-node-2"]["ROLES"] == "<none>"
        assert by["e2e-node-3"]["STATUS"] == "Unknown"  # no Ready condition at all
        assert by["e2e-node-3"]["VERSION"] == ""
        for r in rows:
            assert AGE_RE.match(r["AGE"]), r
        # kube-apiserver lists in key order
        names = [r["NAME"] for r in rows]
        assert names == sorted(names), out

        out = apiserver.kubectl("get", "nodes", "-o", "wide").stdout
        headers, rows = parse_table(out)
        assert headers == WIDE_HEADERS, out
        by = {r["NAME"]: r for r in rows}
        assert by["e2e-node-1"]["INTERNAL-IP"] == "10.9.0.7"
        assert by["e2e-node-1"]["EXTERNAL-IP"] == "<none>"
        assert by["e2e-node-1"]["OS-IMAGE"] == "E2E Linux 1.0"
        assert by["e2e-node-1"]["KERNEL-VERSION"] == "6.1.0-e2e-amd64"
        assert by["e2e-node-1"]["CONTAINER-RUNTIME"] == "fake://1.0.0"
        r3 = by["e2e-node-3"]
        assert (r3["INTERNAL-IP"], r3["EXTERNAL-IP"], r3["OS-IMAGE"], r3["KERNEL-VERSION"],
                r3["CONTAINER-RUNTIME"]) == ("<none>", "<none>", "<unknown>", "<unknown>", "<unknown>")

        # single object and the `no` short name from discovery
        out = apiserver.kubectl("get", "no", "e2e-node-2").stdout
        headers, rows = parse_table(out)
        assert [r["NAME"] for r in rows] == ["e2e-node-2"]
        # multi-type get uses the Name column's format=name -> "node/" prefix
        out = apiserver.kubectl("get", "nodes,namespaces").stdout
        assert re.search(r"^node/e2e-node-1\s", out, re.M), out
        assert re.search(r"^namespace/default\s", out, re.M), out
    finally:
        for n in ("e2e-node-1", "e2e-node-2", "e2e-node-3"):
            delete_node_if_exists(api, n)


def test_get_node_yaml_and_jsonpath(apiserver, node):
    out = apiserver.kubectl("get", "node", node, "-o", "yaml").stdout
    assert re.search(r"^apiVersion: v1$", out, re.M), out
    assert re.search(r"^kind: Node$", out, re.M), out
    assert f"  name: {node}\n" in out
    assert re.search(r"^  resourceVersion: \"\d+\"$", out, re.M), out
    assert re.search(r"^  uid: [0-9a-f-]{36}$", out, re.M), out
    assert re.search(r"^  creationTimestamp: \"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\"$", out, re.M), out
    assert "kernelVersion: 6.1.0-e2e-amd64" in out

    obj = json.loads(apiserver.kubectl("get", "node", node, "-o", "json").stdout)
    assert obj["kind"] == "Node" and obj["metadata"]["name"] == node
    assert obj["status"]["nodeInfo"]["osImage"] == "E2E Linux 1.0"

    p = apiserver.kubectl("get", "node", node, "-o", "jsonpath={.spec.unschedulable}")
    assert p.stdout == ""
    apiserver.kubectl("cordon", node)
    p = apiserver.kubectl("get", "node", node, "-o", "jsonpath={.spec.unschedulable}")
    assert p.stdout == "true"
    p = apiserver.kubectl("get", "node", node, "-o", "name")
    assert p.stdout.strip() == f"node/{node}"


def test_show_labels_and_selectors(apiserver, api):
    specs = {"e2e-sel-a": {"env": "prod", "tier": "web"},
             "e2e-sel-b": {"env": "staging", "tier": "db"},
             "e2e-sel-c": {"tier": "web"}}
    for n, labels in specs.items():
        create_node(api, n, labels=labels)
    try:
        out = apiserver.kubectl("get", "nodes", "e2e-sel-a", "--show-labels").stdout
        headers, rows = parse_table(out)
        assert headers == NODE_HEADERS + ["LABELS"], out
        # kubectl prints labels sorted by key, comma-joined
        assert rows[0]["LABELS"] == "env=prod,kubernetes.io/hostname=e2e-sel-a,tier=web", out

        out = apiserver.kubectl("get", "nodes", "-L", "env").stdout
        headers, rows = parse_table(out)
        assert headers == NODE_HEADERS + ["ENV"], out
        assert {r["NAME"]: r["ENV"] for r in rows if r["NAME"].startswith("e2e-sel-")} == \
            {"e2e-sel-a": "prod", "e2e-sel-b": "staging", "e2e-sel-c": ""}

        cases = [
            ("env=prod", {"e2e-sel-a"}),
            ("env==prod", {"e2e-sel-a"}),
            ("env!=prod", {"e2e-sel-b", "e2e-sel-c"}),
            ("env in (prod,staging)", {"e2e-sel-a", "e2e-sel-b"}),
            ("env notin (prod)", {"e2e-sel-b", "e2e-sel-c"}),
            ("env", {"e2e-sel-a", "e2e-sel-b"}),
            ("!env", {"e2e-sel-c"}),
            ("tier=web,env", {"e2e-sel-a"}),
            ("tier in (web),!env", {"e2e-sel-c"}),
        ]
        for sel, want in cases:
            out = apiserver.kubectl("get", "nodes", "-l", sel, "-o", "name").stdout
            got = {l.split("/", 1)[1] for l in out.split() if l.startswith("node/e2e-sel-")}
            others = [l for l in out.split() if not l.startswith("node/e2e-sel-")]
            assert got == want, f"-l {sel!r}: {out!r}"
            if "env" in sel and "!env" not in sel and "notin" not in sel and "!=" not in sel:
                assert others == [], f"-l {sel!r} matched unrelated nodes: {out!r}"
        p = apiserver.kubectl("get", "nodes", "-l", "env=nope")
        assert p.stdout == ""
        assert p.stderr.strip() == "No resources found", p.stderr
    finally:
        for n in specs:
            delete_node_if_exists(api, n)


def test_watch_nodes(apiserver, api, node):
    w = apiserver.kubectl_popen("get", "nodes", "-w")
    lines = []

    def reader():
        for line in w.stdout:
            lines.append(line.rstrip("\n"))

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        def row_for(status):
            for l in lines:
                f = l.split()
                if f and f[0] == node and len(f) >= 2 and f[1] == status:
                    return l
            return None

        wait_for(lambda: row_for("Ready"), 15, what=f"initial row for {node}")
        assert lines[0].split() == NODE_HEADERS, lines
        apiserver.kubectl("cordon", node)
        wait_for(lambda: row_for("Ready,SchedulingDisabled"), 10, what="watch row after cordon")
        create_node(api, "e2e-watch-new")
        wait_for(lambda: any(l.split()[:2] == ["e2e-watch-new", "Ready"] for l in lines), 10,
                 what="watch row for a new node")
        # one header only: later events are rows, not new tables
        assert sum(1 for l in lines if l.split()[:1] == ["NAME"]) == 1, lines
        assert w.poll() is None, "kubectl get -w exited early: " + w.stderr.read()
    finally:
        w.kill()
        w.wait(timeout=5)
        delete_node_if_exists(api, "e2e-watch-new")


def test_watch_single_node(apiserver, node):
    # `get node X -w` watches from resourceVersion=0 and drops the first event: the server must send
    # a synthetic ADDED first or the first real change is lost (kubectl-wire.md §4).
    w = apiserver.kubectl_popen("get", "node", node, "-w")
    lines = []
    t = threading.Thread(target=lambda: [lines.append(l.rstrip("\n")) for l in w.stdout], daemon=True)
    t.start()
    try:
        wait_for(lambda: any(l.split()[:2] == [node, "Ready"] for l in lines), 15, what="initial row")
        time.sleep(1)  # let the watch request reach the server
        apiserver.kubectl("cordon", node)
        wait_for(lambda: any(l.split()[:2] == [node, "Ready,SchedulingDisabled"] for l in lines), 10,
                 what="row after cordon")
    finally:
        w.kill()
        w.wait(timeout=5)


def test_describe_node(apiserver, api, node):
    uid = api.ok("GET", f"/api/v1/nodes/{node}")["metadata"]["uid"]
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    api.ok("POST", "/api/v1/namespaces/default/events", {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{node}.e2e1", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": node, "uid": uid, "apiVersion": "v1"},
        "reason": "E2EHappened", "message": "something happened to the node", "type": "Normal",
        "source": {"component": "e2e-test", "host": node}, "count": 1,
        "firstTimestamp": now, "lastTimestamp": now})
    out = apiserver.kubectl("describe", "node", node).stdout
    assert re.search(rf"^Name:\s+{node}$", out, re.M), out
    assert re.search(r"^Roles:\s+<none>$", out, re.M), out
    assert re.search(r"^Labels:\s+e2e=yes$", out, re.M), out
    assert re.search(rf"^\s+kubernetes.io/hostname={node}$", out, re.M), out
    assert re.search(r"^CreationTimestamp:\s+\S", out, re.M), out
    assert re.search(r"^Unschedulable:\s+false$", out, re.M), out
    # no lease for this node: describe tolerates the 404 and says so
    assert re.search(r"^Lease:\s+Failed to get lease: leases.coordination.k8s.io \"%s\" not found$" % node,
                     out, re.M), out
    for section in ("Conditions:", "Addresses:", "Capacity:", "Allocatable:", "System Info:", "Events:"):
        assert re.search(rf"^{section}", out, re.M), f"missing {section}\n{out}"
    assert re.search(r"^\s+Ready\s+True\s+.*KubeletReady\s+kubelet is posting ready status$", out, re.M), out
    assert re.search(r"^\s+MemoryPressure\s+False\s+.*KubeletHasSufficientMemory", out, re.M), out
    assert re.search(r"^\s+InternalIP:\s+10\.9\.0\.7$", out, re.M), out
    assert re.search(rf"^\s+Hostname:\s+{node}$", out, re.M), out
    assert re.search(r"^\s+cpu:\s+4$", out, re.M), out
    assert re.search(r"^\s+Kernel Version:\s+6\.1\.0-e2e-amd64$", out, re.M), out
    assert re.search(r"^\s+OS Image:\s+E2E Linux 1\.0$", out, re.M), out
    assert re.search(r"^\s+Machine ID:\s+e2e0machine0id$", out, re.M), out
    ev = out[out.index("\nEvents:"):]
    assert re.search(r"Normal\s+E2EHappened\s+\S+\s+e2e-test.*something happened to the node", ev), ev

    # with a lease, describe shows its holder
    api.ok("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": node, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": node, "leaseDurationSeconds": 40,
                 "renewTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())}})
    try:
        out = apiserver.kubectl("describe", "node", node).stdout
        assert re.search(rf"^Lease:\s*\n\s+HolderIdentity:\s+{node}$", out, re.M), out
        assert re.search(r"^\s+RenewTime:\s+\S", out, re.M), out
    finally:
        api.delete(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}")


def test_create_and_apply(apiserver, api, tmp_path):
    names = ["e2e-create-1", "e2e-apply-1", "e2e-apply-2"]
    for n in names:
        delete_node_if_exists(api, n)
    try:
        f = tmp_path / "n.json"
        f.write_text(json.dumps(node_manifest("e2e-create-1", with_status=False)))
        p = apiserver.kubectl("create", "-f", str(f))
        assert p.stdout.strip() == "node/e2e-create-1 created"
        p = apiserver.kubectl("create", "-f", str(f), check=False)
        assert p.returncode == 1
        assert 'Error from server (AlreadyExists): error when creating "%s": nodes "e2e-create-1" already exists' \
            % f in p.stderr, p.stderr

        y = tmp_path / "a.yaml"
        y.write_text("apiVersion: v1\nkind: Node\nmetadata:\n  name: e2e-apply-1\n  labels:\n    color: red\n")
        p = apiserver.kubectl("apply", "--validate=false", "-f", str(y))
        assert p.stdout.strip() == "node/e2e-apply-1 created"
        obj = api.ok("GET", "/api/v1/nodes/e2e-apply-1")
        assert obj["metadata"]["labels"] == {"color": "red"}
        last = json.loads(obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
        assert last["metadata"]["labels"] == {"color": "red"}
        p = apiserver.kubectl("apply", "--validate=false", "-f", str(y))
        assert p.stdout.strip() == "node/e2e-apply-1 unchanged"
        y.write_text("apiVersion: v1\nkind: Node\nmetadata:\n  name: e2e-apply-1\n  labels:\n    shape: round\n")
        p = apiserver.kubectl("apply", "--validate=false", "-f", str(y))
        assert p.stdout.strip() == "node/e2e-apply-1 configured"
        # the three-way merge removes the label the old configuration had set
        assert api.ok("GET", "/api/v1/nodes/e2e-apply-1")["metadata"]["labels"] == {"shape": "round"}
    finally:
        for n in names:
            delete_node_if_exists(api, n)


def test_apply_with_default_validation(apiserver, api, tmp_path):
    """Plain `kubectl apply` downloads /openapi/v3 (then /openapi/v2) for client-side validation.
    Whatever kite serves, kubectl must behave consistently: with an OpenAPI document the apply works;
    without one kubectl refuses (naming --validate=false) and nothing is created."""
    delete_node_if_exists(api, "e2e-apply-3")
    y = tmp_path / "b.yaml"
    y.write_text("apiVersion: v1\nkind: Node\nmetadata:\n  name: e2e-apply-3\n")
    served = api.get("/openapi/v3").status == 200 or api.get("/openapi/v2").status == 200
    p = apiserver.kubectl("apply", "-f", str(y), check=False)
    try:
        if served:
            assert p.returncode == 0, p.stderr
            assert p.stdout.strip() == "node/e2e-apply-3 created"
        else:
            assert p.returncode == 1, (p.stdout, p.stderr)
            assert "--validate=false" in p.stderr, p.stderr
            assert api.get("/api/v1/nodes/e2e-apply-3").status == 404
    finally:
        delete_node_if_exists(api, "e2e-apply-3")


def test_label_and_annotate(apiserver, api, node):
    assert apiserver.kubectl("label", "node", node, "color=blue").stdout.strip() == f"node/{node} labeled"
    p = apiserver.kubectl("label", "node", node, "color=green", check=False)
    assert p.returncode == 1
    assert "'color' already has a value (blue), and --overwrite is false" in p.stderr, p.stderr
    assert apiserver.kubectl("label", "node", node, "color=green", "--overwrite").stdout.strip() == \
        f"node/{node} labeled"
    assert api.ok("GET", f"/api/v1/nodes/{node}")["metadata"]["labels"]["color"] == "green"
    assert apiserver.kubectl("label", "node", node, "color-").stdout.strip() == f"node/{node} unlabeled"
    assert "color" not in api.ok("GET", f"/api/v1/nodes/{node}")["metadata"]["labels"]

    p = apiserver.kubectl("label", "node", node, "bad key=x", check=False)
    assert p.returncode != 0

    assert apiserver.kubectl("annotate", "node", node, "e2e/note=hello world").stdout.strip() == \
        f"node/{node} annotated"
    assert api.ok("GET", f"/api/v1/nodes/{node}")["metadata"]["annotations"]["e2e/note"] == "hello world"
    assert apiserver.kubectl("annotate", "node", node, "e2e/note-").stdout.strip() == f"node/{node} annotated"
    assert "e2e/note" not in (api.ok("GET", f"/api/v1/nodes/{node}")["metadata"].get("annotations") or {})


def test_cordon_uncordon(apiserver, api, node):
    assert apiserver.kubectl("cordon", node).stdout.strip() == f"node/{node} cordoned"
    _, row = get_row(apiserver, node)
    assert row["STATUS"] == "Ready,SchedulingDisabled"
    assert api.ok("GET", f"/api/v1/nodes/{node}")["spec"]["unschedulable"] is True
    assert apiserver.kubectl("cordon", node).stdout.strip() == f"node/{node} already cordoned"
    assert apiserver.kubectl("uncordon", node).stdout.strip() == f"node/{node} uncordoned"
    _, row = get_row(apiserver, node)
    assert row["STATUS"] == "Ready"
    # uncordon sends {"spec":{"unschedulable":null}}: null removes the field
    assert "unschedulable" not in api.ok("GET", f"/api/v1/nodes/{node}")["spec"]
    assert apiserver.kubectl("uncordon", node).stdout.strip() == f"node/{node} already uncordoned"


@pytest.mark.parametrize("ready,want", [
    ("False", "NotReady,SchedulingDisabled"),
    ("Unknown", "NotReady,SchedulingDisabled"),
    (None, "Unknown,SchedulingDisabled"),  # no Ready condition: upstream printNode prints Unknown
])
def test_cordon_status_column_not_ready(apiserver, api, ready, want):
    name = "e2e-cordon-" + (ready or "none").lower()
    delete_node_if_exists(api, name)
    create_node(api, name, ready=ready)
    try:
        apiserver.kubectl("cordon", name)
        _, row = get_row(apiserver, name)
        assert row["STATUS"] == want
    finally:
        delete_node_if_exists(api, name)


def test_patch_types(apiserver, api, node):
    p = apiserver.kubectl("patch", "node", node, "--type", "strategic", "-p", '{"metadata":{"labels":{"p1":"a"}}}')
    assert p.stdout.strip() == f"node/{node} patched"
    # the same patch again changes nothing: kube-apiserver does not bump resourceVersion on a no-op
    rv = api.ok("GET", f"/api/v1/nodes/{node}")["metadata"]["resourceVersion"]
    p = apiserver.kubectl("patch", "node", node, "--type", "strategic", "-p", '{"metadata":{"labels":{"p1":"a"}}}')
    assert p.stdout.strip() == f"node/{node} patched (no change)"
    assert api.ok("GET", f"/api/v1/nodes/{node}")["metadata"]["resourceVersion"] == rv

    p = apiserver.kubectl("patch", "node", node, "--type", "merge", "-p", '{"metadata":{"labels":{"p2":"b","p1":null}}}')
    assert p.stdout.strip() == f"node/{node} patched"
    labels = api.ok("GET", f"/api/v1/nodes/{node}")["metadata"]["labels"]
    assert labels.get("p2") == "b" and "p1" not in labels

    p = apiserver.kubectl("patch", "node", node, "--type", "json",
                          "-p", '[{"op":"add","path":"/metadata/labels/p3","value":"c"},'
                                '{"op":"replace","path":"/metadata/labels/p2","value":"bb"}]')
    assert p.stdout.strip() == f"node/{node} patched"
    labels = api.ok("GET", f"/api/v1/nodes/{node}")["metadata"]["labels"]
    assert labels.get("p3") == "c" and labels.get("p2") == "bb"

    # a failing json-patch test op is rejected and changes nothing
    p = apiserver.kubectl("patch", "node", node, "--type", "json",
                          "-p", '[{"op":"test","path":"/metadata/labels/p3","value":"zzz"},'
                                '{"op":"remove","path":"/metadata/labels/p3"}]', check=False)
    assert p.returncode != 0
    assert api.ok("GET", f"/api/v1/nodes/{node}")["metadata"]["labels"].get("p3") == "c"

    # status through the main resource is ignored (nodes' update strategy keeps the old status)
    p = apiserver.kubectl("patch", "node", node, "--type", "merge", "-p", '{"status":{"nodeInfo":{"osImage":"X"}}}')
    assert p.stdout.strip() == f"node/{node} patched (no change)"
    assert api.ok("GET", f"/api/v1/nodes/{node}")["status"]["nodeInfo"]["osImage"] == "E2E Linux 1.0"


def test_patch_status_subresource(apiserver, api, node):
    # strategic merge: conditions merge by "type", so only Ready changes
    p = apiserver.kubectl("patch", "node", node, "--subresource=status", "--type", "strategic", "-p",
                          json.dumps({"status": {"conditions": [{"type": "Ready", "status": "False",
                                                                 "reason": "KubeletNotReady",
                                                                 "message": "e2e says not ready"}]}}))
    assert p.stdout.strip() == f"node/{node} patched"
    _, row = get_row(apiserver, node)
    assert row["STATUS"] == "NotReady"
    conds = {c["type"]: c for c in api.ok("GET", f"/api/v1/nodes/{node}")["status"]["conditions"]}
    assert set(conds) == {"MemoryPressure", "DiskPressure", "PIDPressure", "Ready"}, conds
    assert conds["Ready"]["status"] == "False" and conds["Ready"]["message"] == "e2e says not ready"
    assert conds["MemoryPressure"]["reason"] == "KubeletHasSufficientMemory"

    # merge patch: lists are replaced whole
    p = apiserver.kubectl("patch", "node", node, "--subresource=status", "--type", "merge", "-p",
                          json.dumps({"status": {"conditions": [{"type": "Ready", "status": "True",
                                                                 "reason": "KubeletReady",
                                                                 "message": "kubelet is posting ready status"}]}}))
    assert p.stdout.strip() == f"node/{node} patched"
    _, row = get_row(apiserver, node)
    assert row["STATUS"] == "Ready"
    conds = api.ok("GET", f"/api/v1/nodes/{node}")["status"]["conditions"]
    assert [c["type"] for c in conds] == ["Ready"]

    # spec through /status is ignored
    p = apiserver.kubectl("patch", "node", node, "--subresource=status", "--type", "merge", "-p",
                          '{"spec":{"unschedulable":true}}')
    assert p.stdout.strip() == f"node/{node} patched (no change)"
    assert "unschedulable" not in api.ok("GET", f"/api/v1/nodes/{node}")["spec"]


def test_replace_and_conflict(apiserver, api, node, tmp_path):
    obj = json.loads(apiserver.kubectl("get", "node", node, "-o", "json").stdout)
    obj["metadata"]["labels"]["replaced"] = "yes"
    f = tmp_path / "r.json"
    f.write_text(json.dumps(obj))
    p = apiserver.kubectl("replace", "-f", str(f))
    assert p.stdout.strip() == f"node/{node} replaced"
    cur = api.ok("GET", f"/api/v1/nodes/{node}")
    assert cur["metadata"]["labels"]["replaced"] == "yes"
    assert int(cur["metadata"]["resourceVersion"]) > int(obj["metadata"]["resourceVersion"])

    # obj still carries the old resourceVersion -> 409 Conflict
    obj["metadata"]["labels"]["replaced"] = "again"
    f.write_text(json.dumps(obj))
    p = apiserver.kubectl("replace", "-f", str(f), check=False)
    assert p.returncode == 1
    want = (f'Error from server (Conflict): error when replacing "{f}": Operation cannot be fulfilled on nodes '
            f'"{node}": the object has been modified; please apply your changes to the latest version and try again')
    assert want in p.stderr, p.stderr
    assert api.ok("GET", f"/api/v1/nodes/{node}")["metadata"]["labels"]["replaced"] == "yes"


def test_delete_node(apiserver, api):
    create_node(api, "e2e-del-1")
    p = apiserver.kubectl("delete", "node", "e2e-del-1")
    assert p.stdout.strip() == 'node "e2e-del-1" deleted'
    p = apiserver.kubectl("get", "node", "e2e-del-1", check=False)
    assert p.returncode == 1
    assert p.stderr.strip() == 'Error from server (NotFound): nodes "e2e-del-1" not found'
    p = apiserver.kubectl("delete", "node", "e2e-del-1", check=False)
    assert p.returncode == 1
    assert p.stderr.strip() == 'Error from server (NotFound): nodes "e2e-del-1" not found'
