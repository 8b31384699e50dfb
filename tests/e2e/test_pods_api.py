"""The Pod API as kube-apiserver serves it: defaults (and the DefaultTolerationSeconds admission
plugin), validation, the immutable spec, graceful deletion (DeleteOptions in JSON, protobuf or
the query), the pods/binding and pods/eviction subresources, and `kite up`'s scheduler giving every
new pod its node."""
import json
import struct

import pytest

from conftest import assert_status_body, node_name_of_machine, wait_for

PODS = "/api/v1/namespaces/default/pods"


def pod_body(name, node=None, grace=None, **spec):
    spec = {"containers": [{"name": "c", "image": "busybox"}], **spec}
    if node:
        spec["nodeName"] = node
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def binding(name, node):
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"kind": "Node", "name": node}}


def eviction(name, **opts):
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"},
            "deleteOptions": opts}


def varint(v):
    v &= (1 << 64) - 1
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        out += bytes([b | (0x80 if v else 0)])
        if not v:
            return out


def pb_delete_options(grace=None):
    """kubectl's protobuf DeleteOptions: "k8s\\0" + runtime.Unknown{typeMeta, raw}."""
    raw = b"" if grace is None else b"\x08" + varint(grace)
    tm = b"\x0a\x02v1\x12\x0dDeleteOptions"
    return b"k8s\x00" + b"\x0a" + varint(len(tm)) + tm + b"\x12" + varint(len(raw)) + raw + b"\x1a\x00\x22\x00"


def success_status(r, code=201):
    assert r.status == code, r
    st = r.json()
    assert st["kind"] == "Status" and st["status"] == "Success" and st["code"] == code, st


def test_kubectl_run_defaults(apiserver, api):
    apiserver.kubectl("run", "p", "--image=busybox", "--restart=Never", "--", "sleep", "3600")
    pod = json.loads(apiserver.kubectl("get", "pod", "p", "-o", "json").stdout)
    spec, c = pod["spec"], pod["spec"]["containers"][0]
    assert spec["restartPolicy"] == "Never"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["securityContext"] == {}
    assert spec["enableServiceLinks"] is True
    assert spec["priority"] == 0
    assert c["imagePullPolicy"] == "Always"
    assert c["terminationMessagePath"] == "/dev/termination-log"
    assert c["terminationMessagePolicy"] == "File"
    assert c["resources"] == {}
    assert c["args"] == ["sleep", "3600"]
    assert spec["tolerations"] == [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    ]
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}

    out = apiserver.kubectl("get", "pods", "-o", "wide").stdout
    assert "NOMINATED NODE" in out and "p " in out and "Pending" in out, out
    desc = apiserver.kubectl("describe", "pod", "p").stdout
    assert "QoS Class:        BestEffort" in desc, desc
    assert "node.kubernetes.io/not-ready:NoExecute op=Exists for 300s" in desc, desc
    apiserver.kubectl("delete", "pod", "p")
    assert api.get(f"{PODS}/p").status == 404, "never bound: deleted at once"


