"""python3-kubernetes (Debian 22.6) against `kite apiserver`."""
import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from conftest import delete_node_if_exists, node_manifest


@pytest.fixture(scope="module")
def v1(apiserver):
    return apiserver.python_client()


def mk(name, labels=None):
    return client.V1Node(metadata=client.V1ObjectMeta(name=name, labels=labels or {}))


def cleanup(v1, names):
    for n in names:
        try:
            v1.delete_node(n, _request_timeout=10)
        except ApiException as e:
            assert e.status == 404


def test_create_get_list(v1):
    cleanup(v1, ["py-node-1"])
    try:
        created = v1.create_node(mk("py-node-1", {"py": "1"}), _request_timeout=10)
        assert created.metadata.name == "py-node-1"
        assert len(created.metadata.uid) == 36
        assert int(created.metadata.resource_version) > 0
        assert created.metadata.creation_timestamp is not None
        got = v1.read_node("py-node-1", _request_timeout=10)
        assert got.metadata.uid == created.metadata.uid
        assert got.metadata.resource_version == created.metadata.resource_version
        lst = v1.list_node(_request_timeout=10)
        assert lst.kind == "NodeList" and lst.api_version == "v1"
        assert int(lst.metadata.resource_version) >= int(created.metadata.resource_version)
        assert "py-node-1" in [n.metadata.name for n in lst.items]
        with pytest.raises(ApiException) as ei:
            v1.create_node(mk("py-node-1"), _request_timeout=10)
        assert ei.value.status == 409
        assert '"reason":"AlreadyExists"' in ei.value.body.replace(" ", "")
        with pytest.raises(ApiException) as ei:
            v1.read_node("py-node-missing", _request_timeout=10)
        assert ei.value.status == 404
    finally:
        cleanup(v1, ["py-node-1"])


def test_watch_resume_exactly_once_in_order(v1):
    cleanup(v1, ["py-watch-1"])
    try:
        start_rv = v1.create_node(mk("py-watch-1"), _request_timeout=10).metadata.resource_version
        rvs = []
        for i in range(6):
            n = v1.patch_node("py-watch-1", {"metadata": {"labels": {"step": str(i)}}}, _request_timeout=10)
            rvs.append(n.metadata.resource_version)
        v1.delete_node("py-watch-1", _request_timeout=10)

        w = watch.Watch()
        got = []
        for ev in w.stream(v1.list_node, field_selector="metadata.name=py-watch-1", resource_version=start_rv,
                           timeout_seconds=3, _request_timeout=15):
            got.append((ev["type"], ev["object"].metadata.resource_version,
                        (ev["object"].metadata.labels or {}).get("step")))
            if ev["type"] == "DELETED":
                w.stop()
        types = [g[0] for g in got]
        assert types == ["MODIFIED"] * 6 + ["DELETED"], got
        assert [g[1] for g in got[:6]] == rvs, got
        assert [g[2] for g in got[:6]] == [str(i) for i in range(6)], got
        all_rvs = [int(g[1]) for g in got]
        assert all_rvs == sorted(all_rvs) and len(set(all_rvs)) == len(all_rvs), got

        # resuming from the middle gives exactly the later events
        got2 = []
        for ev in w.stream(v1.list_node, field_selector="metadata.name=py-watch-1", resource_version=rvs[2],
                           timeout_seconds=3, _request_timeout=15):
            got2.append((ev["type"], ev["object"].metadata.resource_version))
            if ev["type"] == "DELETED":
                w.stop()
        assert [g[1] for g in got2[:3]] == rvs[3:], got2
        assert [g[0] for g in got2] == ["MODIFIED"] * 3 + ["DELETED"], got2
    finally:
        cleanup(v1, ["py-watch-1"])


def test_watch_label_selector_transitions(v1):
    """A selector watch sees an object leave the selection as DELETED and enter it as ADDED."""
    cleanup(v1, ["py-watch-2"])
    try:
        rv0 = v1.create_node(mk("py-watch-2", {"grp": "a"}), _request_timeout=10).metadata.resource_version
        v1.patch_node("py-watch-2", {"metadata": {"labels": {"grp": "b"}}}, _request_timeout=10)
        v1.patch_node("py-watch-2", {"metadata": {"labels": {"grp": "a", "x": "1"}}}, _request_timeout=10)
        v1.patch_node("py-watch-2", {"metadata": {"labels": {"x": "2"}}}, _request_timeout=10)
        w = watch.Watch()
        got = []
        for ev in w.stream(v1.list_node, label_selector="grp=a", resource_version=rv0, timeout_seconds=2,
                           _request_timeout=15):
            if ev["object"].metadata.name == "py-watch-2":
                got.append((ev["type"], ev["object"].metadata.labels.get("grp")))
            if len(got) == 3:
                w.stop()
        # leaving the selection: DELETED carrying the last matching content (kube-apiserver's cacher sends
        # the previous object with the new resourceVersion); entering it: ADDED
        assert got == [("DELETED", "a"), ("ADDED", "a"), ("MODIFIED", "a")], got
    finally:
        cleanup(v1, ["py-watch-2"])


