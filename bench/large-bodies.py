"""Another client's GET while large YAML bodies are decoded (README limits: bulk threads).

Starts `kite apiserver` (each binary given, in alternating rounds), then measures the latency of
a GET of one namespace every 20 ms: first on the idle server (the baseline of the same run), then
while --writers clients each POST a 3 MB YAML ConfigMap of 60,000 small keys (parsing and
validation that cost seconds of CPU each: they are answered 422, too many keys for a ConfigMap's
1 MiB). Prints p50/p99/max per binary and phase, and the ratio to the idle baseline.

    python3 bench/large-bodies.py [--writers 50] [--rounds 2] KITE [KITE_BEFORE]
"""
import argparse
import http.client
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchlib import free_port


def body(i, size=3_000_000):
    head = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big-{i}\ndata:\n"
    lines, n, k = [head], len(head), 0
    while n < size - 64:
        line = f"  key{k:07d}: value-{k:07d}-xxxxxxxxxxxxxxxx\n"
        lines.append(line)
        n += len(line)
        k += 1
    return "".join(lines).encode()


def ctx_for(data):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(str(data / "pki" / "ca.crt"))
    ctx.check_hostname = False
    ctx.load_cert_chain(str(data / "pki" / "admin.crt"), str(data / "pki" / "admin.key"))
    return ctx


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))] if xs else float("nan")


def sample(port, ctx, stop, out):
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=120)
    while not stop.is_set():
        t0 = time.monotonic()
        conn.request("GET", "/api/v1/namespaces/default")
        conn.getresponse().read()
        out.append(time.monotonic() - t0)
        time.sleep(0.02)
    conn.close()


def one(kite, writers, payloads):
    tmp = Path(tempfile.mkdtemp(prefix="kite-bench-bodies-"))
    port = free_port("large-bodies")
    data = tmp / "data"
    proc = subprocess.Popen([kite, "apiserver", "--data-dir", str(data), "--listen", f"127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=open(tmp / "log", "w"))
    try:
        deadline = time.monotonic() + 30
        while not (data / "pki" / "admin.key").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        ctx = ctx_for(data)
        while time.monotonic() < deadline:
            try:
                c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.1)
        res = {}
        for phase in ("idle", "bodies"):
            stop, lat = threading.Event(), []
            t = threading.Thread(target=sample, args=(port, ctx, stop, lat))
            t.start()
            codes = []
            if phase == "idle":
                time.sleep(3)
            else:
                def post(i):
                    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=300)
                    c.request("POST", "/api/v1/namespaces/default/configmaps", body=payloads[i],
                              headers={"Content-Type": "application/yaml"})
                    codes.append(c.getresponse().status)
                    c.close()
                ws = [threading.Thread(target=post, args=(i,)) for i in range(writers)]
                t0 = time.monotonic()
                for w in ws:
                    w.start()
                for w in ws:
                    w.join()
                res["bodies_s"] = time.monotonic() - t0
                res["codes"] = sorted(set(codes))
            stop.set()
            t.join()
            res[phase] = lat
        return res
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--writers", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("kites", nargs="+")
    a = ap.parse_args()
    payloads = [body(i) for i in range(a.writers)]
    print(f"GET latency (ms) idle and while {a.writers} YAML bodies of 3 MB (60,000 keys each) are decoded; "
          f"{a.rounds} rounds, binaries alternating; load average {os.getloadavg()[0]:.1f}")
    print(f"{'binary':<40} {'round':>5} {'idle p50':>9} {'p99':>7} {'bodies p50':>11} {'p99':>8} {'max':>8} "
          f"{'p99/idle p99':>13} {'bodies took':>12}  answers")
    for r in range(a.rounds):
        for k in a.kites:
            res = one(k, a.writers, payloads)
            i, b = res["idle"], res["bodies"]
            print(f"{k[-40:]:<40} {r + 1:>5} {pct(i, 50) * 1e3:>9.1f} {pct(i, 99) * 1e3:>7.1f} "
                  f"{pct(b, 50) * 1e3:>11.1f} {pct(b, 99) * 1e3:>8.1f} {max(b) * 1e3:>8.1f} "
                  f"{pct(b, 99) / pct(i, 99):>13.1f} {res['bodies_s']:>11.1f}s  {res['codes']}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
