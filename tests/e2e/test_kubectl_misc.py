"""kubectl against `kite apiserver`: namespaces, leases, events, /metrics, /version, discovery."""
import json
import re
import subprocess
import time

import pytest

from conftest import AGE_RE, create_node, delete_node_if_exists, parse_table


def test_version_raw(apiserver):
    v = json.loads(apiserver.kubectl("get", "--raw", "/version").stdout)
    assert v["major"] == "1" and v["minor"] == "32", v
    assert re.match(r"^v1\.32\.\d+", v["gitVersion"]), v
    for k in ("gitCommit", "gitTreeState", "buildDate", "goVersion", "compiler", "platform"):
        assert k in v, (k, v)
    p = apiserver.kubectl("version", "-o", "json")
    sv = json.loads(p.stdout)["serverVersion"]
    assert sv["gitVersion"] == v["gitVersion"]


def test_get_namespaces(apiserver):
    out = apiserver.kubectl("get", "ns").stdout
    headers, rows = parse_table(out)
    assert headers == ["NAME", "STATUS", "AGE"], out
    by = {r["NAME"]: r for r in rows}
    for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
        assert ns in by, out
        assert by[ns]["STATUS"] == "Active", out
        assert AGE_RE.match(by[ns]["AGE"]), out
    obj = json.loads(apiserver.kubectl("get", "ns", "kube-system", "-o", "json").stdout)
    assert obj["status"]["phase"] == "Active"
    assert obj["metadata"]["labels"]["kubernetes.io/metadata.name"] == "kube-system"