def test_patch_strategic_and_merge(v1, apiserver):
    cleanup(v1, ["py-patch-1"])
    try:
        v1.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="py-patch-1", labels={"a": "1"}),
                                     spec=client.V1NodeSpec(taints=[client.V1Taint(key="k1", effect="NoSchedule"),
                                                                    client.V1Taint(key="k2", effect="NoExecute")])),
                       _request_timeout=10)
        # patch_node with a dict sends application/strategic-merge-patch+json
        n = v1.patch_node("py-patch-1", {"metadata": {"labels": {"b": "2"}}}, _request_timeout=10)
        assert n.metadata.labels == {"a": "1", "b": "2"}
        # taints are an atomic list in the Node schema (no patchMergeKey): replaced, not merged
        n = v1.patch_node("py-patch-1", {"spec": {"taints": [{"key": "k3", "effect": "NoSchedule"}]}},
                          _request_timeout=10)
        assert [t.key for t in n.spec.taints] == ["k3"]
        # a list body sends application/json-patch+json
        n = v1.patch_node("py-patch-1", [{"op": "remove", "path": "/metadata/labels/a"}], _request_timeout=10)
        assert n.metadata.labels == {"b": "2"}
        # merge patch (RFC 7386) through the generic call_api
        ac = apiserver.python_api_client()
        n = ac.call_api("/api/v1/nodes/{name}", "PATCH", path_params={"name": "py-patch-1"},
                        header_params={"Content-Type": "application/merge-patch+json", "Accept": "application/json"},
                        body={"metadata": {"labels": {"b": None, "c": "3"}}}, response_type="V1Node",
                        auth_settings=["BearerToken"], _return_http_data_only=True, _request_timeout=10)
        assert n.metadata.labels == {"c": "3"}
        # status patch on the subresource
        n = v1.patch_node_status("py-patch-1", {"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}]}}, _request_timeout=10)
        assert [(c.type, c.status) for c in n.status.conditions] == [("Ready", "True")]
        n = v1.patch_node_status("py-patch-1", {"status": {"conditions": [
            {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure", "message": "x"}]}},
                                 _request_timeout=10)
        assert sorted(c.type for c in n.status.conditions) == ["DiskPressure", "Ready"]
    finally:
        cleanup(v1, ["py-patch-1"])


def test_replace_conflict(v1):
    cleanup(v1, ["py-conf-1"])
    try:
        n = v1.create_node(mk("py-conf-1", {"v": "0"}), _request_timeout=10)
        stale = v1.read_node("py-conf-1", _request_timeout=10)
        n.metadata.labels = {"v": "1"}
        n2 = v1.replace_node("py-conf-1", n, _request_timeout=10)
        assert int(n2.metadata.resource_version) > int(stale.metadata.resource_version)
        stale.metadata.labels = {"v": "stale"}
        with pytest.raises(ApiException) as ei:
            v1.replace_node("py-conf-1", stale, _request_timeout=10)
        e = ei.value
        assert e.status == 409
        import json
        st = json.loads(e.body)
        assert st["kind"] == "Status" and st["reason"] == "Conflict" and st["code"] == 409
        assert st["message"] == ('Operation cannot be fulfilled on nodes "py-conf-1": the object has been modified; '
                                 'please apply your changes to the latest version and try again')
        assert st["details"]["name"] == "py-conf-1" and st["details"]["kind"] == "nodes"
        assert v1.read_node("py-conf-1", _request_timeout=10).metadata.labels == {"v": "1"}
        # an update without resourceVersion is unconditional for nodes
        n2.metadata.resource_version = None
        n2.metadata.labels = {"v": "2"}
        assert v1.replace_node("py-conf-1", n2, _request_timeout=10).metadata.labels == {"v": "2"}
    finally:
        cleanup(v1, ["py-conf-1"])


def test_list_label_selector(v1):
    names = {"py-sel-1": {"team": "a", "zone": "z1"}, "py-sel-2": {"team": "b", "zone": "z1"},
             "py-sel-3": {"team": "a"}}
    cleanup(v1, names)
    try:
        for n, l in names.items():
            v1.create_node(mk(n, l), _request_timeout=10)

        def sel(s):
            return sorted(n.metadata.name for n in v1.list_node(label_selector=s, _request_timeout=10).items)

        assert sel("team=a") == ["py-sel-1", "py-sel-3"]
        assert sel("team=a,zone=z1") == ["py-sel-1"]
        assert sel("team in (a,b),!zone") == ["py-sel-3"]
        assert sel("zone,team!=a") == ["py-sel-2"]
        assert sel("team=none") == []
        fs = v1.list_node(field_selector="metadata.name=py-sel-2", _request_timeout=10).items
        assert [n.metadata.name for n in fs] == ["py-sel-2"]
    finally:
        cleanup(v1, names)


def test_pagination_limit_continue(v1):
    names = [f"py-page-{i}" for i in range(7)]
    cleanup(v1, names + ["py-page-9"])
    try:
        for n in names:
            v1.create_node(mk(n, {"page": "yes"}), _request_timeout=10)
        first = v1.list_node(label_selector="page=yes", limit=3, _request_timeout=10)
        assert [n.metadata.name for n in first.items] == names[:3]
        assert first.metadata._continue
        snapshot_rv = first.metadata.resource_version
        # created after the first page: a continued list is a consistent snapshot and must not show it
        v1.create_node(mk("py-page-9", {"page": "yes"}), _request_timeout=10)
        got = [n.metadata.name for n in first.items]
        cont = first.metadata._continue
        pages = 1
        while cont:
            page = v1.list_node(label_selector="page=yes", limit=3, _continue=cont, _request_timeout=10)
            assert len(page.items) <= 3
            assert page.metadata.resource_version == snapshot_rv
            got += [n.metadata.name for n in page.items]
            cont = page.metadata._continue
            pages += 1
            assert pages < 10, "continue never ends"
        assert got == names, got
        assert pages == 3
        # a fresh list sees it
        fresh = [n.metadata.name for n in v1.list_node(label_selector="page=yes", _request_timeout=10).items]
        assert fresh == names + ["py-page-9"]
        # an invalid continue token is a 400 BadRequest
        with pytest.raises(ApiException) as ei:
            v1.list_node(limit=3, _continue="not-a-token", _request_timeout=10)
        assert ei.value.status == 400
    finally:
        cleanup(v1, names + ["py-page-9"])
