"""ServiceAccounts as Kubernetes keeps them: the `default` ServiceAccount and the kube-root-ca.crt
ConfigMap in every namespace (made again when deleted); the TokenRequest API (`kubectl create
token`, the python client's create_namespaced_service_account_token) issuing JWTs with
kube-apiserver's claims, which authenticate as system:serviceaccount:NS:NAME with RBAC applied;
tampered, expired, not-yet-valid, foreign-key and wrong-audience tokens, and tokens bound to a
deleted pod or secret, answered 401; the Node authorizer and NodeRestriction on a node's token
requests; ServiceAccount admission. Against `kite up --no-agent` (controllers in-process)."""
import base64
import datetime
import json
import subprocess
import time

import pytest

from conftest import Cluster, KiteProcess, _workdir, node_manifest

NS = "satest"
NODE = "node-a"
NODE_TOKEN = "node-a-token"
AUDIENCE = "https://kubernetes.default.svc.cluster.local"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = _workdir(tmp_path_factory, "satoken")
    tokens = work / "tokens.csv"
    tokens.write_text(f'{NODE_TOKEN},system:node:{NODE},4001,"system:nodes"\n')
    c = Cluster("up", work, extra_args=["--no-agent", "--token-auth-file", str(tokens),
                                       "--service-account-max-token-expiration", "2h",
                                       "--service-account-extend-token-expiration"]).start()
    c.kubectl("create", "namespace", NS)
    wait(lambda: get(c, "serviceaccount", "default", NS), 20, "the default ServiceAccount")
    # NS's default ServiceAccount may read everything: a token of it that is refused is refused by authentication
    c.kubectl("create", "clusterrolebinding", "sa-default-view", "--clusterrole=view",
              f"--serviceaccount={NS}:default")
    yield c
    c.stop()


def wait(fn, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}; last: {last!r}")


def get(c, kind, name, ns):
    p = c.kubectl("get", kind, name, "-n", ns, "-o", "json", check=False)
    return json.loads(p.stdout) if p.returncode == 0 else None


def claims(tok):
    parts = tok.split(".")
    assert len(parts) == 3, tok
    pad = lambda s: s + "=" * (-len(s) % 4)
    return json.loads(base64.urlsafe_b64decode(pad(parts[0]))), json.loads(base64.urlsafe_b64decode(pad(parts[1])))


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def as_token(c, tok, *args, check=False):
    """kubectl with only this bearer token (no client certificate)."""
    return subprocess.run(["kubectl", "--kubeconfig=/dev/null", f"--server=https://127.0.0.1:{c.port}",
                           f"--certificate-authority={c.data_dir / 'pki' / 'ca.crt'}", f"--token={tok}", *args],
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL, check=check)


def token_status(c, tok, path=f"/api/v1/namespaces/{NS}/pods"):
    api = c.api(token=tok, with_client_cert=False)
    try:
        return api.get(path).status
    finally:
        api.close()


def create_token(c, name, *args, ns=NS):
    return c.kubectl("create", "token", name, "-n", ns, *args).stdout.strip()


# ---------------------------------------------------------------- the controllers

def test_every_namespace_gets_default_sa_and_root_ca(cluster):
    c = cluster
    ca = (c.data_dir / "pki" / "ca.crt").read_text()
    for ns in ("default", "kube-system", "kube-public", NS):
        wait(lambda: get(c, "serviceaccount", "default", ns), 20, f"{ns}/default")
        cm = wait(lambda: get(c, "configmap", "kube-root-ca.crt", ns), 20, f"{ns}/kube-root-ca.crt")
        assert cm["data"] == {"ca.crt": ca}
        assert cm["metadata"]["annotations"]["kubernetes.io/description"].startswith("Contains a CA bundle")


