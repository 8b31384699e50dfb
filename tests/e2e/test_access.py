"""Access reviews, impersonation, authentication failures and the audit log, with the machine's
kubectl and raw HTTPS against a `kite apiserver` started with --audit-log-path.

The node-rights table is what the Node authorizer answers `kubectl auth can-i` for node A."""
import datetime
import json
import os
import ssl
import stat
import subprocess
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from conftest import KITE, Api, Cluster, assert_status_body

AUDIT_MAXSIZE_MB = 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    wd = tmp_path_factory.mktemp("access")
    c = Cluster("apiserver", wd, extra_args=["--audit-log-path", str(wd / "audit" / "audit.log"),
                                             "--audit-log-maxsize", str(AUDIT_MAXSIZE_MB),
                                             "--audit-log-maxbackup", "2"]).start()
    c.audit_log = wd / "audit" / "audit.log"
    yield c
    c.stop()


@pytest.fixture(scope="module")
def node_kubeconfig(cluster):
    """`kite kubeconfig --node n1 -o FILE`: a node credential in a private file."""
    path = cluster.workdir / "n1.kubeconfig"
    p = subprocess.run([KITE, "kubeconfig", "--data-dir", str(cluster.data_dir), "--node", "n1", "-o", str(path)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "", "the key goes to the file, not to stdout"
    return path


def kubectl_with(cluster, kubeconfig, *args, check=True):
    env = cluster.kubectl_env()
    env["KUBECONFIG"] = str(kubeconfig)
    p = subprocess.run(["/usr/bin/kubectl", *args], env=env, capture_output=True, text=True, timeout=30,
                       cwd=str(cluster.workdir))
    if check:
        assert p.returncode == 0, (args, p.stdout, p.stderr)
    return p


# ---- access reviews through kubectl ----------------------------------------------------------

def test_can_i_as_admin(cluster):
    p = cluster.kubectl("auth", "can-i", "create", "pods")
    assert p.stdout.strip() == "yes"
    p = cluster.kubectl("auth", "can-i", "delete", "nodes", "--all-namespaces")
    assert p.stdout.strip() == "yes"


def test_can_i_list_as_admin(cluster):
    p = cluster.kubectl("auth", "can-i", "--list")
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]
    assert any(l.split()[:4] == ["*.*", "[]", "[]", "[*]"] for l in lines[1:]), p.stdout
    assert any("selfsubjectaccessreviews.authorization.k8s.io" in l for l in lines), p.stdout


def test_can_i_list_as_a_node(cluster):
    p = cluster.kubectl("auth", "can-i", "--list", "--as", "system:node:A", "--as-group", "system:nodes")
    assert "selfsubjectreviews.authentication.k8s.io" in p.stdout
    assert "[/version]" in p.stdout


# (verb, TYPE[/NAME], subresource or None, namespace or None, kubectl's answer)
NODE_A_RIGHTS = [
    ("update", "nodes", "status", None, "yes"),
    ("patch", "nodes/A", "status", None, "yes"),
    ("update", "nodes/B", "status", None, "no"),
    ("delete", "nodes/A", None, None, "no"),
    ("get", "nodes/A", None, None, "yes"),
    ("update", "leases/A", None, "kube-node-lease", "yes"),
    ("update", "leases/B", None, "kube-node-lease", "no"),
    ("create", "leases", None, "kube-system", "no"),
    ("impersonate", "users", None, None, "no"),
]


@pytest.mark.parametrize("verb,what,sub,ns,want", NODE_A_RIGHTS,
                         ids=[f"{r[0]}-{r[1]}{'-' + r[2] if r[2] else ''}" for r in NODE_A_RIGHTS])
def test_can_i_as_node_a(cluster, verb, what, sub, ns, want):
    args = ["auth", "can-i", verb, what, "--as", "system:node:A", "--as-group", "system:nodes"]
    if sub:
        args += ["--subresource", sub]
    if ns:
        args += ["-n", ns]
    p = cluster.kubectl(*args, check=False)
    # kubectl prints "no - REASON" when the authorizer gave one (the Node authorizer does)
    assert p.stdout.split(" - ")[0].strip() == want, (args, p.stdout, p.stderr)
    assert p.returncode == (0 if want == "yes" else 1)


def test_whoami_admin(cluster):
    p = cluster.kubectl("auth", "whoami")
    rows = {l.split(None, 1)[0]: l.split(None, 1)[1].strip() for l in p.stdout.splitlines()[1:]}
    assert rows["Username"] == "kite-admin"
    assert rows["Groups"] == "[system:masters system:authenticated]"
    p = cluster.kubectl("auth", "whoami", "-o", "json")
    o = json.loads(p.stdout)
    assert o["kind"] == "SelfSubjectReview" and o["apiVersion"] == "authentication.k8s.io/v1"
    assert o["status"]["userInfo"]["username"] == "kite-admin"
    import yaml
    y = yaml.safe_load(cluster.kubectl("auth", "whoami", "-o", "yaml").stdout)
    assert y["status"]["userInfo"]["groups"] == ["system:masters", "system:authenticated"]


def test_whoami_node_cert(cluster, node_kubeconfig):
    mode = stat.S_IMODE(os.stat(node_kubeconfig).st_mode)
    assert mode == 0o600, oct(mode)
    p = kubectl_with(cluster, node_kubeconfig, "auth", "whoami", "-o", "json")
    info = json.loads(p.stdout)["status"]["userInfo"]
    assert info["username"] == "system:node:n1"
    assert info["groups"] == ["system:nodes", "system:authenticated"]


def test_whoami_impersonated(cluster):
    p = cluster.kubectl("auth", "whoami", "-o", "json", "--as", "jane", "--as-group", "dev", "--as-uid", "42")
    info = json.loads(p.stdout)["status"]["userInfo"]
    assert info == {"username": "jane", "uid": "42", "groups": ["dev", "system:authenticated"]}


# ---- impersonation --------------------------------------------------------------------------

def test_node_cannot_impersonate(cluster, node_kubeconfig):
    p = kubectl_with(cluster, node_kubeconfig, "get", "pods", "--as", "bob", check=False)
    assert p.returncode != 0
    assert ('Error from server (Forbidden): users "bob" is forbidden: User "system:node:n1" cannot impersonate '
            'resource "users" in API group "" at the cluster scope') in p.stderr, p.stderr
    p = kubectl_with(cluster, node_kubeconfig, "get", "pods", "--as", "system:node:n1", "--as-group", "system:masters",
                     check=False)
    assert p.returncode != 0 and "cannot impersonate" in p.stderr, p.stderr


def test_impersonation_raw(cluster):
    api = cluster.api()
    st = assert_status_body(api.get("/api/v1/pods", headers={"Impersonate-Group": "system:masters"}), 400, "BadRequest")
    assert "without impersonating a user" in st["message"]
    r = api.get("/api/v1/pods", headers={"Impersonate-User": "jane"})
    st = assert_status_body(r, 403, "Forbidden")
    assert st["message"] == 'pods is forbidden: User "jane" cannot list resource "pods" in API group "" at the cluster scope'
    api.close()


# ---- authentication failures ----------------------------------------------------------------

def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _cert(subject_attrs, key, issuer_name, issuer_key, not_before, not_after):
    b = (x509.CertificateBuilder().subject_name(x509.Name(subject_attrs)).issuer_name(issuer_name)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(not_before).not_valid_after(not_after)
         .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
    return b.sign(issuer_key, hashes.SHA256())


def _client(cluster, tmp_path, name, cert, key):
    (tmp_path / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / f"{name}.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                             serialization.PrivateFormat.PKCS8,
                                                             serialization.NoEncryption()))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(str(tmp_path / f"{name}.crt"), str(tmp_path / f"{name}.key"))
    return Api("127.0.0.1", cluster.port, ctx)


def test_unauthenticated_401(cluster, tmp_path):
    pki = cluster.data_dir / "pki"
    ca_cert = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), None)
    now = datetime.datetime.now(datetime.timezone.utc)
    day = datetime.timedelta(days=1)
    masters = x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters")
    other_ca_key = _key()
    other_ca = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "not-the-cluster-ca")])
    cases = {
        "good": ([x509.NameAttribute(NameOID.COMMON_NAME, "eve"), masters], ca_cert.subject, ca_key, now - day, now + day),
        "wrong-ca": ([x509.NameAttribute(NameOID.COMMON_NAME, "eve"), masters], other_ca, other_ca_key, now - day,
                     now + day),
        "expired": ([x509.NameAttribute(NameOID.COMMON_NAME, "eve"), masters], ca_cert.subject, ca_key, now - 3 * day,
                    now - day),
        "not-yet-valid": ([x509.NameAttribute(NameOID.COMMON_NAME, "eve"), masters], ca_cert.subject, ca_key,
                          now + day, now + 3 * day),
        # no user name can be derived: kube-apiserver's x509 authenticator refuses it
        "no-cn": ([masters], ca_cert.subject, ca_key, now - day, now + day),
    }
    for name, (subject, issuer, issuer_key, nb, na) in cases.items():
        k = _key()
        api = _client(cluster, tmp_path, name, _cert(subject, k, issuer, issuer_key, nb, na), k)
        r = api.get("/api/v1/namespaces")
        if name == "good":
            assert r.status == 200, r
        else:
            assert_status_body(r, 401, "Unauthorized")
            # a credential that fails is refused everywhere, not taken for anonymous
            assert_status_body(api.get("/version"), 401, "Unauthorized")
        api.close()
    anon = cluster.api(with_client_cert=False)
    assert_status_body(anon.get("/api/v1/namespaces"), 401, "Unauthorized")
    assert anon.get("/version").status == 200
    assert anon.get("/healthz").status == 200
    assert_status_body(anon.get("/apis"), 401, "Unauthorized")
    anon.close()
    bad = cluster.api(token="no-such-token", with_client_cert=False)
    assert_status_body(bad.get("/api/v1/namespaces"), 401, "Unauthorized")
    bad.close()


