"""Controller-manager restarts and leader changes leave the cluster's picture alone, against a bare
`kite apiserver` (pods stay Pending: no agent, no scheduler; the controllers only count them).

A controller-manager restarted under Deployments acts only once its informers have synced
(client-go's WaitForCacheSync): no pod created again, none deleted, one ReplicaSet per Deployment."""
import time

from conftest import KiteProcess, wait_for

APPS = "/apis/apps/v1/namespaces/default"
FILLER_NS = "filler"
FILLER_PODS = 300  # pods elsewhere make the pod list slower than the ReplicaSet list
DEPLOYMENTS = 4
REPLICAS = 3


def start_cm(cluster, name, *extra):
    return KiteProcess(["controller-manager", "--kubeconfig", str(cluster.kubeconfig), "--leader-elect=false",
                        "--controllers", "replicaset,deployment,garbagecollector", *extra],
                       cluster.workdir, name).start()


def deployment(name):
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": REPLICAS, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}


def events(api, reason):
    items = api.ok("GET", "/api/v1/namespaces/default/events")["items"]
    return [e for e in items if e["reason"] == reason]


def pods(api):
    return api.ok("GET", "/api/v1/namespaces/default/pods")["items"]


def test_restarted_controller_manager_creates_no_surplus_pods(fresh_apiserver):
    c = fresh_apiserver
    api = c.api()
    api.ok("POST", "/api/v1/namespaces", {"metadata": {"name": FILLER_NS}})
    for i in range(FILLER_PODS):
        api.ok("POST", f"/api/v1/namespaces/{FILLER_NS}/pods",
               {"metadata": {"name": f"f{i}"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    names = [f"web{i}" for i in range(DEPLOYMENTS)]
    for n in names:
        api.ok("POST", f"{APPS}/deployments", deployment(n))
    want = DEPLOYMENTS * REPLICAS
    cm = start_cm(c, "cm")
    try:
        wait_for(lambda: len(pods(api)) == want and len(events(api, "SuccessfulCreate")) == want, 30,
                 what=f"{want} pods created")
        for round_ in range(3):
            cm.stop()
            cm.start()
            wait_for(lambda: b"controllers running" in cm.log_path.read_bytes().rsplit(b"=== start", 1)[-1], 10,
                     what="the controllers running again")
            # a restarted controller that acts before its caches fill creates within a second
            time.sleep(3)
            created = events(api, "SuccessfulCreate")
            assert len(created) == want, f"round {round_}: {len(created)} creates for {want} pods"
            assert not events(api, "SuccessfulDelete"), f"round {round_}: pods deleted"
            assert len(pods(api)) == want
            rs = api.ok("GET", f"{APPS}/replicasets")["items"]
            assert len(rs) == DEPLOYMENTS, [r["metadata"]["name"] for r in rs]
            for n in names:
                d = api.ok("GET", f"{APPS}/deployments/{n}")
                assert not d["status"].get("collisionCount"), d["status"]
    finally:
        assert cm.stop() == 0

