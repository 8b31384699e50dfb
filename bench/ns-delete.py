#!/usr/bin/python3
"""Namespace deletion under load: DELETE of a namespace holding many leases answers at once with
the namespace Terminating, the namespace controller empties it in the background, and lease
renewals elsewhere keep their latency meanwhile.

usage: ns-delete.py [--kite PATH] [--leases 5000] [--clients 16] [--interval 0.01] [--rounds 3]
                    [--baseline 5] [--limit-ms 50] [--timeout 300] [--keep]

Starts `kite up --no-agent` (which runs the namespace controller) on a temp data dir and
--clients renewal clients (one process and one keep-alive TLS connection each, the admin client
certificate) that PUT their own lease in namespace default continuously, --interval seconds
apart (10 ms: ~1,000 renewals/s in all; sixteen clients renewing back to back, --interval 0,
would take the machine's CPUs from the server and measure the scheduler instead). Then, --rounds times: creates a namespace with --leases leases,
measures renewal latency for --baseline seconds, DELETEs the namespace and keeps measuring until
a GET of it answers 404. Prints each DELETE's latency, each time until the namespace was gone,
renewal p50/p99/max in the baseline windows and in the deletion windows (pooled over the rounds:
one deletion window is short), and a final "summary:" line of key=value pairs for bench/run.
Exits 1 when a DELETE did not answer 200 with the namespace Terminating, a namespace was not gone
within --timeout, a renewal failed, or the renewal p99 during the deletions was >= --limit-ms;
2 when kite could not be started.
"""
import argparse
import base64
import http.client
import json
import multiprocessing as mp
import os
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

import yaml

REPO = Path(__file__).resolve().parents[1]
DOOMED = "bench-doomed"
RENEW_NS = "default"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
HTTP_TIMEOUT = 30


def log(msg):
    print(f"ns-delete: {msg}", file=sys.stderr, flush=True)


def free_port():
    return benchlib.free_port("ns-delete")


def tls_files(kubeconfig, workdir):
    """(ca, cert, key) file paths of the kubeconfig's first user and cluster."""
    cfg = yaml.safe_load(Path(kubeconfig).read_text())
    cluster, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
    out = []
    for obj, key, name in ((cluster, "certificate-authority", "ca.pem"), (user, "client-certificate", "c.pem"),
                           (user, "client-key", "k.pem")):
        p = Path(workdir) / name
        if obj.get(key + "-data"):
            p.write_bytes(base64.b64decode(obj[key + "-data"]))
        else:
            p.write_bytes(Path(obj[key]).read_bytes())
        out.append(str(p))
    return out


def tls_context(files):
    ca, cert, key = files
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(ca)
    ctx.check_hostname = False  # the serving cert names IP 127.0.0.1
    ctx.load_cert_chain(cert, key)
    return ctx


class Conn:
    """One keep-alive HTTPS connection; reconnects once when the server closed it."""

    def __init__(self, port, ctx):
        self.port, self.ctx, self.c = port, ctx, None

    def request(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in range(2):
            if self.c is None:
                self.c = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=HTTP_TIMEOUT)
            try:
                self.c.request(method, path, body=data, headers=headers)
                r = self.c.getresponse()
                out = r.status, r.read()
                if r.will_close:
                    self.close()
                return out
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self):
        if self.c:
            self.c.close()
            self.c = None


def lease(ns, name, renew=None):
    spec = {"holderIdentity": name, "leaseDurationSeconds": 40}
    if renew is not None:
        spec["renewTime"] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(renew)) + ".%06dZ" % int(renew % 1 * 1e6)
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name, "namespace": ns},
            "spec": spec}


def create_leases(port, files, ns, n, threads=8):
    """Creates n leases in ns over `threads` keep-alive connections."""
    errors = []

    def work(k):
        c = Conn(port, tls_context(files))
        for i in range(k, n, threads):
            st, body = c.request("POST", LEASES.format(ns=ns), lease(ns, f"l-{i}"))
            if st != 201:
                errors.append(f"lease l-{i}: HTTP {st}: {body[:200]!r}")
                return
        c.close()

    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise RuntimeError(errors[0])


