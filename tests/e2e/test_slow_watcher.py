"""A watcher that stops reading is dropped once its bounded queue fills (10,000 events or 16 MiB),
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

NS = "default"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
WRITES = 24000   # more events than a watcher may queue (10,000) plus what its socket buffers hold
WRITERS = 8


def lease(name, holder):
    return json.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                       "metadata": {"name": name, "namespace": NS},
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
    s.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
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


def test_slow_watcher_is_cut_off_without_slowing_others(fresh_apiserver):
    c = fresh_apiserver
    api = c.api()
    r = api.post(LEASES, lease("hot", "h0"), ctype="application/json")
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

    errors = []
    def writer(idx):
        conn = http.client.HTTPSConnection("127.0.0.1", c.port, context=c.identity.ctx, timeout=30)
        for i in range(idx, WRITES, WRITERS):
            conn.request("PUT", f"{LEASES}/hot", body=lease("hot", f"h{i + 1}"),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            body = resp.read()
            if resp.status != 200:
                errors.append((resp.status, body[:200]))
        conn.close()
    start = time.time()
    ws = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    took = time.time() - start
    assert not errors, errors[:3]
    rt.join(timeout=60)
    assert len(seen) == WRITES, f"reading watcher saw {len(seen)} of {WRITES} events"
    assert len(set(seen)) == WRITES, "every write arrives exactly once"

    # the slow watcher was dropped: reading now, it gets what its buffers held, then the ERROR
    # event (its backlog was released at the drop), then the end of the stream
    data = read_to_end(slow)
    behind, behind_bytes = final_error(data)
    assert behind == 10000 + 1, "dropped by its event bound (small objects)"
    assert 0 < behind_bytes < 16 << 20
    deadline = time.time() + 10
    while watchers_open(api) > 0 and time.time() < deadline:
        time.sleep(0.1)
    assert watchers_open(api) == 0, "the slow watcher is still registered"
    print(f"{WRITES} writes in {took:.1f}s with a stalled watcher; slow watcher got {len(data)} bytes, "
          f"then ERROR ({behind} events / {behind_bytes} bytes behind)")


BIG = 100 * 1024
BIG_WRITES = 600  # 60 MB: more than a queue's 16 MiB plus a pull's batch plus socket buffers


def test_stalled_watcher_of_big_objects_dropped_by_bytes(fresh_apiserver):
    """Big objects: the byte bound drops a stalled watcher long before its 10,000 events."""
    c = fresh_apiserver
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
    conn = http.client.HTTPSConnection("127.0.0.1", c.port, context=c.identity.ctx, timeout=60)
    for i in range(1, BIG_WRITES + 1):
        conn.request("PUT", f"{LEASES}/big", body=big(i), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        body = resp.read()
        assert resp.status == 200, body[:300]
    conn.close()
    data = read_to_end(slow)
    behind, behind_bytes = final_error(data)
    assert behind < 200, f"dropped by its byte bound, not its event bound: {behind} events behind"
    assert behind_bytes > 16 << 20
    assert behind_bytes < (16 << 20) + 2 * BIG
    deadline = time.time() + 10
    while watchers_open(api) > 0 and time.time() < deadline:
        time.sleep(0.1)
    assert watchers_open(api) == 0