def test_deleted_ones_come_back(cluster):
    c = cluster
    c.kubectl("create", "namespace", "sa-churn")
    sa = wait(lambda: get(c, "serviceaccount", "default", "sa-churn"), 20, "default SA")
    cm = wait(lambda: get(c, "configmap", "kube-root-ca.crt", "sa-churn"), 20, "kube-root-ca.crt")
    c.kubectl("delete", "serviceaccount", "default", "-n", "sa-churn")
    c.kubectl("delete", "configmap", "kube-root-ca.crt", "-n", "sa-churn")
    sa2 = wait(lambda: (o := get(c, "serviceaccount", "default", "sa-churn")) and
               o["metadata"]["uid"] != sa["metadata"]["uid"] and o, 20, "a new default SA")
    cm2 = wait(lambda: (o := get(c, "configmap", "kube-root-ca.crt", "sa-churn")) and
               o["metadata"]["uid"] != cm["metadata"]["uid"] and o, 20, "a new kube-root-ca.crt")
    assert sa2 and cm2["data"] == cm["data"]
    # a changed CA bundle is put back
    c.kubectl("patch", "configmap", "kube-root-ca.crt", "-n", "sa-churn", "--type=merge",
              "-p", '{"data":{"ca.crt":"junk","extra":"x"}}')
    wait(lambda: (o := get(c, "configmap", "kube-root-ca.crt", "sa-churn")) and o["data"] == cm["data"], 20,
         "the CA bundle restored")


def test_controller_manager_alone_publishes_its_root_ca_file(fresh_apiserver):
    """`kite controller-manager --root-ca-file F` against a bare apiserver: F's bundle in every
    namespace; `--controllers=root-ca-cert-publisher` leaves the ServiceAccounts to nobody."""
    c = fresh_apiserver
    bundle = c.workdir / "bundle.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\nMIIBdGVzdA==\n-----END CERTIFICATE-----\n")
    cm = KiteProcess(["controller-manager", "--kubeconfig", str(c.data_dir / "controller-manager.kubeconfig"),
                      "--leader-elect=false", "--controllers", "root-ca-cert-publisher", "--root-ca-file", str(bundle)],
                     c.workdir, "cm").start()
    try:
        c.kubectl("create", "namespace", "alone")
        got = wait(lambda: get(c, "configmap", "kube-root-ca.crt", "alone"), 20, "kube-root-ca.crt")
        assert got["data"] == {"ca.crt": bundle.read_text()}
        assert get(c, "serviceaccount", "default", "alone") is None
    finally:
        cm.stop()
        cm.check_sanitizers()


# ---------------------------------------------------------------- TokenRequest and authentication

def test_create_token_claims(cluster):
    c = cluster
    sa = get(c, "serviceaccount", "default", NS)
    before = int(time.time())
    tok = create_token(c, "default")
    header, cl = claims(tok)
    assert header["alg"] == "RS256" and header["kid"]
    assert cl["iss"] == AUDIENCE and cl["aud"] == [AUDIENCE]
    assert cl["sub"] == f"system:serviceaccount:{NS}:default"
    assert cl["exp"] - cl["iat"] == 3600 and cl["nbf"] == cl["iat"]
    assert before - 2 <= cl["iat"] <= time.time() + 2
    assert cl["kubernetes.io"] == {"namespace": NS, "serviceaccount": {"name": "default", "uid": sa["metadata"]["uid"]}}
    assert cl["jti"]
    _, cl = claims(create_token(c, "default", "--duration", "20m"))
    assert cl["exp"] - cl["iat"] == 1200
    p = c.kubectl("create", "token", "default", "-n", NS, "--duration", "1m", check=False)
    assert p.returncode != 0
    assert ('TokenRequest.authentication.k8s.io "default" is invalid: spec.expirationSeconds: Invalid value: 60: '
            'may not specify a duration less than 10 minutes') in p.stderr
    p = c.kubectl("create", "token", "nosuch", "-n", NS, check=False)
    assert p.returncode != 0 and 'serviceaccounts "nosuch" not found' in p.stderr


def test_token_expiration_capped_by_max_token_expiration(cluster):
    """--service-account-max-token-expiration 2h: a longer TokenRequest gets a 2 h token, with
    kube-apiserver's warning; the limit of 2^32 s still refuses."""
    c = cluster
    p = c.kubectl("create", "token", "default", "-n", NS, "--duration", "48h")
    _, cl = claims(p.stdout.strip())
    assert cl["exp"] - cl["iat"] == 7200, cl
    assert "requested expiration of 172800 seconds shortened to 7200 seconds" in p.stderr, p.stderr
    api = c.api()
    r = api.post(f"/api/v1/namespaces/{NS}/serviceaccounts/default/token", token_request(exp=10800))
    assert r.status == 201, r
    assert r.json()["spec"]["expirationSeconds"] == 7200
    assert "shortened to 7200 seconds" in r.headers.get("warning", ""), r.headers
    r = api.post(f"/api/v1/namespaces/{NS}/serviceaccounts/default/token", token_request(exp=1 << 33))
    assert r.status == 422, r
    _, cl = claims(create_token(c, "default", "--duration", "90m"))
    assert cl["exp"] - cl["iat"] == 5400


