"""Hostile HTTP clients (issue 29, item 6): a request is authenticated at its head, before its body
is read (HTTP/1.1: the 401 comes instead of "100 Continue"; HTTP/2: at HEADERS, before any DATA
is kept), and request bodies are held within budgets per body, per connection and per server,
anonymous ones within much smaller budgets (README's limits table)."""
import contextlib
import json
import multiprocessing
import os
import ssl
import http.client
import threading
import time

import pytest

from conftest import KITE, Cluster, wait_for
from hostile import H2, h1_head_answer, rss_bytes, sanitized, tls_context

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
MB = 1000 * 1000
MiB = 1024 * 1024
BODY_MAX = 3 * MiB           # KITE_HTTP_DEFAULT_MAX_BODY
CONN_BODY_MAX = 16 * MiB     # KITE_HTTP_CONN_BODY_MAX
SERVER_BODY_MAX = 128 * MiB  # KITE_HTTP_SERVER_BODY_MAX
ANON_MAX_BODY = 64 * 1024    # KITE_HTTP_ANON_MAX_BODY
SANITIZED = sanitized(KITE)
# another client's GET during an attack: within 1 s (the bound), 3 s for a sanitizer build
GET_MAX_S = 3.0 if SANITIZED else 1.0


@contextlib.contextmanager
def small_quarantine():
    """ASan keeps up to 256 MB of freed memory resident (its quarantine, for use-after-free
    reports), so a sanitized server's RSS grows with what it allocates and frees, not with what
    it holds: the flood's peak passed 96 MiB with 21 MiB sent. The servers of this module, whose
    tests bound memory, start with a 16 MB quarantine."""
    old = os.environ.get("ASAN_OPTIONS")
    if SANITIZED:
        os.environ["ASAN_OPTIONS"] = (old + ":" if old else "") + "quarantine_size_mb=16"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("ASAN_OPTIONS", None)
        else:
            os.environ["ASAN_OPTIONS"] = old


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory, store):
    """The module's `kite apiserver` (conftest's, with the small quarantine)."""
    with small_quarantine():
        c = Cluster("apiserver", tmp_path_factory.mktemp("apiserver"), store=store).start()
    yield c
    c.stop()


def head(path, length, *extra, method="POST"):
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/yaml",
             f"Content-Length: {length}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def status_json(data):
    return json.loads(data[data.index(b"\r\n\r\n") + 4:])


# ---- HTTP/1.1 ------------------------------------------------------------------------------

def test_h1_anonymous_body_is_answered_401_without_being_read(apiserver):
    """The head of an anonymous 3 MB body and no body: the 401 comes at once (the old server
    waited for the 3 MB first), and the connection closes (the body was not read)."""
    ctx = tls_context(apiserver.data_dir)
    first, data = h1_head_answer(apiserver.port, ctx, head(CONFIGMAPS, 3 * MB), timeout=5)
    assert first is not None, "no answer to the head alone: the server waits for the body"
    assert first < 2, first
    assert data.startswith(b"HTTP/1.1 401 "), data[:300]
    assert b"\r\nconnection: close\r\n" in data.lower(), data[:300]
    st = status_json(data)
    assert (st["kind"], st["code"], st["reason"], st["message"]) == ("Status", 401, "Unauthorized", "Unauthorized")


def test_h1_anonymous_expect_continue_gets_401_not_100(apiserver):
    ctx = tls_context(apiserver.data_dir)
    first, data = h1_head_answer(apiserver.port, ctx, head(CONFIGMAPS, 3 * MB, "Expect: 100-continue"), timeout=5)
    assert first is not None and first < 2, (first, data[:200])
    assert data.startswith(b"HTTP/1.1 401 "), data[:300]  # never "100 Continue"


def test_h1_bad_token_body_is_answered_401_at_head(apiserver):
    ctx = tls_context(apiserver.data_dir)
    first, data = h1_head_answer(apiserver.port, ctx, head(CONFIGMAPS, 3 * MB, "Authorization: Bearer nope.nope"),
                                 timeout=5)
    assert first is not None and first < 2 and data.startswith(b"HTTP/1.1 401 "), (first, data[:300])


