"""A watcher that stops reading is dropped once its bounded queue fills (10,000 events or 16 MiB
by default; lowered here),
and nobody else is slowed by it: writes keep being acknowledged and a watcher that reads sees
every event. When it reads again it gets what its socket buffers held, then an ERROR event
(410 Expired, how far behind it was), then the end of the stream, as from kube-apiserver."""
import http.client
import json
import re
import socket
import ssl
import threading
import time

import pytest

from conftest import Cluster

NS = "default"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
# The bounds are lowered for the tests (--watch-queue-events, --watch-queue-bytes; the defaults,
# 10,000 events and 16 MiB, are documented in README's limits table) so that a few thousand writes
# fill a queue. The writes must also fill what the stalled socket holds first: the server's send
# buffer (up to tcp_wmem's maximum; 2.8 MB seen), the client's 4 KiB (doubled), the in-flight and
# TLS bytes and one pull's batch of 128 events; padded objects make that few events.
QUEUE = 1000
QUEUE_BYTES = 1 << 20
BATCH = 128


def _socket_bytes():
    try:
        return int(open("/proc/sys/net/ipv4/tcp_wmem").read().split()[2]) + (64 << 10)
    except (OSError, ValueError, IndexError):
        return 8 << 20


PAD = 4096
WRITES = QUEUE + BATCH + _socket_bytes() // PAD + 200
WRITERS = 8


@pytest.fixture
def small_queue(tmp_path):
    c = Cluster("apiserver", tmp_path, extra_args=["--watch-queue-events", str(QUEUE)]).start()
    yield c
    c.stop()


@pytest.fixture
def small_queue_bytes(tmp_path):
    c = Cluster("apiserver", tmp_path, extra_args=["--watch-queue-bytes", str(QUEUE_BYTES)]).start()
    yield c
    c.stop()


def lease(name, holder, pad=0):
    md = {"name": name, "namespace": NS}
    if pad:
        md["annotations"] = {"pad": "x" * pad}
    return json.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": md,
                       "spec": {"holderIdentity": holder, "leaseDurationSeconds": 40}}).encode()


def stalled_watch(c, path):
    """A watch with a tiny receive buffer that does not read (yet)."""
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.connect(("127.0.0.1", c.port))
    s = c.identity.ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return s


def read_to_end(s, timeout=30):
    """Reads the stream to its last chunk (the connection itself stays open: keep-alive)."""
    s.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            if data.endswith(b"\r\n0\r\n\r\n"):
                break
    except (ssl.SSLError, ConnectionResetError, socket.timeout):
        pass
    s.close()
    return data


def final_error(data):
    """The stream's last event, which must be the too-slow ERROR (chunked framing aside: the
    event is one chunk of its own)."""
    m = re.findall(rb'\{"type":"ERROR",.*?\}\}\n', data)
    assert m, f"no ERROR event in the last bytes: {data[-300:]!r}"
    assert data.rstrip().endswith(b"0"), "the stream ended (last chunk) after it"
    ev = json.loads(m[-1])
    st = ev["object"]
    assert (st["kind"], st["status"], st["code"], st["reason"]) == ("Status", "Failure", 410, "Expired"), st
    mm = re.fullmatch(r"watcher too slow: (\d+) events / (\d+) bytes behind", st["message"])
    assert mm, st["message"]
    return int(mm.group(1)), int(mm.group(2))


def watchers_open(api):
    text = api.get("/metrics").body.decode()
    m = re.search(r'apiserver_registered_watchers\{resource="leases"\} (\d+)', text)
    return int(m.group(1)) if m else 0


def write_all(c, reqs):
    """Makes (method, path, body) requests from WRITERS connections; returns the failures."""
    errors = []
    def writer(idx):
        conn = http.client.HTTPSConnection("127.0.0.1", c.port, context=c.identity.ctx, timeout=60)
        for method, path, body in reqs[idx::WRITERS]:
            conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            out = resp.read()
            if resp.status not in (200, 201):
                errors.append((resp.status, out[:200]))
        conn.close()
    ws = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    return errors


@pytest.mark.slow
def test_slow_watcher_is_cut_off_without_slowing_others(small_queue):
    c = small_queue
    api = c.api()
    r = api.post(LEASES, lease("hot", "h0", PAD), ctype="application/json")
    assert r.status == 201, r.body
    rv0 = r.json()["metadata"]["resourceVersion"]

    # the slow watcher: a tiny receive buffer, and it does not read until the writes are done
    slow = stalled_watch(c, f"{LEASES}?watch=true&resourceVersion={rv0}")

    # the reading watcher
    seen = []
    def reader():
        conn = http.client.HTTPSConnection("127.0.0.1", c.port, context=c.identity.ctx, timeout=60)
        conn.request("GET", f"{LEASES}?watch=true&resourceVersion={rv0}&timeoutSeconds=120")
        resp = conn.getresponse()
        while len(seen) < WRITES:
            line = resp.readline()
            if not line:
                break
            seen.append(json.loads(line)["object"]["spec"]["holderIdentity"])
        conn.close()
    rt = threading.Thread(target=reader)
    rt.start()
    deadline = time.time() + 10
    while watchers_open(api) < 2 and time.time() < deadline:
        time.sleep(0.05)
    assert watchers_open(api) == 2

    start = time.time()
    errors = write_all(c, [("PUT", f"{LEASES}/hot", lease("hot", f"h{i + 1}", PAD)) for i in range(WRITES)])
    took = time.time() - start
    assert not errors, errors[:3]
    rt.join(timeout=60)
    assert len(seen) == WRITES, f"reading watcher saw {len(seen)} of {WRITES} events"
    assert len(set(seen)) == WRITES, "every write arrives exactly once"

    # the slow watcher was dropped: reading now, it gets what its buffers held, then the ERROR
    # event (its backlog was released at the drop), then the end of the stream
    data = read_to_end(slow)
    behind, behind_bytes = final_error(data)
    assert behind == QUEUE + 1, "dropped by its event bound"
    assert 0 < behind_bytes < 16 << 20
    deadline = time.time() + 10
    while watchers_open(api) > 0 and time.time() < deadline:
        time.sleep(0.1)
    assert watchers_open(api) == 0, "the slow watcher is still registered"
    print(f"{WRITES} writes in {took:.1f}s with a stalled watcher; slow watcher got {len(data)} bytes, "
          f"then ERROR ({behind} events / {behind_bytes} bytes behind)")


