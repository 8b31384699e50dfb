"""Services and EndpointSlices on `kite up` with real containers: cluster IPs from
--service-cluster-ip-range (explicit ones honoured or refused 422, kept over a restart), Kubernetes'
validation with its field paths, the kubernetes Service, and the EndpointSlice controller: a pod
whose readiness probe fails leaves its Service's slice as ready=false while it keeps Running, and
comes back when it passes; named target ports resolve to the container's port; kubectl expose,
create service, get svc,endpointslices and describe service. Needs root, runc, conmon, umoci."""
import ipaddress
import time

from test_pods_run import NS, cluster, cond, get, sh, status_of, wait  # noqa: F401

SVCS = f"/api/v1/namespaces/{NS}/services"
SLICES = f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices"
EPS = f"/api/v1/namespaces/{NS}/endpoints"
RANGE = ipaddress.ip_network("10.96.0.0/12")


def svc(name, ports=None, selector=None, **spec):
    body = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"ports": ports if ports is not None else [{"port": 80}], **spec}}
    if selector:
        body["spec"]["selector"] = selector
    return body


def slices_of(c, name):
    r = c.api().get(f"{SLICES}?labelSelector=kubernetes.io%2Fservice-name%3D{name}")
    assert r.status == 200, r
    return r.json()["items"]


def endpoints_of(c, name):
    return [e for s in slices_of(c, name) for e in s.get("endpoints", [])]


def causes(r):
    assert r.status == 422, r
    body = r.json()
    assert body["reason"] == "Invalid" and body["details"]["kind"] == "Service", body
    return {(x["field"], x["message"]) for x in body["details"]["causes"]}