def test_h1_authenticated_expect_continue_still_continues(apiserver):
    ctx = tls_context(apiserver.data_dir, cert="admin")
    first, data = h1_head_answer(apiserver.port, ctx, head(CONFIGMAPS, 3 * MB, "Expect: 100-continue"), timeout=2)
    assert data.startswith(b"HTTP/1.1 100 Continue\r\n"), data[:300]


def test_h1_anonymous_body_on_a_public_path_has_the_anonymous_limit(apiserver):
    """Anonymous requests are served on the public paths (/healthz, /version), with a body of at
    most 64 KiB: past it 413 at the head. An authenticated one may send 3 MiB there."""
    ctx = tls_context(apiserver.data_dir)
    first, data = h1_head_answer(apiserver.port, ctx, head("/healthz", ANON_MAX_BODY + 1), timeout=5)
    assert first is not None and first < 2, (first, data[:200])
    assert data.startswith(b"HTTP/1.1 413 "), data[:300]
    assert status_json(data)["reason"] == "RequestEntityTooLarge"
    admin = tls_context(apiserver.data_dir, cert="admin")
    _, data = h1_head_answer(apiserver.port, admin, head("/healthz", ANON_MAX_BODY + 1, "Expect: 100-continue"),
                             timeout=2)
    assert data.startswith(b"HTTP/1.1 100 Continue\r\n"), data[:300]


# ---- HTTP/2 --------------------------------------------------------------------------------

def test_h2_anonymous_streams_are_refused_at_headers(apiserver):
    """100 anonymous streams announcing 2.9 MB each get their 401 and RST_STREAM NO_ERROR before
    any DATA is sent (the old server buffered their bodies first, answering nothing)."""
    c = H2(apiserver.port, tls_context(apiserver.data_dir, alpn=("h2",)))
    try:
        sids = [c.head("POST", CONFIGMAPS, length=2_900_000, ctype="application/yaml") for _ in range(100)]
        done = lambda: all(s in c.status and s in c.reset for s in sids)
        assert c.wait(done, 10), f"{len(c.status)} answered, {len(c.reset)} reset of {len(sids)}"
        assert {c.status[s] for s in sids} == {401}
        assert {c.reset[s] for s in sids} == {0}  # NO_ERROR: stop sending, nothing is wrong
        assert json.loads(c.bodies[sids[0]])["reason"] == "Unauthorized"
        assert all(c.send_some(s, 2_900_000) == -1 for s in sids)
        # the connection goes on: an anonymous GET of a public path
        sid = c.head("GET", "/version", ctype=None, end=True)
        assert c.wait(lambda: sid in c.ended, 5) and c.status[sid] == 200
    finally:
        c.close()


def _declare(c, n, length, path=CONFIGMAPS):
    return [c.head("POST", path, length=length, ctype="application/yaml") for _ in range(n)]


def test_h2_connection_body_budget(apiserver):
    """An authenticated connection's bodies together within 16 MiB: streams declaring 3 MB each,
    the sixth and later are answered 429 with Retry-After at once; the first five wait for their
    bodies. Closing the connection gives the budget back."""
    per_conn = CONN_BODY_MAX // (3 * MB)
    ctx = tls_context(apiserver.data_dir, cert="admin", alpn=("h2",))
    for _ in range(2):  # the second connection finds the first one's claims returned
        c = H2(apiserver.port, ctx)
        try:
            sids = _declare(c, per_conn + 3, 3 * MB)
            over = sids[per_conn:]
            assert c.wait(lambda: all(s in c.status for s in over), 5), c.status
            assert {c.status[s] for s in over} == {429}
            assert c.headers[over[0]].get("retry-after") == "1"
            st = json.loads(c.bodies[over[0]])
            assert (st["code"], st["reason"]) == (429, "TooManyRequests"), st
            c.pump(0.5)
            assert not any(s in c.status for s in sids[:per_conn]), c.status
        finally:
            c.close()