BIG = 20 * 1024
# more than the queue's bytes plus a pull's batch plus the socket's buffers
BIG_WRITES = (QUEUE_BYTES + BATCH * BIG + _socket_bytes()) // BIG + 50


def test_stalled_watcher_of_big_objects_dropped_by_bytes(small_queue_bytes):
    """Big objects: the byte bound drops a stalled watcher long before its event bound."""
    c = small_queue_bytes
    api = c.api()
    def big(i):
        return json.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                           "metadata": {"name": "big", "namespace": NS,
                                        "annotations": {"pad": f"{i:08d}" + "x" * BIG}},
                           "spec": {"holderIdentity": f"h{i}"}}).encode()
    r = api.post(LEASES, big(0), ctype="application/json")
    assert r.status == 201, r.body[:300]
    rv0 = r.json()["metadata"]["resourceVersion"]
    slow = stalled_watch(c, f"{LEASES}?watch=true&resourceVersion={rv0}")
    deadline = time.time() + 10
    while watchers_open(api) < 1 and time.time() < deadline:
        time.sleep(0.05)
    # several writers: their writes share the store's commits
    errors = write_all(c, [("PUT", f"{LEASES}/big", big(i)) for i in range(1, BIG_WRITES + 1)])
    assert not errors, errors[:3]
    data = read_to_end(slow)
    behind, behind_bytes = final_error(data)
    print(f"{BIG_WRITES} writes; the stalled watcher got {len(data)} bytes, then ERROR ({behind} events / "
          f"{behind_bytes} bytes behind)")
    assert behind < 200, f"dropped by its byte bound, not its event bound: {behind} events behind"
    assert behind_bytes > QUEUE_BYTES
    assert behind_bytes < QUEUE_BYTES + 2 * BIG
    deadline = time.time() + 10
    while watchers_open(api) > 0 and time.time() < deadline:
        time.sleep(0.1)
    assert watchers_open(api) == 0


STATE = 600      # objects of a watch-list's state: more bytes than the socket buffers hold
STATE_PAD = 8192
CHANGES = 300    # changes while it streams: over the event bound below, under it plus STATE
WL = "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"


@pytest.fixture
def tiny_queue(tmp_path):
    c = Cluster("apiserver", tmp_path, extra_args=["--watch-queue-events", "200"]).start()
    yield c
    c.stop()


def test_watch_list_keeps_the_changes_made_while_its_state_streams(tiny_queue):
    """A watch-list (an informer's list through the watch) sends its state first; the changes
    made meanwhile wait behind it, and it may lag by as many events as its state holds beyond
    the queue's bound. So a state of 600 objects that the client is slow to take, with 300
    changes made meanwhile (over the bound of 200, which drops a plain watch), arrives whole:
    the state, its end bookmark, every change, and no ERROR."""
    c = tiny_queue
    api = c.api()
    errors = write_all(c, [("POST", LEASES, lease(f"l{i}", "h0", STATE_PAD)) for i in range(STATE)])
    assert not errors, errors[:3]
    slow = stalled_watch(c, f"{LEASES}?{WL}")
    deadline = time.time() + 10
    while watchers_open(api) < 1 and time.time() < deadline:
        time.sleep(0.05)
    assert watchers_open(api) == 1
    errors = write_all(c, [("PUT", f"{LEASES}/l{i}", lease(f"l{i}", "h1", STATE_PAD)) for i in range(CHANGES)])
    assert not errors, errors[:3]
    assert watchers_open(api) == 1, "the watch-list was dropped while its state streamed"
    slow.settimeout(30)
    data = b""
    deadline = time.time() + 60
    while data.count(b'"type":"MODIFIED"') < CHANGES and b'"type":"ERROR"' not in data and time.time() < deadline:
        chunk = slow.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    slow.close()
    assert b'"type":"ERROR"' not in data, data[data.find(b'"type":"ERROR"') - 20:][:300]
    assert data.count(b'"type":"ADDED"') == STATE
    end = data.find(b"k8s.io/initial-events-end")
    assert end > data.rfind(b'"type":"ADDED"'), "the bookmark ends the state"
    assert data.count(b'"type":"MODIFIED"') == CHANGES
    assert data.find(b'"type":"MODIFIED"') > end, "the changes come after the state"
