#!/usr/bin/python3
"""Watch fan-out: the apiserver's cost of one change seen by W watchers.

usage: watch-fanout.py [--kite PATH] [--watchers "1 10 100 1000"] [--writes 300] [--rate 50] [--keep]

`kite up --no-agent` (bench/benchlib.py); one Lease in its own namespace; for each W: W watches of
that namespace's Leases (HTTP/1.1 over TLS with the admin's certificate, each its own connection,
as W controllers or kubectl --watch would hold them), then --writes merge patches of the Lease's
renewTime at --rate per second from one kept-alive connection. Measured: the apiserver's CPU
(utime + stime) from the first write until every watcher has seen every event, divided per
write and per delivered event; the lag from each write's request to each watcher's receipt of its
event (p50/p99, every watcher and write); events missed (must be 0). The baseline is the smallest W in the
same run; "per added watcher's event" is the CPU one row adds over the row above, per write and
per added watcher: what one more watcher of a change costs the server, which should not grow with
W (kube-apiserver's watch cache serializes an event once per encoding and writes it to each
watcher; so does kite's). The watchers run in this
process (one thread, non-blocking sockets): at large W it shares the 2 cores with the server, so
lag there includes this reader's own delay. Prints a table and a "summary:" line per W."""
import argparse
import http.client
import json
import os
import selectors
import shutil
import socket
import ssl
import sys
import tempfile
import threading
import time
from pathlib import Path

import benchlib

REPO = Path(__file__).resolve().parents[1]
NS = "fanout"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


def request(conn, method, path, body=None, ctype="application/json"):
    conn.request(method, path, body=json.dumps(body) if body is not None else None,
                 headers={"Content-Type": ctype} if body is not None else {})
    r = conn.getresponse()
    data = r.read()
    if r.status >= 300 and r.status != 409:
        sys.exit(f"{method} {path}: {r.status} {data[:300]!r}")
    return json.loads(data) if data else None


class Watcher:
    """One watch connection; counts the MODIFIED events of the Lease and when each arrived."""

    def __init__(self, ctx, port, rv):
        raw = socket.create_connection(("127.0.0.1", port))
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.s = ctx.wrap_socket(raw)
        self.s.sendall(f"GET {LEASES}?watch=true&resourceVersion={rv}&timeoutSeconds=3600 HTTP/1.1\r\n"
                       f"Host: 127.0.0.1\r\nAccept: application/json\r\n\r\n".encode())
        self.s.setblocking(False)
        self.buf = b""
        self.seen = []  # arrival time of each event, in order

    def read(self, now):
        try:
            while True:
                chunk = self.s.recv(65536)
                if not chunk:
                    return False
                self.buf += chunk
        except (ssl.SSLWantReadError, BlockingIOError):
            pass
        n = self.buf.count(b'"MODIFIED"')
        if n:
            self.seen.extend([now] * n)
            self.buf = self.buf[self.buf.rfind(b'"MODIFIED"') + 10:]
        return True

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def run_one(kite_pid, ctx, port, w, writes, rate):
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
    rv = request(conn, "GET", f"{LEASES}/l")["metadata"]["resourceVersion"]
    watchers = [Watcher(ctx, port, rv) for _ in range(w)]
    sel = selectors.DefaultSelector()
    for x in watchers:
        sel.register(x.s, selectors.EVENT_READ, x)
    time.sleep(1.0)  # every watch answered and registered
    for x in watchers:
        x.read(time.monotonic())
    sent = []
    done = threading.Event()

    def writer():
        t0 = time.monotonic()
        for i in range(writes):
            due = t0 + i / rate
            d = due - time.monotonic()
            if d > 0:
                time.sleep(d)
            now = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{i % 1000000:06d}Z"
            sent.append(time.monotonic())
            request(conn, "PATCH", f"{LEASES}/l", {"spec": {"renewTime": now}}, "application/merge-patch+json")
        done.set()

    cpu0 = benchlib.cpu_seconds(kite_pid)
    th = threading.Thread(target=writer, daemon=True)
    th.start()
    deadline = time.monotonic() + writes / rate + 60
    while time.monotonic() < deadline:
        for key, _ in sel.select(0.2):
            key.data.read(time.monotonic())
        if done.is_set() and all(len(x.seen) >= writes for x in watchers):
            break
    cpu = benchlib.cpu_seconds(kite_pid) - cpu0
    th.join(10)
    lags = []
    missed = 0
    for x in watchers:
        missed += max(0, writes - len(x.seen))
        for i, t in enumerate(x.seen[:writes]):
            if i < len(sent):
                lags.append((t - sent[i]) * 1000)
        x.close()
    conn.close()
    return {"w": w, "cpu_s": cpu, "per_write_us": cpu / writes * 1e6, "per_event_us": cpu / (writes * w) * 1e6,
            "lag_p50_ms": pct(lags, 50), "lag_p99_ms": pct(lags, 99), "missed": missed}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kite", default=str(REPO / "build" / "kite"))
    ap.add_argument("--watchers", default="1 10 100 1000")
    ap.add_argument("--writes", type=int, default=300)
    ap.add_argument("--rate", type=float, default=50)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    work = Path(tempfile.mkdtemp(prefix="kite-fanout-"))
    p, port, data = benchlib.start_up(a.kite, work, who="watch-fanout")
    rows = []
    try:
        ctx = benchlib.admin_context(data)
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
        request(conn, "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        request(conn, "POST", LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
                                       "spec": {"holderIdentity": "bench", "leaseDurationSeconds": 40}})
        conn.close()
        for w in [int(x) for x in a.watchers.split()]:
            log(f"{w} watchers, {a.writes} writes at {a.rate}/s")
            r = run_one(p.pid, ctx, port, w, a.writes, a.rate)
            rows.append(r)
            log(f"  server CPU {r['cpu_s']:.2f} s: {r['per_write_us']:.0f} us per write, {r['per_event_us']:.1f} us per "
                f"delivered event; lag p50 {r['lag_p50_ms']:.1f} ms, p99 {r['lag_p99_ms']:.1f} ms; missed {r['missed']}")
    finally:
        benchlib.stop(p)
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("| watchers | server CPU per write (us) | per delivered event (us) | per added watcher's event, from the row above (us) "
          "| lag p50 / p99 (ms) | missed |")
    print("|---|---|---|---|---|---|")
    prev = None
    for r in rows:
        extra = ""
        if prev and r["w"] > prev["w"]:
            r["marginal_us"] = (r["cpu_s"] - prev["cpu_s"]) / (a.writes * (r["w"] - prev["w"])) * 1e6
            extra = f"{r['marginal_us']:.1f}"
        print(f"| {r['w']} | {r['per_write_us']:.0f} | {r['per_event_us']:.1f} | {extra} | "
              f"{r['lag_p50_ms']:.1f} / {r['lag_p99_ms']:.1f} | {r['missed']} |")
        prev = r
    for r in rows:
        print(f"summary: watchers={r['w']} per_write_us={r['per_write_us']:.0f} per_event_us={r['per_event_us']:.1f} "
              f"lag_p99_ms={r['lag_p99_ms']:.1f} missed={r['missed']}")
    return 1 if any(r["missed"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