def test_server_body_budget(apiserver):
    """Every connection's bodies together within 128 MiB: connections of five 3 MB streams each,
    the stream past the server's budget is answered 429 whichever connection it is on."""
    ctx = tls_context(apiserver.data_dir, cert="admin", alpn=("h2",))
    fits = SERVER_BODY_MAX // (3 * MB)
    conns, sids = [], []
    try:
        time.sleep(0.5)  # the previous test's connections are closed on the server's side
        while len(sids) < fits + 2:
            c = H2(apiserver.port, ctx)
            conns.append(c)
            sids += [(c, s) for s in _declare(c, min(5, fits + 2 - len(sids)), 3 * MB)]
            c.pump(0.05)
        deadline = time.monotonic() + 5
        refused = []
        while len(refused) < 2 and time.monotonic() < deadline:
            for c in conns:
                c.pump(0.05)
            refused = [(c, s) for c, s in sids if c.status.get(s) == 429]
        for c in conns:
            c.pump(0.3)
        # exactly the streams past the budget (which ones: the order the workers took them in)
        assert len([1 for c, s in sids if c.status.get(s) == 429]) == 2, [c.status for c in conns]
        assert not any(c.status.get(s) not in (None, 429) for c, s in sids)
    finally:
        for c in conns:
            c.close()


def _get_latency(api_client, path="/api/v1/namespaces/default"):
    t0 = time.monotonic()
    r = api_client.get(path)
    assert r.status == 200, r
    return time.monotonic() - t0


