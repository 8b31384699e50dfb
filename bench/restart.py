#!/usr/bin/python3
"""Restart storm: restart `kite up` under N simulated nodes and time their recovery.

usage: restart.py [--kite PATH] [--nodes "1000"] [--connections 64] [--ramp 200] [--down 5]
                  [--kill] [--timeout 120] [--out DIR]

For each N: `kite up --no-agent` (bench/benchlib.py) and `kite sim --nodes N` at default timings
(lease 40 s renewed every 10 s). Once every node is Ready and a renewal period has passed, the
apiserver is stopped (SIGTERM, or SIGKILL with --kill), left down --down seconds, and started
again on the same data dir and port. Meanwhile, every second: the requests the apiserver answered
(apiserver_request_total, all codes) and the 429s it shed (kite_inflight_rejected_total), from its
/metrics, and the simulator's renewals. Reported: the time from the restart (the apiserver ready
again) until every node's Lease has a renewTime after it (every node heartbeating again, by the
Leases the server holds), the peak request rate and the 429s after the restart, the renewal
failures the simulator saw, and the nodes the node lifecycle controller marked not Ready (false
Unknown: every node stayed alive). The target (issue #27): every lease renewed again within one
lease duration (40 s), no node marked.

Writes DIR/restart-N.dat (seconds since the restart; requests/s; 429/s; renewals/s; leases renewed
since the restart) and DIR/restart-N.png (gnuplot, skipped without it). Exit 1 when a run did not
recover within --timeout.
"""
import argparse
import json
import os
import signal
import ssl
import sys
import threading
import time
import http.client
from datetime import datetime, timezone
from pathlib import Path

import benchlib

REPO = Path(__file__).resolve().parents[1]
LEASE_S = 40


def log(msg):
    print(f"restart: {msg}", file=sys.stderr, flush=True)


class Api:
    """GETs against the apiserver as admin (a new connection when the last one broke)."""

    def __init__(self, port, data):
        self.port = port
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self.ctx.check_hostname = False
        self.ctx.verify_mode = ssl.CERT_NONE
        self.ctx.load_cert_chain(str(data / "pki" / "admin.crt"), str(data / "pki" / "admin.key"))
        self.c = None

    def get(self, path, timeout=10):
        try:
            if self.c is None:
                self.c = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=timeout)
            self.c.request("GET", path)
            r = self.c.getresponse()
            body = r.read()
            return r.status, body
        except (OSError, ssl.SSLError, http.client.HTTPException):
            if self.c:
                self.c.close()
            self.c = None
            return 0, b""


def counters(api):
    """(requests answered, 429s shed) from /metrics; None while the server is down."""
    st, body = api.get("/metrics")
    if st != 200:
        return None
    req = shed = 0.0
    for ln in body.decode(errors="replace").split("\n"):
        if ln.startswith("apiserver_request_total{"):
            req += float(ln.rsplit(" ", 1)[1])
        elif ln.startswith("kite_inflight_rejected_total{"):
            shed += float(ln.rsplit(" ", 1)[1])
    return req, shed


