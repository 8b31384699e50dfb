"""Watch bookmarks (allowWatchBookmarks=true): as kube-apiserver's cacher, one about every minute
and one 2 s before the watch times out, carrying the revision the watch is current to, which
for a filtered watch is past its last event; resuming from it loses nothing."""
import json
import threading
import time

import pytest

from conftest import LEASES

# the same answers on both stores: every test of the module's apiserver runs on SQLite and on etcd
pytestmark = pytest.mark.both_stores


def lease(name, label):
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "default", "labels": {"e2e-bm": label}},
            "spec": {"holderIdentity": name}}


def events(resp):
    assert resp.status == 200, resp
    return [json.loads(line) for line in resp.body.splitlines() if line.strip()]


def test_bookmark_before_timeout_carries_progress(apiserver, api):
    rv0 = api.ok("POST", LEASES, lease("e2e-bm-0", "no"))["metadata"]["resourceVersion"]
    late = {}

    def write_unmatched():
        time.sleep(0.8)
        late["rv"] = int(api2.ok("POST", LEASES, lease("e2e-bm-1", "no"))["metadata"]["resourceVersion"])

    api2 = apiserver.api()
    t = threading.Thread(target=write_unmatched)
    t.start()
    t0 = time.monotonic()
    r = api.get(f"{LEASES}?watch=true&labelSelector=e2e-bm%3Dyes&allowWatchBookmarks=true"
                f"&timeoutSeconds=4&resourceVersion={rv0}")
    took = time.monotonic() - t0
    t.join()
    api2.close()
    evs = events(r)
    assert [e["type"] for e in evs] == ["BOOKMARK"], evs
    bm = evs[0]["object"]
    assert bm["kind"] == "Lease" and bm["apiVersion"] == "coordination.k8s.io/v1", bm
    # the unmatched write during the watch moved it on: the bookmark is past it
    assert int(bm["metadata"]["resourceVersion"]) >= late["rv"], (bm, late)
    assert 3.5 <= took <= 6, took

    # resuming from the bookmark: exactly the matching change made after it
    api.ok("POST", LEASES, lease("e2e-bm-2", "yes"))
    evs = events(api.get(f"{LEASES}?watch=true&labelSelector=e2e-bm%3Dyes&timeoutSeconds=1"
                         f"&resourceVersion={bm['metadata']['resourceVersion']}"))
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [("ADDED", "e2e-bm-2")], evs


def test_no_bookmarks_unless_asked(api):
    rv = api.ok("POST", LEASES, lease("e2e-bm-3", "no"))["metadata"]["resourceVersion"]
    evs = events(api.get(f"{LEASES}?watch=true&labelSelector=e2e-bm%3Dyes&timeoutSeconds=3&resourceVersion={rv}"))
    assert evs == [], evs
    # a watch shorter than 2 s times out before any bookmark would be due
    evs = events(api.get(f"{LEASES}?watch=true&labelSelector=e2e-bm%3Dyes&allowWatchBookmarks=true"
                         f"&timeoutSeconds=1&resourceVersion={rv}"))
    assert evs == [], evs