def test_kubernetes_service(cluster):
    s = cluster.api().ok("GET", f"{SVCS}/kubernetes")
    assert s["spec"]["clusterIP"] == "10.96.0.1" and s["spec"]["clusterIPs"] == ["10.96.0.1"]
    assert s["spec"]["ports"] == [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": cluster.port}]
    assert "selector" not in s["spec"]
    # no selector: not the EndpointSlice controller's; the apiserver's lease reconciler lists itself
    sl = slices_of(cluster, "kubernetes")
    assert [(x["metadata"]["name"], [e["addresses"] for e in x["endpoints"]], x["ports"][0]["port"]) for x in sl] == \
        [("kubernetes", [["127.0.0.1"]], cluster.port)], sl
    assert "endpointslice.kubernetes.io/managed-by" not in sl[0]["metadata"]["labels"]
    # and its v1 Endpoints beside them, from the same list of live apiservers
    ep = wait(lambda: cluster.api().get(f"{EPS}/kubernetes").json().get("subsets"), 10, "kubernetes Endpoints")
    assert ep == [{"addresses": [{"ip": "127.0.0.1"}],
                   "ports": [{"name": "https", "port": cluster.port, "protocol": "TCP"}]}], ep
    out = cluster.kubectl("get", "endpoints", "kubernetes").stdout.splitlines()
    assert out[0].split() == ["NAME", "ENDPOINTS", "AGE"] and out[1].split()[:2] == ["kubernetes", f"127.0.0.1:{cluster.port}"], out
    assert cluster.kubectl("get", "ep", "kubernetes", "-o", "name").stdout.strip() == "endpoints/kubernetes"
    out = [line.split() for line in cluster.kubectl("describe", "ep", "kubernetes").stdout.splitlines()]
    assert ["Addresses:", "127.0.0.1"] in out and ["https", str(cluster.port), "TCP"] in out, out
    res = [line.split() for line in cluster.kubectl("api-resources", "--api-group=").stdout.splitlines()]
    assert ["endpoints", "ep", "v1", "true", "Endpoints"] in res, res


def test_defaults_and_allocation(cluster):
    api = cluster.api()
    s = api.ok("POST", SVCS, svc("alloc", [{"port": 80}], {"app": "none"}))
    spec = s["spec"]
    ip = ipaddress.ip_address(spec["clusterIP"])
    assert ip in RANGE and spec["clusterIPs"] == [spec["clusterIP"]]
    assert spec["type"] == "ClusterIP" and spec["sessionAffinity"] == "None"
    assert spec["ipFamilies"] == ["IPv4"] and spec["ipFamilyPolicy"] == "SingleStack"
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    assert s["status"] == {"loadBalancer": {}}
    # an explicit address is honoured; the same one again is taken; one outside the range refused
    s2 = api.ok("POST", SVCS, svc("fixed", clusterIP="10.96.0.42"))
    assert s2["spec"]["clusterIP"] == "10.96.0.42"
    assert causes(api.post(SVCS, svc("fixed2", clusterIP="10.96.0.42"))) == {
        ("spec.clusterIPs", 'Invalid value: []string{"10.96.0.42"}: failed to allocate IP 10.96.0.42: '
                            "provided IP is already allocated")}
    assert causes(api.post(SVCS, svc("outside", clusterIP="10.200.0.1"))) == {
        ("spec.clusterIPs", 'Invalid value: []string{"10.200.0.1"}: failed to allocate IP 10.200.0.1: the provided IP '
                            "(10.200.0.1) is not in the valid range. The range of valid IPs is 10.96.0.0/12")}
    # a refused create holds nothing: the address is free for the next one
    assert causes(api.post(SVCS, svc("invalid", [{"port": 0}], clusterIP="10.96.0.43")))
    assert api.ok("POST", SVCS, svc("fixed3", clusterIP="10.96.0.43"))["spec"]["clusterIP"] == "10.96.0.43"
    # a dry run holds nothing either
    r = api.post(SVCS + "?dryRun=All", svc("dry", clusterIP="10.96.0.44"))
    assert r.status == 201, r
    assert api.ok("POST", SVCS, svc("fixed4", clusterIP="10.96.0.44"))["spec"]["clusterIP"] == "10.96.0.44"
    # immutable; an update that leaves it out keeps it
    r = api.patch(f"{SVCS}/fixed", {"spec": {"clusterIP": "10.96.0.50", "clusterIPs": ["10.96.0.50"]}})
    assert causes(r) == {("spec.clusterIP", 'Invalid value: "10.96.0.50": field is immutable')}
    cur = api.ok("GET", f"{SVCS}/fixed")
    del cur["spec"]["clusterIP"], cur["spec"]["clusterIPs"]
    assert api.ok("PUT", f"{SVCS}/fixed", cur)["spec"]["clusterIP"] == "10.96.0.42"
    # deleting frees the address at once
    api.ok("DELETE", f"{SVCS}/fixed")
    assert api.ok("POST", SVCS, svc("fixed", clusterIP="10.96.0.42"))["spec"]["clusterIP"] == "10.96.0.42"
    # a Service that becomes an ExternalName lets its address go
    api.ok("POST", SVCS, svc("tochange", clusterIP="10.96.0.60"))
    r = api.patch(f"{SVCS}/tochange", {"spec": {"type": "ExternalName", "externalName": "example.com"}})
    assert r.status == 200, r
    assert "clusterIP" not in r.json()["spec"] and "ipFamilies" not in r.json()["spec"], r.json()
    assert api.ok("POST", SVCS, svc("took", clusterIP="10.96.0.60"))["spec"]["clusterIP"] == "10.96.0.60"
    # headless and NodePort
    assert api.ok("POST", SVCS, svc("headless", clusterIP="None"))["spec"]["clusterIPs"] == ["None"]
    np = api.ok("POST", SVCS, svc("np", type="NodePort"))["spec"]
    assert 30000 <= np["ports"][0]["nodePort"] <= 32767 and np["externalTrafficPolicy"] == "Cluster"
    taken = np["ports"][0]["nodePort"]
    r = api.post(SVCS, svc("np2", [{"port": 80, "nodePort": taken}], type="NodePort"))
    assert causes(r) == {("spec.ports[0].nodePort", f"Invalid value: {taken}: provided port is already allocated")}
    r = api.post(SVCS, svc("np3", [{"port": 80, "nodePort": 80}], type="NodePort"))
    assert causes(r) == {("spec.ports[0].nodePort", "Invalid value: 80: provided port is not in the valid range. "
                                                    "The range of valid ports is 30000-32767")}


def test_validation(cluster):
    api = cluster.api()
    r = api.post(SVCS, svc("bad", [{"port": 0, "protocol": "XTP"}, {"name": "a", "port": 80, "targetPort": "no--pe"}],
                           type="Foo", sessionAffinity="Sticky"))
    got = causes(r)
    assert ("spec.type", 'Unsupported value: "Foo": supported values: "ClusterIP", "ExternalName", "LoadBalancer", '
                         '"NodePort"') in got
    assert ("spec.sessionAffinity", 'Unsupported value: "Sticky": supported values: "ClientIP", "None"') in got
    assert ("spec.ports[0].name", "Required value") in got
    assert ("spec.ports[0].port", "Invalid value: 0: must be between 1 and 65535, inclusive") in got
    assert ("spec.ports[0].protocol", 'Unsupported value: "XTP": supported values: "SCTP", "TCP", "UDP"') in got
    assert ("spec.ports[1].targetPort", 'Invalid value: "no--pe": must not contain consecutive hyphens') in got
    assert causes(api.post(SVCS, svc("noports", []))) == {("spec.ports", "Required value")}
    assert causes(api.post(SVCS, svc("badip", clusterIP="1.2.3"))) >= {
        ("spec.clusterIPs[0]", 'Invalid value: "1.2.3": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)')}
    got = causes(api.post(SVCS, svc("9starts-with-digit")))
    assert {f for f, _ in got} == {"metadata.name"} and "DNS-1035" in next(iter(got))[1]
    r = api.post(SLICES, {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "x"},
                          "addressType": "IPv4", "endpoints": [{"addresses": ["not-an-ip"]}] + [
                              {"addresses": ["10.0.0.1"]}] * 1000})
    assert r.status == 422, r
    got = {(x["field"], x["message"]) for x in r.json()["details"]["causes"]}
    assert ("endpoints", "Too many: 1001: must have at most 1000 items") in got
    assert ("endpoints[0].addresses[0]", 'Invalid value: "not-an-ip": must be a valid IPv4 address') in got
    r = api.post(SLICES, {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "x"},
                          "addressType": "IPv5", "endpoints": []})
    assert {(x["field"], x["message"]) for x in r.json()["details"]["causes"]} == {
        ("addressType", 'Unsupported value: "IPv5": supported values: "FQDN", "IPv4", "IPv6"')}


