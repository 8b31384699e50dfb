"""A node's credential through real HTTPS, checked against Kubernetes' Node authorizer and
NodeRestriction (kube-apiserver 1.32, --authorization-mode=Node,RBAC with no binding for nodes):
every verb x resource x (the node's own object, another node's object, an unrelated object),
allowed or refused, each refusal a 403 Status with kube-apiserver's message; the attacks a new
user tried with `kite kubeconfig --node A` are refused; and the same for a token user in
system:nodes (--token-auth-file).
"""
import json
import re
import subprocess

import pytest

from conftest import KITE, Api, Cluster, TLSIdentity, assert_status_body, node_manifest

NODE = "node-a"
OTHER = "node-b"
USER = f"system:node:{NODE}"
TOKEN = "node-a-token"
COORD = "coordination.k8s.io"
NL = "kube-node-lease"
LEASES = f"/apis/{COORD}/v1/namespaces"
PODS = "/api/v1/namespaces/default/pods"
SMP = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"


# ---------------------------------------------------------------- cluster and identities

@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("nodeauthz")
    tokens = work / "tokens.csv"
    tokens.write_text(f'{TOKEN},{USER},3001,"system:nodes"\n'
                      'kubelet-token,kubelet-x,3002,"system:nodes"\n')
    c = Cluster("apiserver", work, extra_args=["--token-auth-file", str(tokens)]).start()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def admin(cluster):
    a = cluster.api()
    yield a
    a.close()


def node_api(cluster, how):
    if how == "token":
        return cluster.api(token=TOKEN, with_client_cert=False)
    p = subprocess.run([KITE, "kubeconfig", "--data-dir", str(cluster.data_dir), "--node", NODE],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode == 0, p.stderr
    kc = cluster.workdir / f"{NODE}.kubeconfig"
    kc.write_text(p.stdout)
    return Api("127.0.0.1", cluster.port, TLSIdentity(kc, cluster.workdir).ctx)


def lease(name, ns=NL, holder=None):
    return {"apiVersion": f"{COORD}/v1", "kind": "Lease", "metadata": {"name": name, "namespace": ns},
            "spec": {"holderIdentity": holder or name, "leaseDurationSeconds": 40}}


def pod(name, node=None, secret=None, configmap=None, sa=None):
    spec = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    vols = []
    if secret:
        vols.append({"name": "s", "secret": {"secretName": secret}})
    if configmap:
        vols.append({"name": "c", "configMap": {"name": configmap}})
        spec["containers"][0]["env"] = [{"name": "E", "valueFrom": {"configMapKeyRef": {"name": configmap, "key": "k"}}}]
    if vols:
        spec["volumes"] = vols
    if sa:
        spec["serviceAccountName"] = sa
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def ensure(admin, path, body):
    r = admin.post(path, body)
    assert r.status in (201, 409), r


def setup_objects(admin):
    """The world the table runs against (idempotent: each identity's run starts from it)."""
    for n in (NODE, OTHER):
        ensure(admin, "/api/v1/nodes", node_manifest(n))
    for n in (NODE, OTHER):
        ensure(admin, f"{LEASES}/{NL}/leases", lease(n))
    ensure(admin, "/api/v1/namespaces", {"metadata": {"name": "team"}})
    for kind, names in (("secrets", ("sec-a", "sec-b", "sec-u")), ("configmaps", ("cm-a", "cm-b", "cm-u")),
                        ("serviceaccounts", ("sa-a", "sa-b", "sa-u"))):
        for n in names:
            body = {"metadata": {"name": n}}
            if kind != "serviceaccounts":
                body["data"] = {"k": "dg==" if kind == "secrets" else "v"}
            ensure(admin, f"/api/v1/namespaces/default/{kind}", body)
    ensure(admin, PODS, pod("pod-a", NODE, secret="sec-a", configmap="cm-a", sa="sa-a"))
    ensure(admin, PODS, pod("pod-b", OTHER, secret="sec-b", configmap="cm-b", sa="sa-b"))
    ensure(admin, PODS, pod("pod-u"))
    for n in ("pod-a-del", "pod-a-evict"):
        ensure(admin, PODS, pod(n, NODE))
    ensure(admin, "/api/v1/namespaces/default/events",
           {"metadata": {"name": "ev-u"}, "involvedObject": {"kind": "Node", "name": OTHER}, "reason": "X"})


# ---------------------------------------------------------------- expectations

class Allow:
    """Allowed: the answer is whatever the request gets past authorization (codes listed)."""

    def __init__(self, *codes):
        self.codes = codes or (200, 201)


class Authz:
    """Refused by authorization: kube-apiserver's message, built from the request attributes."""

    def __init__(self, verb, resource, name=None, ns=None, sub=None, group="", reason=None):
        self.verb, self.resource, self.name, self.ns, self.sub, self.group = verb, resource, name, ns, sub, group
        self.reason = reason

    def message(self, user):
        gr = self.resource + ("." + self.group if self.group else "")
        m = gr + (f' "{self.name}"' if self.name else "") + " is forbidden: "
        res = self.resource + ("/" + self.sub if self.sub else "")
        m += f'User "{user}" cannot {self.verb} resource "{res}" in API group "{self.group}" '
        m += f'in the namespace "{self.ns}"' if self.ns else "at the cluster scope"
        return m


class Admission:
    """Refused by NodeRestriction: admission.NewForbidden's message."""

    def __init__(self, resource, name, why, group=""):
        self.resource, self.name, self.why, self.group = resource, name, why, group

    def message(self, user):
        gr = self.resource + ("." + self.group if self.group else "")
        return f'{gr} "{self.name}" is forbidden: {self.why}'


def core(res, name=None, ns=None, sub=None, query=""):
    p = "/api/v1" + (f"/namespaces/{ns}" if ns else "") + f"/{res}" + (f"/{name}" if name else "")
    return p + (f"/{sub}" if sub else "") + query


def lease_path(ns, name=None):
    return f"{LEASES}/{ns}/leases" + (f"/{name}" if name else "")


def mirror_pod(node_uid, name="mirror-a", node=NODE):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {"kubernetes.io/config.mirror": "hash"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid,
                                              "controller": True}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}}


