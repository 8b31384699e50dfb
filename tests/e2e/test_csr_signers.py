"""Who may approve and sign CertificateSigningRequests for which signer, as kube-apiserver's
CertificateApproval, CertificateSigning and CertificateSubjectRestriction admission plugins: RBAC
on `certificatesigningrequests/approval` is not enough to `kubectl certificate approve`, the
`approve` verb on `signers` (by name or `kubernetes.io/*`) is needed too; writing a certificate
through `/status` needs `sign`; and nobody may ask the kube-apiserver-client signer for a
certificate in system:masters. The controller-manager's own approver and signer still work."""
import base64
import json
import subprocess

import pytest

from conftest import KITE, KUBECTL, KUBECTL_TIMEOUT, Cluster, _workdir, wait_for

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster("up", _workdir(tmp_path_factory, "csrsigners"), extra_args=["--no-agent"]).start()
    yield c
    c.stop()


def user_kubectl(cluster, name, *args):
    """kubectl as user `name` (a client certificate from `kite kubeconfig --user`)."""
    kc = cluster.workdir / f"{name}.kubeconfig"
    home = cluster.workdir / f"home-{name}"
    if not kc.exists():
        p = subprocess.run([KITE, "kubeconfig", "--data-dir", str(cluster.data_dir), "--user", name],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        kc.write_text(p.stdout)
        home.mkdir(exist_ok=True)
    env = cluster.kubectl_env()
    env["KUBECONFIG"], env["HOME"] = str(kc), str(home)
    return subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True, timeout=KUBECTL_TIMEOUT,
                          cwd=str(cluster.workdir))


def make_csr(tmp_path, subject, name):
    key, req = tmp_path / f"{name}.key", tmp_path / f"{name}.csr"
    subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-subj", subject, "-keyout", str(key), "-out", str(req)], check=True, capture_output=True,
                   timeout=30)
    return req.read_bytes()


def csr_body(name, pem, signer=CLIENT_SIGNER):
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": name},
            "spec": {"request": base64.b64encode(pem).decode(), "signerName": signer, "usages": ["client auth"]}}


def conditions(csr):
    return {c["type"]: c for c in (csr.get("status") or {}).get("conditions") or []}


def grant(api, user, role, rules):
    r = api.post(f"{RBAC}/clusterroles", {"metadata": {"name": role}, "rules": rules})
    assert r.status in (201, 409), r  # 409: another test made it
    api.ok("POST", f"{RBAC}/clusterrolebindings", {
        "metadata": {"name": f"{role}-{user}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]})


CSR_WRITER = [{"verbs": ["get", "list", "watch"], "apiGroups": ["certificates.k8s.io"],
               "resources": ["certificatesigningrequests"]},
              {"verbs": ["update"], "apiGroups": ["certificates.k8s.io"],
               "resources": ["certificatesigningrequests/approval", "certificatesigningrequests/status"]}]


def test_approve_needs_approve_on_the_signer(cluster, tmp_path):
    api = cluster.api()
    api.ok("POST", CSRS, csr_body("jane", make_csr(tmp_path, "/O=dev/CN=jane", "jane")))
    grant(api, "approver", "csr-writer", CSR_WRITER)
    p = user_kubectl(cluster, "approver", "certificate", "approve", "jane")
    assert p.returncode != 0, p.stdout
    assert ('certificatesigningrequests.certificates.k8s.io "jane" is forbidden: user not permitted to approve '
            f'requests with signerName "{CLIENT_SIGNER}"') in p.stderr, p.stderr
    assert "Error from server (Forbidden)" in p.stderr, p.stderr
    assert "Approved" not in conditions(api.ok("GET", f"{CSRS}/jane"))
    # approve on every kubernetes.io signer: kubectl approves, and the controller-manager
    # (system:kube-controller-manager, `sign` on this signer) issues the certificate
    grant(api, "approver", "approve-kubernetes-signers",
          [{"verbs": ["approve"], "apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
            "resourceNames": ["kubernetes.io/*"]}])
    p = user_kubectl(cluster, "approver", "certificate", "approve", "jane")
    assert p.returncode == 0, p.stderr
    assert "approved" in p.stdout, p.stdout
    c = wait_for(lambda: (lambda c: c if c.get("status", {}).get("certificate") else None)(
        api.ok("GET", f"{CSRS}/jane")), 10, what="approved CSR issued")
    assert conditions(c)["Approved"]["reason"] == "KubectlApprove"
    # that wildcard is about kubernetes.io only
    api.ok("POST", CSRS, csr_body("elsewhere", make_csr(tmp_path, "/CN=jane", "elsewhere"), "example.com/signer"))
    p = user_kubectl(cluster, "approver", "certificate", "deny", "elsewhere")
    assert p.returncode != 0 and 'signerName "example.com/signer"' in p.stderr, p.stderr
    # the admin (system:masters) may approve for any signer
    out = cluster.kubectl("certificate", "deny", "elsewhere").stdout
    assert "denied" in out, out


def test_status_certificate_needs_sign(cluster, tmp_path):
    api = cluster.api()
    api.ok("POST", CSRS, csr_body("by-hand", make_csr(tmp_path, "/CN=by-hand", "by-hand"), "example.com/by-hand"))
    csr = api.ok("GET", f"{CSRS}/by-hand")
    ca = (cluster.data_dir / "pki" / "ca.crt").read_bytes()
    csr.setdefault("status", {})["certificate"] = base64.b64encode(ca).decode()
    grant(api, "hand-signer", "csr-writer", CSR_WRITER)
    as_signer = {"Impersonate-User": "hand-signer"}
    r = api.put(f"{CSRS}/by-hand/status", csr, headers=as_signer)
    assert r.status == 403, r
    assert r.json()["message"] == ('certificatesigningrequests.certificates.k8s.io "by-hand" is forbidden: user not '
                                   'permitted to sign requests with signerName "example.com/by-hand"'), r.json()
    grant(api, "hand-signer", "sign-by-hand", [{"verbs": ["sign"], "apiGroups": ["certificates.k8s.io"],
                                             "resources": ["signers"], "resourceNames": ["example.com/by-hand"]}])
    r = api.put(f"{CSRS}/by-hand/status", csr, headers=as_signer)
    assert r.status == 200, r
    assert r.json()["status"]["certificate"] == csr["status"]["certificate"]


def test_no_system_masters_from_the_client_signer(cluster, tmp_path):
    pem = make_csr(tmp_path, "/O=system:masters/CN=root", "root")
    body = json.dumps(csr_body("root", pem))
    p = cluster.kubectl("create", "-f", "-", input=body, check=False)
    assert p.returncode != 0, p.stdout
    assert ('certificatesigningrequests.certificates.k8s.io "root" is forbidden: use of '
            f'{CLIENT_SIGNER} signer with system:masters group is not allowed') in p.stderr, p.stderr
    assert cluster.api().get(f"{CSRS}/root").status == 404
    # the same subject for another signer is that signer's to judge
    cluster.kubectl("create", "-f", "-", input=json.dumps(csr_body("root-elsewhere", pem, "example.com/x")))