def test_kubeconfig_o_replaces_a_loose_file(cluster, tmp_path):
    path = tmp_path / "n2.kubeconfig"
    path.write_text("old")
    os.chmod(path, 0o644)
    old = os.umask(0o022)
    try:
        p = subprocess.run([KITE, "kubeconfig", "--data-dir", str(cluster.data_dir), "--node", "n2", "-o", str(path)],
                           capture_output=True, text=True, timeout=30)
    finally:
        os.umask(old)
    assert p.returncode == 0, p.stderr
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert "client-key-data" in path.read_text()
    assert [f.name for f in tmp_path.iterdir()] == ["n2.kubeconfig"], "no temporary left behind"
    # stdout as before
    p = subprocess.run([KITE, "kubeconfig", "--data-dir", str(cluster.data_dir), "--node", "n2"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0 and "client-key-data" in p.stdout


# ---- the audit log --------------------------------------------------------------------------

def audit_events(cluster):
    """Every event in the current audit log and its backups, parsed (the writer is asynchronous:
    waits until the log stops growing)."""
    deadline = time.monotonic() + 10
    last = -1
    while time.monotonic() < deadline:
        size = sum(f.stat().st_size for f in cluster.audit_log.parent.iterdir())
        if size == last:
            break
        last = size
        time.sleep(0.2)
    events = []
    for f in sorted(cluster.audit_log.parent.iterdir()):
        for line in f.read_text().splitlines():
            events.append(json.loads(line))
    return events


def test_audit_create_get_watch(cluster):
    api = cluster.api()
    r = api.post("/api/v1/namespaces", {"metadata": {"name": "audited"}})
    assert r.status == 201, r
    create_id = r.headers["audit-id"]
    r = api.get("/api/v1/namespaces/audited")
    assert r.status == 200
    get_id = r.headers["audit-id"]
    r = api.get("/api/v1/namespaces?watch=1&timeoutSeconds=1&fieldSelector=metadata.name%3Daudited")
    assert r.status == 200
    watch_id = r.headers["audit-id"]
    api.close()
    kubectl_ns = cluster.kubectl("get", "namespace", "audited", "-o", "name").stdout.strip()
    assert kubectl_ns == "namespace/audited"

    deadline = time.monotonic() + 10
    while True:
        events = audit_events(cluster)
        by_id = {}
        for e in events:
            by_id.setdefault(e["auditID"], []).append(e)
        if len(by_id.get(watch_id, [])) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for e in events:
        assert e["kind"] == "Event" and e["apiVersion"] == "audit.k8s.io/v1" and e["level"] == "Metadata"
        assert e["stage"] in ("ResponseStarted", "ResponseComplete")
        for k in ("auditID", "requestURI", "verb", "user", "sourceIPs", "requestReceivedTimestamp", "stageTimestamp"):
            assert k in e, (k, e)
        datetime.datetime.strptime(e["stageTimestamp"], "%Y-%m-%dT%H:%M:%S.%fZ")
    (create,) = by_id[create_id]
    assert create["stage"] == "ResponseComplete" and create["verb"] == "create"
    assert create["requestURI"] == "/api/v1/namespaces"
    # the name from the object, as kube-apiserver fills it in (audit.LogRequestObject) at every level
    assert create["objectRef"] == {"resource": "namespaces", "name": "audited", "apiVersion": "v1"}
    assert create["responseStatus"]["code"] == 201
    assert create["user"] == {"username": "kite-admin", "groups": ["system:masters", "system:authenticated"]}
    assert create["sourceIPs"] == ["127.0.0.1"]
    (get,) = by_id[get_id]
    assert get["verb"] == "get" and get["objectRef"]["name"] == "audited" and get["responseStatus"]["code"] == 200
    started, complete = by_id[watch_id]
    assert started["verb"] == "watch" and started["stage"] == "ResponseStarted"
    assert complete["stage"] == "ResponseComplete" and complete["responseStatus"]["code"] == 200
    assert started["requestURI"] == complete["requestURI"]
    assert complete["stageTimestamp"] >= started["stageTimestamp"]
    # kubectl's own request: its user agent
    kget = [e for e in events if e.get("objectRef", {}).get("name") == "audited" and
            e.get("userAgent", "").startswith("kubectl/")]
    assert kget, "kubectl's get is audited with its user agent"


def test_audit_impersonation_and_denials(cluster, node_kubeconfig):
    kubectl_with(cluster, node_kubeconfig, "get", "pods", "--as", "bob", check=False)
    cluster.kubectl("get", "pods", "--as", "jane", check=False)
    events = audit_events(cluster)
    denied = [e for e in events if e["user"].get("username") == "system:node:n1" and
              e["responseStatus"]["code"] == 403]
    assert denied, "the refused impersonation is audited"
    jane = [e for e in events if e.get("impersonatedUser", {}).get("username") == "jane"]
    assert jane and jane[-1]["user"]["username"] == "kite-admin"
    assert jane[-1]["responseStatus"]["code"] == 403


def test_audit_rotates_by_size(cluster):
    """--audit-log-maxsize 1 and --audit-log-maxbackup 2: the log rotates before it passes 1 MiB
    and two backups stay."""
    api = cluster.api()
    pad = "x" * 3000  # ~3.5 KB per event
    for i in range(1000):
        r = api.get(f"/api/v1/namespaces/default?pad={pad}&i={i}")
        assert r.status == 200
    api.close()
    audit_events(cluster)  # settled
    files = sorted(cluster.audit_log.parent.iterdir())
    backups = [f for f in files if f.name != "audit.log"]
    assert len(backups) == 2, [f.name for f in files]
    for f in files:
        assert f.stat().st_size <= AUDIT_MAXSIZE_MB * 1024 * 1024, (f.name, f.stat().st_size)
        assert stat.S_IMODE(f.stat().st_mode) == 0o600
        assert f.name == "audit.log" or (f.name.startswith("audit-") and f.name.endswith(".log")), f.name
        for line in f.read_text().splitlines():
            json.loads(line)
    m = cluster.api().get("/metrics").body.decode()
    assert 'apiserver_audit_error_total{plugin="log"} 0' in m
    assert "kite_audit_rotations_total 2" in m or "kite_audit_rotations_total 3" in m, \
        [l for l in m.splitlines() if "audit" in l]
