"""What an apiserver keeps in the store for the Services it serves, on the embedded store: the
same RangeAllocation bitmaps kube-apiserver keeps in etcd (/registry/ranges/serviceips,
/registry/ranges/servicenodeports) and the kubernetes Service's endpoints from its master lease
(test_etcd.py covers two apiservers on etcd)."""
import base64
import json
import sqlite3

from conftest import Cluster, skip_on_etcd

SVCS = "/api/v1/namespaces/default/services"


def range_bits(c, key):
    """The offsets set in the bitmap at key (read from the apiserver's SQLite file) and its range."""
    skip_on_etcd(why="reads the bitmaps from the SQLite file; test_etcd.py reads them in etcd")
    con = sqlite3.connect(f"file:{c.data_dir / 'kite.db'}?mode=ro", uri=True)
    try:
        row = con.execute("SELECT value, deleted FROM kv WHERE key = ? ORDER BY rev DESC LIMIT 1", (key,)).fetchone()
    finally:
        con.close()
    assert row and not row[1], f"{key} is not in the store"
    o = json.loads(bytes(row[0]))
    assert o["kind"] == "RangeAllocation", o
    bits = bin(int.from_bytes(base64.b64decode(o["data"] or ""), "big"))[2:][::-1]
    return {i for i, ch in enumerate(bits) if ch == "1"}, o["range"]


def offset(ip):
    a = [int(x) for x in ip.split(".")]
    return (a[0] << 24 | a[1] << 16 | a[2] << 8 | a[3]) - (10 << 24 | 96 << 16) - 1


def test_allocations_are_kept_in_range_allocation_bitmaps(fresh_apiserver):
    c = fresh_apiserver
    api = c.api()
    try:
        bits, rng = range_bits(c, "/registry/ranges/serviceips")
        assert rng == "10.96.0.0/12" and offset("10.96.0.1") in bits  # the kubernetes Service's
        s = api.ok("POST", SVCS, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "r1"},
                                  "spec": {"type": "NodePort", "ports": [{"port": 80}]}})
        ip, port = s["spec"]["clusterIP"], s["spec"]["ports"][0]["nodePort"]
        assert offset(ip) in range_bits(c, "/registry/ranges/serviceips")[0]
        pbits, prng = range_bits(c, "/registry/ranges/servicenodeports")
        assert prng == "30000-32767" and port - 30000 in pbits
        api.ok("DELETE", f"{SVCS}/r1")
        assert offset(ip) not in range_bits(c, "/registry/ranges/serviceips")[0]
        assert port - 30000 not in range_bits(c, "/registry/ranges/servicenodeports")[0]
        # kept across a restart: the repair pass at start finds it current
        api.ok("POST", SVCS, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "r2"},
                              "spec": {"clusterIP": "10.96.0.50", "ports": [{"port": 80}]}})
    finally:
        api.close()
    c.stop()
    c.restart()
    assert offset("10.96.0.50") in range_bits(c, "/registry/ranges/serviceips")[0]
    api = c.api()
    try:
        r = api.post(SVCS, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "r3"},
                            "spec": {"clusterIP": "10.96.0.50", "ports": [{"port": 80}]}})
        assert r.status == 422 and "provided IP is already allocated" in r.body.decode(), r
    finally:
        api.close()


def test_advertise_address_and_no_endpoint_reconciler(tmp_path):
    slices = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dkubernetes"
    c = Cluster("apiserver", tmp_path / "adv", extra_args=["--advertise-address", "10.1.2.3"]).start()
    try:
        items = c.api().ok("GET", slices)["items"]
        assert [(i["endpoints"][0]["addresses"], i["ports"][0]["port"]) for i in items] == [(["10.1.2.3"], c.port)], items
        leases = c.api().ok("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?labelSelector="
                                   "apiserver.kubernetes.io%2Fidentity%3Dkube-apiserver")["items"]
        assert len(leases) == 1 and leases[0]["spec"]["leaseDurationSeconds"] == 3600, leases
    finally:
        c.stop()
    c = Cluster("apiserver", tmp_path / "none", extra_args=["--endpoint-reconciler-type", "none"]).start()
    try:
        assert c.api().ok("GET", slices)["items"] == []
    finally:
        c.stop()
