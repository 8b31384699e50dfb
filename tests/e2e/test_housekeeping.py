"""Events expire after --event-ttl (kube-apiserver deletes them through etcd leases, 1 h by
default); events that happened recently stay."""
import json
import time

import pytest

from conftest import Cluster, wait_for

EVENTS = "/api/v1/namespaces/default/events"


def event(name, when):
    return json.dumps({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
                       "involvedObject": {"kind": "Node", "name": "n1", "uid": "n1"},
                       "reason": "Test", "message": "m", "type": "Normal", "count": 1,
                       "firstTimestamp": when, "lastTimestamp": when,
                       "source": {"component": "e2e"}}).encode()


def test_events_expire_after_ttl(tmp_path):
    c = Cluster("apiserver", tmp_path, extra_args=["--event-ttl", "3s"]).start()
    try:
        api = c.api()
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        later = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
        assert api.post(EVENTS, event("old", now), ctype="application/json").status == 201
        assert api.post(EVENTS, event("recent", later), ctype="application/json").status == 201
        deadline = time.time() + 30
        while time.time() < deadline:
            if api.get(f"{EVENTS}/old").status == 404:
                break
            time.sleep(0.5)
        assert api.get(f"{EVENTS}/old").status == 404, "an event older than the TTL is deleted"
        if c.store == "etcd":
            # on etcd an event goes with its lease, granted at its write for the TTL, whatever its
            # timestamps say (kube-apiserver's --event-ttl)
            wait_for(lambda: api.get(f"{EVENTS}/recent").status == 404, 10, 0.5, "the etcd lease of the recent event")
            return
        assert api.get(f"{EVENTS}/recent").status == 200, "a recent event stays"
    finally:
        c.stop()


@pytest.mark.slow
def test_apiserver_flags_are_checked_the_same_by_apiserver_and_up(tmp_path):
    """kite up takes every apiserver flag, and both refuse bad values before starting."""
    import subprocess
    from conftest import KITE
    bad = [(["--event-ttl", "0s"], "--event-ttl"), (["--threads", "x"], "--threads"),
           (["--threads", "0"], "--threads"), ([], "--data-dir is required")]
    for cmd in ("apiserver", "up"):
        for extra, says in bad:
            args = [KITE, cmd, *([] if not extra else ["--data-dir", str(tmp_path / "d")]), *extra]
            p = subprocess.run(args, capture_output=True, text=True, timeout=20)
            assert p.returncode == 2, (args, p.stdout, p.stderr)
            assert says in p.stderr, (args, p.stderr)
            assert not (tmp_path / "d").exists(), "nothing is created for a refused command line"


def test_max_connections_holds_extra_clients_in_the_backlog(tmp_path):
    """--max-connections: connections beyond it are not served (they wait in the listen backlog,
    as with kube-apiserver behind a connection limit) until one closes; bad values are refused."""
    import socket
    import ssl
    import subprocess
    from conftest import KITE
    p = subprocess.run([KITE, "apiserver", "--data-dir", str(tmp_path / "x"), "--max-connections", "0"],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode == 2 and "--max-connections" in p.stderr, p.stderr
    c = Cluster("apiserver", tmp_path, extra_args=["--max-connections", "3"]).start()
    held = []
    try:
        for _ in range(3):
            t = c.identity.ctx.wrap_socket(socket.create_connection(("127.0.0.1", c.port), timeout=10))
            held.append(t)
        extra = socket.create_connection(("127.0.0.1", c.port), timeout=1.5)
        try:
            c.identity.ctx.wrap_socket(extra)
            assert False, "a fourth connection was served over --max-connections 3"
        except (socket.timeout, ssl.SSLError, OSError):
            pass
        finally:
            extra.close()
        held.pop().close()
        time.sleep(0.5)
        api = c.api()
        r = api.get("/readyz")
        assert r.status == 200 and r.body == b"ok", r
        api.close()
    finally:
        for t in held:
            t.close()
        c.stop()