def test_token_authenticates_and_rbac_applies(cluster):
    c = cluster
    c.kubectl("create", "serviceaccount", "reader", "-n", NS)
    sa = get(c, "serviceaccount", "reader", NS)
    tok = create_token(c, "reader")
    who = json.loads(as_token(c, tok, "auth", "whoami", "-o", "json", check=True).stdout)["status"]["userInfo"]
    assert who["username"] == f"system:serviceaccount:{NS}:reader"
    assert who["uid"] == sa["metadata"]["uid"]
    assert who["groups"] == ["system:serviceaccounts", f"system:serviceaccounts:{NS}", "system:authenticated"]
    assert who["extra"]["authentication.kubernetes.io/credential-id"] == [f"JTI={claims(tok)[1]['jti']}"]
    p = as_token(c, tok, "get", "pods", "-n", NS)
    assert p.returncode != 0
    assert (f'pods is forbidden: User "system:serviceaccount:{NS}:reader" cannot list resource "pods" in API group "" '
            f'in the namespace "{NS}"') in p.stderr
    assert token_status(c, tok) == 403
    c.kubectl("create", "rolebinding", "reader-view", "-n", NS, "--clusterrole=view", f"--serviceaccount={NS}:reader")
    wait(lambda: token_status(c, tok) == 200, 10, "the binding to apply")
    assert as_token(c, tok, "get", "pods", "-n", NS).returncode == 0
    assert token_status(c, tok, "/api/v1/namespaces/default/pods") == 403
    # the group binding works too: system:serviceaccounts:NS
    c.kubectl("create", "rolebinding", "all-sa-view", "-n", "default", "--clusterrole=view",
              f"--group=system:serviceaccounts:{NS}")
    wait(lambda: token_status(c, tok, "/api/v1/namespaces/default/pods") == 200, 10, "the group binding to apply")
    # deleting the ServiceAccount ends its tokens; a new one of the same name does not revive them
    c.kubectl("delete", "serviceaccount", "reader", "-n", NS)
    assert token_status(c, tok) == 401
    c.kubectl("create", "serviceaccount", "reader", "-n", NS)
    assert token_status(c, tok) == 401
    assert token_status(c, create_token(c, "reader")) == 200


def forge(c, cl, header=None, key=None):
    """A JWT with claims cl signed by the server's key (or another one) with openssl."""
    h = header or {"alg": "RS256", "kid": "x"}
    signing = f"{b64url(json.dumps(h).encode())}.{b64url(json.dumps(cl).encode())}"
    keyfile = key or str(c.data_dir / "pki" / "sa.key")
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", keyfile], input=signing.encode(),
                         capture_output=True, check=True).stdout
    return f"{signing}.{b64url(sig)}"


def test_bad_tokens_are_401(cluster):
    c = cluster
    tok = create_token(c, "default")
    wait(lambda: token_status(c, tok) == 200, 10, "the binding to apply")
    _, cl = claims(tok)
    assert token_status(c, forge(c, cl)) == 200  # the forger works: what follows fails for its reason
    h, p, s = tok.split(".")
    tampered = dict(cl, sub=f"system:serviceaccount:{NS}:admin")
    assert token_status(c, f"{h}.{b64url(json.dumps(tampered).encode())}.{s}") == 401
    assert token_status(c, f"{h}.{p}.{s[:-4]}AAAA") == 401
    assert token_status(c, f"{h}.{p}.") == 401
    assert token_status(c, f"{b64url(json.dumps({'alg': 'none'}).encode())}.{p}.") == 401
    now = int(time.time())
    assert token_status(c, forge(c, dict(cl, exp=now - 120, iat=now - 1000, nbf=now - 1000))) == 401
    assert token_status(c, forge(c, dict(cl, nbf=now + 600, iat=now + 600, exp=now + 4000))) == 401
    assert token_status(c, forge(c, dict(cl, iss="https://elsewhere"))) == 401
    assert token_status(c, forge(c, dict(cl, aud=["other"]))) == 401
    assert token_status(c, forge(c, cl, header={"alg": "HS256"})) == 401
    other = c.workdir / "other.key"
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(other)],
                   check=True, capture_output=True)
    assert token_status(c, forge(c, cl, key=str(other))) == 401
    # another audience than the server's: valid for someone else, not for the API
    assert token_status(c, create_token(c, "default", "--audience", "vault")) == 401
    both = create_token(c, "default", "--audience", "vault", "--audience", AUDIENCE)
    assert token_status(c, both) == 200
    p = as_token(c, f"{h}.{p}.{s[:-4]}AAAA", "get", "pods")
    assert p.returncode != 0 and "Unauthorized" in p.stderr