def renewer(idx, port, files, interval, stop, ready, out):
    """A renewal client: PUTs its lease back to back until stop is set; sends its samples
    [(start, seconds, status), ...] (start: CLOCK_MONOTONIC, comparable across processes)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    c = Conn(port, tls_context(files))
    name = f"renew-{idx}"
    path = LEASES.format(ns=RENEW_NS) + "/" + name
    st, body = c.request("POST", LEASES.format(ns=RENEW_NS), lease(RENEW_NS, name, time.time()))
    if st not in (201, 409):
        out.send(("error", f"{name}: create: HTTP {st}: {body[:200]!r}"))
        return
    ready.release()
    samples = []
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            st, _ = c.request("PUT", path, lease(RENEW_NS, name, time.time()))
        except OSError as e:
            st = f"{type(e).__name__}"
        samples.append((t0, time.monotonic() - t0, st))
        if interval:
            time.sleep(interval)
    c.close()
    out.send(("ok", samples))


class Round:
    """One namespace created, filled, measured and deleted; windows are CLOCK_MONOTONIC (from, to)."""

    def __init__(self, ns):
        self.ns, self.create_s, self.base, self.during = ns, 0.0, (0.0, 0.0), (0.0, 0.0)
        self.status, self.phase, self.delete_s, self.gone_s, self.left = 0, "", 0.0, None, 0


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def stats(lat):
    """(count, p50 ms, p99 ms, max ms)"""
    return len(lat), pct(lat, 50) * 1e3, pct(lat, 99) * 1e3, (max(lat) * 1e3 if lat else float("nan"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kite", default=os.environ.get("KITE") or str(REPO / "build" / "kite"))
    ap.add_argument("--leases", type=int, default=5000)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--interval", type=float, default=0.01, help="seconds between a client's renewals")
    ap.add_argument("--rounds", type=int, default=3, help="create-and-delete rounds; samples are pooled")
    ap.add_argument("--baseline", type=float, default=5.0, help="seconds of renewals measured before the DELETE")
    ap.add_argument("--limit-ms", type=float, default=50.0, help="renewal p99 during the deletion must stay below")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the namespace to be gone")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (data dir and kite's log)")
    a = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="kite-ns-delete."))
    data = tmp / "data"
    data.mkdir()
    port = free_port()
    logf = open(tmp / "up.log", "wb")
    proc = subprocess.Popen([a.kite, "up", "--no-agent", "--data-dir", str(data), "--listen", f"127.0.0.1:{port}"],
                            stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, start_new_session=True)
    stop, procs = mp.Event(), []
    rounds, samples, errors = [], [], []

    def cleanup():
        stop.set()
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if a.keep:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    def fail(code, msg):
        log(msg)
        try:
            log("kite up log tail:\n" + (tmp / "up.log").read_bytes()[-3000:].decode(errors="replace"))
        except OSError:
            pass
        cleanup()
        sys.exit(code)

    signal.signal(signal.SIGTERM, lambda *_: fail(130, "terminated"))
    try:
        # ---- start kite up and wait for /readyz with the admin certificate
        deadline, files = time.monotonic() + 30, None
        while True:
            if proc.poll() is not None:
                fail(2, f"kite up exited with {proc.returncode}")
            if time.monotonic() > deadline:
                fail(2, "kite up not ready after 30 s")
            try:
                if files is None and (data / "admin.kubeconfig").exists():
                    files = tls_files(data / "admin.kubeconfig", tmp)
                if files:
                    st, body = Conn(port, tls_context(files)).request("GET", "/readyz")
                    if st == 200 and body.strip() == b"ok":
                        break
            except (OSError, ssl.SSLError, http.client.HTTPException, yaml.YAMLError, KeyError, IndexError):
                files = None
            time.sleep(0.1)
        ctl = Conn(port, tls_context(files))

        # ---- renewal clients
        ready = mp.Semaphore(0)
        pipes = []
        for i in range(a.clients):
            rd, wr = mp.Pipe(duplex=False)
            p = mp.Process(target=renewer, args=(i, port, files, a.interval, stop, ready, wr), daemon=True)
            p.start()
            procs.append(p)
            pipes.append(rd)
        for _ in range(a.clients):
            if not ready.acquire(timeout=30):
                fail(1, "renewal clients did not start")
        log(f"{a.clients} renewal clients running")

        for r in range(a.rounds):
            rd = Round(f"{DOOMED}-{r + 1}")
            rounds.append(rd)
            # ---- the namespace and its leases
            st, body = ctl.request("POST", "/api/v1/namespaces",
                                   {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": rd.ns}})
            if st != 201:
                fail(1, f"creating namespace {rd.ns}: HTTP {st}: {body[:300]!r}")
            log(f"round {r + 1}: creating {a.leases} leases in {rd.ns}")
            t = time.monotonic()
            try:
                create_leases(port, files, rd.ns, a.leases)
            except (RuntimeError, OSError, http.client.HTTPException) as e:
                fail(1, f"creating leases: {e}")
            rd.create_s = time.monotonic() - t
            time.sleep(1.0)  # settle: the creations' writes are done
            # ---- baseline
            log(f"round {r + 1}: baseline {a.baseline:g} s")
            rd.base = (time.monotonic(), None)
            time.sleep(a.baseline)
            # ---- the deletion
            t = time.monotonic()
            rd.base = (rd.base[0], t)
            rd.status, body = ctl.request("DELETE", f"/api/v1/namespaces/{rd.ns}")
            rd.delete_s = time.monotonic() - t
            try:
                rd.phase = json.loads(body).get("status", {}).get("phase", "")
            except ValueError:
                pass
            log(f"round {r + 1}: DELETE -> HTTP {rd.status} in {rd.delete_s * 1e3:.1f} ms, phase {rd.phase or '?'}; "
                "waiting for the namespace to go")
            while time.monotonic() - t < a.timeout:
                gst, _ = ctl.request("GET", f"/api/v1/namespaces/{rd.ns}")
                if gst == 404:
                    rd.gone_s = time.monotonic() - t
                    break
                time.sleep(0.02)
            rd.during = (t, time.monotonic())
            # the namespace goes only once emptied: its leases must be gone with it
            lst, body = ctl.request("GET", LEASES.format(ns=rd.ns))
            rd.left = len(json.loads(body).get("items") or []) if lst == 200 else -1
            if rd.gone_s is None:
                break
        stop.set()
        for pr in pipes:
            if not pr.poll(30):
                errors.append("a renewal client sent no samples")
                continue
            kind, payload = pr.recv()
            if kind == "error":
                errors.append(payload)
            else:
                samples.extend(payload)
        for p in procs:
            p.join(5)
    except KeyboardInterrupt:
        fail(130, "interrupted")

    def within(windows, t):
        return any(lo <= t < hi for lo, hi in windows)

    base = [x[1] for x in samples if within([rd.base for rd in rounds], x[0])]
    during = [x[1] for x in samples if within([rd.during for rd in rounds], x[0])]
    measured_from = rounds[0].base[0] if rounds else float("inf")
    bad = [x for x in samples if x[2] != 200 and x[0] >= measured_from]
    bn, b50, b99, bmax = stats(base)
    dn, d50, d99, dmax = stats(during)
    ratio = d99 / b99 if b99 > 0 else float("nan")
    base_s = sum(rd.base[1] - rd.base[0] for rd in rounds)
    during_s = sum(rd.during[1] - rd.during[0] for rd in rounds)
    delete_ms = max(rd.delete_s for rd in rounds) * 1e3
    gone_s = max(rd.gone_s for rd in rounds) if all(rd.gone_s is not None for rd in rounds) else None
    verdicts = []
    for rd in rounds:
        if rd.status != 200 or rd.phase != "Terminating":
            verdicts.append(f"DELETE of {rd.ns} answered HTTP {rd.status} with phase {rd.phase or '?'} "
                            "(want 200, Terminating)")
        if rd.gone_s is None:
            verdicts.append(f"{rd.ns} still there after {a.timeout:g} s")
        elif rd.left:
            verdicts.append(f"{rd.ns} gone with {rd.left} leases left in it")
    deleted_ok = not verdicts
    if bad or errors:
        verdicts.append(f"{len(bad)} failed renewals" + (f" ({bad[0][2]})" if bad else "") +
                        (f"; {errors[0]}" if errors else ""))
    if not during or d99 >= a.limit_ms:
        verdicts.append(f"renewal p99 during deletion {d99:.1f} ms >= {a.limit_ms:g} ms")

    print(f"namespace deletion: {a.rounds} round(s) of {a.leases} leases in a namespace, created then deleted, while "
          f"{a.clients} clients renew their own lease in {RENEW_NS} ("
          + (f"{a.interval * 1e3:g} ms apart" if a.interval else "back to back")
          + ", one keep-alive TLS connection each)")
    for i, rd in enumerate(rounds):
        gone = f"{rd.gone_s:.2f} s" if rd.gone_s is not None else f"> {a.timeout:g} s"
        print(f"  round {i + 1}: create {a.leases} leases {rd.create_s:.2f} s ({a.leases / rd.create_s:.0f}/s); "
              f"DELETE {rd.delete_s * 1e3:.1f} ms, HTTP {rd.status}, phase {rd.phase or '?'}; gone (GET 404) after {gone}")
    print(f"  renewals before (baseline, {base_s:.1f} s): {bn} ({bn / base_s:.0f}/s), "
          f"p50 {b50:.2f} ms, p99 {b99:.2f} ms, max {bmax:.2f} ms")
    print(f"  renewals during deletion ({during_s:.2f} s): {dn} ({dn / during_s:.0f}/s), "
          f"p50 {d50:.2f} ms, p99 {d99:.2f} ms, max {dmax:.2f} ms; p99 ratio to baseline {ratio:.2f}")
    print(f"  failed renewals: {len(bad)}")
    print("  result: " + ("PASS" if not verdicts else "FAIL: " + "; ".join(verdicts)) +
          f" (target: renewal p99 during deletion < {a.limit_ms:g} ms)")
    print(f"summary: delete_ms={delete_ms:.1f} gone_s={gone_s if gone_s is not None else -1:.2f} "
          f"base_p50={b50:.2f} base_p99={b99:.2f} base_max={bmax:.2f} del_p50={d50:.2f} del_p99={d99:.2f} "
          f"del_max={dmax:.2f} ratio={ratio:.2f} base_n={bn} del_n={dn} failed={len(bad)} "
          f"deleted={'PASS' if deleted_ok else 'FAIL'} result={'PASS' if not verdicts else 'FAIL'}")
    sys.stdout.flush()
    cleanup()
    sys.exit(1 if verdicts else 0)


if __name__ == "__main__":
    main()
