"""RBAC as kube-apiserver's --authorization-mode=RBAC, driven by the machine's kubectl with user
certificates from `kite kubeconfig --user`: a user with no binding is refused (403), bindings to
the bootstrap roles grant what they say where they say it, ClusterRole aggregation extends
`view`, roleRef is immutable, escalation is refused unless the user holds the rights (or `bind`),
and the controllers, running under their own certificate (system:kube-controller-manager), still
empty a deleted namespace."""
import json
import subprocess

import pytest

from conftest import KITE, KUBECTL, KUBECTL_TIMEOUT, Cluster, KiteProcess, wait_for, _workdir, parse_table


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """`kite up` without the agent: apiserver + controllers in-process, as themselves."""
    c = Cluster("up", _workdir(tmp_path_factory, "rbac"), extra_args=["--no-agent"]).start()
    yield c
    c.stop()


class User:
    """kubectl as a user identity (CN=name, O=groups), with its own discovery cache."""

    def __init__(self, cluster, name, groups=()):
        self.cluster = cluster
        self.home = cluster.workdir / f"home-{name}"
        self.home.mkdir(exist_ok=True)
        self.kubeconfig = cluster.workdir / f"{name}.kubeconfig"
        args = [KITE, "kubeconfig", "--data-dir", str(cluster.data_dir), "--user", name]
        if groups:
            args += ["--group", ",".join(groups)]
        p = subprocess.run(args, capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        self.kubeconfig.write_text(p.stdout)

    def kubectl(self, *args, input=None):
        env = self.cluster.kubectl_env()
        env["KUBECONFIG"] = str(self.kubeconfig)
        env["HOME"] = str(self.home)
        return subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True, timeout=KUBECTL_TIMEOUT,
                              input=input, cwd=str(self.cluster.workdir))


def ok(p):
    assert p.returncode == 0, f"rc {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


def forbidden(p, *words):
    assert p.returncode != 0, f"allowed, expected Forbidden:\n{p.stdout}"
    assert "Forbidden" in p.stderr or "forbidden" in p.stderr, p.stderr
    for w in words:
        assert w in p.stderr, p.stderr
    return p


def ensure_ns(cluster, *names):
    have = cluster.kubectl("get", "ns", "-o", "name").stdout.split()
    for n in names:
        if f"namespace/{n}" not in have:
            cluster.kubectl("create", "ns", n)


def test_user_without_bindings_gets_403(cluster):
    nobody = User(cluster, "nobody")
    p = forbidden(nobody.kubectl("get", "pods", "-n", "default"))
    assert ('pods is forbidden: User "nobody" cannot list resource "pods" in API group "" in the namespace "default"'
            in p.stderr), p.stderr
    forbidden(nobody.kubectl("get", "nodes"), 'cannot list resource "nodes" in API group "" at the cluster scope')
    # discovery and the public paths stay open to every authenticated user (system:discovery)
    ok(nobody.kubectl("api-resources", "--api-group=rbac.authorization.k8s.io"))
    ok(nobody.kubectl("get", "--raw", "/version"))
    forbidden(nobody.kubectl("get", "--raw", "/metrics"))


def test_rolebinding_to_view_grants_reads_in_its_namespace_only(cluster):
    ensure_ns(cluster, "rb-a", "rb-b")
    alice = User(cluster, "alice")
    forbidden(alice.kubectl("get", "pods", "-n", "rb-a"))
    cluster.kubectl("create", "rolebinding", "alice-view", "--clusterrole=view", "--user=alice", "-n", "rb-a")
    ok(alice.kubectl("get", "pods", "-n", "rb-a"))
    ok(alice.kubectl("get", "configmaps", "-n", "rb-a"))
    forbidden(alice.kubectl("get", "pods", "-n", "rb-b"), 'in the namespace "rb-b"')
    forbidden(alice.kubectl("get", "pods", "-A"), "at the cluster scope")
    forbidden(alice.kubectl("create", "configmap", "c", "-n", "rb-a", "--from-literal=a=b"),
              'cannot create resource "configmaps"')
    forbidden(alice.kubectl("get", "secrets", "-n", "rb-a"))  # view does not read secrets

    _, table = parse_table(cluster.kubectl("get", "rolebindings", "-n", "rb-a", "-o", "wide").stdout)
    row = next(r for r in table if r["NAME"] == "alice-view")
    assert row["ROLE"] == "ClusterRole/view" and row["USERS"] == "alice", table
    assert set(row) >= {"NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"}, row