@pytest.mark.slow
def test_bound_tokens_end_with_their_object(cluster):
    c = cluster
    c.kubectl("apply", "-n", NS, "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "holder"},
        "spec": {"nodeName": "nowhere", "containers": [{"name": "c", "image": "busybox"}]}}))
    pod = get(c, "pod", "holder", NS)
    assert pod["spec"]["serviceAccountName"] == "default"
    tok = create_token(c, "default", "--bound-object-kind", "Pod", "--bound-object-name", "holder")
    _, cl = claims(tok)
    assert cl["kubernetes.io"]["pod"] == {"name": "holder", "uid": pod["metadata"]["uid"]}
    wait(lambda: token_status(c, tok) == 200, 10, "the binding to apply")
    who = json.loads(as_token(c, tok, "auth", "whoami", "-o", "json", check=True).stdout)["status"]["userInfo"]
    assert who["extra"]["authentication.kubernetes.io/pod-name"] == ["holder"]
    assert who["extra"]["authentication.kubernetes.io/pod-uid"] == [pod["metadata"]["uid"]]
    c.kubectl("delete", "pod", "holder", "-n", NS, "--grace-period=0", "--force")
    assert token_status(c, tok) == 401
    # the same name again is another pod: the token stays dead
    c.kubectl("apply", "-n", NS, "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "holder"},
        "spec": {"nodeName": "nowhere", "containers": [{"name": "c", "image": "busybox"}]}}))
    assert token_status(c, tok) == 401
    c.kubectl("delete", "pod", "holder", "-n", NS, "--grace-period=0", "--force")
    # bound to a Secret
    c.kubectl("create", "secret", "generic", "anchor", "-n", NS, "--from-literal=k=v")
    tok = create_token(c, "default", "--bound-object-kind", "Secret", "--bound-object-name", "anchor")
    assert claims(tok)[1]["kubernetes.io"]["secret"]["name"] == "anchor"
    assert token_status(c, tok) == 200
    c.kubectl("delete", "secret", "anchor", "-n", NS)
    assert token_status(c, tok) == 401
    # bound to a Node (ServiceAccountTokenNodeBinding)
    admin = c.api()
    assert admin.post("/api/v1/nodes", node_manifest("bound-node")).status == 201
    node_uid = admin.get("/api/v1/nodes/bound-node").json()["metadata"]["uid"]
    r = admin.post(f"/api/v1/namespaces/{NS}/serviceaccounts/default/token",
                   token_request({"apiVersion": "v1", "kind": "Node", "name": "bound-node"}))
    assert r.status == 201, r
    tok = r.json()["status"]["token"]
    assert claims(tok)[1]["kubernetes.io"]["node"] == {"name": "bound-node", "uid": node_uid}
    assert token_status(c, tok) == 200
    assert admin.delete("/api/v1/nodes/bound-node").status == 200
    assert token_status(c, tok) == 401
    r = admin.post(f"/api/v1/namespaces/{NS}/serviceaccounts/default/token",
                   token_request({"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}))
    assert r.status == 400 and r.json()["message"] == "cannot bind token to object of type apps/v1, Kind=Deployment"
    admin.close()
    # refusals as kube-apiserver words them
    p = c.kubectl("create", "token", "default", "-n", NS, "--bound-object-kind", "Pod", "--bound-object-name", "gone",
                  check=False)
    assert p.returncode != 0 and 'pods "gone" not found' in p.stderr
    c.kubectl("create", "serviceaccount", "other", "-n", NS)
    c.kubectl("apply", "-n", NS, "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "runs-as-other"},
        "spec": {"nodeName": "nowhere", "serviceAccountName": "other", "containers": [{"name": "c", "image": "busybox"}]}}))
    p = c.kubectl("create", "token", "default", "-n", NS, "--bound-object-kind", "Pod", "--bound-object-name",
                  "runs-as-other", check=False)
    assert p.returncode != 0
    assert 'cannot bind token for serviceaccount "default" to pod running with serviceaccount "other"' in p.stderr
    c.kubectl("delete", "pod", "runs-as-other", "-n", NS, "--grace-period=0", "--force")


def token_request(bound=None, exp=None):
    spec = {}
    if bound:
        spec["boundObjectRef"] = bound
    if exp:
        spec["expirationSeconds"] = exp
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}


