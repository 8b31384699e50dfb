"""ConfigMaps, Secrets and ServiceAccounts; Secrets encrypted at rest."""
import base64
import subprocess

from conftest import Cluster, assert_status_body

SECRETS = "/api/v1/namespaces/default/secrets"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def secret(name, **kw):
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, **kw}


def test_secret_values_are_not_readable_in_the_store(tmp_path):
    c = Cluster("apiserver", tmp_path).start()
    api = c.api()
    plain = "s3cr3t-value-that-must-not-leak"
    b64 = base64.b64encode(plain.encode()).decode()
    api.ok("POST", SECRETS, secret("s1", stringData={"password": plain}))
    api.ok("POST", SECRETS, secret("s2", data={"token": b64}))
    got = api.ok("GET", SECRETS + "/s1")
    assert got["data"] == {"password": b64} and "stringData" not in got and got["type"] == "Opaque", got
    raw = c.store_bytes()
    assert plain.encode() not in raw and b64.encode() not in raw
    assert b"/secrets/default/s1" in raw  # keys stay readable, values do not
    api.close()
    c.stop()
    c.restart()  # read back from the database, opened with the key in the data dir
    api = c.api()
    assert api.ok("GET", SECRETS + "/s2")["data"] == {"token": b64}
    api.close()
    c.stop()
    (c.data_dir / "pki" / "encryption.key").write_bytes(b"\x01" * 32)
    args = list(c.proc.args)  # the same store, on a port it cannot get to
    args[args.index("--listen") + 1] = "127.0.0.1:1"
    p = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert p.returncode == 1 and "do not open with this encryption key" in p.stderr, p


def test_secret_and_configmap_validation(apiserver, api):
    r = api.post(SECRETS, secret("bad64", data={"k": "not base64!"}))
    st = assert_status_body(r, 400, "BadRequest")
    assert "illegal base64 data at input byte" in st["message"], st
    r = api.post(SECRETS, secret("tls", type="kubernetes.io/tls", data={"tls.crt": "eA=="}))
    st = assert_status_body(r, 422, "Invalid")
    assert st["details"]["causes"][0]["field"] == "data[tls.key]", st
    r = api.post(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                              "data": {"bad key/": "x"}})
    assert_status_body(r, 422, "Invalid")
    api.ok("POST", CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "frozen"},
                                "immutable": True, "data": {"a": "1"}})
    r = api.patch(CONFIGMAPS + "/frozen", {"data": {"a": "2"}}, ctype="application/merge-patch+json")
    st = assert_status_body(r, 422, "Invalid")
    assert "field is immutable when `immutable` is set" in st["message"], st
    api.ok("POST", SECRETS, secret("typed", type="Opaque", data={}))
    r = api.patch(SECRETS + "/typed", {"type": "kubernetes.io/tls"}, ctype="application/merge-patch+json")
    assert_status_body(r, 422, "Invalid")


def test_kubectl_sees_the_new_kinds(apiserver):
    manifest = """
apiVersion: v1
kind: ServiceAccount
metadata: {name: builder}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: fast}
"""
    apiserver.kubectl("apply", "-f", "-", input=manifest)
    out = apiserver.kubectl("get", "sa,cm", "-o", "name").stdout.split()
    assert "serviceaccount/builder" in out and "configmap/settings" in out, out
    assert apiserver.kubectl("get", "cm", "settings", "-o", "jsonpath={.data.mode}").stdout == "fast"
