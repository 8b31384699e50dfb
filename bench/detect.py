#!/usr/bin/python3
"""Node failure detection latency of the node lifecycle controller: renewals stop -> the node's
Ready=Unknown seen by a watcher.

usage: detect.py [--kite PATH] [--tool build/node-leases] [--nodes 1000] [--stop 100] [--grace 50]
                 [--interval S] [--conns 8] [--window 20] [--floor 100] [--out DIR] [--keep]

Starts `kite apiserver` (static token, system:masters) on a temp data dir; bench/node-leases.c
creates --nodes Nodes (Ready=True, as a kubelet registers) and their Leases in kube-node-lease and
renews every Lease each --interval seconds (default: 10 s, the kubelet's 0.25 x leaseDuration 40 s,
with the default grace; 0.4 x grace when the grace is shorter than 25 s, so that a live node has
more than two renewals in every grace), the phases spread over the interval. Then
`kite controller-manager --controllers=nodelifecycle --node-monitor-grace-period GRACE` starts
(after the creation, as a controller restarted on a running cluster: every node gets a fresh
grace). After a warm-up (one interval, and the controller's start-up work done: a RegisteredNode
event posted per node) comes the steady window of --window seconds, in which the controller's CPU
(utime + stime of /proc/PID/stat) and the renewal rate are measured. Then --stop nodes spread over
the names stop renewing at once, and the run lasts until every one of them was seen Unknown and
at least grace + 10 s after the stop, renewals of the others going on.

A watcher (LIST, then a watch of /api/v1/nodes on its own connection) records when each node's
Ready was first seen Unknown. Latency = that time - the answer to the node's last renewal (both
CLOCK_MONOTONIC). A false positive is a node whose renewals never stopped but was seen Unknown;
the writer's own longest gap between two acknowledged renewals of such a node tells whether the
writer fell behind (gap > grace) or the controller erred. Baseline in the same run: --floor label
PATCHes of live nodes, each from sending it to its event seen by the same watcher (the API's own
write -> watch latency), taken during the wait for detection.

Prints a report and a final "summary:" line of key=value pairs for bench/run. Exits 1 when the p99
exceeds grace + 1 s, a stopped node was never seen Unknown, or there was a false positive; 2 when
kite could not be started.
"""
import argparse
import http.client
import json
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import benchlib

REPO = Path(__file__).resolve().parents[1]
NODES = "/api/v1/nodes"
TCK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print(f"detect: {msg}", file=sys.stderr, flush=True)


def free_port():
    return benchlib.free_port("detect")


def tls():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False  # the bench's own apiserver
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


class Api:
    def __init__(self, port, token):
        self.port, self.headers = port, {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self.c = None

    def req(self, method, path, body=None, ctype="application/json", timeout=60):
        data = json.dumps(body).encode() if body is not None else None
        headers = dict(self.headers, **({"Content-Type": ctype} if data else {}))
        for attempt in range(2):
            if self.c is None:
                self.c = http.client.HTTPSConnection("127.0.0.1", self.port, context=tls(), timeout=timeout)
            try:
                self.c.request(method, path, body=data, headers=headers)
                r = self.c.getresponse()
                out = r.read()
                return r.status, json.loads(out) if out.startswith(b"{") else out
            except (OSError, http.client.HTTPException):
                self.c = None
                if attempt:
                    raise
        return None


def ready_of(node):
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status")
    return None


class Watcher(threading.Thread):
    """LIST then watch of the nodes: when each node's Ready was first seen Unknown, and when each
    floor mark label was first seen."""

    def __init__(self, port, token):
        super().__init__(daemon=True)
        self.port, self.token = port, token
        self.unknown, self.marks = {}, {}
        self.cv = threading.Condition()
        self.stop = False
        self.listed = threading.Event()
        self.rv = None

    def seen(self, obj, now):
        md = obj.get("metadata") or {}
        name = md.get("name")
        if md.get("resourceVersion"):
            self.rv = md["resourceVersion"]
        with self.cv:
            if ready_of(obj) == "Unknown" and name not in self.unknown:
                self.unknown[name] = now
            mark = (md.get("labels") or {}).get("bench-mark")
            if mark and mark not in self.marks:
                self.marks[mark] = now
            self.cv.notify_all()

    def run(self):
        st, lst = Api(self.port, self.token).req("GET", NODES, timeout=600)
        assert st == 200, (st, lst)
        now = time.monotonic_ns()
        for o in lst["items"]:
            self.seen(o, now)
        self.rv = lst["metadata"]["resourceVersion"]
        self.listed.set()
        while not self.stop:
            conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=tls(), timeout=3600)
            conn.request("GET", f"{NODES}?watch=true&allowWatchBookmarks=true&resourceVersion={self.rv}",
                         headers={"Authorization": f"Bearer {self.token}"})
            r = conn.getresponse()
            buf = b""
            while not self.stop:
                try:
                    chunk = r.read1(1 << 20)
                except (OSError, http.client.HTTPException):
                    break
                if not chunk:
                    break
                now = time.monotonic_ns()
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    ev = json.loads(line)
                    if ev.get("type") in ("ADDED", "MODIFIED"):
                        self.seen(ev["object"], now)
            conn.close()

    def wait(self, table, key, timeout):
        deadline = time.monotonic() + timeout
        with self.cv:
            while key not in table:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cv.wait(left)
            return table[key]


