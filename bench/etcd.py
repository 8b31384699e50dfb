#!/usr/bin/python3
"""Lease renewals with kite on etcd, next to etcd's own puts and to kite on SQLite, in one run.

usage: etcd.py [--kite PATH] [--seconds 10] [--rounds 3] [--connections 64] [--threads 2]
               [--leases 64] [--keep]

One etcd member (Debian's etcd-server, default settings: every write fsynced) on 127.0.0.1, on a
temp dir. The same wrk (THREADS threads, CONNECTIONS keep-alive connections, --latency) drives:
  etcd put        POST /v3/kv/put through etcd's JSON gateway (plain HTTP, etcd's own client
                  port): LEASES keys /registry/leases/default/bench-N, values of the size kite
                  stores for a Lease (bench/etcd-put.lua)
  kite/etcd x1    unconditional PUTs of LEASES Leases (bench/lease-put.lua, TLS, a static token)
                  to one `kite apiserver --etcd-servers` over that etcd
  kite/etcd x2    the same load split over two apiservers over that etcd (the second with a copy
                  of the first's pki/, as a control-plane join), one wrk per apiserver with half
                  the connections each, at once: req/s summed, p99 the larger
  kite/sqlite     the same PUTs to `kite apiserver` on its SQLite file
Rounds are interleaved (a slow spell of the machine touches every row alike); each row shows its
median round. Prints the table, the ratios to etcd's own put rate, and a final "summary:" line of
key=value pairs for bench/run. Exits 2 when etcd or wrk is missing or a server did not start.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import cpu_seconds, free_port  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
TARGET = 0.8  # kite on etcd >= 0.8x etcd's own put rate (issue #28)


def log(msg):
    print(f"etcd-bench: {msg}", file=sys.stderr, flush=True)


def wait(pred, secs, what, proc=None, logpath=None):
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            break
        try:
            if pred():
                return
        except (OSError, http.client.HTTPException, ssl.SSLError):
            pass
        time.sleep(0.1)
    tail = Path(logpath).read_text(errors="replace")[-3000:] if logpath and Path(logpath).exists() else ""
    log(f"{what} not ready\n{tail}")
    sys.exit(2)


class Procs:
    def __init__(self):
        self.procs = []

    def start(self, args, logpath):
        f = open(logpath, "ab")
        p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=f, stderr=f, start_new_session=True)
        f.close()
        self.procs.append(p)
        return p

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def http_ok(port, path, tls=False, token=None):
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
    else:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body


class Kite:
    """A `kite apiserver` with a static token (system:masters), on SQLite or on etcd."""

    def __init__(self, procs, kite, work, name, token_file, token, etcd=None, pki_from=None):
        self.work = Path(work) / name
        self.data = self.work / "data"
        self.data.mkdir(parents=True)
        if pki_from:
            shutil.copytree(pki_from / "pki", self.data / "pki")
        self.port = free_port("etcd-bench")
        self.token = token
        args = [kite, "apiserver", "--data-dir", str(self.data), "--listen", f"127.0.0.1:{self.port}",
                "--token-auth-file", str(token_file)]
        if etcd:
            args += ["--etcd-servers", etcd]
        self.log = self.work / "apiserver.log"
        self.proc = procs.start(args, self.log)
        wait(lambda: http_ok(self.port, "/readyz", True, token) == (200, b"ok"), 60, f"kite {name}", self.proc,
             self.log)

    def request(self, method, path, body=None):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        c = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=10)
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def create_leases(self, n):
        for i in range(n):
            st, body = self.request("POST", LEASES, {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": f"bench-{i}", "namespace": "default"},
                "spec": {"holderIdentity": f"bench-{i}", "leaseDurationSeconds": 40}})
            if st not in (201, 409):
                log(f"creating lease bench-{i}: HTTP {st} {body[:200]!r}")
                sys.exit(2)


def to_ms(v):
    m = re.match(r"([0-9.]+)(us|ms|s|m)?$", v)
    n = float(m.group(1))
    return n * {"us": 0.001, "ms": 1, "s": 1000, "m": 60000, None: 1}[m.group(2)]


def wrk(url, script, conns, threads, secs, env):
    """Runs wrk; returns (req/s, p50 ms, p99 ms, non-2xx, socket errors)."""
    out = subprocess.run(["wrk", f"-t{threads}", f"-c{conns}", f"-d{secs}s", "--latency", "--timeout", "5s",
                          "-s", str(script), url], capture_output=True, text=True, env={**os.environ, **env})
    t = out.stdout
    rps = float(re.search(r"^Requests/sec:\s+([0-9.]+)", t, re.M).group(1)) if "Requests/sec" in t else 0.0
    p50 = re.search(r"^\s+50%\s+(\S+)", t, re.M)
    p99 = re.search(r"^\s+99%\s+(\S+)", t, re.M)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", t)
    errs = re.search(r"Socket errors:(.*)", t)
    nerr = sum(int(x) for x in re.findall(r"\d+", errs.group(1))) if errs else 0
    if not rps:
        log(f"wrk {url}: {t}{out.stderr}")
    return (rps, to_ms(p50.group(1)) if p50 else 0.0, to_ms(p99.group(1)) if p99 else 0.0,
            int(non2xx.group(1)) if non2xx else 0, nerr)


def wrk_split(urls, script, conns, threads, secs, env):
    """One wrk per url at once, conns split between them: (req/s summed, p50 mean, p99 max, ...)."""
    res = [None] * len(urls)

    def run(i):
        res[i] = wrk(urls[i], script, max(1, conns // len(urls)), max(1, threads // len(urls)), secs, env)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(len(urls))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return (sum(r[0] for r in res), sum(r[1] for r in res) / len(res), max(r[2] for r in res),
            sum(r[3] for r in res), sum(r[4] for r in res))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kite", default=os.environ.get("KITE") or str(REPO / "build" / "kite"))
    ap.add_argument("--seconds", type=int, default=int(os.environ.get("BENCH_SECONDS", 10)))
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("BENCH_ROUNDS", 3)))
    ap.add_argument("--connections", type=int, default=int(os.environ.get("BENCH_CONNECTIONS", 64)))
    ap.add_argument("--threads", type=int, default=int(os.environ.get("BENCH_THREADS", 2)))
    ap.add_argument("--leases", type=int, default=int(os.environ.get("BENCH_LEASES", 64)))
    ap.add_argument("--only", default="", help="comma-separated rows to run (etcd,x1,x2,sqlite)")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    for tool in ("etcd", "wrk"):
        if not shutil.which(tool):
            log(f"{tool} is not installed (scripts/install-deps installs etcd-server; apt-get install wrk)")
            sys.exit(2)
    work = Path(tempfile.mkdtemp(prefix="kite-bench-etcd-"))
    procs = Procs()
    try:
        cport, pport = free_port("etcd-bench"), free_port("etcd-bench")
        curl = f"http://127.0.0.1:{cport}"
        etcd = procs.start(["etcd", "--name", "bench", "--data-dir", str(work / "etcd"),
                            "--listen-client-urls", curl, "--advertise-client-urls", curl,
                            "--listen-peer-urls", f"http://127.0.0.1:{pport}",
                            "--initial-advertise-peer-urls", f"http://127.0.0.1:{pport}",
                            "--initial-cluster", f"bench=http://127.0.0.1:{pport}",
                            "--log-level", "warn", "--logger", "zap"], work / "etcd.log")
        wait(lambda: b'"health":"true"' in http_ok(cport, "/health")[1], 30, "etcd", etcd, work / "etcd.log")
        token = "bench-" + os.urandom(8).hex()
        tokens = work / "tokens.csv"
        tokens.write_text(f'{token},bench,1000,"system:masters"\n')
        a1 = Kite(procs, a.kite, work, "etcd-a", tokens, token, etcd=curl)
        a2 = Kite(procs, a.kite, work, "etcd-b", tokens, token, etcd=curl, pki_from=a1.data)
        sq = Kite(procs, a.kite, work, "sqlite", tokens, token)
        a1.create_leases(a.leases)
        sq.create_leases(a.leases)
        # the value size kite stores for one of these Leases, for etcd's own puts
        st, body = a1.request("GET", f"{LEASES}/bench-0")
        vbytes = len(body.strip())
        env = {"KITE_TOKEN": token, "LEASE_NS": "default", "LEASE_COUNT": str(a.leases),
               "VALUE_BYTES": str(vbytes)}
        rows = {"etcd": "etcd put (JSON gateway)", "x1": "kite/etcd, 1 apiserver", "x2": "kite/etcd, 2 apiservers",
                "sqlite": "kite/sqlite"}
        only = [r for r in (a.only.split(",") if a.only else rows) if r in rows]
        runs = {r: [] for r in only}
        put = BENCH / "lease-put.lua"
        cpu = {r: [] for r in only}  # per round: (kite, etcd) CPU seconds
        kites = {"etcd": [], "x1": [a1], "x2": [a1, a2], "sqlite": [sq]}
        for rnd in range(a.rounds):
            for r in only:
                log(f"round {rnd + 1}/{a.rounds}: {rows[r]}")
                c0 = (sum(cpu_seconds(k.proc.pid) for k in kites[r]), cpu_seconds(etcd.pid))
                if r == "etcd":
                    res = wrk(curl, BENCH / "etcd-put.lua", a.connections, a.threads, a.seconds, env)
                elif r == "x1":
                    res = wrk(f"https://127.0.0.1:{a1.port}", put, a.connections, a.threads, a.seconds, env)
                elif r == "x2":
                    res = wrk_split([f"https://127.0.0.1:{a1.port}", f"https://127.0.0.1:{a2.port}"], put,
                                    a.connections, a.threads, a.seconds, env)
                else:
                    res = wrk(f"https://127.0.0.1:{sq.port}", put, a.connections, a.threads, a.seconds, env)
                log(f"  {res[0]:.0f} req/s, p50 {res[1]:.2f} ms, p99 {res[2]:.2f} ms, non-2xx {res[3]}, "
                    f"errors {res[4]}")
                runs[r].append(res)
                cpu[r].append((sum(cpu_seconds(k.proc.pid) for k in kites[r]) - c0[0], cpu_seconds(etcd.pid) - c0[1]))
        med = {}
        for r, rs in runs.items():
            s = sorted(rs, key=lambda x: x[0])
            m = s[(len(s) - 1) // 2]
            med[r] = (m[0], m[1], m[2], sum(x[3] for x in rs), sum(x[4] for x in rs))
            # CPU per request over all rounds (requests = req/s x seconds)
            n = sum(x[0] for x in rs) * a.seconds
            med[r] += (sum(c[0] for c in cpu[r]) / n * 1e6 if n else 0, sum(c[1] for c in cpu[r]) / n * 1e6 if n else 0)
        base = med.get("etcd", (0,))[0]
        print(f"wrk: {a.threads} threads, {a.connections} keep-alive connections, {a.seconds}s each, "
              f"{a.rounds} interleaved rounds (median shown); {a.leases} leases, values {vbytes} B; "
              f"etcd {subprocess.run(['etcd', '--version'], capture_output=True, text=True).stdout.split()[2]}, "
              f"one member, fsync on")
        print(f"{'':28} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'vs etcd':>8} {'non-2xx':>8} {'errors':>7} "
              f"{'kite us/req':>11} {'etcd us/req':>11}  rounds")
        for r in only:
            rps, p50, p99, non2xx, errs, kus, eus = med[r]
            ratio = f"{rps / base:.2f}x" if base else "-"
            print(f"{rows[r]:28} {rps:8.0f} {p50:8.2f} {p99:8.2f} {ratio:>8} {non2xx:8d} {errs:7d} "
                  f"{kus:11.0f} {eus:11.0f}  " + " / ".join(f"{x[0]:.0f}" for x in runs[r]))
        print("(us/req: CPU time of the kite apiservers and of etcd per request, over all rounds)")
        if base and "x1" in med:
            ok = "met" if med["x1"][0] >= TARGET * base else "NOT met"
            print(f"target kite/etcd >= {TARGET}x etcd's own put rate: {ok} "
                  f"(1 apiserver {med['x1'][0] / base:.2f}x"
                  + (f", 2 apiservers {med['x2'][0] / base:.2f}x" if "x2" in med else "") + ")")
        print("summary: " + " ".join(f"{r}_rps={med[r][0]:.0f} {r}_p99_ms={med[r][2]:.2f} {r}_kite_us={med[r][5]:.0f} "
                                     f"{r}_etcd_us={med[r][6]:.0f}" for r in only)
              + (f" x1_ratio={med['x1'][0] / base:.2f}" if base and "x1" in med else ""))
    finally:
        procs.stop_all()
        if a.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
