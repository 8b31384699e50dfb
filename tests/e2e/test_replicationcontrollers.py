"""v1 ReplicationController under `kite up`: served (kubectl get rc, get all, scale, describe's
columns), defaulted and validated as kube-apiserver does, its pods kept by the replication
controller (the ReplicaSet controller's core for this kind), and python3-kubernetes 22.6's own
e2e tests for it (test_client.py's test_replication_controller_apis, test_utils.py's
test_create_from_multi_resource_yaml and test_create_multi_resource_from_directory, with their
manifests)."""
import json
import os
import shutil
import subprocess
import uuid

import pytest
from kubernetes import client, utils

from conftest import AGENT_FAST_FLAGS, KITE, REPO, Cluster, _workdir, delete_pods_now, wait_for

NS = "default"

MULTI_SERVICE = """apiVersion: v1
kind: Service
metadata:
  name: mock
  labels:
    app: mock
spec:
  ports:
  - port: 99
    protocol: TCP
    targetPort: 9949
  selector:
    app: mock
"""
MULTI_RC = """apiVersion: v1
kind: ReplicationController
metadata:
  name: mock
spec:
  replicas: 1
  selector:
    app: mock
  template:
    metadata:
      labels:
        app: mock
    spec:
      containers:
      - name: mock-container
        image: k8s.gcr.io/pause:2.0
        ports:
        - containerPort: 9949
          protocol: TCP
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if os.geteuid() != 0 or not all(shutil.which(b) for b in ("runc", "conmon", "umoci")):
        pytest.skip("needs root, runc, conmon and umoci (scripts/install-deps)")
    work = _workdir(tmp_path_factory, "rc")
    tar = os.path.join(os.path.dirname(KITE), "busybox.tar")
    if not os.path.exists(tar):
        tar = str(work / "busybox.tar")
        subprocess.run([str(REPO / "scripts/make-busybox-image"), tar], check=True, capture_output=True)
    c = Cluster("up", work, extra_args=AGENT_FAST_FLAGS)
    r = subprocess.run([KITE, "images", "import", tar, "--root-dir", str(c.data_dir / "agent")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    c.start()
    yield c
    c.kubectl("delete", "rc", "--all", check=False)
    delete_pods_now(c)
    c.stop()


def rc(name, replicas=2, labels=None, selector=None, image="busybox"):
    labels = labels or {"app": name}
    spec = {"replicas": replicas,
            "template": {"metadata": {"labels": labels},
                         "spec": {"terminationGracePeriodSeconds": 0,
                                  "containers": [{"name": "c", "image": image, "command": ["sleep", "3600"]}]}}}
    if selector is not None:
        spec["selector"] = selector
    return {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": name}, "spec": spec}


def pods_of(c, name):
    items = c.api().get(f"/api/v1/namespaces/{NS}/pods?labelSelector=app%3D{name}").json()["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


# -- python3-kubernetes 22.6's e2e tests (kubernetes/e2e_test), against kite

def test_replication_controller_apis(cluster):
    api = client.CoreV1Api(cluster.python_api_client())
    name = 'frontend-' + uuid.uuid4().hex[:5]
    rc_manifest = {
        'apiVersion': 'v1',
        'kind': 'ReplicationController',
        'metadata': {'labels': {'name': name},
                     'name': name},
        'spec': {'replicas': 2,
                 'selector': {'name': name},
                 'template': {'metadata': {
                     'labels': {'name': name}},
                     'spec': {'containers': [{
                         'image': 'nginx',
                         'name': 'nginx',
                         'ports': [{'containerPort': 80,
                                    'protocol': 'TCP'}]}]}}}}
    resp = api.create_namespaced_replication_controller(body=rc_manifest, namespace='default')
    assert name == resp.metadata.name
    assert 2 == resp.spec.replicas
    resp = api.read_namespaced_replication_controller(name=name, namespace='default')
    assert name == resp.metadata.name
    assert 2 == resp.spec.replicas
    api.delete_namespaced_replication_controller(name=name, namespace='default', propagation_policy='Background')


def test_create_from_multi_resource_yaml(cluster, tmp_path):
    path = tmp_path / "multi-resource.yaml"
    path.write_text(MULTI_SERVICE + "---\n" + MULTI_RC)
    k8s_client = cluster.python_api_client()
    utils.create_from_yaml(k8s_client, str(path))
    core_api = client.CoreV1Api(k8s_client)
    assert core_api.read_namespaced_service(name="mock", namespace="default") is not None
    assert core_api.read_namespaced_replication_controller(name="mock", namespace="default") is not None
    core_api.delete_namespaced_replication_controller(name="mock", namespace="default", propagation_policy="Background")
    core_api.delete_namespaced_service(name="mock", namespace="default", body={})


def test_create_multi_resource_from_directory(cluster, tmp_path):
    d = tmp_path / "multi-resource"
    d.mkdir()
    (d / "multi-resource-service.yaml").write_text(MULTI_SERVICE)
    (d / "multi-resource-replication-controller.yaml").write_text(MULTI_RC)
    k8s_client = cluster.python_api_client()
    utils.create_from_directory(k8s_client, str(d) + "/")
    core_api = client.CoreV1Api(k8s_client)
    assert core_api.read_namespaced_service(name="mock", namespace="default") is not None
    assert core_api.read_namespaced_replication_controller(name="mock", namespace="default") is not None
    core_api.delete_namespaced_replication_controller(name="mock", namespace="default", propagation_policy="Background")
    core_api.delete_namespaced_service(name="mock", namespace="default", body={})


# -- kite's own

def test_defaults_and_validation(cluster):
    api = cluster.api()
    # the selector and the labels default to the template's labels (SetDefaults_ReplicationController)
    r = api.ok("POST", f"/api/v1/namespaces/{NS}/replicationcontrollers", rc("dflt", replicas=0))
    assert r["spec"]["selector"] == {"app": "dflt"} and r["metadata"]["labels"] == {"app": "dflt"}, r
    r = api.post(f"/api/v1/namespaces/{NS}/replicationcontrollers", rc("bad", selector={"app": "other"}))
    assert r.status == 422, r.body
    st = r.json()
    assert st["reason"] == "Invalid" and st["details"]["kind"] == "ReplicationController", st
    assert "spec.template.metadata.labels: Invalid value: map[app:bad]: selector does not match template labels" \
        in st["message"], st["message"]
    bad = rc("neg", replicas=-1)
    r = api.post(f"/api/v1/namespaces/{NS}/replicationcontrollers", bad)
    assert r.status == 422 and "spec.replicas: Invalid value: -1: must be greater than or equal to 0" in r.json()["message"]
    bad = rc("rp")
    bad["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    r = api.post(f"/api/v1/namespaces/{NS}/replicationcontrollers", bad)
    assert r.status == 422 and 'spec.template.spec.restartPolicy: Unsupported value: "Never"' in r.json()["message"]
    api.delete(f"/api/v1/namespaces/{NS}/replicationcontrollers/dflt")


def test_controller_keeps_replicas_and_kubectl_shows_it(cluster):
    c = cluster
    c.api().ok("POST", f"/api/v1/namespaces/{NS}/replicationcontrollers", rc("keeper", replicas=2))
    pods = wait_for(lambda: len(p := pods_of(c, "keeper")) == 2 and p, 30, what="two pods")
    for p in pods:
        refs = p["metadata"]["ownerReferences"]
        assert refs[0]["kind"] == "ReplicationController" and refs[0]["apiVersion"] == "v1" and refs[0]["controller"], refs
        assert p["metadata"]["generateName"] == "keeper-"
    wait_for(lambda: c.api().get(f"/api/v1/namespaces/{NS}/replicationcontrollers/keeper").json()
             .get("status", {}).get("readyReplicas") == 2, 60, what="two ready replicas")
    out = c.kubectl("get", "rc", "keeper").stdout.splitlines()
    assert out[0].split() == ["NAME", "DESIRED", "CURRENT", "READY", "AGE"], out
    assert out[1].split()[:4] == ["keeper", "2", "2", "2"], out
    wide = c.kubectl("get", "rc", "keeper", "-o", "wide").stdout.splitlines()
    assert wide[0].split()[5:] == ["CONTAINERS", "IMAGES", "SELECTOR"] and wide[1].split()[5:] == ["c", "busybox", "app=keeper"], wide
    assert "replicationcontroller/keeper" in c.kubectl("get", "all").stdout
    # a pod deleted is replaced
    victim = pods[0]["metadata"]["name"]
    c.api().delete(f"/api/v1/namespaces/{NS}/pods/{victim}?gracePeriodSeconds=0")
    wait_for(lambda: len(p := pods_of(c, "keeper")) == 2 and victim not in [x["metadata"]["name"] for x in p], 30,
             what="a replacement")
    # /scale, as kubectl scale uses it
    c.kubectl("scale", "rc", "keeper", "--replicas=1")
    scale = c.api().get(f"/api/v1/namespaces/{NS}/replicationcontrollers/keeper/scale").json()
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 1 and scale["status"]["selector"] == "app=keeper", scale
    wait_for(lambda: len(pods_of(c, "keeper")) == 1, 30, what="one pod")
    # deleting it (background) lets the garbage collector take its pods
    c.kubectl("delete", "rc", "keeper", "--cascade=background")
    wait_for(lambda: not pods_of(c, "keeper"), 30, what="pods collected")


def test_orphans_are_adopted_and_a_changed_selector_releases(cluster):
    c = cluster
    c.api().ok("POST", f"/api/v1/namespaces/{NS}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "orphan", "labels": {"app": "adopt"}},
        "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]}})
    c.api().ok("POST", f"/api/v1/namespaces/{NS}/replicationcontrollers", rc("adopt", replicas=1))
    pod = wait_for(lambda: (p := c.api().get(f"/api/v1/namespaces/{NS}/pods/orphan").json())["metadata"]
                   .get("ownerReferences") and p, 30, what="adopted")
    assert pod["metadata"]["ownerReferences"][0]["name"] == "adopt"
    # one replica wanted, one adopted: nothing more is created
    assert [p["metadata"]["name"] for p in pods_of(c, "adopt")] == ["orphan"]
    # an RC's selector may change (a ReplicaSet's may not): the pod it no longer selects is released
    c.kubectl("patch", "rc", "adopt", "--type=merge", "-p",
              json.dumps({"spec": {"selector": {"app": "adopt", "v": "2"},
                                   "template": {"metadata": {"labels": {"app": "adopt", "v": "2"}}}}}))
    wait_for(lambda: not c.api().get(f"/api/v1/namespaces/{NS}/pods/orphan").json()["metadata"].get("ownerReferences"),
             30, what="released")
    wait_for(lambda: len(pods_of(c, "adopt")) == 2, 30, what="a new pod for the new selector")
    c.kubectl("delete", "rc", "adopt")
    c.kubectl("delete", "pod", "orphan", "--grace-period=0", "--force")