def test_node_mints_tokens_only_for_its_pods(cluster):
    c = cluster
    admin = c.api()
    for sa in ("sa-a", "sa-b"):
        assert admin.post(f"/api/v1/namespaces/{NS}/serviceaccounts", {"metadata": {"name": sa}}).status == 201
    for name, node, sa in (("on-a", NODE, "sa-a"), ("on-b", "node-b", "sa-b")):
        r = admin.post(f"/api/v1/namespaces/{NS}/pods", {"metadata": {"name": name}, "spec": {
            "nodeName": node, "serviceAccountName": sa, "containers": [{"name": "c", "image": "busybox"}]}})
        assert r.status == 201, r
    uid_a = admin.get(f"/api/v1/namespaces/{NS}/pods/on-a").json()["metadata"]["uid"]
    uid_b = admin.get(f"/api/v1/namespaces/{NS}/pods/on-b").json()["metadata"]["uid"]
    node = c.api(token=NODE_TOKEN, with_client_cert=False)
    path = f"/api/v1/namespaces/{NS}/serviceaccounts"
    pod_ref = lambda n, u: {"apiVersion": "v1", "kind": "Pod", "name": n, "uid": u}
    r = node.post(f"{path}/sa-a/token", token_request(pod_ref("on-a", uid_a), 3607))
    assert r.status == 201, r
    tok = r.json()["status"]["token"]
    cl = claims(tok)[1]["kubernetes.io"]
    assert cl["pod"] == {"name": "on-a", "uid": uid_a} and cl["serviceaccount"]["name"] == "sa-a"
    # the kubelet's 3607 s token, extended to a year (--service-account-extend-token-expiration)
    assert claims(tok)[1]["exp"] - claims(tok)[1]["iat"] == 365 * 24 * 3600
    # an SA no pod of its runs as: the Node authorizer
    r = node.post(f"{path}/sa-b/token", token_request(pod_ref("on-b", uid_b)))
    assert r.status == 403
    assert r.json()["message"] == (f'serviceaccounts "sa-b" is forbidden: User "system:node:{NODE}" cannot create '
                                   f'resource "serviceaccounts/token" in API group "" in the namespace "{NS}": '
                                   f"no relationship found between node '{NODE}' and this object")
    # its own pod's SA, but unbound, or bound without a uid: NodeRestriction
    r = node.post(f"{path}/sa-a/token", token_request())
    assert r.status == 403 and r.json()["message"] == \
        'serviceaccounts "sa-a" is forbidden: node requested token not bound to a pod'
    r = node.post(f"{path}/sa-a/token", token_request({"apiVersion": "v1", "kind": "Pod", "name": "on-a"}))
    assert r.status == 403 and r.json()["message"] == \
        'serviceaccounts "sa-a" is forbidden: node requested token with a pod binding without a uid'
    r = node.post(f"{path}/sa-a/token", token_request(pod_ref("on-a", "00000000-0000-0000-0000-000000000000")))
    assert r.status == 409
    # other verbs on serviceaccounts
    assert node.get(f"{path}/sa-a").status == 403
    node.close()
    for name in ("on-a", "on-b"):
        c.kubectl("delete", "pod", name, "-n", NS, "--grace-period=0", "--force")
    admin.close()


