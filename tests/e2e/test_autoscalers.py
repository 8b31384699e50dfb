"""autoscaling/v2 HorizontalPodAutoscaler as a stored kind (no controller: kite serves no metrics
API): kubectl autoscale creates one, kubectl get hpa prints upstream's columns, get all lists it,
defaults and validation as kube-apiserver's."""
import pytest

NS = "default"
HPA = f"/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers"


@pytest.fixture(scope="module")
def c(apiserver):
    apiserver.kubectl("create", "deployment", "web", "--image=busybox", "--", "sleep", "3600")
    return apiserver


def test_kubectl_autoscale_get_and_all(c):
    c.kubectl("autoscale", "deployment", "web", "--min=2", "--max=5", "--cpu-percent=70")
    h = c.api().get(f"{HPA}/web").json()
    assert h["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, h
    assert h["spec"]["minReplicas"] == 2 and h["spec"]["maxReplicas"] == 5
    out = c.kubectl("get", "hpa", "web").stdout.splitlines()
    assert out[0].split() == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"], out
    assert out[1].split()[:7] == ["web", "Deployment/web", "cpu:", "<unknown>/70%", "2", "5", "0"], out
    assert c.kubectl("get", "all").stdout.count("horizontalpodautoscaler.autoscaling/web") == 1
    # autoscaling/v1 (what kubectl autoscale wrote) reads the same object
    v1 = c.api().get(f"/apis/autoscaling/v1/namespaces/{NS}/horizontalpodautoscalers/web").json()
    assert v1["apiVersion"] == "autoscaling/v1" and v1["spec"]["targetCPUUtilizationPercentage"] == 70, v1
    assert c.api().get("/apis/autoscaling").json()["preferredVersion"]["version"] == "v2"
    c.kubectl("delete", "hpa", "web")


def test_defaults_and_validation(c):
    api = c.api()
    body = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "d"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "maxReplicas": 3, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}}
    h = api.ok("POST", HPA, body)
    assert h["spec"]["minReplicas"] == 1
    assert h["spec"]["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}], h["spec"]
    assert h["spec"]["behavior"]["scaleUp"]["policies"][0] == {"type": "Pods", "value": 4, "periodSeconds": 15}
    assert h["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 60
    api.delete(f"{HPA}/d")
    bad = dict(body, metadata={"name": "bad"}, spec=dict(body["spec"], minReplicas=4, maxReplicas=2))
    r = api.post(HPA, bad)
    assert r.status == 422, r.body
    assert "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`" in r.json()["message"]
    bad = dict(body, metadata={"name": "bad"}, spec={"scaleTargetRef": {"kind": "Deployment"}, "maxReplicas": 1})
    r = api.post(HPA, bad)
    assert r.status == 422 and "spec.scaleTargetRef.name: Required value" in r.json()["message"], r.body
