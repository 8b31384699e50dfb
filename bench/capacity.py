#!/usr/bin/python3
"""Heartbeat capacity: ramp simulated nodes against `kite up` until lease renewals miss the SLO.

usage: capacity.py [--kite PATH] [--max 20000] [--ramp 20] [--interval 10] [--hold 30]
                   [--renew "10 1"] [--connections 256] [--inflight N] [--out DIR]

For each renewal period in --renew (seconds; the default timings renew every 10 s, the aggressive
ones every 1 s: `kite sim --lease-duration` 4 x the period): a fresh `kite up --no-agent`
(bench/benchlib.py) and `kite sim --nodes MAX --ramp R`. Every --interval seconds the simulator's
renewal latency over the interval (from when a renewal was due to its answer: p99 and max), its
renewal failures, and the apiserver's CPU and RSS are sampled against the number of nodes
started. The ramp ends after two intervals in a row with renewal p99 > 1 s (the Kubernetes SLO), at
a failing node, or at --max. The capacity is the node count at the last interval within the SLO;
the nodes above it are then killed (their leases stop) and the capacity is held for --hold
seconds (300 for the issue's 5 minutes), which must stay within the SLO.

Writes DIR/capacity-RENEW.dat (nodes, p99 ms, max ms, apiserver CPU %, RSS MiB per interval) and
DIR/capacity-RENEW.png (gnuplot; skipped without it). Prints a table and a "summary:" line per
renewal period.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

import benchlib

REPO = Path(__file__).resolve().parents[1]
SLO_MS = 1000


def log(msg):
    print(f"capacity: {msg}", file=sys.stderr, flush=True)


def control(path, line):
    return benchlib.sim_control(path, line, timeout=60, tries=50)


def sample(ctl, up, interval, sim=None):
    """One interval: (stats at its end, apiserver CPU fraction over it[, the simulator's])."""
    control(ctl, "reset")
    c0, t0 = benchlib.cpu_seconds(up.pid), time.monotonic()
    s0 = benchlib.cpu_seconds(sim.pid) if sim else 0
    time.sleep(interval)
    st = json.loads(control(ctl, "stats"))
    dt = time.monotonic() - t0
    up_cpu = (benchlib.cpu_seconds(up.pid) - c0) / dt
    if sim is None:
        return st, up_cpu
    return st, up_cpu, (benchlib.cpu_seconds(sim.pid) - s0) / dt


def run(args, renew, tmp, out):
    work = tmp / f"r{renew}"
    work.mkdir(parents=True)
    up, port, data = benchlib.start_up(args.kite, work, who="capacity")
    ctl = work / "sim.sock"
    sim = benchlib.start_sim(args.kite, data, work, "--nodes", str(args.max), "--ramp", str(args.ramp),
                             "--lease-duration", str(4 * renew), "--control", str(ctl), "--progress-every", "10s",
                             "--connections", str(args.connections),
                             "--inflight", str(args.inflight or max(64, args.connections)))
    rows = []
    res = {"renew": renew, "capacity": 0}
    try:
        while not ctl.exists():
            benchlib.check_sim(sim, work, "capacity")
            time.sleep(0.5)
        ended = "the maximum"
        over = 0
        while True:
            benchlib.check_sim(sim, work, "capacity")
            st, cpu, sim_cpu = sample(ctl, up, args.interval, sim)
            rss = benchlib.rss_kib(up.pid) / 1024
            n = st["registered"]
            rows.append((n, st["renewalP99Ms"], st["renewalMaxMs"], cpu * 100, rss, sim_cpu * 100))
            log(f"renew {renew}s: {n} nodes, p99 {st['renewalP99Ms']:.0f} ms, max {st['renewalMaxMs']:.0f} ms, "
                f"failing {st['failing']}, api CPU {cpu * 100:.0f}%, sim CPU {sim_cpu * 100:.0f}%, RSS {rss:.0f} MiB")
            # two intervals in a row past the SLO end the ramp (one can be the connections'
            # handshakes at the start, or a checkpoint); a failing node ends it at once
            over = over + 1 if st["renewalP99Ms"] > SLO_MS else 0
            if over >= 2 or st["failing"] > 0:
                ended = f"p99 {st['renewalP99Ms']:.0f} ms" if st["failing"] == 0 else f"{st['failing']} failing"
                break
            if over == 0:
                res.update(capacity=n, cpu=cpu, rss=rss, p99=st["renewalP99Ms"])
            if st["started"] >= args.max and n >= args.max:
                break
        res["ended"] = ended
        cap = res["capacity"]
        if cap and args.hold > 0:
            # back to the capacity: the nodes above it die (their leases stop), the rest hold
            width = max(5, len(str(args.max - 1)))  # as the simulator names them
            names = [f"sim-{i:0{width}d}" for i in range(cap, args.max)]
            for i in range(0, len(names), 2000):
                control(ctl, "kill " + " ".join(names[i:i + 2000]))
            time.sleep(4 * renew)  # the killed nodes' outstanding requests drain
            st, cpu, sim_cpu = sample(ctl, up, args.hold, sim)
            res["hold_sim_cpu"] = sim_cpu
            res["hold_p99"], res["hold_max"], res["hold_failing"] = st["renewalP99Ms"], st["renewalMaxMs"], st["failing"]
            res["hold_cpu"], res["hold_rss"] = cpu, benchlib.rss_kib(up.pid) / 1024
    finally:
        benchlib.stop(sim)
        benchlib.stop(up)
    dat = out / f"capacity-{renew}s.dat"
    with open(dat, "w") as f:
        f.write("# nodes renewal_p99_ms renewal_max_ms apiserver_cpu_percent apiserver_rss_mib sim_cpu_percent\n")
        for r in rows:
            f.write(" ".join(f"{x:.1f}" if isinstance(x, float) else str(x) for x in r) + "\n")
    res["png"] = out / f"capacity-{renew}s.png"
    benchlib.plot(res["png"], f"lease renewals every {renew} s: latency as simulated nodes are added", "nodes",
                  "renewal latency, ms", dat, [(2, "p99 ms"), (3, "max ms")],
                  y2=[(4, "apiserver CPU %"), (6, "simulator CPU %")], y2label="CPU % of a core")
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kite", default=os.environ.get("KITE") or str(REPO / "build" / "kite"))
    ap.add_argument("--max", type=int, default=20000, help="nodes at most")
    ap.add_argument("--ramp", type=int, default=20, help="nodes started per second (registrations cost more than renewals: a fast ramp measures the ramp)")
    ap.add_argument("--interval", type=float, default=10, help="seconds per sample")
    ap.add_argument("--hold", type=float, default=30, help="seconds the capacity is held (300: the issue's 5 minutes)")
    ap.add_argument("--renew", default="10 1", help="renewal periods, seconds")
    ap.add_argument("--connections", type=int, default=256)
    ap.add_argument("--inflight", type=int, default=0,
                    help="the simulator's lanes (requests at once; over HTTP/2 streams of the connections); 0: max(64, connections)")
    ap.add_argument("--out", default=str(REPO / "build" / "bench"))
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"heartbeat capacity: `kite sim` ramping at {args.ramp} nodes/s against `kite up --no-agent` "
          f"({args.connections} shared connections) until renewal p99 > {SLO_MS} ms or a failure; held {args.hold:.0f} s")
    print(f"{'renew s':>7} {'nodes held':>10} {'ended by':>16} {'p99 ms':>7} {'hold p99':>9} {'hold max':>9} "
          f"{'api CPU':>8} {'api RSS MiB':>11}", flush=True)
    with benchlib.workdir("kite-bench-capacity-", args.keep, "capacity") as tmp:
        for renew in [int(x) for x in args.renew.split()]:
            r = run(args, renew, tmp, out)
            hp = f"{r['hold_p99']:.0f}" if "hold_p99" in r else "-"
            hm = f"{r['hold_max']:.0f}" if "hold_max" in r else "-"
            cpu = r.get("hold_cpu", r.get("cpu", 0)) * 100
            rss = r.get("hold_rss", r.get("rss", 0))
            print(f"{renew:>7} {r['capacity']:>10} {r.get('ended', '-'):>16} {r.get('p99', 0):>7.0f} {hp:>9} {hm:>9} "
                  f"{cpu:>7.0f}% {rss:>11.0f}", flush=True)
            print(f"summary: renew_s={renew} capacity={r['capacity']} ended=\"{r.get('ended')}\" hold_s={args.hold:.0f} "
                  f"hold_p99_ms={hp} hold_failing={r.get('hold_failing', '-')} api_cpu={cpu / 100:.3f} "
                  f"api_rss_mib={rss:.0f} sim_cpu={r.get('hold_sim_cpu', 0):.3f} plot={r['png']}", flush=True)


if __name__ == "__main__":
    main()