def eviction(name):
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}}


def table(node_uid):
    """(what, method, path, body, content type, expectation), in the order they run: writes that
    remove what later rows need come last."""
    N, O = NODE, OTHER
    lease_b_takeover = lease(O, holder=N)
    own_node_label = {"metadata": {"labels": {"kubelet.kubernetes.io/role": "e2e"}}}
    return [
        # -- nodes: own, another, none named
        ("get own node", "GET", core("nodes", N), None, None, Allow(200)),
        ("get another node", "GET", core("nodes", O), None, None,
         Authz("get", "nodes", O, reason=f"node '{N}' cannot read '{O}', only its own Node object")),
        ("get an unregistered node", "GET", core("nodes", "node-z"), None, None, Authz("get", "nodes", "node-z")),
        ("list nodes", "GET", core("nodes"), None, None,
         Authz("list", "nodes", reason=f"node '{N}' cannot read all nodes, only its own Node object")),
        ("list own node by name", "GET", core("nodes", query=f"?fieldSelector=metadata.name%3D{N}"), None, None, Allow(200)),
        ("list another node by name", "GET", core("nodes", query=f"?fieldSelector=metadata.name%3D{O}"), None, None,
         Authz("list", "nodes", O)),
        ("watch own node", "GET", core("nodes", query=f"?watch=true&timeoutSeconds=1&fieldSelector=metadata.name%3D{N}"),
         None, None, Allow(200)),
        ("watch all nodes", "GET", core("nodes", query="?watch=true&timeoutSeconds=1"), None, None, Authz("watch", "nodes")),
        ("create own node again", "POST", core("nodes"), node_manifest(N), None, Allow(409)),
        ("create a node for another name", "POST", core("nodes"), node_manifest("node-z"), None,
         Admission("nodes", "node-z", f'node "{N}" is not allowed to modify node "node-z"')),
        ("create another node that exists", "POST", core("nodes"), node_manifest(O), None,
         Admission("nodes", O, f'node "{N}" is not allowed to modify node "{O}"')),
        ("patch own node", "PATCH", core("nodes", N), own_node_label, SMP, Allow(200)),
        ("patch another node", "PATCH", core("nodes", O), own_node_label, SMP,
         Authz("patch", "nodes", O, reason=f'node "{N}" is not allowed to modify node "{O}"')),
        ("update another node", "PUT", core("nodes", O), node_manifest(O), None, Authz("update", "nodes", O)),
        ("patch own status", "PATCH", core("nodes", N, sub="status"),
         {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, SMP, Allow(200)),
        ("patch another's status to NotReady", "PATCH", core("nodes", O, sub="status"),
         {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}, SMP,
         Authz("patch", "nodes", O, sub="status", reason=f'node "{N}" is not allowed to modify node "{O}"')),
        ("update another's status", "PUT", core("nodes", O, sub="status"), node_manifest(O), None,
         Authz("update", "nodes", O, sub="status")),
        ("label itself node-restriction.kubernetes.io/x", "PATCH", core("nodes", N),
         {"metadata": {"labels": {"node-restriction.kubernetes.io/x": "y"}}}, SMP,
         Admission("nodes", N, "is not allowed to modify labels: node-restriction.kubernetes.io/x")),
        ("label itself control-plane", "PATCH", core("nodes", N),
         {"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}}, SMP,
         Admission("nodes", N, "is not allowed to modify labels: node-role.kubernetes.io/control-plane")),
        ("label itself through status", "PATCH", core("nodes", N, sub="status"),
         {"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}}, SMP,
         Admission("nodes", N, "is not allowed to modify labels: node-role.kubernetes.io/control-plane")),
        ("untaint itself", "PATCH", core("nodes", N),
         {"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}, MERGE,
         Admission("nodes", N, f'node "{N}" is not allowed to modify taints')),
        ("delete own node", "DELETE", core("nodes", N), None, None, Authz("delete", "nodes", N)),
        ("delete another node", "DELETE", core("nodes", O), None, None, Authz("delete", "nodes", O)),
        ("delete all nodes", "DELETE", core("nodes"), None, None, Authz("deletecollection", "nodes")),
        # -- leases
        ("get own lease", "GET", lease_path(NL, N), None, None, Allow(200)),
        ("get another's lease", "GET", lease_path(NL, O), None, None,
         Authz("get", "leases", O, ns=NL, group=COORD,
               reason="can only access node lease with the same name as the requesting node")),
        ("renew own lease", "PUT", lease_path(NL, N), lease(N), None, Allow(200)),
        ("patch own lease", "PATCH", lease_path(NL, N), {"spec": {"leaseDurationSeconds": 40}}, MERGE, Allow(200)),
        ("replace another's lease", "PUT", lease_path(NL, O), lease_b_takeover, None,
         Authz("update", "leases", O, ns=NL, group=COORD)),
        ("patch another's lease", "PATCH", lease_path(NL, O), {"spec": {"holderIdentity": N}}, MERGE,
         Authz("patch", "leases", O, ns=NL, group=COORD)),
        ("create another's lease", "POST", lease_path(NL), lease("node-z"), None,
         Admission("leases", "node-z", "can only access node lease with the same name as the requesting node", COORD)),
        ("delete another's lease", "DELETE", lease_path(NL, O), None, None, Authz("delete", "leases", O, ns=NL, group=COORD)),
        ("list node leases", "GET", lease_path(NL), None, None,
         Authz("list", "leases", ns=NL, group=COORD, reason="can only get, create, update, patch, or delete a node lease")),
        ("take the controller-manager's lease", "POST", lease_path("kube-system"), lease("kube-controller-manager", "kube-system"),
         None, Authz("create", "leases", ns="kube-system", group=COORD,
                     reason=f'can only access leases in the "{NL}" system namespace')),
        ("update a lease elsewhere", "PUT", lease_path("default", N), lease(N, "default"), None,
         Authz("update", "leases", N, ns="default", group=COORD)),
        # -- pods
        ("get own pod", "GET", core("pods", "pod-a", "default"), None, None, Allow(200)),
        ("get another's pod", "GET", core("pods", "pod-b", "default"), None, None,
         Authz("get", "pods", "pod-b", "default", reason=f"no relationship found between node '{N}' and this object")),
        ("get an unbound pod", "GET", core("pods", "pod-u", "default"), None, None,
         Authz("get", "pods", "pod-u", "default", reason=f"no relationship found between node '{N}' and this object")),
        ("list all pods", "GET", core("pods"), None, None,
         Authz("list", "pods", reason="can only list/watch pods with spec.nodeName field selector")),
        ("list pods of a namespace", "GET", core("pods", ns="default"), None, None, Authz("list", "pods", ns="default")),
        ("list own pods", "GET", core("pods", query=f"?fieldSelector=spec.nodeName%3D{N}"), None, None, Allow(200)),
        ("list another's pods", "GET", core("pods", query=f"?fieldSelector=spec.nodeName%3D{O}"), None, None,
         Authz("list", "pods")),
        ("watch own pods", "GET", core("pods", query=f"?watch=1&timeoutSeconds=1&fieldSelector=spec.nodeName%3D{N}"),
         None, None, Allow(200)),
        ("watch all pods", "GET", core("pods", query="?watch=1&timeoutSeconds=1"), None, None, Authz("watch", "pods")),
        ("create a pod", "POST", core("pods", ns="default"), pod("made-by-node", N), None,
         Admission("pods", "made-by-node", f'pod does not have "kubernetes.io/config.mirror" annotation, node "{N}" can '
                   "only create mirror pods")),
        ("create a mirror pod for another node", "POST", core("pods", ns="default"), mirror_pod(node_uid, "mirror-b", O),
         None, Admission("pods", "mirror-b", f'node "{N}" can only create pods with spec.nodeName set to itself')),
        ("create own mirror pod", "POST", core("pods", ns="default"), mirror_pod(node_uid), None, Allow(201)),
        ("update a pod", "PATCH", core("pods", "pod-a", "default"), {"metadata": {"labels": {"x": "y"}}}, SMP,
         Authz("patch", "pods", "pod-a", "default")),
        ("patch own pod's status", "PATCH", core("pods", "pod-a", "default", "status"),
         {"status": {"phase": "Running"}}, SMP, Allow(200)),
        ("patch another's pod's status", "PATCH", core("pods", "pod-b", "default", "status"),
         {"status": {"phase": "Failed"}}, SMP,
         Admission("pods", "pod-b", f'node "{N}" can only update pod status for pods with spec.nodeName set to itself')),
        ("patch an unbound pod's status", "PATCH", core("pods", "pod-u", "default", "status"),
         {"status": {"phase": "Failed"}}, SMP,
         Admission("pods", "pod-u", f'node "{N}" can only update pod status for pods with spec.nodeName set to itself')),
        ("relabel own pod through status", "PATCH", core("pods", "pod-a", "default", "status"),
         {"metadata": {"labels": {"x": "y"}}}, SMP,
         Admission("pods", "pod-a", f'node "{N}" cannot update labels through pod status')),
        ("bind a pod", "POST", core("pods", "pod-u", "default", "binding"),
         {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "pod-u"}, "target": {"kind": "Node", "name": N}}, None,
         Authz("create", "pods", "pod-u", "default", sub="binding")),
        ("evict another's pod", "POST", core("pods", "pod-b", "default", "eviction"), eviction("pod-b"), None,
         Admission("pods", "pod-b", f"node {N} can only evict pods with spec.nodeName set to itself")),
        ("evict own pod", "POST", core("pods", "pod-a-evict", "default", "eviction"), eviction("pod-a-evict"), None,
         Allow(201)),
        ("delete another's pod", "DELETE", core("pods", "pod-b", "default"), None, None,
         Admission("pods", "pod-b", f'node "{N}" can only delete pods with spec.nodeName set to itself')),
        ("delete an unbound pod", "DELETE", core("pods", "pod-u", "default"), None, None,
         Admission("pods", "pod-u", f'node "{N}" can only delete pods with spec.nodeName set to itself')),
        ("delete own pod", "DELETE", core("pods", "pod-a-del", "default", query="?gracePeriodSeconds=0"), None, None,
         Allow(200)),
        ("delete all pods", "DELETE", core("pods", ns="default"), None, None, Authz("deletecollection", "pods", ns="default")),
        # -- what its pods reference: secrets, configmaps, service account tokens
        ("get own pod's secret", "GET", core("secrets", "sec-a", "default"), None, None, Allow(200)),
        ("list own pod's secret by name", "GET", core("secrets", ns="default", query="?fieldSelector=metadata.name%3Dsec-a"),
         None, None, Allow(200)),
        ("get another's pod's secret", "GET", core("secrets", "sec-b", "default"), None, None,
         Authz("get", "secrets", "sec-b", "default", reason=f"no relationship found between node '{N}' and this object")),
        ("get an unrelated secret", "GET", core("secrets", "sec-u", "default"), None, None,
         Authz("get", "secrets", "sec-u", "default")),
        ("list secrets", "GET", core("secrets", ns="default"), None, None,
         Authz("list", "secrets", ns="default", reason="No Object name found")),
        ("list all secrets", "GET", core("secrets"), None, None,
         Authz("list", "secrets", reason="can only read namespaced object of this type")),
        ("create a secret", "POST", core("secrets", ns="default"), {"metadata": {"name": "by-node"}}, None,
         Authz("create", "secrets", ns="default", reason="can only read resources of this type")),
        ("delete own pod's secret", "DELETE", core("secrets", "sec-a", "default"), None, None,
         Authz("delete", "secrets", "sec-a", "default")),
        ("get own pod's configmap", "GET", core("configmaps", "cm-a", "default"), None, None, Allow(200)),
        ("get another's pod's configmap", "GET", core("configmaps", "cm-b", "default"), None, None,
         Authz("get", "configmaps", "cm-b", "default")),
        ("get an unrelated configmap", "GET", core("configmaps", "cm-u", "default"), None, None,
         Authz("get", "configmaps", "cm-u", "default")),
        ("update own pod's configmap", "PUT", core("configmaps", "cm-a", "default"), {"metadata": {"name": "cm-a"}}, None,
         Authz("update", "configmaps", "cm-a", "default")),
        ("get own pod's service account", "GET", core("serviceaccounts", "sa-a", "default"), None, None,
         Authz("get", "serviceaccounts", "sa-a", "default",
               reason="can only create tokens for individual service accounts")),
        ("create a service account", "POST", core("serviceaccounts", ns="default"), {"metadata": {"name": "sa-n"}}, None,
         Authz("create", "serviceaccounts", ns="default")),
        # -- events
        ("create an event", "POST", core("events", ns="default"),
         {"metadata": {"name": "ev-a"}, "involvedObject": {"kind": "Node", "name": N}, "reason": "Started"}, None,
         Allow(201)),
        ("patch an event", "PATCH", core("events", "ev-a", "default"), {"count": 2}, SMP, Allow(200)),
        ("create an events.k8s.io event", "POST", "/apis/events.k8s.io/v1/namespaces/default/events",
         {"metadata": {"name": "ev-a2"}, "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "kite",
          "reportingInstance": N, "action": "X", "reason": "Y", "regarding": {"kind": "Node", "name": N}}, None, Allow(201)),
        ("get an event", "GET", core("events", "ev-u", "default"), None, None, Authz("get", "events", "ev-u", "default")),
        ("list events", "GET", core("events"), None, None, Authz("list", "events")),
        ("delete an event", "DELETE", core("events", "ev-u", "default"), None, None,
         Authz("delete", "events", "ev-u", "default")),
        # -- namespaces
        ("get a namespace", "GET", core("namespaces", "default"), None, None, Authz("get", "namespaces", "default")),
        ("list namespaces", "GET", core("namespaces"), None, None, Authz("list", "namespaces")),
        ("create a namespace", "POST", core("namespaces"), {"metadata": {"name": "by-node"}}, None,
         Authz("create", "namespaces")),
        ("delete a namespace", "DELETE", core("namespaces", "team"), None, None, Authz("delete", "namespaces", "team")),
        # -- own lease last: deleting it is allowed (a kubelet recreates it), as upstream
        ("delete own lease", "DELETE", lease_path(NL, N), None, None, Allow(200)),
        ("create own lease", "POST", lease_path(NL), lease(N), None, Allow(201)),
    ]


def check_refusal(what, r, exp, user):
    st = assert_status_body(r, 403, "Forbidden")
    want = exp.message(user)
    if isinstance(exp, Authz):
        assert st["message"].startswith(want), f"{what}: {st['message']!r} does not start with {want!r}"
        rest = st["message"][len(want):]
        if exp.reason is not None:
            assert rest == ": " + exp.reason, f"{what}: {st['message']!r}"
        else:
            assert rest == "" or rest.startswith(": "), f"{what}: {st['message']!r}"
        name, group, kind = exp.name, exp.group, exp.resource
    else:
        assert st["message"] == want, f"{what}: {st['message']!r} != {want!r}"
        name, group, kind = exp.name, exp.group, exp.resource
    d = st.get("details") or {}
    assert d.get("name") == name, f"{what}: details {d}"
    assert d.get("group", "") == group, f"{what}: details {d}"
    assert d.get("kind") == kind, f"{what}: details {d}"


def run_table(cluster, admin, how):
    setup_objects(admin)
    node_uid = admin.ok("GET", f"/api/v1/nodes/{NODE}")["metadata"]["uid"]
    before_b = admin.ok("GET", f"/api/v1/nodes/{OTHER}")
    before_lease_b = admin.ok("GET", lease_path(NL, OTHER))
    api = node_api(cluster, how)
    failures = []
    try:
        for what, method, path, body, ctype, exp in table(node_uid):
            if body is not None and ctype:
                r = api.request(method, path, body=json.dumps(body), ctype=ctype)
            else:
                r = api.request(method, path, body=body)
            try:
                if isinstance(exp, Allow):
                    assert r.status in exp.codes, f"{what}: {method} {path} -> {r.status} {r.body[:400]!r}"
                else:
                    check_refusal(what, r, exp, USER)
            except AssertionError as e:
                failures.append(str(e))
    finally:
        api.close()
    assert not failures, f"{len(failures)} rows wrong ({how}):\n" + "\n".join(failures)
    # the refused attacks changed nothing
    after_b = admin.ok("GET", f"/api/v1/nodes/{OTHER}")
    assert after_b["metadata"]["resourceVersion"] == before_b["metadata"]["resourceVersion"]
    assert admin.ok("GET", lease_path(NL, OTHER))["spec"] == before_lease_b["spec"]
    labels = admin.ok("GET", f"/api/v1/nodes/{NODE}")["metadata"]["labels"]
    assert not [k for k in labels if "node-restriction" in k or k.startswith("node-role.")], labels
    assert admin.get("/api/v1/namespaces/team").json().get("metadata", {}).get("deletionTimestamp") is None
    assert admin.get(lease_path("kube-system", "kube-controller-manager")).status == 404
    assert admin.get("/api/v1/nodes/node-z").status == 404
    assert admin.get(f"{PODS}/pod-b").json()["status"].get("phase") != "Failed"
    # clean up what the allowed rows made, so the next identity starts the same
    for p in (f"{PODS}/mirror-a?gracePeriodSeconds=0", f"{PODS}/pod-a-evict?gracePeriodSeconds=0",
              "/api/v1/namespaces/default/events/ev-a", "/apis/events.k8s.io/v1/namespaces/default/events/ev-a2"):
        assert admin.delete(p).status in (200, 202, 404)


@pytest.mark.parametrize("how", ["cert", "token"])
def test_node_rights_table(cluster, admin, how):
    run_table(cluster, admin, how)


def test_non_resource_paths(cluster):
    api = node_api(cluster, "cert")
    try:
        assert api.get("/api").status == 200
        assert api.get("/apis").status == 200
        assert api.get("/version").status == 200
        assert api.get("/healthz").status == 200
        st = assert_status_body(api.get("/metrics"), 403, "Forbidden")
        assert st["message"] == f'forbidden: User "{USER}" cannot get path "/metrics"', st
    finally:
        api.close()


def test_unidentifiable_node_is_refused(cluster, admin):
    """A user in system:nodes whose name is not system:node:NAME gets nothing a node gets."""
    setup_objects(admin)
    api = cluster.api(token="kubelet-token", with_client_cert=False)
    try:
        st = assert_status_body(api.get(f"/api/v1/nodes/{NODE}"), 403, "Forbidden")
        assert st["message"] == (f'nodes "{NODE}" is forbidden: User "kubelet-x" cannot get resource "nodes" in API '
                                 'group "" at the cluster scope: unknown node for user "kubelet-x"'), st
        assert_status_body(api.put(lease_path(NL, NODE), lease(NODE)), 403, "Forbidden")
        assert_status_body(api.post(core("events", ns="default"), {"metadata": {"name": "x"}}), 403, "Forbidden")
    finally:
        api.close()


def test_up_agent_keeps_working_with_its_node_credential(up_cluster):
    """`kite up`'s own agent runs as system:node:NAME: it registers, renews its lease, reports status."""
    import time
    from conftest import node_name_of_machine, wait_for
    api = up_cluster.api()
    name = node_name_of_machine()
    try:
        def renewed():
            r = api.get(lease_path(NL, name))
            return r.status == 200 and r.json()["spec"].get("renewTime")
        first = wait_for(renewed, 20, what="the agent's lease")
        wait_for(lambda: renewed() != first, 10, what="a lease renewal")
        node = api.ok("GET", f"/api/v1/nodes/{name}")
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", node["status"]["conditions"]
        log = up_cluster.proc.log_path.read_text()
        # 403 as a word: timestamps and uids may contain the digits
        assert not re.search(r"\b403\b", log) and "Forbidden" not in log, log[-3000:]
        time.sleep(0)
    finally:
        api.close()
