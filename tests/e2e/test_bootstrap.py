"""Joining a node as clusters do: bootstrap tokens (`kite token create`), the CSR approver and
signer of `kite up`'s controllers, `kite agent --bootstrap-kubeconfig` obtaining and rotating its
own client certificate, and `kubectl certificate approve|deny`."""
import base64
import json
import os
import stat
import subprocess
import time

import pytest
import yaml

from conftest import AGENT_FAST_FLAGS, KITE, Cluster, KiteProcess, pod_network_flags, wait_for

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
KUBELET_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster("up", tmp_path_factory.mktemp("bootstrap"), extra_args=["--no-agent"]).start()
    yield c
    c.stop()


def kite(*args):
    p = subprocess.run([KITE, *args], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, f"kite {' '.join(args)} -> {p.returncode}: {p.stderr}"
    return p.stdout


def bootstrap_kubeconfig(cluster, token, path):
    ca = base64.b64encode((cluster.data_dir / "pki" / "ca.crt").read_bytes()).decode()
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{cluster.port}",
                                               "certificate-authority-data": ca}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x"}))
    return path


def make_csr(tmp_path, subject, name):
    """A PKCS#10 request (EC P-256) for subject, as openssl makes it: its PEM."""
    key, req = tmp_path / f"{name}.key", tmp_path / f"{name}.csr"
    subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-subj", subject, "-keyout", str(key), "-out", str(req)], check=True, capture_output=True,
                   timeout=30)
    return req.read_bytes()


def csr_body(name, pem, signer=KUBELET_SIGNER, usages=("digital signature", "client auth")):
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": name},
            "spec": {"request": base64.b64encode(pem).decode(), "signerName": signer, "usages": list(usages)}}


def conditions(csr):
    return {c["type"]: c for c in (csr.get("status") or {}).get("conditions") or []}


def cert_subject(pem):
    return subprocess.run(["openssl", "x509", "-noout", "-subject", "-nameopt", "RFC2253"], input=pem,
                          capture_output=True, timeout=10).stdout.decode()


def cert_serial(pem):
    return subprocess.run(["openssl", "x509", "-noout", "-serial"], input=pem, capture_output=True,
                          timeout=10).stdout.decode().strip()


def csrs_of(api, user):
    items = api.ok("GET", CSRS)["items"]
    return [c for c in items if c["spec"].get("username") == user]


# ---------------------------------------------------------------- tokens and authentication