def test_clusterrolebinding_to_edit_for_a_group(cluster):
    ensure_ns(cluster, "crb-a", "crb-b")
    bob = User(cluster, "bob", groups=["devs"])
    forbidden(bob.kubectl("create", "configmap", "c", "-n", "crb-a", "--from-literal=a=b"))
    cluster.kubectl("create", "clusterrolebinding", "devs-edit", "--clusterrole=edit", "--group=devs")
    for ns in ("crb-a", "crb-b"):
        ok(bob.kubectl("create", "configmap", "c", "-n", ns, "--from-literal=a=b"))
        ok(bob.kubectl("delete", "configmap", "c", "-n", ns))
    ok(bob.kubectl("get", "pods", "-A"))
    # edit does not manage RBAC (admin does)
    forbidden(bob.kubectl("create", "rolebinding", "x", "--clusterrole=view", "--user=bob", "-n", "crb-a"),
              'cannot create resource "rolebindings"')
    forbidden(bob.kubectl("delete", "ns", "crb-b"))
    cluster.kubectl("delete", "clusterrolebinding", "devs-edit")
    forbidden(bob.kubectl("create", "configmap", "c2", "-n", "crb-a", "--from-literal=a=b"))


@pytest.mark.slow
def test_aggregation_extends_view(cluster):
    ensure_ns(cluster, "agg")
    erin = User(cluster, "erin")
    cluster.kubectl("create", "rolebinding", "erin-view", "--clusterrole=view", "--user=erin", "-n", "agg")
    forbidden(erin.kubectl("get", "secrets", "-n", "agg"))
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "secret-reader-agg", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(role))

    def view_has_secrets():
        rules = json.loads(cluster.kubectl("get", "clusterrole", "view", "-o", "json").stdout)["rules"]
        return any("secrets" in r.get("resources", []) for r in rules)

    wait_for(view_has_secrets, 15, what="view aggregates secret-reader-agg")
    ok(erin.kubectl("get", "secrets", "-n", "agg"))
    # edit and admin aggregate view: they got it too
    for r in ("edit", "admin"):
        rules = json.loads(cluster.kubectl("get", "clusterrole", r, "-o", "json").stdout)["rules"]
        assert any(x.get("resources") == ["secrets"] and x.get("verbs") == ["get", "list"] for x in rules), (r, rules)
    cluster.kubectl("delete", "clusterrole", "secret-reader-agg")
    wait_for(lambda: not view_has_secrets(), 15, what="view drops secret-reader-agg")
    forbidden(erin.kubectl("get", "secrets", "-n", "agg"))


def test_role_ref_is_immutable(cluster):
    ensure_ns(cluster, "imm")
    cluster.kubectl("create", "rolebinding", "fixed", "--clusterrole=view", "--user=frank", "-n", "imm")
    p = cluster.kubectl("patch", "rolebinding", "fixed", "-n", "imm", "--type=merge", "-p",
                        '{"roleRef":{"name":"edit"}}', check=False)
    assert p.returncode != 0 and "Invalid" in p.stderr and "cannot change roleRef" in p.stderr, p.stderr
    rb = json.loads(cluster.kubectl("get", "rolebinding", "fixed", "-n", "imm", "-o", "json").stdout)
    assert rb["roleRef"]["name"] == "view"
    # subjects may change
    cluster.kubectl("patch", "rolebinding", "fixed", "-n", "imm", "--type=merge", "-p",
                    '{"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"gina"}]}')