def parse_time(s):
    s = s.rstrip("Z")
    frac = ""
    if "." in s:
        s, frac = s.split(".", 1)
    t = datetime.strptime(s, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    return t + (float("0." + frac) if frac else 0.0)


LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


class RenewalWatch:
    """The names of the Leases renewed after `since` (epoch seconds): one list, then a watch from
    its revision. A list every second (50,000 Leases are ~45 MB of JSON) would itself compete with
    the renewals at that size; the watch costs the server one event per renewal."""

    def __init__(self, port, data, since):
        self.port, self.data, self.since = port, data, since
        self.names = set()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()

    def count(self):
        with self.lock:
            return len(self.names)

    def seen(self, obj):
        rt = obj.get("spec", {}).get("renewTime")
        if rt and parse_time(rt) > self.since:
            with self.lock:
                self.names.add(obj["metadata"]["name"])

    def run(self):
        api = Api(self.port, self.data)
        while not self.stop.is_set():
            st, body = api.get(LEASES, timeout=120)
            if st != 200:
                time.sleep(0.5)
                continue
            lst = json.loads(body)
            for it in lst.get("items", []):
                self.seen(it)
            rv = lst["metadata"]["resourceVersion"]
            try:
                c = http.client.HTTPSConnection("127.0.0.1", self.port, context=api.ctx, timeout=30)
                c.request("GET", f"{LEASES}?watch=1&resourceVersion={rv}")
                r = c.getresponse()
                if r.status != 200:
                    c.close()
                    continue
                while not self.stop.is_set():
                    ln = r.readline()
                    if not ln:
                        break
                    ln = ln.strip()
                    if not ln.startswith(b"{"):
                        continue
                    ev = json.loads(ln)
                    if ev.get("type") in ("ADDED", "MODIFIED"):
                        self.seen(ev["object"])
                c.close()
            except (OSError, ssl.SSLError, http.client.HTTPException, ValueError):
                time.sleep(0.5)


def run(args, n, tmp, out):
    work = tmp / f"n{n}"
    work.mkdir(parents=True)
    up, port, data = benchlib.start_up(args.kite, work, who="restart")
    res = {"nodes": n}
    ctl = work / "sim.sock"
    sim = benchlib.start_sim(args.kite, data, work, "--nodes", str(n), "--ramp", str(args.ramp), "--control", str(ctl),
                             "--progress-every", "5s", "--connections", str(args.connections))
    try:
        st = benchlib.wait_sim_ready(sim, ctl, n, time.monotonic() + n / args.ramp + 600, work, "restart")
        if st.get("ready") != n:
            log(f"N={n}: only {st.get('ready', 0)} of {n} nodes Ready")
            return res
        time.sleep(10)
        api = Api(port, data)
        samples = []  # (monotonic, requests, shed, renewals)
        stop_sampling = threading.Event()
        base = {"req": 0.0, "shed": 0.0, "last_req": 0.0, "last_shed": 0.0}

        def sampler():
            sapi = Api(port, data)
            while not stop_sampling.is_set():
                t = time.monotonic()
                c = counters(sapi)
                try:
                    ren = json.loads(benchlib.sim_control(ctl, "stats"))["renewals"]
                except (OSError, ValueError, KeyError):
                    ren = None
                if c is not None:
                    # counters start over with the new process: carry the old process's totals
                    if c[0] + base["req"] < base["last_req"]:
                        base["req"], base["shed"] = base["last_req"], base["last_shed"]
                    base["last_req"], base["last_shed"] = c[0] + base["req"], c[1] + base["shed"]
                    samples.append((t, c[0] + base["req"], c[1] + base["shed"], ren))
                else:
                    samples.append((t, None, None, ren))
                time.sleep(max(0.0, 1.0 - (time.monotonic() - t)))

        th = threading.Thread(target=sampler, daemon=True)
        th.start()
        time.sleep(20)  # two renewal periods of the steady state (the ramp bunches the renewals)
        benchlib.sim_control(ctl, "reset")
        t_down = time.monotonic()
        log(f"N={n}: stopping the apiserver ({'SIGKILL' if args.kill else 'SIGTERM'})")
        if args.kill:
            up.send_signal(signal.SIGKILL)
            up.wait()
        else:
            benchlib.stop(up, timeout=60)
        time.sleep(args.down)
        up, _, _ = benchlib.start_up(args.kite, work, who="restart", port=port)
        t_up = time.monotonic()
        wall_up = time.time()
        res["down_s"] = t_up - t_down
        log(f"N={n}: apiserver ready again after {res['down_s']:.1f}s down")
        renewed = []  # (seconds since t_up, leases renewed since)
        recovered = None
        watch = RenewalWatch(port, data, wall_up)
        while time.monotonic() - t_up < args.timeout:
            k = watch.count()
            renewed.append((time.monotonic() - t_up, k))
            if k >= n:
                recovered = time.monotonic() - t_up
                break
            time.sleep(1)
        watch.stop.set()
        time.sleep(5)
        stop_sampling.set()
        th.join()
        res["recovered_s"] = recovered
        res["renewed"] = renewed[-1][1] if renewed else 0
        st = json.loads(benchlib.sim_control(ctl, "stats"))
        res["failed_renewals"] = st.get("failing", 0)
        res["not_ready"] = benchlib.not_ready(data, "restart")
        # rates after the restart, per sampling interval
        rows = []
        prev = None
        for t, req, shed, ren in samples:
            if prev and req is not None and prev[1] is not None and t > prev[0]:
                dt = t - prev[0]
                rr = (ren - prev[3]) / dt if ren is not None and prev[3] is not None else 0
                k = max([x[1] for x in renewed if x[0] <= t - t_up] or [0])
                rows.append((t - t_up, (req - prev[1]) / dt, (shed - prev[2]) / dt, rr, k))
            if req is not None:
                prev = (t, req, shed, ren)
            elif prev is not None:
                prev = (prev[0], prev[1], prev[2], ren)
        after = [r for r in rows if r[0] >= 0]
        res["peak_rps"] = max([r[1] for r in after] or [0])
        res["shed_after"] = sum(r[2] for r in after)
        res["steady_rps"] = (sum(r[1] for r in rows if r[0] < -args.down - 1) /
                             max(1, len([r for r in rows if r[0] < -args.down - 1])))
        dat = out / f"restart-{n}.dat"
        with open(dat, "w") as f:
            f.write("# seconds_since_restart requests_per_s shed_429_per_s renewals_per_s leases_renewed_since_restart\n")
            for r in rows:
                f.write(f"{r[0]:.1f} {r[1]:.1f} {r[2]:.1f} {r[3]:.1f} {r[4]}\n")
        res["png"] = out / f"restart-{n}.png"
        benchlib.plot(res["png"], f"kite up restarted under {n} simulated nodes", "seconds since the apiserver was ready again",
                      "per second", dat, [(2, "requests answered/s"), (3, "429 shed/s"), (4, "renewals acknowledged/s")],
                      y2=[(5, "leases renewed since the restart")], y2label="leases")
    finally:
        benchlib.stop(sim)
        benchlib.stop(up)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kite", default=os.environ.get("KITE") or str(REPO / "build" / "kite"))
    ap.add_argument("--nodes", default="1000")
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--ramp", type=int, default=200)
    ap.add_argument("--down", type=float, default=5, help="seconds the apiserver stays down")
    ap.add_argument("--kill", action="store_true", help="SIGKILL the apiserver (default SIGTERM)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds after the restart for every lease to renew")
    ap.add_argument("--out", default=str(REPO / "build" / "bench"), help="where the .dat and .png go")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    bad = False
    print(f"restart storm: kite up {'killed' if args.kill else 'stopped'} and restarted after {args.down:.0f} s under N "
          f"simulated nodes ({args.connections} shared connections, default timings: lease {LEASE_S} s renewed every 10 s)")
    print(f"{'nodes':>7} {'down s':>7} {'all leases renewed after':>25} {'steady req/s':>13} {'peak req/s':>11} "
          f"{'429s after':>11} {'nodes failing':>14} {'not Ready':>10}", flush=True)
    with benchlib.workdir("kite-bench-restart-", args.keep, "restart") as tmp:
        for n in [int(x) for x in args.nodes.split()]:
            log(f"N={n}")
            r = run(args, n, tmp, out)
            if "recovered_s" not in r:
                bad = True
                print(f"{n:>7} (never all Ready)", flush=True)
                continue
            rec = f"{r['recovered_s']:.1f} s" if r["recovered_s"] is not None else f"not in {args.timeout:.0f} s ({r['renewed']})"
            bad |= r["recovered_s"] is None
            print(f"{n:>7} {r['down_s']:>7.1f} {rec:>25} {r['steady_rps']:>13.0f} {r['peak_rps']:>11.0f} "
                  f"{r['shed_after']:>11.0f} {r['failed_renewals']:>14} {r['not_ready']:>10}", flush=True)
            print(f"summary: nodes={n} down_s={r['down_s']:.1f} recovered_s={r['recovered_s']} "
                  f"steady_rps={r['steady_rps']:.0f} peak_rps={r['peak_rps']:.0f} shed_after={r['shed_after']:.0f} "
                  f"not_ready={r['not_ready']} plot={r['png']}", flush=True)
    print(f"target (issue #27): every lease renewed again within one lease duration ({LEASE_S} s), no node marked")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
