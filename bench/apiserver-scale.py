#!/usr/bin/python3
"""The API server with many nodes stored: idle cost, cost per write, memory per node.

usage: apiserver-scale.py [--kite PATH] [--tool build/node-leases] [--nodes 150000] [--hot 64]
                          [--conns 64] [--seconds 15] [--idle-seconds 60] [--grace 50s] [--perf PHASE,...] [--keep]

One `kite apiserver` (static token, system:masters) on a fresh data dir, driven by
bench/node-leases.c (HTTP/1.1 keep-alive TLS connections, unconditional lease PUTs back to back):
  1. hot:      renewals cycling over HOT leases on the empty server (the baseline);
  2. populate: NODES Nodes and their Leases created;
  3. distinct: renewals cycling over all NODES leases (each written once per cycle);
  4. idle:     nothing renewed any more: once every lease expired (each node then turns
               LeaseExpired, one event each) the server's CPU over IDLE seconds with no request
               at all, and its memory per node beyond the stored bytes (RssAnon growth since
               phase 1, less key and latest value of every key in the database);
  5. hot-full: renewals cycling over HOT leases with the NODES objects stored.
Each write phase runs SECONDS after a 3 s warm-up and reports renewals/s and the server's CPU
per renewal; the ratios are against phase 1 of the same run. --perf PHASE records the server
with `perf record -g` during that phase (idle, distinct, hot or hot-full) into the work dir.
"""
import argparse
import os
import secrets
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import cpu_seconds, free_port, rss_kib, stop  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def log(msg):
    print(f"[apiserver-scale] {msg}", file=sys.stderr, flush=True)


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class Tool:
    """bench/node-leases: commands on stdin, answers read line by line."""

    def __init__(self, argv, err, paused):
        env = dict(os.environ)
        if paused:
            env["NODE_LEASES_PAUSED"] = "1"
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(err, "w"),
                                  text=True, env=env)

    def until(self, word):
        for line in self.p.stdout:
            if line.startswith(word):
                return line.split()
        raise RuntimeError(f"node-leases ended before '{word}' (exit {self.p.wait()})")

    def cmd(self, c, word):
        self.p.stdin.write(c + "\n")
        self.p.stdin.flush()
        return self.until(word)

    def quit(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.flush()
        summary = self.until("summary:")
        self.p.wait()
        return dict(kv.split("=") for kv in summary[1:])


class Perf:
    def __init__(self, pid, out):
        self.p = subprocess.Popen(["perf", "record", *os.environ.get("BENCH_PERF_ARGS", "-g").split(), "-F", "499", "-p", str(pid), "-o", str(out)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self):
        self.p.send_signal(2)
        self.p.wait()


def renew_phase(a, api_pid, tool, seconds, perf_out=None):
    """Renewals for `seconds` after a warm-up: (renewals/s, server CPU us per renewal)."""
    tool.cmd("resume", "resumed")
    time.sleep(3)
    m0 = tool.cmd("mark", "mark")
    c0, t0 = cpu_seconds(api_pid), time.monotonic()
    perf = Perf(api_pid, perf_out) if perf_out else None
    time.sleep(seconds)
    if perf:
        perf.stop()
    m1 = tool.cmd("mark", "mark")
    c1, t1 = cpu_seconds(api_pid), time.monotonic()
    tool.cmd("pause", "paused")
    n = int(m1[2]) - int(m0[2])
    return n / (t1 - t0), 1e6 * (c1 - c0) / n if n else 0.0, 100 * (c1 - c0) / (t1 - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kite", default=os.environ.get("KITE", str(REPO / "build/kite")))
    ap.add_argument("--tool", default=str(REPO / "build/node-leases"))
    ap.add_argument("--nodes", type=int, default=150000)
    ap.add_argument("--hot", type=int, default=64)
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--idle-seconds", type=float, default=60)
    ap.add_argument("--perf", default="")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--grace", default="50s", help="the apiserver's --node-monitor-grace-period (1h: the idle "
                    "phase's nodes stay Healthy, no LeaseExpired transition and event per node)")
    a = ap.parse_args()
    src = REPO / "bench/node-leases.c"
    if not Path(a.tool).exists() or Path(a.tool).stat().st_mtime < src.stat().st_mtime:
        log(f"building {a.tool}")
        subprocess.run(["cc", "-O2", "-g", "-std=gnu11", "-D_GNU_SOURCE", "-o", a.tool, str(src),
                        *subprocess.run(["pkg-config", "--cflags", "--libs", "gnutls"], capture_output=True,
                                        text=True, check=True).stdout.split(), "-lpthread"], check=True)
    work = Path(tempfile.mkdtemp(prefix="kite-apiserver-scale-"))
    port = free_port("apiserver-scale")
    token = secrets.token_hex(12)
    (work / "tokens.csv").write_text(f'{token},bench,1000,"system:masters"\n')
    api_p = subprocess.Popen([a.kite, "apiserver", "--data-dir", str(work / "api"), "--listen", f"127.0.0.1:{port}",
                              "--token-auth-file", str(work / "tokens.csv"), "--node-monitor-grace-period", a.grace],
                             stdout=open(work / "apiserver.log", "w"), stderr=subprocess.STDOUT)
    rows = []
    try:
        deadline = time.monotonic() + 60
        while not (work / "api" / "kite.db").exists() or subprocess.run(
                ["curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}", f"https://127.0.0.1:{port}/readyz"],
                capture_output=True, text=True).stdout != "200":
            if api_p.poll() is not None or time.monotonic() > deadline:
                sys.exit("apiserver did not start: " + (work / "apiserver.log").read_text()[-2000:])
            time.sleep(0.2)
        pid = api_p.pid
        perf_out = lambda ph: work / f"perf-{ph}.data" if ph in a.perf.split(",") else None  # noqa: E731

        def tool(n, paused=True):
            return Tool([a.tool, str(port), token, str(n), str(min(a.conns, n)), "1", "0"],
                        work / f"node-leases-{n}.err", paused)

        hot = tool(a.hot)
        hot.until("renew-start")
        hot_rate, hot_us, hot_cpu = renew_phase(a, pid, hot, a.seconds, perf_out("hot"))
        log(f"hot ({a.hot} leases, empty server): {hot_rate:.0f}/s, {hot_us:.1f} us CPU each")
        time.sleep(1)
        rss0, anon0 = rss_kib(pid), status_kib(pid, "RssAnon")

        full = tool(a.nodes)
        created = float(full.until("created")[1])
        full.until("renew-start")
        log(f"populated {a.nodes} nodes and leases in {created:.1f} s")
        d_rate, d_us, d_cpu = renew_phase(a, pid, full, a.seconds, perf_out("distinct"))
        log(f"distinct ({a.nodes} leases): {d_rate:.0f}/s, {d_us:.1f} us CPU each")
        # Nothing renews the leases: 50 s (the grace) after its last renewal each node turns
        # LeaseExpired (one event each, apiserver/nodestate.c). Idle is what follows that.
        t_end = time.monotonic()
        wait = 60 if a.grace == "50s" else 10
        time.sleep(wait)
        settle = float(wait)
        while settle < 180:
            c, t = cpu_seconds(pid), time.monotonic()
            time.sleep(5)
            settle += time.monotonic() - t
            if 100 * (cpu_seconds(pid) - c) / (time.monotonic() - t) < 5:
                break
        settle = time.monotonic() - t_end
        log(f"settled {settle:.0f} s after the last renewal")
        c0, t0 = cpu_seconds(pid), time.monotonic()
        perf = Perf(pid, perf_out("idle")) if perf_out("idle") else None
        time.sleep(a.idle_seconds)
        if perf:
            perf.stop()
        idle_cpu = 100 * (cpu_seconds(pid) - c0) / (time.monotonic() - t0)
        rss1, anon1 = rss_kib(pid), status_kib(pid, "RssAnon")
        db = sqlite3.connect(f"file:{work / 'api' / 'kite.db'}?mode=ro", uri=True)
        stored, keys = db.execute("SELECT sum(length(key) + length(value)), count(*) FROM kv k WHERE deleted = 0 AND rev = "
                                  "(SELECT max(rev) FROM kv WHERE key = k.key)").fetchone()
        db.close()
        per_node = (1024 * (anon1 - anon0) - stored) / a.nodes
        log(f"idle: {idle_cpu:.2f}% of a core; RSS {rss0 / 1024:.0f} -> {rss1 / 1024:.0f} MiB "
            f"(anon {anon0 / 1024:.0f} -> {anon1 / 1024:.0f}); stored {stored / 2**20:.0f} MiB in {keys} keys; "
            f"{per_node:.0f} B per node beyond the stored bytes")

        full.quit()
        rss2, anon2 = rss_kib(pid), status_kib(pid, "RssAnon")
        h_rate, h_us, h_cpu = renew_phase(a, pid, hot, a.seconds, perf_out("hot-full"))
        log(f"hot ({a.hot} leases, {a.nodes} stored): {h_rate:.0f}/s, {h_us:.1f} us CPU each")
        hot.quit()

        rows = [
            ("renewals, {} hot leases, empty server (baseline), /s".format(a.hot), f"{hot_rate:.0f}",
             f"{hot_us:.1f} us CPU each, {hot_cpu:.0f}% CPU", "1.00"),
            (f"populate {a.nodes} Nodes + Leases, s", f"{created:.1f}", f"{2 * a.nodes / created:.0f} creates/s", ""),
            (f"idle with {a.nodes} nodes stored, % of a core over {a.idle_seconds:.0f} s", f"{idle_cpu:.2f}",
             (f"after every lease expired ({settle:.0f} s after the last renewal)" if a.grace == "50s" else
              f"nodes Healthy (grace {a.grace}), {settle:.0f} s after the last renewal") + "; target < 2", "PASS" if idle_cpu < 2 else "FAIL"),
            ("apiserver memory per node beyond stored bytes, B", f"{per_node:.0f}",
             f"RssAnon +{(anon1 - anon0) / 1024:.0f} MiB, stored {stored / 2**20:.0f} MiB ({keys} keys); target < 2048",
             "PASS" if per_node < 2048 else "FAIL"),
            (f"renewals, {a.nodes} distinct leases, /s", f"{d_rate:.0f}",
             f"{d_us:.1f} us CPU each, {d_cpu:.0f}% CPU", f"rate {d_rate / hot_rate:.2f}, CPU each {d_us / hot_us:.2f}"),
            (f"renewals, {a.hot} hot leases, {a.nodes} stored, /s", f"{h_rate:.0f}",
             f"{h_us:.1f} us CPU each, {h_cpu:.0f}% CPU", f"rate {h_rate / hot_rate:.2f}, CPU each {h_us / hot_us:.2f}"),
            ("RSS at the end, MiB", f"{rss2 / 1024:.0f}", f"anon {anon2 / 1024:.0f}", ""),
        ]
    finally:
        stop(api_p)
        if a.keep or a.perf:
            log(f"kept {work}")
        else:
            subprocess.run(["rm", "-rf", str(work)])
    print(f"| measure ({a.conns} connections) | value | detail | ratio to baseline |")
    print("|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
