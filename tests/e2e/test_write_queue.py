"""Concurrent unconditional writes of one object (raw HTTPS).

Many clients PUTting the same Lease at once, as node agents and controllers renewing one lease do:
each write waits for the one before it instead of losing the store's compare-and-swap and being
recomputed, so every client gets 200, every acknowledged write is a commit of its own (its own
resourceVersion, seen by watchers in that order) and no write is retried."""
import http.client
import json
import re
import threading

import pytest

from conftest import LEASES, Response, assert_status_body, wait_for

THREADS = 16
PUTS_PER_THREAD = 25


def lease(name, holder, rv=None):
    md = {"name": name, "namespace": "default"}
    if rv is not None:
        md["resourceVersion"] = rv
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": md,
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 40}}


def metric(api, name):
    text = api.get("/metrics").body.decode()
    m = re.search(rf"^{name} (\d+)$", text, re.M)
    assert m, f"{name} not in /metrics"
    return int(m.group(1))


def hammer(cluster, path, body_of, threads=THREADS, per_thread=PUTS_PER_THREAD, method="PUT", ctype=None):
    """threads clients each send per_thread writes of path at once (a barrier starts them);
    returns {thread: [(status, body, holder), ...]} in each client's send order."""
    results = {t: [] for t in range(threads)}
    barrier = threading.Barrier(threads)

    def client(t):
        a = cluster.api()
        try:
            a.get("/readyz")  # handshake before the barrier: the writes start together
            barrier.wait(timeout=30)
            for i in range(per_thread):
                holder = f"w{t}-{i}"
                body = body_of(holder)
                if ctype:
                    r = a.request(method, path, body=json.dumps(body), ctype=ctype)
                else:
                    r = a.request(method, path, body=body)
                results[t].append((r.status, r.body, holder))
        finally:
            a.close()

    ths = [threading.Thread(target=client, args=(t,)) for t in range(threads)]
    for th in ths:
        th.start()
    for th in ths:
        th.join(timeout=120)
    assert not any(th.is_alive() for th in ths), "a client hung"
    return results


def test_concurrent_unconditional_puts_of_one_lease(fresh_apiserver):
    api = fresh_apiserver.api()
    name = "e2e-contended"
    created = api.ok("POST", LEASES, lease(name, "creator"))
    rv0 = int(created["metadata"]["resourceVersion"])
    retries0 = metric(api, "kite_write_conflict_retries_total")

    results = hammer(fresh_apiserver, f"{LEASES}/{name}", lambda h: lease(name, h))

    acked = {}  # rv -> holder
    for t, rs in results.items():
        assert len(rs) == PUTS_PER_THREAD
        last = 0
        for status, body, holder in rs:
            assert status == 200, f"client {t}: {status} {body[:500]!r}"
            obj = json.loads(body)
            assert obj["spec"]["holderIdentity"] == holder, obj
            rv = int(obj["metadata"]["resourceVersion"])
            assert rv > last, f"client {t}: resourceVersion {rv} after {last}"
            last = rv
            assert rv not in acked, f"resourceVersion {rv} acknowledged twice ({acked[rv]}, {holder})"
            acked[rv] = holder
    assert len(acked) == THREADS * PUTS_PER_THREAD

    # the object is the last acknowledged write
    final = api.ok("GET", f"{LEASES}/{name}")
    assert int(final["metadata"]["resourceVersion"]) == max(acked)
    assert final["spec"]["holderIdentity"] == acked[max(acked)]

    # every acknowledged write is one commit, and a watcher sees them all, in order
    r = api.get(f"{LEASES}?watch=true&resourceVersion={rv0}&timeoutSeconds=1")
    assert r.status == 200, r
    seen = []
    for line in r.body.split(b"\n"):
        if line.strip():
            ev = json.loads(line)
            if ev["type"] == "MODIFIED" and ev["object"]["metadata"]["name"] == name:
                seen.append((int(ev["object"]["metadata"]["resourceVersion"]), ev["object"]["spec"]["holderIdentity"]))
    assert seen == sorted(acked.items())

    # the writes queued behind each other instead of racing and being recomputed
    assert metric(api, "kite_write_conflict_retries_total") == retries0
    assert metric(api, "kite_write_queued_total") > 0
    api.close()