def flag_pod(c, name, flagdir, labels):
    """A pod Ready while flagdir/ready exists (an exec readiness probe every second), serving a
    named port."""
    probe = {"exec": {"command": ["test", "-f", "/flag/ready"]}, "periodSeconds": 1, "failureThreshold": 1}
    spec = {"nodeName": c.node, "restartPolicy": "Always", "terminationGracePeriodSeconds": 1,
            "containers": [sh("c", "exec sleep 3600", readinessProbe=probe,
                              ports=[{"name": "web", "containerPort": 8080}],
                              volumeMounts=[{"name": "flag", "mountPath": "/flag"}])],
            "volumes": [{"name": "flag", "hostPath": {"path": str(flagdir), "type": "DirectoryOrCreate"}}]}
    c.api().ok("POST", f"/api/v1/namespaces/{NS}/pods",
               {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec})


def test_readiness_moves_endpoint(cluster, tmp_path):
    c = cluster
    flag = tmp_path / "flag"
    flag.mkdir()
    (flag / "ready").touch()
    api = c.api()
    api.ok("POST", SVCS, svc("web", [{"name": "http", "port": 80, "targetPort": "web"}], {"app": "web"}))
    # no pod yet: one empty placeholder slice, as upstream
    sl = wait(lambda: slices_of(c, "web"), 10, "the placeholder slice")
    assert len(sl) == 1 and sl[0]["endpoints"] == [] and "ports" not in sl[0]
    flag_pod(c, "web-1", flag, {"app": "web"})
    pod = wait(lambda: cond(status_of(c, "web-1"), "Ready") == "True" and get(c, "web-1"), 20, "web-1 Ready")
    ip = pod["status"]["podIP"]
    ep = wait(lambda: (e := endpoints_of(c, "web")) and e[0]["conditions"]["ready"] and e, 10, "a ready endpoint")
    assert ep == [{"addresses": [ip], "conditions": {"ready": True, "serving": True, "terminating": False},
                   "nodeName": c.node, "targetRef": {"kind": "Pod", "namespace": NS, "name": "web-1",
                                                     "uid": pod["metadata"]["uid"]}}]
    s = slices_of(c, "web")
    assert len(s) == 1
    s = s[0]
    name = s["metadata"]["name"]
    assert name.startswith("web-") and len(name) == len("web-") + 5
    assert s["addressType"] == "IPv4" and s["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    assert s["metadata"]["labels"] == {"kubernetes.io/service-name": "web",
                                       "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}
    owner = s["metadata"]["ownerReferences"]
    assert owner == [{"apiVersion": "v1", "kind": "Service", "name": "web",
                      "uid": api.ok("GET", f"{SVCS}/web")["metadata"]["uid"], "controller": True,
                      "blockOwnerDeletion": True}]
    # the probe fails: not ready, not serving, still Running; the slice is updated in place
    (flag / "ready").unlink()
    t0 = time.monotonic()
    wait(lambda: (e := endpoints_of(c, "web")) and e[0]["conditions"] == {"ready": False, "serving": False,
                                                                           "terminating": False}, 10, "not ready")
    assert time.monotonic() - t0 < 5
    assert status_of(c, "web-1")["phase"] == "Running"
    assert [x["metadata"]["name"] for x in slices_of(c, "web")] == [name]
    # and passes again
    (flag / "ready").touch()
    wait(lambda: (e := endpoints_of(c, "web")) and e[0]["conditions"]["ready"], 10, "ready again")
    assert [x["metadata"]["name"] for x in slices_of(c, "web")] == [name]
    # kubectl sees them as kube-apiserver's
    out = c.kubectl("get", "svc,endpointslices", "-l", "kubernetes.io/service-name=web").stdout
    assert f"{name}   IPv4          8080    {ip}" in out, out
    out = c.kubectl("get", "svc", "web").stdout.splitlines()
    assert out[0].split() == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    assert out[1].split()[:5] == ["web", "ClusterIP", api.ok("GET", f"{SVCS}/web")["spec"]["clusterIP"], "<none>",
                                  "80/TCP"]
    out = c.kubectl("describe", "service", "web").stdout
    assert f"Endpoints:                {ip}:8080" in out or any(
        line.split() == ["Endpoints:", f"{ip}:8080"] for line in out.splitlines()), out
    # the pod goes: its endpoint goes, the placeholder stays; the Service goes: so do its slices
    api.delete(f"/api/v1/namespaces/{NS}/pods/web-1")
    wait(lambda: get(c, "web-1") is None, 30, "web-1 gone")
    wait(lambda: (sl := slices_of(c, "web")) and sl[0]["endpoints"] == [], 10, "no endpoints")
    api.ok("DELETE", f"{SVCS}/web")
    wait(lambda: slices_of(c, "web") == [], 10, "slices deleted with their Service")


def test_endpoints_follow_deployment_readiness(cluster, tmp_path):
    """The endpoints controller: a Deployment's pods in their Service's v1 Endpoints, ready in
    addresses and not ready in notReadyAddresses; kubectl get ep and describe svc read them; a
    Service without a selector keeps the Endpoints its user wrote; the Service goes, so do they."""
    c = cluster
    api = c.api()
    flag = tmp_path / "flag"
    flag.mkdir()
    (flag / "ready").touch()
    api.ok("POST", SVCS, svc("manual", [{"port": 5432}]))
    manual = api.ok("POST", EPS, {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "manual"},
                                  "subsets": [{"addresses": [{"ip": "192.0.2.10"}], "ports": [{"port": 5432}]}]})
    assert manual["subsets"][0]["ports"] == [{"port": 5432, "protocol": "TCP"}]
    api.ok("POST", SVCS, svc("dep", [{"name": "http", "port": 80, "targetPort": "web"}], {"app": "dep"},
                             publishNotReadyAddresses=False))
    probe = {"exec": {"command": ["test", "-f", "/flag/ready"]}, "periodSeconds": 1, "failureThreshold": 1}
    template = {"metadata": {"labels": {"app": "dep"}},
                "spec": {"nodeName": c.node, "terminationGracePeriodSeconds": 1,
                         "containers": [sh("c", "exec sleep 3600", readinessProbe=probe,
                                           ports=[{"name": "web", "containerPort": 8080}],
                                           volumeMounts=[{"name": "flag", "mountPath": "/flag"}])],
                         "volumes": [{"name": "flag", "hostPath": {"path": str(flag), "type": "DirectoryOrCreate"}}]}}
    api.ok("POST", f"/apis/apps/v1/namespaces/{NS}/deployments",
           {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "dep"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "dep"}}, "template": template}})

    def subsets():
        return api.get(f"{EPS}/dep").json().get("subsets") or []

    ss = wait(lambda: (s := subsets()) and len(s[0].get("addresses", [])) == 2 and s, 30, "two ready addresses")
    pods = {p["metadata"]["name"]: p for p in api.ok("GET", f"/api/v1/namespaces/{NS}/pods?labelSelector=app%3Ddep")["items"]}
    ips = sorted(p["status"]["podIP"] for p in pods.values())
    assert [a["ip"] for a in ss[0]["addresses"]] == ips and "notReadyAddresses" not in ss[0], ss
    assert ss[0]["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    a = ss[0]["addresses"][0]
    assert a["nodeName"] == c.node and a["targetRef"]["kind"] == "Pod" and a["targetRef"]["name"] in pods
    ep = api.ok("GET", f"{EPS}/dep")
    assert ep["metadata"].get("labels") is None and "endpoints.kubernetes.io/managed-by" not in ep["metadata"].get("labels", {})
    out = c.kubectl("get", "endpoints", "dep").stdout.splitlines()
    assert out[1].split()[:2] == ["dep", ",".join(f"{ip}:8080" for ip in ips)], out
    out = c.kubectl("describe", "svc", "dep").stdout
    assert any(line.split()[:1] == ["Endpoints:"] and all(f"{ip}:8080" in line for ip in ips)
               for line in out.splitlines()), out
    # the probes fail: both addresses move to notReadyAddresses, and back
    (flag / "ready").unlink()
    ss = wait(lambda: (s := subsets()) and len(s[0].get("notReadyAddresses", [])) == 2 and s, 10, "not ready")
    assert "addresses" not in ss[0] and [x["ip"] for x in ss[0]["notReadyAddresses"]] == ips, ss
    # the annotation names when the change that caused the write happened: a pod's Ready transition
    ready_at = {next(x["lastTransitionTime"] for x in p["status"]["conditions"] if x["type"] == "Ready")
                for p in api.ok("GET", f"/api/v1/namespaces/{NS}/pods?labelSelector=app%3Ddep")["items"]}
    ann = api.ok("GET", f"{EPS}/dep")["metadata"].get("annotations", {})
    assert ann.get("endpoints.kubernetes.io/last-change-trigger-time") in ready_at, (ann, ready_at)
    assert c.kubectl("get", "ep", "dep", "--no-headers").stdout.split()[:2] != ["dep", f"{ips[0]}:8080"]
    (flag / "ready").touch()
    wait(lambda: (s := subsets()) and len(s[0].get("addresses", [])) == 2, 10, "ready again")
    # deleted by a user: written again
    api.ok("DELETE", f"{EPS}/dep")
    wait(lambda: len((subsets() or [{}])[0].get("addresses", [])) == 2, 10, "written again")
    # the selector-less Service's Endpoints are as its user wrote them
    assert api.ok("GET", f"{EPS}/manual")["metadata"]["resourceVersion"] == manual["metadata"]["resourceVersion"]
    api.ok("DELETE", f"/apis/apps/v1/namespaces/{NS}/deployments/dep")
    api.ok("DELETE", f"{SVCS}/dep")
    wait(lambda: api.get(f"{EPS}/dep").status == 404, 10, "Endpoints deleted with their Service")
    api.ok("DELETE", f"{SVCS}/manual")
    wait(lambda: api.get(f"{EPS}/manual").status == 404, 10, "Endpoints deleted with their Service")
    for name in pods:
        api.delete(f"/api/v1/namespaces/{NS}/pods/{name}?gracePeriodSeconds=0")


def test_kubectl_expose_and_create(cluster, tmp_path):
    c = cluster
    flag = tmp_path / "flag"
    flag.mkdir()
    (flag / "ready").touch()
    flag_pod(c, "exp", flag, {"run": "exp"})
    wait(lambda: cond(status_of(c, "exp"), "Ready") == "True", 20, "exp Ready")
    c.kubectl("expose", "pod", "exp", "--port=8000", "--target-port=web", "--name=exp")
    s = c.api().ok("GET", f"{SVCS}/exp")
    assert s["spec"]["selector"] == {"run": "exp"} and s["spec"]["ports"][0]["targetPort"] == "web"
    wait(lambda: [e["addresses"] for e in endpoints_of(c, "exp")] == [[status_of(c, "exp")["podIP"]]], 10,
         "exp's endpoint")
    c.kubectl("create", "service", "clusterip", "made", "--tcp=5678:8080")
    out = c.kubectl("get", "svc", "made", "-o", "wide").stdout
    assert "5678/TCP" in out and "app=made" in out, out
    c.api().delete(f"/api/v1/namespaces/{NS}/pods/exp")
    wait(lambda: get(c, "exp") is None, 30, "exp gone")


def test_allocation_survives_restart(cluster):
    c = cluster
    api = c.api()
    api.ok("POST", SVCS, svc("keep", clusterIP="10.96.0.77", selector={"app": "keep"}))
    before = wait(lambda: slices_of(c, "keep"), 10, "keep's placeholder")
    c.stop()
    c.restart()
    api = c.api()
    assert causes(api.post(SVCS, svc("keep2", clusterIP="10.96.0.77")))  # still held
    assert api.ok("GET", f"{SVCS}/keep")["spec"]["clusterIP"] == "10.96.0.77"
    time.sleep(2)  # the controller resynced after the restart: nothing churned
    assert [s["metadata"]["name"] for s in slices_of(c, "keep")] == [s["metadata"]["name"] for s in before]
    assert slices_of(c, "keep")[0]["metadata"]["resourceVersion"] == before[0]["metadata"]["resourceVersion"]
    c.node = wait(lambda: (api.get("/api/v1/nodes").json().get("items") or [None])[0], 20, "node")["metadata"]["name"]


def test_service_cidr_flag(tmp_path):
    from conftest import Cluster
    c = Cluster("apiserver", tmp_path, extra_args=["--service-cluster-ip-range", "10.0.0.0/24"]).start()
    try:
        api = c.api()
        assert api.ok("GET", f"{SVCS}/kubernetes")["spec"]["clusterIP"] == "10.0.0.1"
        ip = ipaddress.ip_address(api.ok("POST", SVCS, svc("a"))["spec"]["clusterIP"])
        assert ip in ipaddress.ip_network("10.0.0.0/24") and ip not in (ipaddress.ip_address("10.0.0.0"),
                                                                         ipaddress.ip_address("10.0.0.255"))
    finally:
        c.stop()
    bad = Cluster("apiserver", tmp_path / "bad", extra_args=["--service-cluster-ip-range", "10.0.0.0/8"])
    bad.proc.start()
    deadline = time.monotonic() + 10
    while bad.proc.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not bad.proc.alive()
    assert "--service-cluster-ip-range 10.0.0.0/8" in bad.proc.log_tail()