def test_python_client_creates_tokens(cluster):
    from kubernetes import client
    v1 = cluster.python_client()
    body = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[AUDIENCE, "extra"],
                                                                             expiration_seconds=900))
    out = v1.create_namespaced_service_account_token("default", NS, body)
    assert out.status.token and out.status.expiration_timestamp
    cl = claims(out.status.token)[1]
    assert cl["aud"] == [AUDIENCE, "extra"] and cl["exp"] - cl["iat"] == 900
    assert abs(out.status.expiration_timestamp.timestamp() - cl["exp"]) < 1
    assert token_status(cluster, out.status.token) == 200
    # a dry run issues nothing
    dry = v1.create_namespaced_service_account_token("default", NS, body, dry_run="All")
    assert not dry.status or not dry.status.token


# ---------------------------------------------------------------- admission

def test_pod_service_account_admission(cluster):
    c = cluster
    pod = lambda name, **spec: json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "nodeName": "nowhere", "containers": [{"name": "c", "image": "busybox"}], **spec}})
    p = c.kubectl("apply", "-n", NS, "-f", "-", input=pod("missing-sa", serviceAccountName="ghost"), check=False)
    assert p.returncode != 0
    assert (f'pods "missing-sa" is forbidden: error looking up service account {NS}/ghost: '
            f'serviceaccount "ghost" not found') in p.stderr
    c.kubectl("apply", "-n", NS, "-f", "-", input=pod("defaulted"))
    assert get(c, "pod", "defaulted", NS)["spec"]["serviceAccountName"] == "default"
    # the ServiceAccount's imagePullSecrets when the pod names none
    c.kubectl("create", "serviceaccount", "puller", "-n", NS)
    c.kubectl("patch", "serviceaccount", "puller", "-n", NS, "-p", '{"imagePullSecrets":[{"name":"regcred"}]}')
    c.kubectl("apply", "-n", NS, "-f", "-", input=pod("pulls", serviceAccountName="puller"))
    assert get(c, "pod", "pulls", NS)["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    c.kubectl("delete", "pod", "defaulted", "pulls", "-n", NS, "--grace-period=0", "--force")


def test_extend_token_expiration(cluster):
    """--service-account-extend-token-expiration, as kube-apiserver's: a token bound to a pod,
    asked for 3607 s (the kubelet's projected volume) with only the server's audiences, is valid a
    year and carries kubernetes.io.warnafter = iat + 3607; the TokenRequest's status still says
    3607 s. Any other request is not extended."""
    c = cluster
    admin = c.api()
    assert admin.post(f"/api/v1/namespaces/{NS}/serviceaccounts", {"metadata": {"name": "sa-ext"}}).status == 201
    r = admin.post(f"/api/v1/namespaces/{NS}/pods", {"metadata": {"name": "ext"}, "spec": {
        "serviceAccountName": "sa-ext", "containers": [{"name": "c", "image": "busybox"}]}})
    assert r.status == 201, r
    ref = {"apiVersion": "v1", "kind": "Pod", "name": "ext", "uid": r.json()["metadata"]["uid"]}
    path = f"/api/v1/namespaces/{NS}/serviceaccounts/sa-ext/token"
    out = admin.ok("POST", path, token_request(ref, 3607))
    cl = claims(out["status"]["token"])[1]
    assert cl["exp"] - cl["iat"] == 365 * 24 * 3600, cl
    assert cl["kubernetes.io"]["warnafter"] == cl["iat"] + 3607, cl
    exp_ts = datetime.datetime.strptime(out["status"]["expirationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
    assert abs(exp_ts.replace(tzinfo=datetime.timezone.utc).timestamp() - (cl["iat"] + 3607)) <= 1, out["status"]
    # the extended token authenticates as the ServiceAccount
    who = c.api(token=out["status"]["token"], with_client_cert=False).ok(
        "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert who["status"]["userInfo"]["username"] == f"system:serviceaccount:{NS}:sa-ext", who
    # not extended: another lifetime, another audience, no pod
    for body, life in ((token_request(ref, 3600), 3600),
                       ({**token_request(ref, 3607), "spec": {**token_request(ref, 3607)["spec"], "audiences": ["vault"]}},
                        3607),
                       (token_request(None, 3607), 3607)):
        cl = claims(admin.ok("POST", path, body)["status"]["token"])[1]
        assert cl["exp"] - cl["iat"] == life and "warnafter" not in cl["kubernetes.io"], (body, cl)
