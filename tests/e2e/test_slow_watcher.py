"""A watcher that stops reading is cut off once its bounded buffers fill, and nobody else is
slowed by it: writes keep being acknowledged and a watcher that reads sees every event."""
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

    # the slow watcher: a tiny receive buffer, and it never reads
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.connect(("127.0.0.1", c.port))
    slow = c.identity.ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    slow.sendall(f"GET {LEASES}?watch=true&resourceVersion={rv0} HTTP/1.1\r\nHost: x\r\n\r\n".encode())

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

    # the slow watcher was dropped: the server closed its stream (its gauge went back to 1 once
    # the reading watcher finished too, i.e. to 0 here)
    deadline = time.time() + 10
    while watchers_open(api) > 0 and time.time() < deadline:
        time.sleep(0.1)
    assert watchers_open(api) == 0, "the slow watcher is still registered"
    slow.settimeout(10)
    got = 0
    try:
        while True:
            chunk = slow.recv(65536)
            if not chunk:
                break
            got += len(chunk)
    except (ssl.SSLError, ConnectionResetError, socket.timeout):
        pass
    slow.close()
    assert 0 < got, "the slow watcher received what fit in its buffers, then the end of the stream"
    print(f"{WRITES} writes in {took:.1f}s with a stalled watcher; slow watcher got {got} bytes before the cut")
