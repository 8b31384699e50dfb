"""Overload protection (--max-requests-inflight): a flood of lists from an ordinary user is
answered 429 TooManyRequests past its share of the seats, with Retry-After and kube-apiserver's
Status, while a node's lease renewals (group system:nodes) are all served, and an admin
(system:masters, APF's exempt level) is never refused."""
import threading
import time

import pytest

from conftest import Cluster, assert_status_body, node_manifest

NODE = "node-a"
NODE_TOKEN = "node-a-token"
READER_TOKEN = "reader-token"
MAX_INFLIGHT = 8  # seats: workload requests get 6 of them, the last 2 are the nodes'
CONFIGMAPS = 300  # a list of them takes 3 seats: two at once fit the workload's 6
CM_PATH = "/api/v1/namespaces/default/configmaps"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{NODE}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("overload")
    tokens = work / "tokens.csv"
    tokens.write_text(f'{NODE_TOKEN},system:node:{NODE},3001,"system:nodes"\n'
                      f'{READER_TOKEN},reader,3002,"readers"\n')
    c = Cluster("apiserver", work, extra_args=["--token-auth-file", str(tokens),
                                               "--max-requests-inflight", str(MAX_INFLIGHT)]).start()
    admin = c.api()
    admin.ok("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
             {"metadata": {"name": "readers-view"},
              "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
              "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "readers"}]})
    for i in range(CONFIGMAPS):
        admin.ok("POST", CM_PATH, {"metadata": {"name": f"cm-{i:04d}"}, "data": {"k": "v" * 200}})
    admin.ok("POST", "/api/v1/nodes", node_manifest(NODE))
    admin.ok("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
             {"metadata": {"name": NODE, "namespace": "kube-node-lease"},
              "spec": {"holderIdentity": NODE, "leaseDurationSeconds": 40}})
    admin.close()
    yield c
    c.stop()


def metric(api, name):
    text = api.get("/metrics").body.decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def test_list_flood_gets_429_while_renewals_are_served(cluster):
    stop = threading.Event()
    lists = {"ok": 0, "429": 0, "other": []}
    refusal = []
    mu = threading.Lock()

    def flood():
        api = cluster.api(token=READER_TOKEN, with_client_cert=False)
        while not stop.is_set():
            r = api.get(CM_PATH)
            with mu:
                if r.status == 200:
                    lists["ok"] += 1
                elif r.status == 429:
                    lists["429"] += 1
                    if not refusal:
                        refusal.append(r)
                else:
                    lists["other"].append(r)
        api.close()

    renewals, lat = [], []

    def renew():
        api = cluster.api(token=NODE_TOKEN, with_client_cert=False)
        cur = api.ok("GET", LEASE_PATH)
        while not stop.is_set():
            cur["spec"]["renewTime"] = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
            t = time.monotonic()
            r = api.put(LEASE_PATH, cur)
            lat.append(time.monotonic() - t)
            renewals.append(r.status)
            if r.status == 200:
                cur = r.json()
            time.sleep(0.02)
        api.close()

    threads = [threading.Thread(target=flood) for _ in range(16)] + [threading.Thread(target=renew)]
    for t in threads:
        t.start()
    time.sleep(3)
    # the admin is exempt: served during the flood
    admin = cluster.api()
    r = admin.get(CM_PATH)
    stop.set()
    for t in threads:
        t.join()
    assert r.status == 200, r

    assert not lists["other"], lists["other"][:3]
    assert lists["429"] > 0, f"no list was refused: {lists}"
    assert lists["ok"] > 0, f"no list was served: {lists}"
    resp = refusal[0]
    st = assert_status_body(resp, 429, "TooManyRequests")
    assert st["message"] == "Too many requests, please try again later.", st
    assert st.get("details", {}).get("retryAfterSeconds") == 1, st
    assert resp.headers.get("retry-after") == "1", resp.headers

    # every renewal was served, none waited behind the lists for long
    assert len(renewals) >= 15, f"only {len(renewals)} renewals in 3 s"
    assert set(renewals) == {200}, f"renewals answered {sorted(set(renewals))}"
    assert max(lat) < 2.0, f"slowest renewal {max(lat):.2f} s"

    assert metric(admin, 'kite_inflight_rejected_total{class="workload"}') == lists["429"]
    assert metric(admin, 'kite_inflight_rejected_total{class="system"}') == 0
    assert metric(admin, 'kite_inflight_seats_limit{class="workload"}') == MAX_INFLIGHT - MAX_INFLIGHT // 4
    admin.close()