@pytest.mark.slow
def test_escalation_is_refused(cluster):
    ensure_ns(cluster, "esc", "esc-other")
    carol = User(cluster, "carol")
    cluster.kubectl("create", "rolebinding", "carol-admin", "--clusterrole=admin", "--user=carol", "-n", "esc")
    # what admin holds in its namespace it may hand on
    ok(carol.kubectl("create", "rolebinding", "hank-view", "--clusterrole=view", "--user=hank", "-n", "esc"))
    ok(carol.kubectl("create", "role", "pod-reader", "--verb=get,list", "--resource=pods", "-n", "esc"))
    # more than it holds: refused
    p = forbidden(carol.kubectl("create", "rolebinding", "carol-root", "--clusterrole=cluster-admin", "--user=carol",
                                "-n", "esc"))
    assert "attempting to grant RBAC permissions not currently held" in p.stderr, p.stderr
    forbidden(carol.kubectl("create", "role", "all-pods", "--verb=*", "--resource=pods", "-n", "esc"),
              "attempting to grant RBAC permissions not currently held")
    # nor anywhere it is not admin
    forbidden(carol.kubectl("create", "rolebinding", "x", "--clusterrole=view", "--user=carol", "-n", "esc-other"))
    forbidden(carol.kubectl("create", "clusterrolebinding", "x", "--clusterrole=view", "--user=carol"))
    # an update is checked as a create
    p = carol.kubectl("patch", "role", "pod-reader", "-n", "esc", "--type=json", "-p",
                      '[{"op":"add","path":"/rules/0/verbs/-","value":"escalate"}]')
    forbidden(p, "attempting to grant RBAC permissions not currently held")
    # the bind verb on a role lets a user bind it without holding it
    cluster.kubectl("create", "role", "binder", "--verb=create", "--resource=rolebindings.rbac.authorization.k8s.io",
                    "-n", "esc-other")
    cluster.kubectl("create", "rolebinding", "ivan-binder", "--role=binder", "--user=ivan", "-n", "esc-other")
    ivan = User(cluster, "ivan")
    forbidden(ivan.kubectl("create", "rolebinding", "ivan-edit", "--clusterrole=edit", "--user=ivan", "-n", "esc-other"),
              "attempting to grant RBAC permissions not currently held")
    bind = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "bind-edit", "namespace": "esc-other"},
            "rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"],
                       "resourceNames": ["edit"]}]}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(bind))
    cluster.kubectl("create", "rolebinding", "ivan-bind-edit", "--role=bind-edit", "--user=ivan", "-n", "esc-other")
    ok(ivan.kubectl("create", "rolebinding", "ivan-edit", "--clusterrole=edit", "--user=ivan", "-n", "esc-other"))
    forbidden(ivan.kubectl("create", "rolebinding", "ivan-admin", "--clusterrole=admin", "--user=ivan", "-n", "esc-other"))