def test_get_lease(apiserver, api):
    api.ok("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "e2e-lease-node", "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": "e2e-lease-node", "leaseDurationSeconds": 40,
                 "renewTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())}})
    try:
        out = apiserver.kubectl("-n", "kube-node-lease", "get", "lease", "e2e-lease-node").stdout
        headers, rows = parse_table(out)
        assert headers == ["NAME", "HOLDER", "AGE"], out
        assert rows[0]["NAME"] == "e2e-lease-node" and rows[0]["HOLDER"] == "e2e-lease-node", out
        assert AGE_RE.match(rows[0]["AGE"]), out
        y = apiserver.kubectl("-n", "kube-node-lease", "get", "lease", "e2e-lease-node", "-o", "yaml").stdout
        assert "apiVersion: coordination.k8s.io/v1" in y and "kind: Lease" in y, y
        assert re.search(r"^  renewTime: \"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z\"$", y, re.M), y
        assert re.search(r"^  leaseDurationSeconds: 40$", y, re.M), y
        p = apiserver.kubectl("-n", "kube-node-lease", "get", "lease", "nope", check=False)
        assert p.returncode == 1
        assert p.stderr.strip() == 'Error from server (NotFound): leases.coordination.k8s.io "nope" not found'
    finally:
        api.delete("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/e2e-lease-node")


def test_get_configmaps_secrets_serviceaccounts_columns(apiserver, api):
    """kubectl get cm / secret / sa print upstream's columns (DATA, TYPE, SECRETS), counted."""
    ns = "/api/v1/namespaces/default"
    api.ok("POST", f"{ns}/configmaps", {"metadata": {"name": "cols-cm"}, "data": {"a": "1", "b": "2"},
                                         "binaryData": {"c": "AA=="}})
    api.ok("POST", f"{ns}/secrets", {"metadata": {"name": "cols-s"}, "type": "Opaque", "stringData": {"k": "v"}})
    api.ok("POST", f"{ns}/serviceaccounts", {"metadata": {"name": "cols-sa"}, "secrets": [{"name": "cols-s"}]})
    try:
        cases = [("cm", "cols-cm", ["NAME", "DATA", "AGE"], {"DATA": "3"}),
                 ("secret", "cols-s", ["NAME", "TYPE", "DATA", "AGE"], {"TYPE": "Opaque", "DATA": "1"}),
                 ("sa", "cols-sa", ["NAME", "SECRETS", "AGE"], {"SECRETS": "1"})]
        for res, name, want_headers, want in cases:
            out = apiserver.kubectl("get", res, name).stdout
            headers, rows = parse_table(out)
            assert headers == want_headers, out
            assert rows[0]["NAME"] == name and AGE_RE.match(rows[0]["AGE"]), out
            for k, v in want.items():
                assert rows[0][k] == v, out
    finally:
        api.delete(f"{ns}/configmaps/cols-cm")
        api.delete(f"{ns}/secrets/cols-s")
        api.delete(f"{ns}/serviceaccounts/cols-sa")


@pytest.mark.parametrize("api_path", ["/api/v1/namespaces/default/events",
                                      "/apis/events.k8s.io/v1/namespaces/default/events"])
def test_get_events_all_namespaces(apiserver, api, api_path):
    create_node(api, "e2e-ev-node")
    try:
        uid = api.ok("GET", "/api/v1/nodes/e2e-ev-node")["metadata"]["uid"]
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        name = "e2e-ev-node.%d" % int(time.time() * 1000)
        if api_path.startswith("/api/v1"):
            body = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
                    "involvedObject": {"kind": "Node", "name": "e2e-ev-node", "uid": uid, "apiVersion": "v1"},
                    "reason": "E2EReason", "message": "hello from the e2e test", "type": "Warning",
                    "source": {"component": "e2e"}, "count": 1, "firstTimestamp": now, "lastTimestamp": now}
        else:
            body = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
                    "metadata": {"name": name, "namespace": "default"},
                    "eventTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime()),
                    "reportingController": "e2e.example.com/tester", "reportingInstance": "e2e-1",
                    "action": "Testing", "regarding": {"kind": "Node", "name": "e2e-ev-node", "uid": uid,
                                                       "apiVersion": "v1"},
                    "reason": "E2EReason", "note": "hello from the e2e test", "type": "Warning"}
        api.ok("POST", api_path, body)
        out = apiserver.kubectl("get", "events", "-A").stdout
        headers, rows = parse_table(out)
        assert headers == ["NAMESPACE", "LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], out
        mine = [r for r in rows if r["MESSAGE"] == "hello from the e2e test" and r["REASON"] == "E2EReason"]
        assert mine, out
        r = mine[-1]
        assert r["NAMESPACE"] == "default" and r["TYPE"] == "Warning" and r["OBJECT"] == "node/e2e-ev-node", out
        # both API groups see the same events
        v1 = api.ok("GET", "/api/v1/namespaces/default/events/" + name)
        assert v1["involvedObject"]["name"] == "e2e-ev-node" and v1["message"] == "hello from the e2e test"
        ev = api.ok("GET", "/apis/events.k8s.io/v1/namespaces/default/events/" + name)
        assert ev["regarding"]["name"] == "e2e-ev-node" and ev["note"] == "hello from the e2e test"
    finally:
        delete_node_if_exists(api, "e2e-ev-node")


def test_metrics_raw(apiserver, api):
    for _ in range(3):
        api.ok("GET", "/api/v1/nodes")
    out = apiserver.kubectl("get", "--raw", "/metrics").stdout
    # Prometheus text exposition format: HELP/TYPE lines, then samples
    assert re.search(r"^# HELP \S+ .+$", out, re.M), out[:2000]
    assert re.search(r"^# TYPE \S+ (counter|gauge|histogram|summary|untyped)$", out, re.M), out[:2000]
    # kube-apiserver's request counter, with its labels
    assert re.search(r"^# TYPE apiserver_request_total counter$", out, re.M), out[:3000]
    samples = re.findall(r"^apiserver_request_total\{([^}]*)\} (\d+(?:\.\d+)?(?:e\+\d+)?)$", out, re.M)
    assert samples, out[:3000]
    list_nodes = [float(v) for labels, v in samples
                  if 'verb="LIST"' in labels and 'resource="nodes"' in labels and 'code="200"' in labels]
    assert list_nodes and sum(list_nodes) >= 3, samples
    for line in out.splitlines():
        if line and not line.startswith("#"):
            assert re.match(r"^[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})? \S+$", line), f"bad sample line: {line!r}"
    # and Prometheus' own linter accepts it (a real peer: Debian's prometheus package)
    lint = subprocess.run(["promtool", "check", "metrics"], input=out, capture_output=True, text=True, timeout=30)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_health_endpoints(apiserver, api):
    for path in ("/healthz", "/livez", "/readyz"):
        r = api.get(path)
        assert r.status == 200 and r.body == b"ok", (path, r)
    p = apiserver.kubectl("get", "--raw", "/readyz?verbose")
    assert "readyz check passed" in p.stdout, p.stdout


def test_api_resources(apiserver):
    out = apiserver.kubectl("api-resources").stdout
    headers, rows = parse_table(out)
    assert headers == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"], out
    by = {(r["NAME"], r["APIVERSION"]): r for r in rows}
    assert by[("nodes", "v1")]["SHORTNAMES"] == "no" and by[("nodes", "v1")]["NAMESPACED"] == "false"
    assert by[("namespaces", "v1")]["SHORTNAMES"] == "ns"
    assert by[("events", "v1")]["NAMESPACED"] == "true"
    assert by[("leases", "coordination.k8s.io/v1")]["KIND"] == "Lease"
    assert by[("events", "events.k8s.io/v1")]["KIND"] == "Event"