def test_token_create_list_and_authenticate(cluster):
    tok = kite("token", "create", "--data-dir", str(cluster.data_dir), "--description", "e2e join").strip()
    tid, secret = tok.split(".")
    assert len(tid) == 6 and len(secret) == 16 and tok.islower(), tok
    api = cluster.api()
    s = api.ok("GET", f"/api/v1/namespaces/kube-system/secrets/bootstrap-token-{tid}")
    assert s["type"] == "bootstrap.kubernetes.io/token"
    data = {k: base64.b64decode(v).decode() for k, v in s["data"].items()}
    assert data["token-id"] == tid and data["token-secret"] == secret
    assert data["usage-bootstrap-authentication"] == "true" and data["usage-bootstrap-signing"] == "true"
    assert data["auth-extra-groups"] == "system:bootstrappers:kubeadm:default-node-token"
    assert data["description"] == "e2e join" and data["expiration"].endswith("Z")
    listed = kite("token", "list", "--data-dir", str(cluster.data_dir))
    assert tok in listed and "e2e join" in listed, listed

    who = cluster.api(token=tok, with_client_cert=False)
    r = who.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                 {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert r.status == 201, r
    info = r.json()["status"]["userInfo"]
    assert info["username"] == f"system:bootstrap:{tid}"
    assert info["groups"] == ["system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token",
                              "system:authenticated"], info
    # what kubeadm's bindings give a bootstrap token: CSRs, nothing else
    assert who.get(CSRS).status == 200
    assert who.get("/api/v1/nodes").status == 403
    assert who.get("/api/v1/namespaces/kube-system/secrets").status == 403
    who.close()


def test_wrong_expired_or_deleted_token_is_401(cluster):
    api = cluster.api()
    tok = kite("token", "create", "--data-dir", str(cluster.data_dir)).strip()
    tid = tok.split(".")[0]
    for bad in (tid + ".0000000000000000", "zzzzzz.0000000000000000", tok.upper()):
        c = cluster.api(token=bad, with_client_cert=False)
        r = c.get(CSRS)
        assert r.status == 401 and r.json()["reason"] == "Unauthorized", (bad, r)
        c.close()
    # a token whose expiration has passed
    api.ok("POST", "/api/v1/namespaces/kube-system/secrets", {
        "apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
        "metadata": {"name": "bootstrap-token-exp123"},
        "stringData": {"token-id": "exp123", "token-secret": "0123456789abcdef", "expiration": "2020-01-01T00:00:00Z",
                       "usage-bootstrap-authentication": "true"}})
    c = cluster.api(token="exp123.0123456789abcdef", with_client_cert=False)
    assert c.get(CSRS).status == 401
    c.close()
    # a deleted token no longer authenticates
    c = cluster.api(token=tok, with_client_cert=False)
    assert c.get(CSRS).status == 200
    api.ok("DELETE", f"/api/v1/namespaces/kube-system/secrets/bootstrap-token-{tid}")
    assert c.get(CSRS).status == 401
    c.close()


# ---------------------------------------------------------------- the approver

def test_node_cannot_get_another_nodes_certificate(cluster, tmp_path):
    api = cluster.api()
    kc = tmp_path / "a.kubeconfig"
    kite("kubeconfig", "--data-dir", str(cluster.data_dir), "--node", "csr-a", "-o", str(kc))
    from conftest import TLSIdentity, Api
    node = Api("127.0.0.1", cluster.port, TLSIdentity(kc, tmp_path).ctx)
    other = make_csr(tmp_path, "/O=system:nodes/CN=system:node:csr-b", "other")
    own = make_csr(tmp_path, "/O=system:nodes/CN=system:node:csr-a", "own")
    r = node.post(CSRS, csr_body("csr-for-b", other))
    assert r.status == 201, r
    assert r.json()["spec"]["username"] == "system:node:csr-a"
    r = node.post(CSRS, csr_body("csr-for-a", own))
    assert r.status == 201, r
    # renewing its own certificate is approved (selfnodeclient) and signed
    mine = wait_for(lambda: (lambda c: c if c.get("status", {}).get("certificate") else None)(
        api.ok("GET", f"{CSRS}/csr-for-a")), 10, what="own CSR issued")
    assert conditions(mine)["Approved"]["reason"] == "AutoApproved"
    assert "CN=system:node:csr-a" in cert_subject(base64.b64decode(mine["status"]["certificate"]))
    # another node's name is never approved: the approver looked at it (it came first) and left it
    theirs = api.ok("GET", f"{CSRS}/csr-for-b")
    assert not conditions(theirs) and not theirs.get("status", {}).get("certificate"), theirs
    time.sleep(2)
    theirs = api.ok("GET", f"{CSRS}/csr-for-b")
    assert "Approved" not in conditions(theirs), theirs
    out = cluster.kubectl("get", "csr", "csr-for-b").stdout
    assert "Pending" in out and "system:node:csr-a" in out, out
    node.close()


def test_kubectl_certificate_approve_and_deny(cluster, tmp_path):
    api = cluster.api()
    for name in ("alice-approve", "alice-deny"):
        pem = make_csr(tmp_path, "/O=dev/CN=alice", name)
        api.ok("POST", CSRS, csr_body(name, pem, signer="kubernetes.io/kube-apiserver-client",
                                      usages=("client auth",)))
    time.sleep(1)
    assert "Approved" not in conditions(api.ok("GET", f"{CSRS}/alice-approve"))  # no auto-approval for users
    out = cluster.kubectl("certificate", "approve", "alice-approve").stdout
    assert "approved" in out, out
    c = wait_for(lambda: (lambda c: c if c.get("status", {}).get("certificate") else None)(
        api.ok("GET", f"{CSRS}/alice-approve")), 10, what="approved CSR issued")
    assert conditions(c)["Approved"]["status"] == "True"
    assert conditions(c)["Approved"]["reason"] == "KubectlApprove"
    subj = cert_subject(base64.b64decode(c["status"]["certificate"]))
    assert "CN=alice" in subj and "O=dev" in subj, subj
    out = cluster.kubectl("certificate", "deny", "alice-deny").stdout
    assert "denied" in out, out
    c = api.ok("GET", f"{CSRS}/alice-deny")
    assert conditions(c)["Denied"]["reason"] == "KubectlDeny"
    time.sleep(1)
    assert not api.ok("GET", f"{CSRS}/alice-deny").get("status", {}).get("certificate")
    table = cluster.kubectl("get", "csr").stdout
    assert "Approved,Issued" in table and "Denied" in table, table


# ---------------------------------------------------------------- the agent

def test_agent_joins_with_a_bootstrap_token_and_rotates(cluster, tmp_path):
    api = cluster.api()
    name = "e2e-joiner"
    tok = kite("token", "create", "--data-dir", str(cluster.data_dir)).strip()
    boot = bootstrap_kubeconfig(cluster, tok, tmp_path / "bootstrap.kubeconfig")
    kc = tmp_path / "kubelet.kubeconfig"
    root = tmp_path / "root"
    agent = KiteProcess(["agent", "--bootstrap-kubeconfig", str(boot), "--kubeconfig", str(kc), "--node-name", name,
                         "--root-dir", str(root), "--port", "0", "--rotate-certificates-after", "6s",
                         *pod_network_flags(), *AGENT_FAST_FLAGS], tmp_path, "agent").start()
    try:
        def ready():
            r = api.get(f"/api/v1/nodes/{name}")
            if r.status != 200:
                return None
            conds = {c["type"]: c["status"] for c in r.json()["status"].get("conditions", [])}
            return r.json() if conds.get("Ready") == "True" else None
        wait_for(ready, 30, what=f"node {name} Ready\n" + agent.log_tail())
        # its own certificate, from a CSR the approver approved for the bootstrap identity
        first = csrs_of(api, f"system:bootstrap:{tok.split('.')[0]}")
        assert len(first) == 1, first
        assert first[0]["metadata"]["name"].startswith("node-csr-")
        assert first[0]["spec"]["signerName"] == KUBELET_SIGNER
        assert conditions(first[0])["Approved"]["reason"] == "AutoApproved"
        pem_path = root / "pki" / "kubelet-client-current.pem"
        for p in (kc, pem_path):
            assert stat.S_IMODE(os.stat(p).st_mode) == 0o600, p
        pem = pem_path.read_bytes()
        assert b"PRIVATE KEY" in pem
        assert "CN=system:node:" + name in cert_subject(pem)
        cfg = yaml.safe_load(kc.read_text())
        assert cfg["users"][0]["user"]["client-certificate"] == str(pem_path)
        assert "token" not in cfg["users"][0]["user"]
        # rotation: a CSR made with the node's own certificate, approved as selfnodeclient
        renewed = wait_for(lambda: [c for c in csrs_of(api, f"system:node:{name}")
                                    if c.get("status", {}).get("certificate")] or None,
                           30, what="a renewal CSR issued\n" + agent.log_tail())
        assert "self kubelet client" in conditions(renewed[0])["Approved"]["message"]
        wait_for(lambda: cert_serial(pem_path.read_bytes()) != cert_serial(pem), 10, what="certificate file replaced")
        # the agent goes on with the new certificate without a restart: its lease keeps being renewed
        lease = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
        t0 = api.ok("GET", lease)["spec"]["renewTime"]
        wait_for(lambda: api.ok("GET", lease)["spec"]["renewTime"] != t0, 10, what="lease renewed after rotation")
        assert agent.alive()
        assert "client certificate rotated" in agent.log_tail(100000)
    finally:
        agent.stop()
    # a restart with the kubeconfig it wrote needs no token: the token is deleted first
    tid = tok.split(".")[0]
    api.ok("DELETE", f"/api/v1/namespaces/kube-system/secrets/bootstrap-token-{tid}")
    n_before = len(csrs_of(api, f"system:bootstrap:{tid}"))
    agent2 = KiteProcess(["agent", "--bootstrap-kubeconfig", str(boot), "--kubeconfig", str(kc), "--node-name", name,
                          "--root-dir", str(root), "--port", "0", *pod_network_flags(), *AGENT_FAST_FLAGS],
                         tmp_path, "agent2").start()
    try:
        wait_for(lambda: "started" in agent2.log_tail(), 15, what="agent restarted")
        assert "bootstrapping" not in agent2.log_tail(100000)
        assert len(csrs_of(api, f"system:bootstrap:{tid}")) == n_before
    finally:
        agent2.stop()


def test_agent_with_a_wrong_token_exits(cluster, tmp_path):
    boot = bootstrap_kubeconfig(cluster, "abcdef.0123456789abcdef", tmp_path / "bad.kubeconfig")
    agent = KiteProcess(["agent", "--bootstrap-kubeconfig", str(boot), "--kubeconfig", str(tmp_path / "k"),
                         "--node-name", "e2e-bad", "--root-dir", str(tmp_path / "root"), "--port", "0",
                         *pod_network_flags()], tmp_path, "agent-bad").start()
    agent.proc.wait(timeout=15)
    assert agent.proc.returncode == 1
    assert "Unauthorized" in agent.log_tail(), agent.log_tail()
    assert not (tmp_path / "k").exists()
    agent.stop()
