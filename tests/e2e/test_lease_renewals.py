"""Lease renewals written by splicing the stored text (src/apiserver/renewal.c): a PUT that is the
stored Lease but for its resourceVersion and a new spec.renewTime (the node agent's renewal) is
stored without a parse. Both ways of writing an update must store the same bytes, the splice must
be taken only where it may be, and what the full update checks (the precondition, admission)
still holds on it."""
import json
import re
import subprocess
import time

import pytest

from conftest import KITE, Api, TLSIdentity

pytestmark = pytest.mark.both_stores

NL = "kube-node-lease"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NL}/leases"
MANAGER = "renewer"


def spliced(api):
    text = api.request("GET", "/metrics").body.decode()
    return int(re.search(r"^kite_lease_renewals_spliced_total (\d+)$", text, re.M).group(1))


def create(api, name, manager=MANAGER):
    api.ok("POST", f"{LEASES}?fieldManager={manager}",
           {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                     "renewTime": "2026-01-01T00:00:00.000000Z"}})


def raw(api, name):
    r = api.request("GET", f"{LEASES}/{name}")
    assert r.status == 200, r.body
    return r.body.decode().strip()


def renewed(text, when):
    """The text as the node agent renews it: only renewTime changed, byte for byte."""
    out, n = re.subn(r'"renewTime":"[^"]*"', f'"renewTime":"{when}"', text)
    assert n == 1, text
    return out


def put(api, name, body, manager=MANAGER):
    return api.request("PUT", f"{LEASES}/{name}?fieldManager={manager}", body=body, ctype="application/json")


def normal(text):
    """The parts two renewals may differ in, blanked: resourceVersion, renewTime, the entry's time."""
    text = re.sub(r'"resourceVersion":"\d+"', '"resourceVersion":"RV"', text)
    text = re.sub(r'"renewTime":"[^"]*"', '"renewTime":"T"', text)
    return re.sub(r'"time":"[^"]*"', '"time":"T"', text)


def test_a_renewal_is_spliced_and_stores_what_the_full_update_stores(api):
    create(api, "splice-a")
    create(api, "full-a")
    created = json.loads(raw(api, "splice-a"))["metadata"]["managedFields"][0]["time"]
    time.sleep(1.1)  # the entry's time has seconds: the renewal moves it on
    before = spliced(api)
    r = put(api, "splice-a", renewed(raw(api, "splice-a"), "2026-01-01T00:00:10.000000Z"))
    assert r.status == 200, r.body
    assert spliced(api) == before + 1
    assert r.json()["metadata"]["managedFields"][0]["time"] > created
    # the same renewal in another form (whitespace, key order kept) takes the full update
    doc = json.loads(renewed(raw(api, "full-a"), "2026-01-01T00:00:10.000000Z"))
    r = put(api, "full-a", json.dumps(doc, indent=1))
    assert r.status == 200, r.body
    assert spliced(api) == before + 1
    a, b = raw(api, "splice-a"), raw(api, "full-a")
    assert json.loads(a)["spec"]["renewTime"] == "2026-01-01T00:00:10.000000Z"
    assert normal(a) == normal(b).replace("full-a", "splice-a").replace(
        json.loads(b)["metadata"]["uid"], json.loads(a)["metadata"]["uid"]).replace(
        json.loads(b)["metadata"]["creationTimestamp"], json.loads(a)["metadata"]["creationTimestamp"])
    # the answer is the object stored, its new resourceVersion the one the next renewal gives
    r = put(api, "splice-a", renewed(a, "2026-01-01T00:00:20.000000Z"))
    assert r.status == 200 and spliced(api) == before + 2
    assert r.json() == json.loads(raw(api, "splice-a"))


