#!/usr/bin/python3
"""Heartbeat capacity with simulated nodes: `kite sim` against `kite up --no-agent`.

usage: sim.py [--kite PATH] [--nodes "1000 10000"] [--window 60] [--idle 30] [--ramp 200] [--connections K] [--keep]

For each N: a fresh `kite up --no-agent` (bench/benchlib.py), its idle CPU with no node measured
over --idle seconds (the baseline), then `kite sim --nodes N` at default timings (lease 40 s,
renewed every 10 s; status every 10 s, reported on change or every 5 min) ramping at --ramp
nodes/s. Once every node is Ready (as the simulated nodes' acknowledged statuses say) and one
renewal period has passed, a steady window of --window seconds: renewals/s (vs the N/10 expected),
the renewal latency p50/p99/max over the window (from when a node's renewal was due to its answer,
so a simulator or server falling behind shows), the apiserver's CPU (utime + stime) and RSS, and
the simulator's RSS per node (over its RSS before any node started; the target is < 20 KiB, a
kubemark hollow node costs ~220 MB). --connections K: the nodes share K connections (`kite sim
--connections`, impersonating each node); 0 (the default): one connection per node with its own
certificate. Then the simulator stops and the apiserver's CPU over --idle
seconds with N nodes and no writes (inside the grace period: no controller writes either), next to
the no-node baseline.

At the end of the window, the nodes whose Ready condition is not True (the node lifecycle
controller's false Unknown: every node is alive). Prints a table and a "summary:" line per N. Exit 1 when a run did not get every node Ready.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

import benchlib

REPO = Path(__file__).resolve().parents[1]


def log(msg):
    print(f"sim: {msg}", file=sys.stderr, flush=True)


def run(args, n, tmp):
    work = tmp / f"n{n}"
    work.mkdir(parents=True)
    up, port, data = benchlib.start_up(args.kite, work, who="sim")
    res = {"nodes": n}
    try:
        time.sleep(5)  # the controllers' and scheduler's start-up lists
        res["idle0"] = benchlib.cpu_over(up.pid, args.idle)
        ctl = work / "sim.sock"
        sim = benchlib.start_sim(args.kite, data, work, "--nodes", str(n), "--ramp", str(args.ramp), "--control",
                                 str(ctl), "--progress-every", "5s", "--connections", str(args.connections))
        try:
            t0 = time.monotonic()
            st = benchlib.wait_sim_ready(sim, ctl, n, t0 + n / args.ramp + args.ready_timeout, work, "sim")
            res["ramp_s"] = time.monotonic() - t0
            res["ready"] = st.get("ready", 0)
            if res["ready"] != n:
                log(f"N={n}: only {res['ready']} of {n} nodes Ready after {res['ramp_s']:.0f}s")
                return res
            time.sleep(10)  # one renewal period: every node past its first renewals
            benchlib.sim_control(ctl, "reset")
            s0 = json.loads(benchlib.sim_control(ctl, "stats"))
            c0, w0 = benchlib.cpu_seconds(up.pid), time.monotonic()
            sc0 = benchlib.cpu_seconds(sim.pid)
            time.sleep(args.window)
            s1 = json.loads(benchlib.sim_control(ctl, "stats"))
            dt = time.monotonic() - w0
            res["cpu"] = (benchlib.cpu_seconds(up.pid) - c0) / dt
            res["sim_cpu"] = (benchlib.cpu_seconds(sim.pid) - sc0) / dt
            res["rss_mib"] = benchlib.rss_kib(up.pid) / 1024
            res["renewals_s"] = (s1["renewals"] - s0["renewals"]) / dt
            res["p50"], res["p99"], res["max"] = s1["renewalP50Ms"], s1["renewalP99Ms"], s1["renewalMaxMs"]
            res["failing"] = s1["failing"]
            res["sim_kib_node"] = (s1["rssKiB"] - s1["rssStartKiB"]) / n
            res["sim_rss_mib"] = s1["rssKiB"] / 1024
            res["not_ready"] = benchlib.not_ready(data, "sim")
        finally:
            benchlib.stop(sim)
        res["idle"] = benchlib.cpu_over(up.pid, args.idle)
    finally:
        benchlib.stop(up)
    return res


def print_row(r):
    """One table row and its summary line, printed as soon as the size is done."""
    n = r["nodes"]
    if "cpu" not in r:
        print(f"{n:>7} (only {r.get('ready', 0)} Ready after {r.get('ramp_s', 0):.0f} s)", flush=True)
        return
    print(f"{n:>7} {r['ramp_s']:>7.0f} {r['renewals_s']:>8.1f} {r['renewals_s'] / (n / 10):>8.2f} "
          f"{r['p50']:>7.1f} {r['p99']:>7.1f} {r['max']:>8.1f} {r['cpu'] * 100:>7.1f}% "
          f"{r['cpu'] * 100 / (n / 1000):>6.1f}% {r['rss_mib']:>11.0f} {r['sim_kib_node']:>12.1f} "
          f"{r['sim_cpu'] * 100:>7.1f}% {r['idle'] * 100:>8.2f}% {r['idle0'] * 100:>12.2f}% {r['not_ready']:>9}")
    print(f"summary: nodes={n} renewals_s={r['renewals_s']:.1f} p99_ms={r['p99']:.1f} max_ms={r['max']:.1f} "
          f"api_cpu={r['cpu']:.3f} api_rss_mib={r['rss_mib']:.0f} sim_kib_node={r['sim_kib_node']:.1f} "
          f"sim_cpu={r['sim_cpu']:.3f} idle_cpu={r['idle']:.4f} idle0_cpu={r['idle0']:.4f} failing={r['failing']} "
          f"not_ready={r['not_ready']}",
          flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kite", default=os.environ.get("KITE") or str(REPO / "build" / "kite"))
    ap.add_argument("--nodes", default="1000 10000")
    ap.add_argument("--window", type=float, default=60)
    ap.add_argument("--idle", type=float, default=30)
    ap.add_argument("--ramp", type=int, default=200)
    ap.add_argument("--ready-timeout", type=float, default=300, help="seconds past the ramp for every node to be Ready")
    ap.add_argument("--connections", type=int, default=0, help="shared connections (0: one per node)")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    bad = False
    print(f"heartbeat capacity, `kite sim` vs `kite up --no-agent` (default timings: renewals every 10 s), "
          f"{args.window:.0f}-s window, "
          f"{f'{args.connections} shared connections' if args.connections else 'one connection per node'}")
    print(f"{'nodes':>7} {'ramp s':>7} {'renew/s':>8} {'of N/10':>8} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>8} "
          f"{'api CPU':>8} {'CPU/1k':>7} {'api RSS MiB':>11} {'sim KiB/node':>12} {'sim CPU':>8} "
          f"{'idle CPU':>9} {'idle, 0 nodes':>13} {'not Ready':>9}", flush=True)
    with benchlib.workdir("kite-bench-sim-", args.keep, "sim") as tmp:
        for n in [int(x) for x in args.nodes.split()]:
            log(f"N={n}")
            r = run(args, n, tmp)
            if r.get("ready") != n:
                bad = True
            print_row(r)
    print("targets (issue #27): renewal p99 < 1 s; a simulated node < 20 KiB (kubemark's hollow node ~220 MB); "
          "idle apiserver < 2% of a core")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