def test_concurrent_patches_of_one_lease_all_apply(fresh_apiserver):
    """Merge patches that each add their own label: none is lost."""
    api = fresh_apiserver.api()
    name = "e2e-patched"
    api.ok("POST", LEASES, lease(name, "creator"))
    retries0 = metric(api, "kite_write_conflict_retries_total")
    results = hammer(fresh_apiserver, f"{LEASES}/{name}", lambda h: {"metadata": {"labels": {h: "x"}}},
                     threads=8, per_thread=10, method="PATCH", ctype="application/merge-patch+json")
    for t, rs in results.items():
        for status, body, _ in rs:
            assert status == 200, f"client {t}: {status} {body[:500]!r}"
    labels = api.ok("GET", f"{LEASES}/{name}")["metadata"]["labels"]
    assert sorted(labels) == sorted(f"w{t}-{i}" for t in range(8) for i in range(10))
    assert metric(api, "kite_write_conflict_retries_total") == retries0
    api.close()


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
def test_concurrent_conditional_writes_one_wins(fresh_apiserver, method):
    """With the same resourceVersion precondition (in the body, or set by the patch), exactly one
    of many concurrent writes wins; the others get 409 Conflict."""
    api = fresh_apiserver.api()
    name = "e2e-conditional"
    rv = api.ok("POST", LEASES, lease(name, "creator"))["metadata"]["resourceVersion"]
    if method == "PUT":
        results = hammer(fresh_apiserver, f"{LEASES}/{name}", lambda h: lease(name, h, rv=rv), threads=12, per_thread=1)
    else:
        results = hammer(fresh_apiserver, f"{LEASES}/{name}",
                         lambda h: {"metadata": {"resourceVersion": rv}, "spec": {"holderIdentity": h}},
                         threads=12, per_thread=1, method="PATCH", ctype="application/merge-patch+json")
    codes = sorted(rs[0][0] for rs in results.values())
    assert codes == [200] + [409] * 11, codes
    for rs in results.values():
        status, body, holder = rs[0]
        if status == 409:
            st = assert_status_body(Response(status, {"content-type": "application/json"}, body), 409, "Conflict")
            assert "the object has been modified" in st["message"], st
        else:
            assert api.ok("GET", f"{LEASES}/{name}")["spec"]["holderIdentity"] == holder
    api.close()


def test_stop_answers_writes_waiting_for_the_key(fresh_apiserver):
    """SIGTERM while many writes of one lease wait for each other: the server answers what it
    accepted (the HTTP server's stop waits for it) and exits cleanly, without hanging."""
    api = fresh_apiserver.api()
    name = "e2e-stopping"
    api.ok("POST", LEASES, lease(name, "creator"))
    api.close()
    stop = threading.Event()
    statuses, lock = [], threading.Lock()

    def client(t):
        a = fresh_apiserver.api()
        i = 0
        try:
            while not stop.is_set():
                i += 1
                r = a.put(f"{LEASES}/{name}", lease(name, f"s{t}-{i}"))
                with lock:
                    statuses.append(r.status)
        except (OSError, http.client.HTTPException):
            pass  # the server stopped: connection refused or closed
        finally:
            a.close()

    ths = [threading.Thread(target=client, args=(t,)) for t in range(32)]
    for th in ths:
        th.start()
    wait_for(lambda: len(statuses) > 200, timeout=30, what="writes under way")
    m = fresh_apiserver.api()
    assert metric(m, "kite_write_queued_total") > 0
    m.close()
    rc = fresh_apiserver.stop()
    stop.set()
    for th in ths:
        th.join(timeout=30)
    assert rc == 0, f"kite apiserver exited with {rc}:\n" + fresh_apiserver.proc.log_tail()
    # requests that arrive once the server is stopping are refused with 503
    assert set(statuses) <= {200, 503}, sorted(set(statuses))


def test_writes_from_outside_the_queue_still_retry(fresh_apiserver):
    """deletecollection deletes without queueing (as another API server on a shared store would
    write): a PUT in flight then loses the store's compare-and-swap and is recomputed, here
    finding the lease gone (404) or re-created (200), never answered anything else."""
    api = fresh_apiserver.api()
    name = "e2e-deleted"

    def labelled(holder):
        body = lease(name, holder)
        body["metadata"]["labels"] = {"e2e-queue": "outside"}
        return body

    api.ok("POST", LEASES, labelled("creator"))
    retries0 = metric(api, "kite_write_conflict_retries_total")
    stop = threading.Event()
    statuses, lock = [], threading.Lock()

    def client(t):
        a = fresh_apiserver.api()
        i = 0
        try:
            while not stop.is_set():
                i += 1
                r = a.put(f"{LEASES}/{name}", labelled(f"o{t}-{i}"))
                with lock:
                    statuses.append(r.status)
        finally:
            a.close()

    ths = [threading.Thread(target=client, args=(t,)) for t in range(8)]
    for th in ths:
        th.start()
    try:
        for _ in range(50):
            assert api.delete(f"{LEASES}?labelSelector=e2e-queue%3Doutside").status == 200
            r = api.post(LEASES, labelled("creator"))
            assert r.status in (201, 409), r
    finally:
        stop.set()
        for th in ths:
            th.join(timeout=30)
    assert set(statuses) <= {200, 404}, sorted(set(statuses))
    assert metric(api, "kite_write_conflict_retries_total") > retries0
    # the lease is whatever the last write left, and writes of it still go through
    api.ok("PUT", f"{LEASES}/{name}", labelled("final"))
    assert api.ok("GET", f"{LEASES}/{name}")["spec"]["holderIdentity"] == "final"
    api.close()