def test_the_agents_body_without_server_fields_is_spliced(api):
    """The node agent leaves out uid, creationTimestamp and managedFields; the update keeps the
    stored ones."""
    create(api, "agent-a")
    text = raw(api, "agent-a")
    doc = json.loads(text)
    for k in ("uid", "creationTimestamp", "managedFields"):
        del doc["metadata"][k]
    body = renewed(json.dumps(doc, separators=(",", ":")), "2026-01-01T00:00:30.000000Z")
    before = spliced(api)
    r = put(api, "agent-a", body)
    assert r.status == 200, r.body
    assert spliced(api) == before + 1
    after = json.loads(raw(api, "agent-a"))
    old = json.loads(text)
    assert after["metadata"]["uid"] == old["metadata"]["uid"]
    assert after["metadata"]["creationTimestamp"] == old["metadata"]["creationTimestamp"]
    assert [m["manager"] for m in after["metadata"]["managedFields"]] == [MANAGER]
    assert after["spec"]["renewTime"] == "2026-01-01T00:00:30.000000Z"


def test_what_is_not_a_plain_renewal_takes_the_full_update(api):
    create(api, "other-a")
    base = spliced(api)
    # another change beside renewTime: written, not spliced
    text = renewed(raw(api, "other-a"), "2026-01-01T00:01:00.000000Z")
    r = put(api, "other-a", text.replace('"holderIdentity":"other-a"', '"holderIdentity":"someone"'))
    assert r.status == 200, r.body
    assert r.json()["spec"]["holderIdentity"] == "someone"
    # renewTime not in the server's form (a shorter fraction): stored in canonical form
    r = put(api, "other-a", renewed(raw(api, "other-a"), "2026-01-01T00:01:01.5Z"))
    assert r.status == 200, r.body
    assert r.json()["spec"]["renewTime"] == "2026-01-01T00:01:01.500000Z"
    # another manager: its own entry beside the first
    r = put(api, "other-a", renewed(raw(api, "other-a"), "2026-01-01T00:01:02.000000Z"), manager="someone-else")
    assert r.status == 200, r.body
    assert sorted(m["manager"] for m in r.json()["metadata"]["managedFields"]) == [MANAGER, "someone-else"]
    # a stale resourceVersion: 409 Conflict, as the full update answers it
    text = raw(api, "other-a")
    stale = re.sub(r'"resourceVersion":"\d+"', '"resourceVersion":"1"', renewed(text, "2026-01-01T00:01:03.000000Z"))
    r = put(api, "other-a", stale)
    assert r.status == 409 and r.json()["reason"] == "Conflict", r.body
    # a body with a member twice is not the stored text
    dup = renewed(text, "2026-01-01T00:01:04.000000Z").replace('"spec":{', '"spec":{"renewTime":"2026-01-01T00:00:00.000000Z",')
    r = put(api, "other-a", dup)
    assert r.status in (200, 400), r.body
    assert spliced(api) == base


def test_a_node_may_not_renew_another_nodes_lease_spliced(api, apiserver):
    """Admission (NodeRestriction) runs on the spliced path: node-b's body for node-a's Lease is
    refused, its own is written."""
    create(api, "node-a", manager="kite-agent")
    create(api, "node-b", manager="kite-agent")
    p = subprocess.run([KITE, "kubeconfig", "--data-dir", str(apiserver.data_dir), "--node", "node-b"],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode == 0, p.stderr
    kc = apiserver.workdir / "node-b.kubeconfig"
    kc.write_text(p.stdout)
    node = Api("127.0.0.1", apiserver.port, TLSIdentity(kc, apiserver.workdir).ctx)
    try:
        before = spliced(api)
        other = raw(api, "node-a")
        for i in range(50):  # the refusal's path, again and again (under the sanitizers in make test)
            r = put(node, "node-a", renewed(other, f"2026-01-01T00:02:{i:02d}.000000Z"), manager="kite-agent")
            assert r.status == 403, r.body
            assert "can only access node lease with the same name as the requesting node" in r.json()["message"]
        assert json.loads(raw(api, "node-a"))["spec"]["renewTime"] == "2026-01-01T00:00:00.000000Z"
        r = put(node, "node-b", renewed(raw(api, "node-b"), "2026-01-01T00:02:00.000000Z"), manager="kite-agent")
        assert r.status == 200, r.body
        assert spliced(api) == before + 1
    finally:
        node.close()
