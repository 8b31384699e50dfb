"""ReplicaSets, Deployments and the garbage collector with real containers: `kite up` with the
runc runtime and the busybox image. A ReplicaSet replaces a deleted pod; a Deployment rolls a
new image without dropping below replicas - maxUnavailable ready pods, `rollout status`
returns and `rollout undo` goes back; deleting a Deployment removes its ReplicaSets and pods;
foreground and orphan deletes. Needs root, runc, conmon, umoci."""
import json
import os
import subprocess
import threading
import time

import pytest

from conftest import busybox_tar, runc_up_cluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NS = "default"
APPS = f"/apis/apps/v1/namespaces/{NS}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    def delete_workloads(c):
        api = c.api()
        for kind in ("deployments", "replicasets"):
            for d in api.get(f"{APPS}/{kind}").json().get("items", []):
                api.delete(f"{APPS}/{kind}/{d['metadata']['name']}")

    work = tmp_path_factory.mktemp("deploy-images")
    yield from runc_up_cluster(tmp_path_factory, "deploy", images=[retagged(busybox_tar(work), work, "v2")],
                               before_stop=delete_workloads)


def retagged(tar, work, tag):
    """The busybox image again, named busybox:<tag> (a "new version" to roll out)."""
    d = work / f"img-{tag}"
    d.mkdir()
    subprocess.run(["tar", "-C", str(d), "-xf", tar], check=True)
    idx = json.load(open(d / "index.json"))
    for m in idx["manifests"]:
        m.setdefault("annotations", {})["io.containerd.image.name"] = f"docker.io/library/busybox:{tag}"
        m["annotations"]["org.opencontainers.image.ref.name"] = tag
    json.dump(idx, open(d / "index.json", "w"))
    out = str(work / f"busybox-{tag}.tar")
    subprocess.run(["tar", "-C", str(d), "-cf", out, "."], check=True)
    return out


def wait(fn, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def template(app, image="busybox", readiness=True):
    c = {"name": "c", "image": image, "imagePullPolicy": "Never", "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"]}
    if readiness:
        c["readinessProbe"] = {"exec": {"command": ["true"]}, "periodSeconds": 1}
    return {"metadata": {"labels": {"app": app}},
            "spec": {"terminationGracePeriodSeconds": 2, "containers": [c]}}


def pods_of(c, app):
    items = c.api().get(f"/api/v1/namespaces/{NS}/pods?labelSelector=app%3D{app}").json()["items"]
    return items


def ready(p):
    return any(x["type"] == "Ready" and x["status"] == "True" for x in p.get("status", {}).get("conditions", []))


def live(items):
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def test_replicaset_replaces_a_deleted_pod(cluster):
    c = cluster
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs1"},
          "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "rs1"}}, "template": template("rs1")}}
    c.api().ok("POST", f"{APPS}/replicasets", rs)
    pods = wait(lambda: (p := live(pods_of(c, "rs1"))) and len(p) == 2 and all(ready(x) for x in p) and p, 40, "2 ready pods")
    for p in pods:
        ref = p["metadata"]["ownerReferences"][0]
        assert ref["kind"] == "ReplicaSet" and ref["name"] == "rs1" and ref["controller"] is True
        assert p["metadata"]["name"].startswith("rs1-")
    st = wait(lambda: (s := c.api().get(f"{APPS}/replicasets/rs1").json()["status"]).get("readyReplicas") == 2 and s, 20, "status")
    assert st["replicas"] == 2 and st["availableReplicas"] == 2 and st["fullyLabeledReplicas"] == 2
    assert st["observedGeneration"] == 1
    gone = pods[0]["metadata"]["name"]
    c.kubectl("delete", "pod", gone, "--wait=false")
    new = wait(lambda: (p := live(pods_of(c, "rs1"))) and len(p) == 2 and gone not in [x["metadata"]["name"] for x in p] and p,
               30, "a replacement pod")
    assert len(new) == 2
    out = c.kubectl("get", "rs", "rs1").stdout.split("\n")
    assert out[0].split() == ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]
    # scale down through /scale: the not-ready pod goes first
    c.kubectl("scale", "rs", "rs1", "--replicas=1")
    wait(lambda: len(live(pods_of(c, "rs1"))) == 1, 20, "one pod left")