def test_h2_anonymous_flood_keeps_memory_and_other_clients(apiserver, api):
    """The issue's attack: 16 anonymous connections, 100 streams each sending 2.9 MB without
    ending them (the old server buffered +300 MB per connection). The server's memory stays
    put and another client's GET is answered within 1 s throughout."""
    ctx = tls_context(apiserver.data_dir, alpn=("h2",))
    pid = apiserver.proc.pid
    base = rss_bytes(pid)
    stop = threading.Event()
    stats = {"sent": 0, "answered": 0, "streams": 0, "unanswered": 0, "closed": 0}
    lock = threading.Lock()

    def attacker():
        c = H2(apiserver.port, ctx)
        try:
            sids = _declare(c, 100, 2_900_000)
            left = {s: 2_900_000 for s in sids}
            while not stop.is_set() and left and not c.closed:
                for s in list(left):
                    n = c.send_some(s, left[s])
                    if n < 0 or left[s] - n <= 0:
                        del left[s]
                    else:
                        left[s] -= n
                        with lock:
                            stats["sent"] += n
                c.pump(0.01)
            c.wait(lambda: all(s in c.status for s in sids), 20)
            with lock:
                stats["answered"] += sum(1 for s in sids if c.status.get(s) == 401)
                stats["streams"] += len(sids)
                # a connection the server ended (the sanitizer build, slower, does so to some of
                # these clients) has no more answers to give; one still open must have them all
                if not c.closed:
                    stats["unanswered"] += sum(1 for s in sids if s not in c.status)
                stats["closed"] += c.closed
        finally:
            c.close()

    threads = [threading.Thread(target=attacker) for _ in range(16)]
    for t in threads:
        t.start()
    worst, peak = 0.0, 0
    deadline = time.monotonic() + 8
    try:
        while time.monotonic() < deadline and any(t.is_alive() for t in threads):
            worst = max(worst, _get_latency(api))
            peak = max(peak, rss_bytes(pid) - base)
            if peak > 1024 * MiB:  # the old server: stop before the machine suffers
                break
            time.sleep(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert apiserver.proc.alive()
    assert peak < (96 if SANITIZED else 64) * MiB, f"RSS grew by {peak / MiB:.0f} MiB ({stats['sent'] / MiB:.0f} MiB sent)"
    assert worst < GET_MAX_S, worst
    assert stats["streams"] == 1600 and stats["unanswered"] == 0 and stats["answered"] >= 100, stats
    if not SANITIZED:
        assert stats["answered"] == 1600, stats
    assert _get_latency(api) < GET_MAX_S


@pytest.mark.skipif(SANITIZED, reason="ASan's quarantine keeps freed memory resident by design")
def test_memory_is_returned_when_connections_close(apiserver):
    """Authenticated connections that send 116 MB of bodies they never finish, then close: the
    server's memory comes back down (the old server kept ~100 MB of freed pages resident)."""
    ctx = tls_context(apiserver.data_dir, cert="admin", alpn=("h2",))
    pid = apiserver.proc.pid
    time.sleep(1.5)  # earlier tests' buffers given back
    base = rss_bytes(pid)
    conns = []
    try:
        for _ in range(8):
            c = H2(apiserver.port, ctx)
            conns.append(c)
            left = {s: 2_900_000 for s in _declare(c, 5, 3 * MB)}
            while left:
                for s in list(left):
                    n = c.send_some(s, left[s], chunk=65536)
                    if n < 0 or left[s] - n <= 0:
                        del left[s]
                    else:
                        left[s] -= n
                c.pump(0.001)
        wait_for(lambda: rss_bytes(pid) - base > 80 * MiB, 10, what="the bodies to be held")
    finally:
        for c in conns:
            c.close()
    wait_for(lambda: rss_bytes(pid) - base < 16 * MiB, 5,
             what=f"RSS back near {base / MiB:.0f} MiB (now {rss_bytes(pid) / MiB:.0f} MiB)")


# ---- a memory-capped run ------------------------------------------------------------------

def _own_cgroup(controller):
    """This process's cgroup path for a v1 controller ("memory"), or for v2 (controller None)."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            if (controller is None and ctrls == "") or (controller and controller in ctrls.split(",")):
                return path
    return None


class MemoryCgroup:
    """A child memory cgroup of this process's own with a limit: cgroup v1 (memory controller under
    /sys/fs/cgroup/memory, as on hybrid hosts) or v2. Raises OSError where none can be made."""

    def __init__(self, name, limit):
        v1 = "/sys/fs/cgroup/memory"
        if os.path.isdir(v1) and os.path.exists(os.path.join(v1, "memory.limit_in_bytes")):
            self.v2 = False
            parent = v1 + (_own_cgroup("memory") or "/")
        else:
            with open("/sys/fs/cgroup/cgroup.controllers") as f:
                if "memory" not in f.read().split():
                    raise OSError("no memory controller in cgroup v2")
            self.v2 = True
            parent = "/sys/fs/cgroup" + (_own_cgroup(None) or "/")
        self.path = os.path.join(parent, name)
        os.mkdir(self.path)
        try:
            self._write("memory.max" if self.v2 else "memory.limit_in_bytes", str(limit))
        except OSError:
            os.rmdir(self.path)
            raise

    def _write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def add(self, pid):
        self._write("cgroup.procs", str(pid))

    def oom_kills(self):
        if self.v2:
            with open(os.path.join(self.path, "memory.events")) as f:
                return int(dict(l.split() for l in f)["oom_kill"])
        with open(os.path.join(self.path, "memory.oom_control")) as f:
            d = dict(l.split() for l in f)
        return int(d.get("oom_kill", 0))

    def peak(self):
        name = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        try:
            with open(os.path.join(self.path, name)) as f:
                return int(f.read())
        except OSError:
            return -1

    def remove(self):
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


def _attack_h2_anonymous(port, data_dir, seconds, out):
    """One anonymous connection: 100 streams sending 2.9 MB each without ending them."""
    c = H2(port, tls_context(data_dir, alpn=("h2",)))
    sids = _declare(c, 100, 2_900_000)
    left = {s: 2_900_000 for s in sids}
    deadline = time.monotonic() + seconds
    while left and not c.closed and time.monotonic() < deadline:
        for s in list(left):
            n = c.send_some(s, left[s], chunk=65536)
            if n < 0 or left[s] - n <= 0:
                del left[s]
            else:
                left[s] -= n
        c.pump(0.001)
    # the answers went out at the heads; a client starved of CPU among 16 (and the sanitizer
    # build's server reading 4.6 GB of refused DATA) can take long to read them on 2 cores
    c.wait(lambda: all(s in c.status for s in sids), 60)
    n401 = sum(1 for s in sids if c.status.get(s) == 401)
    out.put((n401, {"closed": c.closed, "error": c.error, "resets": len(c.reset),
                    "others": sorted({v for v in c.status.values() if v != 401}),
                    "unsent": len(left)}))
    c.close()


def _yaml_body(name, size, many_keys):
    """A ConfigMap as YAML of about size bytes: three large values, or many small keys (whose
    parsing and validation cost the HTTP worker threads seconds per body)."""
    head = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n"
    if not many_keys:
        each = (size - len(head)) // 3 - 16
        return (head + "".join(f"  k{i}: {'x' * each}\n" for i in range(3))).encode()
    lines, n, i = [head], len(head), 0
    while n < size - 64:
        line = f"  key{i:07d}: value-{i:07d}-xxxxxxxxxxxxxxxx\n"
        lines.append(line)
        n += len(line)
        i += 1
    return "".join(lines).encode()


@pytest.fixture
def capped_apiserver(tmp_path):
    try:
        cg = MemoryCgroup(f"kite-hostile-{os.getpid()}", 1 << 30)
    except OSError as e:
        pytest.skip(f"no memory cgroup can be made here ({e}): the capped run needs root and cgroup v1 or v2")
    with small_quarantine():
        c = Cluster("apiserver", tmp_path).start()
    cg.add(c.proc.pid)
    yield c, cg
    c.stop()
    cg.remove()


def _capped_run(c, cg, yaml_writers, many_keys=False):
    """The attacks at once: 16 anonymous HTTP/2 connections of 100 streams sending 2.9 MB each
    without ending them, and yaml_writers parallel 3 MB YAML bodies from an authenticated client,
    while another client GETs every 0.2 s. Returns the worst GET latency before the YAML bodies
    start and while they run."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(str(c.data_dir / "pki" / "ca.crt"))
    ctx.check_hostname = False
    ctx.load_cert_chain(str(c.data_dir / "pki" / "admin.crt"), str(c.data_dir / "pki" / "admin.key"))
    mp = multiprocessing.get_context("fork")
    out = mp.Queue()
    attackers = [mp.Process(target=_attack_h2_anonymous, args=(c.port, c.data_dir, 20, out)) for _ in range(16)]
    codes, errors = [], []

    def post_yaml(i):
        try:
            conn = http.client.HTTPSConnection("127.0.0.1", c.port, context=ctx, timeout=120)
            conn.request("POST", CONFIGMAPS, body=_yaml_body(f"big-{i}", 3 * MB, many_keys),
                         headers={"Content-Type": "application/yaml"})
            codes.append(conn.getresponse().status)
            conn.close()
        except Exception as e:  # noqa: BLE001 - the server dying shows here
            errors.append(repr(e))

    writers = [threading.Thread(target=post_yaml, args=(i,)) for i in range(yaml_writers)]
    api = c.api()
    worst = {"h2": 0.0, "yaml": 0.0}
    for p in attackers:
        p.start()
    try:
        t_end = time.monotonic() + 3  # the anonymous connections alone first
        while time.monotonic() < t_end:
            assert c.proc.alive(), "the server died:\n" + c.proc.log_tail()
            worst["h2"] = max(worst["h2"], _get_latency(api))
            time.sleep(0.2)
        for t in writers:
            t.start()
        while any(t.is_alive() for t in writers) or any(p.is_alive() for p in attackers):
            assert c.proc.alive(), "the server died:\n" + c.proc.log_tail()
            worst["yaml"] = max(worst["yaml"], _get_latency(api))
            time.sleep(0.2)
    finally:
        for t in writers:
            if t.is_alive() or t.ident:
                t.join(120)
        for p in attackers:
            p.join(90)
            if p.is_alive():
                p.kill()
    answered = [out.get(timeout=5) for _ in attackers]
    assert c.proc.alive() and cg.oom_kills() == 0, c.proc.log_tail()
    assert not errors, errors[:3]
    assert len(codes) == yaml_writers and all(code < 500 for code in codes), sorted(codes)
    # every stream answered is answered 401, and none is left hanging: an attacker whose
    # connection ended early (its record says how) may see fewer than its 100 answers; all
    # 1,600 are counted in the uncapped flood test (test_h2_anonymous_flood_keeps_memory...)
    assert all(not d["others"] for _, d in answered), answered
    assert all(n == 100 or d["closed"] for n, d in answered), answered
    assert _get_latency(api) < GET_MAX_S
    return worst


