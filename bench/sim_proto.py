#!/usr/bin/python3
"""`kite sim`'s shared connections over HTTP/1.1 and over HTTP/2, back to back against fresh
`kite up --no-agent` clusters.

usage: sim_proto.py [--kite PATH] [--nodes 20000] [--lease 4] [--ramp 500] [--inflight 256]
                    [--h2-connections 8] [--settle 15] [--window 30] [--order "h1 h2"] [--keep]

Each run: N nodes (leases renewed every lease/4 s: N / (lease/4) renewals/s due) ramped in at
--ramp nodes/s (N / ramp s), --settle s more, then a --window s window: renewals/s achieved (the simulator's
stats, from a `reset` at the window's start), the renewal p99 over the window, and the CPU of
`kite up` and of the simulator over the window (utime + stime, /proc/PID/stat). HTTP/1.1:
--connections = --inflight (one lane per connection, --http2=false); HTTP/2: --h2-connections
connections carrying the --inflight lanes' requests as streams."""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def log(msg):
    print(f"sim_proto: {msg}", file=sys.stderr, flush=True)


def run(args, proto, tmp, i):
    work = tmp / f"{i}-{proto}"
    work.mkdir(parents=True)
    up, port, data = benchlib.start_up(args.kite, work, who="sim_proto")
    ctl = work / "sim.sock"
    conns = ["--connections", str(args.inflight), "--http2=false"] if proto == "h1" else \
        ["--connections", str(args.h2_connections)]
    sim = benchlib.start_sim(args.kite, data, work, "--nodes", str(args.nodes), "--lease-duration", str(args.lease),
                             "--ramp", str(args.ramp), "--inflight", str(args.inflight), "--control", str(ctl),
                             "--progress-every", "5s", *conns)
    try:
        # the ramp's time, then --settle s: a ramp that outruns the server stalls (nodes start in free
        # lanes only, after the started nodes' renewals), and the window shows how far it got
        benchlib.wait_sim_ready(sim, ctl, args.nodes, time.monotonic() + args.nodes / args.ramp, work, "sim_proto")
        time.sleep(args.settle)
        load = os.getloadavg()[0]
        benchlib.sim_control(ctl, "reset")
        s0 = json.loads(benchlib.sim_control(ctl, "stats"))
        cu0, cs0, t0 = benchlib.cpu_seconds(up.pid), benchlib.cpu_seconds(sim.pid), time.monotonic()
        time.sleep(args.window)
        cu1, cs1, t1 = benchlib.cpu_seconds(up.pid), benchlib.cpu_seconds(sim.pid), time.monotonic()
        s1 = json.loads(benchlib.sim_control(ctl, "stats"))
        dt = t1 - t0
        return {"proto": "HTTP/1.1" if proto == "h1" else "HTTP/2",
                "connections": args.inflight if proto == "h1" else args.h2_connections,
                "due": args.nodes / (args.lease / 4), "renewals": (s1["renewals"] - s0["renewals"]) / dt,
                "ready": s1["ready"], "p99": s1["renewalP99Ms"], "max": s1["renewalMaxMs"], "failing": s1["failing"],
                "up_cpu": 100 * (cu1 - cu0) / dt, "sim_cpu": 100 * (cs1 - cs0) / dt, "load": load,
                "streams": s1["http2"]["streams"], "records": s1["http2"]["records"]}
    finally:
        benchlib.stop(sim)
        benchlib.stop(up)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kite", default=os.environ.get("KITE", "build/kite"))
    ap.add_argument("--nodes", type=int, default=20000)
    ap.add_argument("--lease", type=int, default=4)
    ap.add_argument("--ramp", type=int, default=500)
    ap.add_argument("--inflight", type=int, default=256)
    ap.add_argument("--h2-connections", type=int, default=8)
    ap.add_argument("--settle", type=int, default=15)
    ap.add_argument("--window", type=int, default=30)
    ap.add_argument("--order", default="h1 h2")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    args.kite = os.path.abspath(args.kite)
    rows = []
    with benchlib.workdir("sim-proto-", args.keep, "sim_proto") as tmp:
        for i, proto in enumerate(args.order.split()):
            log(f"{proto}: {args.nodes} nodes")
            rows.append(run(args, proto, tmp, i))
            log(json.dumps(rows[-1]))
    print(f"| protocol | connections | nodes Ready | renewals/s due | renewals/s | renewal p99 (max) | failing | kite up CPU | "
          f"kite sim CPU | load avg |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['proto']} | {r['connections']} | {r['ready']:,} | {r['ready'] / (args.lease / 4):,.0f} | {r['renewals']:,.0f} | {r['p99']:.0f} ms "
              f"({r['max']:.0f} ms) | {r['failing']} | {r['up_cpu']:.0f}% | {r['sim_cpu']:.0f}% | {r['load']:.1f} |")


if __name__ == "__main__":
    main()
