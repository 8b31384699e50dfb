"""The kube-api-access projected volume, as kube-apiserver's ServiceAccount admission adds it and
the kubelet serves it: a pod's token (a TokenRequest bound to the pod, 3607 s), kube-root-ca.crt's
ca.crt and its namespace at /var/run/secrets/kubernetes.io/serviceaccount, read from inside the
container; the token authenticates as the pod's ServiceAccount until the pod is deleted;
automountServiceAccountToken (the pod's, else the ServiceAccount's) leaves it out. Against
`kite up` with its agent. Needs root, runc, conmon, umoci."""
import base64
import json
import subprocess
import time

import pytest

from conftest import KITE, runc_up_cluster

NS = "satvol"
MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    gen = runc_up_cluster(tmp_path_factory, "satvol", namespace=NS)
    c = next(gen)
    wait(lambda: c.kubectl("get", "sa", "default", "-n", NS, check=False).returncode == 0, 20, "the default SA")
    wait(lambda: c.kubectl("get", "cm", "kube-root-ca.crt", "-n", NS, check=False).returncode == 0, 20, "the root CA")
    yield c
    next(gen, None)


def wait(fn, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.3)
    pytest.fail(f"timed out waiting for {what}; last: {last!r}")


def pod_json(c, name):
    return json.loads(c.kubectl("get", "pod", name, "-n", NS, "-o", "json").stdout)


def mkpod(c, name, script, mounts=None, **spec):
    ctr = {"name": "c", "image": "busybox", "command": ["sh", "-c", script]}
    if mounts:
        ctr["volumeMounts"] = mounts
    c.kubectl("apply", "-n", NS, "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeName": c.node, "restartPolicy": "Never", "containers": [ctr], **spec}}))


def logs_when_done(c, name):
    wait(lambda: pod_json(c, name)["status"].get("phase") in ("Succeeded", "Failed"), 60, f"{name} done")
    p = pod_json(c, name)
    assert p["status"]["phase"] == "Succeeded", json.dumps(p["status"], indent=1)
    return c.kubectl("logs", name, "-n", NS).stdout


def claims(tok):
    part = tok.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def token_status(c, tok):
    api = c.api(token=tok, with_client_cert=False)
    try:
        return api.get(f"/api/v1/namespaces/{NS}/pods").status
    finally:
        api.close()


def test_pod_reads_its_token_ca_and_namespace(cluster):
    c = cluster
    c.kubectl("create", "rolebinding", "default-view", "-n", NS, "--clusterrole=view", f"--serviceaccount={NS}:default")
    mkpod(c, "reader", f"ls {MOUNT}; echo @@; cat {MOUNT}/namespace; echo; echo @@; cat {MOUNT}/ca.crt; "
                       f"echo @@; cat {MOUNT}/token; echo; echo @@; touch {MOUNT}/x 2>&1; echo rc=$?")
    spec = pod_json(c, "reader")["spec"]
    vols = [v for v in spec["volumes"] if v["name"].startswith("kube-api-access-")]
    assert len(vols) == 1 and len(vols[0]["name"]) == len("kube-api-access-") + 5
    assert vols[0]["projected"] == {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                    "path": "namespace"}]}}]}
    assert {"name": vols[0]["name"], "readOnly": True, "mountPath": MOUNT} in spec["containers"][0]["volumeMounts"]
    listing, ns, ca, tok, touch = logs_when_done(c, "reader").split("@@\n")
    assert listing.split() == ["ca.crt", "namespace", "token"]
    assert ns.strip() == NS
    assert ca.strip() == (c.data_dir / "pki" / "ca.crt").read_text().strip()
    assert "rc=0" not in touch  # read-only
    tok = tok.strip()
    cl = claims(tok)
    pod = pod_json(c, "reader")
    assert cl["sub"] == f"system:serviceaccount:{NS}:default"
    assert cl["exp"] - cl["iat"] == 3607
    k = cl["kubernetes.io"]
    assert k["pod"] == {"name": "reader", "uid": pod["metadata"]["uid"]}
    assert k["node"]["name"] == c.node
    # the token the pod holds is the pod's: it works while the pod exists, not after
    assert token_status(c, tok) == 200
    c.kubectl("delete", "pod", "reader", "-n", NS, "--grace-period=0", "--force")
    wait(lambda: token_status(c, tok) == 401, 20, "the token to die with its pod")


@pytest.mark.slow
def test_automount_off(cluster):
    c = cluster
    c.kubectl("create", "serviceaccount", "quiet", "-n", NS)
    c.kubectl("patch", "serviceaccount", "quiet", "-n", NS, "-p", '{"automountServiceAccountToken":false}')
    mkpod(c, "pod-off", f"ls {MOUNT} 2>&1; true", automountServiceAccountToken=False)
    mkpod(c, "sa-off", f"ls {MOUNT} 2>&1; true", serviceAccountName="quiet")
    mkpod(c, "pod-overrides", f"ls {MOUNT}", serviceAccountName="quiet", automountServiceAccountToken=True)
    for name in ("pod-off", "sa-off"):
        spec = pod_json(c, name)["spec"]
        assert not [v for v in spec.get("volumes", []) if v["name"].startswith("kube-api-access-")]
        assert "No such file or directory" in logs_when_done(c, name)
    assert logs_when_done(c, "pod-overrides").split() == ["ca.crt", "namespace", "token"]
    c.kubectl("delete", "pod", "pod-off", "sa-off", "pod-overrides", "-n", NS, "--grace-period=0", "--force")


def test_node_token_requests_are_the_agents(cluster):
    """The agent asked for the pod's token with its node identity, bound to the pod (audit-free
    check: a second pod's token names that pod and the node, and a token of a ServiceAccount no
    pod of the node uses cannot be had with the node's credential)."""
    c = cluster
    p = subprocess.run([KITE, "kubeconfig", "--data-dir", str(c.data_dir), "--node", c.node],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode == 0, p.stderr
    kc = c.workdir / "node.kubeconfig"
    kc.write_text(p.stdout)
    c.kubectl("create", "serviceaccount", "unused", "-n", NS)
    r = subprocess.run(["kubectl", f"--kubeconfig={kc}", "create", "token", "unused", "-n", NS],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert (f'User "system:node:{c.node}" cannot create resource "serviceaccounts/token" in API group "" in the '
            f'namespace "{NS}"') in r.stderr


def test_own_token_source_with_an_audience(cluster):
    """A projected serviceAccountToken source of the pod's own: its audience, lifetime, path and
    mode; a token for another audience does not open the API."""
    c = cluster
    mkpod(c, "vaulted", "cat /v/vault-token; echo; stat -c %a /v/..data/vault-token",
          automountServiceAccountToken=False, mounts=[{"name": "v", "mountPath": "/v"}],
          volumes=[{"name": "v", "projected": {"defaultMode": 0o440, "sources": [
              {"serviceAccountToken": {"audience": "vault", "expirationSeconds": 1200, "path": "vault-token"}}]}}])
    spec_patch = pod_json(c, "vaulted")["spec"]
    assert [v["name"] for v in spec_patch["volumes"]] == ["v"]
    tok, mode = logs_when_done(c, "vaulted").split()
    cl = claims(tok)
    assert cl["aud"] == ["vault"] and cl["exp"] - cl["iat"] == 1200
    assert cl["kubernetes.io"]["pod"]["name"] == "vaulted"
    assert mode == "440"
    assert token_status(c, tok) == 401
    c.kubectl("delete", "pod", "vaulted", "-n", NS, "--grace-period=0", "--force")
