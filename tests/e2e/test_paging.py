"""Paged lists: limit and continue, with selectors, when the store moved on between pages."""
from urllib.parse import quote

import pytest

from conftest import LEASES

# the same answers on both stores: every test of the module's apiserver runs on SQLite and on etcd
pytestmark = pytest.mark.both_stores


def lease(name, x):
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "labels": {"x": x}}}


def test_continue_from_history_with_a_selector_dropping_the_last_record(apiserver, api):
    """A continue page served from the store's history whose last record the selector drops:
    its key was read after the record was freed (found by make soak under ASan)."""
    for i, x in enumerate("1112221"):
        api.ok("POST", LEASES, lease(f"pg-a{i + 1}", x))
    for _ in range(20):  # repeated: a use after free can pass once
        first = api.ok("GET", LEASES + "?labelSelector=x%3D1&limit=2")
        assert [i["metadata"]["name"] for i in first["items"]] == ["pg-a1", "pg-a2"]
        api.ok("POST", LEASES, lease(f"pg-other-{_}", "9"))  # the revision moves on: next pages come from history
        names, cont = [], first["metadata"]["continue"]
        while cont:
            page = api.ok("GET", LEASES + "?labelSelector=x%3D1&limit=2&continue=" + quote(cont))
            names += [i["metadata"]["name"] for i in page["items"]]
            cont = page["metadata"].get("continue")
        assert names == ["pg-a3", "pg-a7"], names
    assert apiserver.proc.alive()


def test_list_of_a_kind_nothing_wrote_is_at_the_current_revision(fresh_apiserver):
    """A list carries the revision the server is current to, also for a resource nothing wrote
    since start (it said 0, and a watch from 0 means 'any', not 'from now')."""
    api = fresh_apiserver.api()
    ns_rv = int(api.ok("GET", "/api/v1/namespaces")["metadata"]["resourceVersion"])
    assert ns_rv > 0
    cm = api.ok("GET", "/api/v1/configmaps")["metadata"]["resourceVersion"]
    assert int(cm) >= ns_rv, cm
    api.ok("POST", LEASES, lease("pg-rv", "1"))
    rv = int(api.ok("GET", "/api/v1/configmaps")["metadata"]["resourceVersion"])
    assert rv > ns_rv  # the lease's write moved the store on: every list is current to it