@pytest.mark.slow
def test_bootstrap_roles_are_listed_and_restored(cluster):
    out = cluster.kubectl("get", "clusterroles").stdout
    assert out.splitlines()[0].split() == ["NAME", "CREATED", "AT"], out
    names = {r["NAME"] for r in parse_table(out)[1]}
    for want in ("cluster-admin", "admin", "edit", "view", "system:basic-user", "system:public-info-viewer",
                 "system:discovery", "system:node", "system:kube-controller-manager", "system:kube-scheduler"):
        assert want in names, (want, names)
    crb = {r["NAME"]: r for r in parse_table(cluster.kubectl("get", "clusterrolebindings", "-o", "wide").stdout)[1]}
    assert crb["cluster-admin"]["GROUPS"] == "system:masters", crb
    assert crb["system:public-info-viewer"]["GROUPS"] == "system:authenticated, system:unauthenticated", crb
    assert "system:node" not in crb  # unbound, as upstream: the Node authorizer grants it
    view = json.loads(cluster.kubectl("get", "clusterrole", "view", "-o", "json").stdout)
    assert view["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] == "true"
    assert view["metadata"]["labels"]["kubernetes.io/bootstrapping"] == "rbac-defaults"
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert view["aggregationRule"]["clusterRoleSelectors"] == [
        {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}]

    # an emptied default comes back at the next start; one marked autoupdate=false stays as set
    cluster.kubectl("patch", "clusterrole", "system:basic-user", "--type=json", "-p",
                    '[{"op":"replace","path":"/rules","value":[]}]')
    cluster.kubectl("patch", "clusterrolebinding", "system:discovery", "--type=json", "-p",
                    '[{"op":"replace","path":"/subjects","value":[]}]')
    cluster.kubectl("annotate", "--overwrite", "clusterrolebinding", "system:discovery",
                    "rbac.authorization.kubernetes.io/autoupdate=false")
    assert cluster.stop() == 0
    cluster.restart()
    rules = json.loads(cluster.kubectl("get", "clusterrole", "system:basic-user", "-o", "json").stdout)["rules"]
    assert any("selfsubjectaccessreviews" in r["resources"] for r in rules), rules
    b = json.loads(cluster.kubectl("get", "clusterrolebinding", "system:discovery", "-o", "json").stdout)
    assert not b.get("subjects"), b
    cluster.kubectl("annotate", "--overwrite", "clusterrolebinding", "system:discovery",
                    "rbac.authorization.kubernetes.io/autoupdate=true")
    cluster.kubectl("patch", "clusterrolebinding", "system:discovery", "--type=merge", "-p",
                    '{"subjects":[{"kind":"Group","apiGroup":"rbac.authorization.k8s.io","name":"system:authenticated"}]}')


@pytest.mark.slow
def test_controllers_run_as_themselves(cluster):
    """The in-process controllers use controller-manager.kubeconfig: not admin, yet they empty a
    deleted namespace (configmaps, roles, bindings) with only their role."""
    kc = cluster.data_dir / "controller-manager.kubeconfig"
    assert (kc.stat().st_mode & 0o777) == 0o600
    env = cluster.kubectl_env()
    env["KUBECONFIG"] = str(kc)
    env["HOME"] = str(cluster.workdir / "home-cm")

    def cm(*args):
        return subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True, timeout=KUBECTL_TIMEOUT)

    forbidden(cm("create", "ns", "cm-made"), 'User "system:kube-controller-manager" cannot create resource "namespaces"')
    ok(cm("get", "configmaps", "-A"))

    cluster.kubectl("create", "ns", "doomed")
    cluster.kubectl("create", "configmap", "c", "-n", "doomed", "--from-literal=a=b")
    cluster.kubectl("create", "role", "r", "--verb=get", "--resource=pods", "-n", "doomed")
    cluster.kubectl("create", "rolebinding", "rb", "--role=r", "--user=x", "-n", "doomed")
    cluster.kubectl("delete", "ns", "doomed", "--wait=false")
    wait_for(lambda: "NotFound" in cluster.kubectl("get", "ns", "doomed", check=False).stderr, 20,
             what="namespace doomed emptied and removed")
    for kind in ("configmaps", "roles", "rolebindings"):
        assert cluster.kubectl("get", kind, "-n", "doomed", "-o", "name").stdout.strip() == "", kind


def test_controller_manager_process_with_its_kubeconfig(tmp_path):
    """`kite controller-manager --kubeconfig DATA_DIR/controller-manager.kubeconfig` against a
    separate `kite apiserver`: namespace deletion and aggregation with the least privilege."""
    c = Cluster("apiserver", tmp_path).start()
    try:
        proc = KiteProcess(["controller-manager", "--kubeconfig", str(c.data_dir / "controller-manager.kubeconfig")],
                           c.workdir, "controller-manager").start()
        wait_for(lambda: b"controller-manager: running" in proc.log_path.read_bytes(), 15, what="controller-manager up")
        c.kubectl("create", "ns", "gone")
        c.kubectl("create", "configmap", "c", "-n", "gone", "--from-literal=a=b")
        c.kubectl("delete", "ns", "gone", "--wait=false")
        wait_for(lambda: "NotFound" in c.kubectl("get", "ns", "gone", check=False).stderr, 20, what="namespace gone")
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "leases-agg", "labels": {"rbac.authorization.k8s.io/aggregate-to-admin": "true"}},
                "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]}]}
        c.kubectl("apply", "-f", "-", input=json.dumps(role))
        wait_for(lambda: "widgets" in c.kubectl("get", "clusterrole", "admin", "-o", "json").stdout, 15,
                 what="admin aggregates leases-agg")
        log = proc.log_path.read_bytes()
        assert b"forbidden" not in log.lower(), log
        assert proc.stop() == 0
    finally:
        c.stop()