def deploy_state(c, name):
    return c.api().get(f"{APPS}/deployments/{name}").json()


@pytest.mark.slow
def test_deployment_rolls_a_new_image_and_undo_goes_back(cluster):
    c = cluster
    d = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
         "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template("web"),
                  "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}}}}
    c.api().ok("POST", f"{APPS}/deployments", d)
    r = c.kubectl("rollout", "status", "deployment/web", "--timeout=60s", timeout=70)
    assert "successfully rolled out" in r.stdout
    st = deploy_state(c, "web")
    assert st["status"]["readyReplicas"] == 3 and st["status"]["updatedReplicas"] == 3
    assert st["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    conds = {x["type"]: x for x in st["status"]["conditions"]}
    assert conds["Available"]["status"] == "True"
    assert conds["Progressing"]["reason"] == "NewReplicaSetAvailable"
    rss = c.api().get(f"{APPS}/replicasets?labelSelector=app%3Dweb").json()["items"]
    assert len(rss) == 1
    h = rss[0]["metadata"]["labels"]["pod-template-hash"]
    assert rss[0]["metadata"]["name"] == f"web-{h}" and set(h) <= set("bcdfghjklmnpqrstvwxz2456789")
    out = c.kubectl("get", "deploy", "web").stdout.split("\n")
    assert out[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert out[1].split()[1:4] == ["3/3", "3", "3"]

    # sample ready pods throughout the rollout: never below replicas - maxUnavailable
    low, stop = [], threading.Event()

    def sample():
        while not stop.is_set():
            n = len([p for p in live(pods_of(c, "web")) if ready(p)])
            low.append(n)
            time.sleep(0.05)
    t = threading.Thread(target=sample)
    t.start()
    try:
        c.kubectl("set", "image", "deployment/web", "c=busybox:v2")
        r = c.kubectl("rollout", "status", "deployment/web", "--timeout=90s", timeout=100)
        assert "successfully rolled out" in r.stdout
    finally:
        stop.set()
        t.join()
    assert low and min(low) >= 2, f"ready pods dipped to {min(low)}"
    pods = live(pods_of(c, "web"))
    assert len(pods) == 3 and all(p["spec"]["containers"][0]["image"] == "busybox:v2" for p in pods)
    st = deploy_state(c, "web")
    assert st["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    hist = c.kubectl("rollout", "history", "deployment/web").stdout
    assert "1" in hist and "2" in hist

    c.kubectl("rollout", "undo", "deployment/web")
    r = c.kubectl("rollout", "status", "deployment/web", "--timeout=90s", timeout=100)
    assert "successfully rolled out" in r.stdout
    wait(lambda: (p := live(pods_of(c, "web"))) and len(p) == 3 and all(x["spec"]["containers"][0]["image"] == "busybox" for x in p),
         30, "pods back on busybox")
    st = deploy_state(c, "web")
    assert st["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    rss = c.api().get(f"{APPS}/replicasets?labelSelector=app%3Dweb").json()["items"]
    assert len(rss) == 2  # the first template's ReplicaSet was reused

    # scale through /scale, and restart
    c.kubectl("scale", "deployment/web", "--replicas=4")
    wait(lambda: deploy_state(c, "web")["status"].get("availableReplicas") == 4, 90, "4 available")
    c.kubectl("rollout", "restart", "deployment/web")
    r = c.kubectl("rollout", "status", "deployment/web", "--timeout=90s", timeout=100)
    assert "successfully rolled out" in r.stdout
    assert len(c.api().get(f"{APPS}/replicasets?labelSelector=app%3Dweb").json()["items"]) == 3


def make_deploy(c, name, replicas=2):
    d = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
         "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": template(name, readiness=False)}}
    c.api().ok("POST", f"{APPS}/deployments", d)
    wait(lambda: len(live(pods_of(c, name))) == replicas, 40, f"{name}'s pods")
    return c.api().get(f"{APPS}/replicasets?labelSelector=app%3D{name}").json()["items"]


def test_deleting_a_deployment_removes_its_replicasets_and_pods(cluster):
    c = cluster
    rss = make_deploy(c, "gone")
    assert len(rss) == 1
    c.kubectl("delete", "deployment", "gone")  # kubectl's default: Background
    wait(lambda: not c.api().get(f"{APPS}/replicasets?labelSelector=app%3Dgone").json()["items"], 30, "ReplicaSets deleted")
    wait(lambda: not pods_of(c, "gone"), 40, "pods deleted")


def test_foreground_delete_waits_for_dependents(cluster):
    c = cluster
    make_deploy(c, "fg")
    p = subprocess.Popen(["kubectl", "delete", "deployment", "fg", "--cascade=foreground", "--wait=false"],
                         env=c.kubectl_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.communicate(timeout=30)
    # the owner stays, being deleted, with the finalizer, while its dependents go
    seen = []
    def state():
        r = c.api().get(f"{APPS}/deployments/fg")
        if r.status == 404:
            return "gone"
        m = r.json()["metadata"]
        seen.append((m.get("deletionTimestamp") is not None, "foregroundDeletion" in m.get("finalizers", []),
                     len(pods_of(c, "fg"))))
        return None
    wait(state, 60, "the Deployment deleted after its dependents")
    assert seen and seen[0][0] and seen[0][1], seen
    assert not pods_of(c, "fg") and not c.api().get(f"{APPS}/replicasets?labelSelector=app%3Dfg").json()["items"]


def test_orphan_delete_keeps_dependents(cluster):
    c = cluster
    rss = make_deploy(c, "orph")
    c.kubectl("delete", "deployment", "orph", "--cascade=orphan")
    wait(lambda: c.api().get(f"{APPS}/deployments/orph").status == 404, 30, "the Deployment deleted")
    rs = c.api().get(f"{APPS}/replicasets/{rss[0]['metadata']['name']}").json()
    assert not rs["metadata"].get("ownerReferences"), rs["metadata"]
    time.sleep(2)
    assert len(live(pods_of(c, "orph"))) == 2
    # the ReplicaSet still owns its pods; deleting it (background) takes them
    c.kubectl("delete", "rs", rss[0]["metadata"]["name"])
    wait(lambda: not pods_of(c, "orph"), 40, "pods deleted")


def test_paused_deployment_scales_but_does_not_roll(cluster):
    """kubectl rollout pause: a new image makes no new ReplicaSet, a scale still resizes what
    runs, Progressing says DeploymentPaused; resume rolls the new image out."""
    c = cluster
    rss = make_deploy(c, "pz", replicas=1)
    assert len(rss) == 1
    c.kubectl("rollout", "pause", "deployment/pz")
    def cond():
        conds = deploy_state(c, "pz").get("status", {}).get("conditions", [])
        return next((x for x in conds if x["type"] == "Progressing" and x.get("reason") == "DeploymentPaused"), None)
    p = wait(cond, 20, "Progressing DeploymentPaused")
    assert p["status"] == "Unknown" and p["message"] == "Deployment is paused", p
    c.kubectl("set", "image", "deployment/pz", "c=busybox:paused-test")
    c.kubectl("scale", "deployment/pz", "--replicas=3")
    wait(lambda: len(live(pods_of(c, "pz"))) == 3, 60, "the paused Deployment scaled to 3")
    rss = c.api().get(f"{APPS}/replicasets?labelSelector=app%3Dpz").json()["items"]
    assert len(rss) == 1 and rss[0]["spec"]["replicas"] == 3, [(r["metadata"]["name"], r["spec"]) for r in rss]
    c.kubectl("rollout", "resume", "deployment/pz")
    wait(lambda: len(c.api().get(f"{APPS}/replicasets?labelSelector=app%3Dpz").json()["items"]) == 2, 30,
         "a new ReplicaSet after resume")
    wait(lambda: not any(x.get("reason") == "DeploymentPaused"
                         for x in deploy_state(c, "pz").get("status", {}).get("conditions", [])), 20,
         "the paused condition gone after resume")
    c.kubectl("delete", "deployment", "pz")