def cpu_ticks(pid):
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])  # utime, stime (fields 14 and 15)


def event_posts(api):
    st, body = api.req("GET", "/metrics")
    text = body.decode() if isinstance(body, bytes) else ""
    return sum(float(l.rsplit(None, 1)[1]) for l in text.splitlines()
               if l.startswith("apiserver_request_total{") and 'verb="POST"' in l and 'resource="events"' in l)


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))] if v else float("nan")


class Tool:
    """bench/node-leases: commands on stdin, answers read line by line."""

    def __init__(self, argv, log_path):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(log_path, "w"),
                                  text=True, bufsize=1)

    def expect(self, word):
        for line in self.p.stdout:
            f = line.split()
            if f and f[0] == word:
                return f[1:]
        raise RuntimeError(f"node-leases ended before '{word}' (exit {self.p.wait()})")

    def cmd(self, c, answer=None):
        self.p.stdin.write(c + "\n")
        self.p.stdin.flush()
        return self.expect(answer) if answer else None

    def finish(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.close()
        out = self.p.stdout.read()
        self.p.wait()
        return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kite", default=os.environ.get("KITE", str(REPO / "build/kite")))
    ap.add_argument("--tool", default=str(REPO / "build/node-leases"))
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--stop", type=int, default=100)
    ap.add_argument("--grace", type=float, default=50)
    ap.add_argument("--interval", type=float, default=0)
    ap.add_argument("--conns", type=int, default=8)
    ap.add_argument("--window", type=float, default=20)
    ap.add_argument("--floor", type=int, default=100)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--controller-first", action="store_true",
                    help="start the controller before the nodes exist (as `kite up`), not after (a restart)")
    ap.add_argument("--out", default=str(REPO / "build" / "bench"), help="where the .dat and .png go")
    a = ap.parse_args()
    interval = a.interval or (10.0 if a.grace >= 25 else 0.4 * a.grace)
    work = Path(tempfile.mkdtemp(prefix="kite-detect."))
    procs = []

    def cleanup(*_):
        for p in reversed(procs):  # the controller first: the writers' end is no node failure
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"kept {work}")

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    try:
        token = secrets.token_hex(12)
        (work / "tokens.csv").write_text(f'{token},bench,1000,"system:masters"\n')
        port = free_port()
        api_p = subprocess.Popen([a.kite, "apiserver", "--data-dir", str(work / "api"), "--listen", f"127.0.0.1:{port}",
                                  "--token-auth-file", str(work / "tokens.csv")],
                                 stdout=open(work / "apiserver.log", "w"), stderr=subprocess.STDOUT)
        procs.append(api_p)
        api = Api(port, token)
        for _ in range(300):
            try:
                if api.req("GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            if api_p.poll() is not None:
                break
            time.sleep(0.1)
        else:
            log("apiserver not ready")
            sys.exit(2)
        if api_p.poll() is not None:
            log("apiserver died: " + (work / "apiserver.log").read_text()[-2000:])
            sys.exit(2)

        def start_cm():
            cm = subprocess.Popen([a.kite, "controller-manager", "--kubeconfig", str(work / "api/admin.kubeconfig"),
                                   "--controllers=nodelifecycle", "--leader-elect=false",
                                   "--node-monitor-grace-period", f"{a.grace:g}s"],
                                  stdout=open(work / "controller-manager.log", "w"), stderr=subprocess.STDOUT)
            procs.append(cm)
            return cm, time.monotonic()

        if a.controller_first:
            cm, cm_start = start_cm()
        log(f"{a.nodes} nodes, renewals every {interval:g} s over {a.conns} connections, grace {a.grace:g} s"
            + (", the controller started first" if a.controller_first else ""))
        tool = Tool([a.tool, str(port), token, str(a.nodes), str(a.conns), str(int(interval * 1000)), str(a.stop)],
                    work / "node-leases.err")
        procs.append(tool.p)
        try:
            created_s = float(tool.expect("created")[0])
            t0 = int(tool.expect("renew-start")[0])
        except RuntimeError as e:
            log(f"{e}: {(work / 'node-leases.err').read_text()[-2000:]}")
            sys.exit(2)
        log(f"created {a.nodes} nodes and leases in {created_s:.1f} s")
        w = Watcher(port, token)
        w.start()
        if not w.listed.wait(300):
            log("watcher's LIST did not answer")
            sys.exit(2)
        if not a.controller_first:
            cm, cm_start = start_cm()

        # warm-up: one interval, and until the controller's start-up work is done: a RegisteredNode
        # event per node, as Kubernetes records, each a POST (counted by the apiserver's metrics)
        time.sleep(interval + 1)
        startup_s = float("nan")
        while time.monotonic() - cm_start < 600:
            if event_posts(api) >= a.nodes:
                startup_s = time.monotonic() - cm_start
                break
            time.sleep(0.5)
        time.sleep(1)
        warm_s = time.monotonic() - cm_start

        # the steady window
        m0 = tool.cmd("mark", "mark")
        c0, a0 = cpu_ticks(cm.pid), cpu_ticks(api_p.pid)
        time.sleep(a.window)
        m1 = tool.cmd("mark", "mark")
        c1, a1 = cpu_ticks(cm.pid), cpu_ticks(api_p.pid)
        dt = (int(m1[0]) - int(m0[0])) / 1e9
        rate = (int(m1[1]) - int(m0[1])) / dt
        cm_cpu = (c1 - c0) / TCK / dt  # cores
        api_cpu = (a1 - a0) / TCK / dt
        fp_before = sorted(w.unknown)

        # stop, and the floor while waiting for the grace to run out
        stop_at = int(tool.cmd("stop", "stop-at")[0])
        stopped_names = {f"detect-{s * a.nodes // a.stop:05d}" for s in range(a.stop)}
        live = [f"detect-{i:05d}" for i in range(a.nodes) if f"detect-{i:05d}" not in stopped_names]
        floor = []
        fapi = Api(port, token)
        time.sleep(min(1.0, a.grace / 5))
        for k in range(min(a.floor, len(live))):
            mark = f"m{k}"
            t = time.monotonic_ns()
            st, _ = fapi.req("PATCH", f"{NODES}/{live[k * len(live) // a.floor]}",
                             {"metadata": {"labels": {"bench-mark": mark}}}, "application/merge-patch+json")
            seen = w.wait(w.marks, mark, 10)
            if st == 200 and seen:
                floor.append((seen - t) / 1e6)
        end = stop_at + int((a.grace + 10) * 1e9)
        with w.cv:
            while True:
                left = (end - time.monotonic_ns()) / 1e9
                done = all(n in w.unknown for n in stopped_names)
                if left <= 0 and done or left < -60:
                    break
                w.cv.wait(max(0.1, left) if left > 0 else 1)
        # the controller stops before the writers do (their end is no node failure)
        cm_alive = cm.poll() is None
        cm.send_signal(signal.SIGTERM)
        cm.wait(30)
        with w.cv:
            unknown = dict(w.unknown)
        st, lst = api.req("GET", NODES, timeout=600)  # the watcher's view checked against the server's
        out = tool.finish()
        w.stop = True

        last_ack = {}
        gaps = {}
        summary = ""
        for line in out.splitlines():
            f = line.split()
            if f[0] == "stopped":
                last_ack[f[1]] = int(f[2])
            elif f[0] == "gap":
                gaps[f[1]] = float(f[2])
            elif f[0] == "summary:":
                summary = line
        wsum = dict(kv.split("=", 1) for kv in summary.split()[1:])
        lat = [(unknown[n] - last_ack[n]) / 1e9 for n in last_ack if n in unknown]
        missed = [n for n in last_ack if n not in unknown]
        fps = sorted(n for n in unknown if n not in last_ack)
        fp_writer = [n for n in fps if gaps.get(n, 0) / 1000 > a.grace]
        final_unknown = {o["metadata"]["name"] for o in lst["items"] if ready_of(o) != "True"}
        fp_final = sorted(final_unknown - set(last_ack))

        per_k = a.nodes / 1000
        target = a.grace + 1
        p50, p99, mx = pct(lat, 50), pct(lat, 99), max(lat) if lat else float("nan")
        # the detection times' distribution, next to the grace: DIR/detect-N-G.dat and .png
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        dat = out / f"detect-{a.nodes}-{a.grace:g}.dat"
        with open(dat, "w") as f:
            f.write("# renewals_stop_to_unknown_s fraction_of_stopped_nodes grace_s\n")
            for i, v in enumerate(sorted(lat)):
                f.write(f"{v:.3f} {(i + 1) / len(lat):.4f} {a.grace:g}\n")
        benchlib.plot(out / f"detect-{a.nodes}-{a.grace:g}.png",
                      f"{a.stop} of {a.nodes} nodes stop renewing: time to Ready=Unknown (grace {a.grace:g} s)",
                      "seconds from the last renewal's answer to Unknown seen", "fraction of the stopped nodes", dat,
                      [(2, "detected")])
        ok = bool(lat) and p99 <= target and not missed and not fps and not fp_final and cm_alive
        print(f"{a.nodes} nodes, grace {a.grace:g} s, renewals every {interval:g} s "
              f"({a.nodes / interval:.0f}/s wanted, {rate:.0f}/s achieved in the steady window; "
              f"PUT p50 {wsum.get('put_p50_ms')} ms, p99 {wsum.get('put_p99_ms')} ms; writer's longest gap of a live node "
              f"{float(wsum.get('live_gap_max_ms', 0)) / 1000:.2f} s); created in {created_s:.1f} s; controller start-up "
              f"(a RegisteredNode event per node posted) {startup_s:.0f} s")
        print(f"  {a.stop} stopped at once: renewals stop -> Ready=Unknown seen, p50 {p50:.2f} s, p99 {p99:.2f} s, "
              f"max {mx:.2f} s (target p99 <= {target:g} s); {len(missed)} never seen Unknown")
        print(f"  false positives (live nodes seen Unknown): {len(fps)} "
              f"({len(fp_writer)} where the writer itself left a gap > grace; {len(fp_before)} before the stop); "
              f"not Ready at the end: {len(fp_final)}")
        print(f"  controller-manager CPU over {dt:.0f} s: {100 * cm_cpu:.2f}% of a core, "
              f"{100 * cm_cpu / per_k:.3f}% of a core per 1,000 nodes, "
              f"{1e6 * cm_cpu / rate if rate else 0:.1f} us per renewal; apiserver {100 * api_cpu:.0f}% of a core")
        print(f"  baseline: API write -> watch (label PATCH sent -> event seen), p50 {pct(floor, 50):.1f} ms, "
              f"p99 {pct(floor, 99):.1f} ms over {len(floor)}")
        if not cm_alive:
            print("  controller-manager died: " + (work / "controller-manager.log").read_text()[-1500:])
        print(f"summary: nodes={a.nodes} grace={a.grace:g} interval={interval:g} p50_s={p50:.2f} p99_s={p99:.2f} "
              f"max_s={mx:.2f} target_s={target:g} missed={len(missed)} fp={len(fps)} fp_writer={len(fp_writer)} "
              f"fp_final={len(fp_final)} cm_pct_core={100 * cm_cpu:.2f} cm_pct_per_1k={100 * cm_cpu / per_k:.3f} "
              f"cm_us_per_renewal={1e6 * cm_cpu / rate if rate else 0:.1f} api_pct_core={100 * api_cpu:.0f} "
              f"rate={rate:.0f} rate_wanted={a.nodes / interval:.0f} floor_p50_ms={pct(floor, 50):.1f} "
              f"floor_p99_ms={pct(floor, 99):.1f} startup_s={startup_s:.0f} result={'PASS' if ok else 'FAIL'}")
        sys.stdout.flush()
        return 0 if ok else 1
    finally:
        cleanup()


if __name__ == "__main__":
    sys.exit(main())