@pytest.mark.slow
def test_memory_capped_run(capped_apiserver):
    """In a 1 GiB memory cgroup the server lives through both attacks (no OOM kill), answers every
    body (no 5xx: 401 to the anonymous streams; 413, 422 or 429 to the YAML bodies) and another
    client's GET within 1 s during the anonymous flood."""
    c, cg = capped_apiserver
    worst = _capped_run(c, cg, 50)
    assert worst["h2"] < GET_MAX_S, f"another client's GET took {worst['h2']:.2f} s (peak memory {cg.peak() >> 20} MiB)"


@pytest.mark.slow  # over 30 s under ASan: the slow tier (make test-slow, CI)
def test_memory_capped_run_gets_stay_fast_under_yaml_bodies(capped_apiserver):
    """The same run with YAML bodies of 60,000 keys each (parsing and validation that once held
    both HTTP workers for a minute, then seconds each at a load of 14): another client's GET is
    still answered within 1 s, as large bodies are decoded on the bulk threads, never on the
    HTTP workers."""
    c, cg = capped_apiserver
    worst = _capped_run(c, cg, 50, many_keys=True)
    assert worst["yaml"] < GET_MAX_S, f"another client's GET took {worst['yaml']:.2f} s during the YAML bodies"


def test_large_bodies_are_written_whole_from_the_bulk_threads(apiserver):
    """Bodies of 256 KiB and more are decoded on the bulk threads: 8 YAML creates, a JSON PUT
    and a merge PATCH of ~1 MB, in parallel, are answered as on the workers (201 / 200), store
    exactly what was sent, and another client's GET is served meanwhile."""
    ns = "/api/v1/namespaces/default/configmaps"
    results, errors = {}, []

    def create(i):
        try:
            a = apiserver.api()
            value = f"{i}" * 900_000
            body = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bulk-{i}\ndata:\n  v: '{value}'\n"
            r = a.post(ns, body, ctype="application/yaml")
            results[i] = (r.status, value)
            a.close()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    api = apiserver.api()
    while any(t.is_alive() for t in threads):
        assert api.get("/api/v1/namespaces/default").status == 200
        time.sleep(0.05)
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(s for s, _ in results.values()) == [201] * 8, {i: s for i, (s, _) in results.items()}
    for i, (_, value) in results.items():
        assert api.ok("GET", f"{ns}/bulk-{i}")["data"]["v"] == value
    cm = api.ok("GET", f"{ns}/bulk-0")
    cm["data"]["v"] = "p" * 700_000
    assert api.put(f"{ns}/bulk-0", cm).status == 200
    r = api.patch(f"{ns}/bulk-1", {"data": {"v": None, "w": "q" * 600_000}}, ctype="application/merge-patch+json")
    assert r.status == 200, r.body[:300]
    assert api.ok("GET", f"{ns}/bulk-0")["data"]["v"] == "p" * 700_000
    got = api.ok("GET", f"{ns}/bulk-1")["data"]
    assert got == {"w": "q" * 600_000}
    for i in range(8):
        api.delete(f"{ns}/bulk-{i}")