def test_ports_qos_and_generate_name(api):
    body = pod_body("", containers=[{"name": "web", "image": "nginx:1.25", "ports": [{"containerPort": 80}],
                                     "resources": {"limits": {"cpu": "1", "memory": "64Mi"}}}])
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = "web-"
    p = api.ok("POST", PODS, body)
    assert p["metadata"]["name"].startswith("web-") and len(p["metadata"]["name"]) == 9, p["metadata"]
    c = p["spec"]["containers"][0]
    assert c["imagePullPolicy"] == "IfNotPresent"
    assert c["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert c["resources"]["requests"] == {"cpu": "1", "memory": "64Mi"}, "requests default to the limits"
    assert p["status"]["qosClass"] == "Guaranteed"
    api.ok("DELETE", f"{PODS}/{p['metadata']['name']}")


def test_validation(api):
    r = api.post(PODS, pod_body("bad", containers=[]))
    st = assert_status_body(r, 422, "Invalid")
    assert st["message"] == 'Pod "bad" is invalid: spec.containers: Required value', st
    r = api.post(PODS, pod_body("bad", containers=[{"name": "c", "image": "x"}, {"name": "c"}], restartPolicy="Sometimes"))
    st = assert_status_body(r, 422, "Invalid")
    fields = [(c["field"], c["reason"]) for c in st["details"]["causes"]]
    assert fields == [("spec.containers[1].name", "FieldValueDuplicate"), ("spec.containers[1].image", "FieldValueRequired"),
                      ("spec.restartPolicy", "FieldValueNotSupported")], st
    r = api.post(PODS, pod_body("bad", containers=[{"name": "c", "image": "x", "resources": {
        "requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]))
    st = assert_status_body(r, 422, "Invalid")
    assert st["details"]["causes"][0]["field"] == "spec.containers[0].resources.requests[cpu]", st
    assert "must be less than or equal to cpu limit of 1" in st["message"], st


def test_immutable_spec(apiserver, api):
    api.ok("POST", PODS, pod_body("imm"))
    # the image may change
    p = api.ok("PATCH", f"{PODS}/imm", {"spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}},
               ctype="application/strategic-merge-patch+json")
    assert p["spec"]["containers"][0]["image"] == "busybox:1.36"
    r = api.patch(f"{PODS}/imm", {"spec": {"restartPolicy": "Never"}})
    st = assert_status_body(r, 422, "Invalid")
    assert st["message"].startswith(
        'Pod "imm" is invalid: spec: Forbidden: pod updates may not change fields other than '
        "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
        "`spec.tolerations` (only additions to existing tolerations),"
        "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"), st
    # kubectl shows the same
    out = apiserver.kubectl("patch", "pod", "imm", "-p", '{"spec":{"nodeName":"elsewhere"}}', check=False)
    assert out.returncode != 0 and "pod updates may not change fields" in out.stderr, out
    api.ok("DELETE", f"{PODS}/imm")


def test_binding(api):
    api.ok("POST", PODS, pod_body("b1"))
    r = api.post(f"{PODS}/b1/binding", binding("b1", "n1"))
    success_status(r)
    p = api.ok("GET", f"{PODS}/b1")
    assert p["spec"]["nodeName"] == "n1"
    cond = [c for c in p["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert cond and cond[0]["status"] == "True", p["status"]
    r = api.post(f"{PODS}/b1/binding", binding("b1", "n2"))
    st = assert_status_body(r, 409, "Conflict")
    assert st["message"] == 'Operation cannot be fulfilled on pods/binding "b1": pod b1 is already assigned to node "n1"', st
    assert api.ok("GET", f"{PODS}/b1")["spec"]["nodeName"] == "n1"
    # the body names the pod of the URL, and is a Binding
    assert_status_body(api.post(f"{PODS}/b1/binding", binding("other", "n1")), 400, "BadRequest")
    assert_status_body(api.post(f"{PODS}/b1/binding", eviction("b1")), 400, "BadRequest")
    assert_status_body(api.post(f"{PODS}/nope/binding", binding("nope", "n1")), 404, "NotFound")
    # only POST
    assert_status_body(api.get(f"{PODS}/b1/binding"), 405)
    api.ok("DELETE", f"{PODS}/b1?gracePeriodSeconds=0")
    assert api.get(f"{PODS}/b1").status == 404


def test_discovery_lists_action_subresources(api):
    res = {r["name"]: r for r in api.ok("GET", "/api/v1")["resources"]}
    assert res["pods/binding"]["verbs"] == ["create"] and res["pods/binding"]["kind"] == "Binding"
    ev = res["pods/eviction"]
    assert ev["verbs"] == ["create"] and (ev["group"], ev["version"], ev["kind"]) == ("policy", "v1", "Eviction")


def test_graceful_delete(api):
    api.ok("POST", PODS, pod_body("g", node="n1", grace=40))
    r = api.delete(f"{PODS}/g")
    assert r.status == 200, r
    p = r.json()
    assert p["kind"] == "Pod" and p["metadata"]["deletionGracePeriodSeconds"] == 40, p["metadata"]
    first = p["metadata"]["deletionTimestamp"]
    assert api.ok("GET", f"{PODS}/g")["metadata"]["deletionTimestamp"] == first, "still there, terminating"
    # a longer grace changes nothing; a shorter one moves the deadline earlier
    p = api.ok("DELETE", f"{PODS}/g", {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 60})
    assert p["metadata"]["deletionGracePeriodSeconds"] == 40
    p = api.ok("DELETE", f"{PODS}/g", {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 10})
    assert p["metadata"]["deletionGracePeriodSeconds"] == 10
    assert p["metadata"]["deletionTimestamp"] < first, (p["metadata"], first)
    # grace 0 (the node agent confirming its containers are gone) removes it
    r = api.delete(f"{PODS}/g", body=json.dumps({"gracePeriodSeconds": 0}), ctype="application/json")
    assert r.status == 200, r
    assert api.get(f"{PODS}/g").status == 404

    # the request's grace, in the query
    api.ok("POST", PODS, pod_body("g2", node="n1"))
    p = api.ok("DELETE", f"{PODS}/g2?gracePeriodSeconds=7")
    assert p["metadata"]["deletionGracePeriodSeconds"] == 7
    assert_status_body(api.delete(f"{PODS}/g2?gracePeriodSeconds=soon"), 400, "BadRequest")
    # and in a protobuf body, as kubectl sends it
    ct = "application/vnd.kubernetes.protobuf"
    p = api.ok("DELETE", f"{PODS}/g2", body=pb_delete_options(3), ctype=ct)
    assert p["metadata"]["deletionGracePeriodSeconds"] == 3
    assert api.delete(f"{PODS}/g2", body=pb_delete_options(0), ctype=ct).status == 200
    assert api.get(f"{PODS}/g2").status == 404
    assert_status_body(api.delete(f"{PODS}/x", body=b"k8s\x00\x12\xff", ctype=ct), 400, "BadRequest")


def test_finalizers_hold_a_graceful_delete(api):
    body = pod_body("fin", node="n1", grace=30)
    body["metadata"]["finalizers"] = ["example.com/hold"]
    api.ok("POST", PODS, body)
    api.ok("DELETE", f"{PODS}/fin?gracePeriodSeconds=0")
    p = api.ok("GET", f"{PODS}/fin")
    assert p["metadata"]["deletionTimestamp"] and p["metadata"]["deletionGracePeriodSeconds"] == 0, p["metadata"]
    api.ok("PATCH", f"{PODS}/fin", {"metadata": {"finalizers": None}}, ctype="application/merge-patch+json")
    wait_for(lambda: api.get(f"{PODS}/fin").status == 404, 5, what="pod gone once the finalizer is")


def test_kubectl_force_delete(apiserver, api):
    api.ok("POST", PODS, pod_body("f", node="n1"))
    apiserver.kubectl("delete", "pod", "f", "--wait=false")
    assert api.ok("GET", f"{PODS}/f")["metadata"]["deletionGracePeriodSeconds"] == 30
    out = apiserver.kubectl("delete", "pod", "f", "--grace-period=0", "--force")
    assert 'pod "f" force deleted' in out.stdout, out
    assert api.get(f"{PODS}/f").status == 404


def test_eviction(api):
    api.ok("POST", PODS, pod_body("e1", node="n1", grace=20))
    success_status(api.post(f"{PODS}/e1/eviction", eviction("e1")))
    p = api.ok("GET", f"{PODS}/e1")
    assert p["metadata"]["deletionGracePeriodSeconds"] == 20, "evicted gracefully"
    success_status(api.post(f"{PODS}/e1/eviction", eviction("e1", gracePeriodSeconds=0)))
    assert api.get(f"{PODS}/e1").status == 404
    # unbound: at once; a failed precondition evicts nothing
    api.ok("POST", PODS, pod_body("e2"))
    r = api.post(f"{PODS}/e2/eviction", eviction("e2", preconditions={"uid": "not-it"}))
    assert_status_body(r, 409, "Conflict")
    success_status(api.post(f"{PODS}/e2/eviction", eviction("e2")))
    assert api.get(f"{PODS}/e2").status == 404
    assert_status_body(api.post(f"{PODS}/e2/eviction", eviction("e2")), 404, "NotFound")
    assert_status_body(api.post(f"{PODS}/e3/eviction", eviction("e2")), 400, "BadRequest")


def test_kubectl_drain_evicts(apiserver, api):
    """kubectl drain finds pods/eviction in discovery and evicts the node's pods."""
    api.ok("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "drain-me"}})
    api.ok("POST", PODS, pod_body("d1", node="drain-me", grace=0))
    out = apiserver.kubectl("drain", "drain-me", "--force", "--timeout=20s")
    assert "evicting pod default/d1" in out.stderr + out.stdout, out
    assert api.get(f"{PODS}/d1").status == 404


def test_deletecollection_is_graceful(api):
    api.ok("POST", PODS, pod_body("c1", node="n1"))
    api.ok("POST", PODS, pod_body("c2"))
    api.ok("DELETE", PODS)
    assert api.get(f"{PODS}/c2").status == 404, "unbound: gone"
    assert api.ok("GET", f"{PODS}/c1")["metadata"]["deletionGracePeriodSeconds"] == 30
    api.ok("DELETE", PODS, body=json.dumps({"gracePeriodSeconds": 0}), ctype="application/json")
    assert api.get(f"{PODS}/c1").status == 404


def test_scheduler_in_kite_up(up_cluster):
    api = up_cluster.api()
    node = node_name_of_machine()
    api.ok("POST", PODS, pod_body("bound-by-up"))
    p = wait_for(lambda: api.ok("GET", f"{PODS}/bound-by-up")["spec"].get("nodeName"), 15, what="pod bound")
    assert p == node
    # a pod for another scheduler is left alone
    api.ok("POST", PODS, pod_body("other-sched", schedulerName="my-scheduler"))
    api.ok("POST", PODS, pod_body("after"))
    wait_for(lambda: api.ok("GET", f"{PODS}/after")["spec"].get("nodeName"), 15, what="second pod bound")
    assert "nodeName" not in api.ok("GET", f"{PODS}/other-sched")["spec"]
    api.close()
