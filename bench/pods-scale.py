#!/usr/bin/python3
"""Pods at scale: N x M pods bound, started and reported Running by simulated nodes.

usage: pods-scale.py [--kite PATH] [--sim-kite PATH] [--nodes 1000] [--pods-per-node 10] [--deployments 10] [--rate 0]
                     [--ramp 500]
                     [--connections 8] [--timeout 900] [--out DIR] [--keep]

A fresh `kite up --no-agent` (bench/benchlib.py) and `kite sim --nodes N --pods-per-node M` (each
node runs the agent's pod manager on a fake runtime and admits M pods; default timings: lease 40 s
renewed every 10 s). Once every node is Ready and one renewal period has passed, --deployments
Deployments of N x M / D replicas in all are created at once (with --rate R, created empty and
scaled up R pods a second in all, the creation rate Kubernetes' pod startup SLO is measured at);
kite up's controllers create the pods (each ReplicaSet at most 500 a pass, as Kubernetes'
burstReplicas), its scheduler binds them, the simulated nodes' pod managers start them and report
them Running. A watch of every pod, opened
before the Deployments, sees each pod's creation, its binding and its first Running status
(monotonic time of the bench's own reading, so no clock is compared across processes).

Reported: the time from the Deployments' creation until every pod exists, is bound, and is Running
(the ratio of the last to the first is what scheduling, starting and reporting add to the
controllers' creates, measured in the same run); the pod startup latency, created -> Running seen
(p50 / p99; Kubernetes' SLO: p99 <= 5 s for stateless pods, image pulls excluded); the pods' status
writes per second and per pod (PATCHes of pods/status, apiserver_request_total, over the burst); the
nodes' lease renewals during the burst (p99 from when each was due, and failing nodes: heartbeats
must stay on time while pods start), and the apiserver's own latency for lease writes over the
burst (the upper bound of the histogram bucket holding its p99: what the server took, beside what
the simulated nodes waited); `kite up`'s CPU and peak RSS, the simulator's CPU; at the
end, the nodes not Ready. Writes DIR/pods-scale-NxM[-rateR].dat (seconds since creation, pods created,
bound, Running) and its PNG plot (gnuplot, skipped without it). Exit 1 when not every pod ran
within --timeout.
"""
import argparse
import json
import os
import ssl
import sys
import threading
import time
import http.client
from pathlib import Path

import benchlib

REPO = Path(__file__).resolve().parents[1]
IMAGE = "registry.example/web:1.0"  # on every simulated machine (KITE_SIM_COMMON_IMAGE)


def log(msg):
    print(f"pods-scale: {msg}", file=sys.stderr, flush=True)


def request(port, ctx, method, path, body=None, timeout=120, content_type="application/json"):
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=timeout)
    try:
        hdrs = {"Content-Type": content_type} if body is not None else {}
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=hdrs)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def scrape(port, ctx):
    """(PATCHes of pods/status answered, {le: count} of the apiserver's own lease write latency
    histogram, PUT and PATCH together) from /metrics, or (None, None)."""
    st, body = request(port, ctx, "GET", "/metrics")
    if st != 200:
        return None, None
    n, hist = 0.0, {}
    for ln in body.decode(errors="replace").split("\n"):
        if ln.startswith("apiserver_request_total{") and 'verb="PATCH"' in ln and 'resource="pods/status"' in ln:
            n += float(ln.rsplit(" ", 1)[1])
        elif (ln.startswith("apiserver_request_duration_seconds_bucket{") and 'resource="leases"' in ln and
              ('verb="PUT"' in ln or 'verb="PATCH"' in ln)):
            le = ln.split('le="', 1)[1].split('"', 1)[0]
            hist[le] = hist.get(le, 0.0) + float(ln.rsplit(" ", 1)[1])
    return n, hist


def hist_p99(h0, h1):
    """The upper bound (s) of the bucket holding the 99th percentile of what h1 adds to h0."""
    if not h0 or not h1:
        return float("nan")
    d = sorted(((float("inf") if le == "+Inf" else float(le)), h1[le] - h0.get(le, 0.0)) for le in h1)
    total = d[-1][1]
    if total <= 0:
        return float("nan")
    for le, c in d:
        if c >= 0.99 * total:
            return le
    return float("inf")


class PodWatch(threading.Thread):
    """Every pod's first sighting, binding and first Running status, in the bench's monotonic time."""

    def __init__(self, port, ctx, rv):
        super().__init__(daemon=True)
        self.port, self.ctx, self.rv = port, ctx, rv
        self.created, self.bound, self.running = {}, {}, {}
        self.events = 0
        self.error = None
        self.stopping = False
        self.lock = threading.Lock()

    def run(self):
        while not self.stopping:
            try:
                self.watch_once()
            except (OSError, ssl.SSLError, http.client.HTTPException, ValueError) as e:
                if self.stopping:
                    return
                self.error = f"watch: {e}"
                time.sleep(0.5)

    def watch_once(self):
        c = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=600)
        c.request("GET", f"/api/v1/pods?watch=true&allowWatchBookmarks=true&resourceVersion={self.rv}")
        r = c.getresponse()
        if r.status != 200:
            raise ValueError(f"watch answered {r.status}: {r.read()[:200]!r}")
        while not self.stopping:
            line = r.readline()
            if not line:
                return
            ev = json.loads(line)
            obj = ev.get("object", {})
            md = obj.get("metadata", {})
            if ev.get("type") == "ERROR":
                raise ValueError(f"watch ERROR event: {obj.get('message')}")
            if md.get("resourceVersion"):
                self.rv = md["resourceVersion"]
            if ev.get("type") == "BOOKMARK":
                continue
            key = f"{md.get('namespace')}/{md.get('name')}"
            now = time.monotonic()
            with self.lock:
                self.events += 1
                self.created.setdefault(key, now)
                if obj.get("spec", {}).get("nodeName"):
                    self.bound.setdefault(key, now)
                if obj.get("status", {}).get("phase") == "Running":
                    self.running.setdefault(key, now)

    def counts(self):
        with self.lock:
            return len(self.created), len(self.bound), len(self.running)


def deployment(name, replicas):
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "web", "image": IMAGE,
                                                           "imagePullPolicy": "IfNotPresent"}]}}}}


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def run(args, tmp, out):
    n, m = args.nodes, args.pods_per_node
    total = n * m
    work = tmp / f"n{n}x{m}"
    work.mkdir(parents=True)
    up, port, data = benchlib.start_up(args.kite, work, who="pods-scale")
    ctx = benchlib.admin_context(data)
    res = {"nodes": n, "per_node": m, "pods": total}
    ctl = work / "sim.sock"
    sim = benchlib.start_sim(args.sim_kite or args.kite, data, work, "--nodes", str(n), "--pods-per-node", str(m), "--ramp",
                             str(args.ramp), "--control", str(ctl), "--progress-every", "10s", "--connections",
                             str(args.connections))
    try:
        st = benchlib.wait_sim_ready(sim, ctl, n, time.monotonic() + n / args.ramp + 600, work, "pods-scale")
        if st.get("ready") != n:
            log(f"only {st.get('ready', 0)} of {n} nodes Ready")
            return res
        time.sleep(10)  # one renewal period
        s, body = request(port, ctx, "GET", "/api/v1/pods?limit=1")
        rv = json.loads(body)["metadata"]["resourceVersion"]
        w = PodWatch(port, ctx, rv)
        w.start()
        benchlib.sim_control(ctl, "reset")
        p0, h0 = scrape(port, ctx)
        c0, sc0 = benchlib.cpu_seconds(up.pid), benchlib.cpu_seconds(sim.pid)
        rss_max = benchlib.rss_kib(up.pid)
        d = args.deployments
        t0 = time.monotonic()
        want = [total // d + (1 if i < total % d else 0) for i in range(d)]
        for i in range(d):
            s, body = request(port, ctx, "POST", "/apis/apps/v1/namespaces/default/deployments",
                              deployment(f"web-{i}", 0 if args.rate else want[i]))
            if s != 201:
                sys.exit(f"pods-scale: creating deployment web-{i}: {s} {body[:300]!r}")
        log(f"{d} Deployments of {total} pods in all created" + (f", scaled up at {args.rate:g} pods/s" if args.rate else ""))
        scaler = None
        if args.rate:  # the replicas raised a second at a time, rate pods a second in all
            def scale_up():
                have, k, t = [0] * d, 0, time.monotonic()
                while sum(have) < total:
                    k += 1
                    target = min(total, round(args.rate * k))  # pods in all after k seconds
                    for i in range(d):
                        n_i = min(want[i], target // d + (1 if i < target % d else 0))
                        if n_i != have[i]:
                            have[i] = n_i
                            request(port, ctx, "PATCH", f"/apis/apps/v1/namespaces/default/deployments/web-{i}",
                                    {"spec": {"replicas": n_i}}, content_type="application/merge-patch+json")
                    t += 1.0
                    time.sleep(max(0.0, t - time.monotonic()))
            scaler = threading.Thread(target=scale_up, daemon=True)
            scaler.start()
        timeline = []  # (seconds since t0, created, bound, running)
        done = {}
        last_log = 0.0
        while time.monotonic() - t0 < args.timeout:
            time.sleep(1)
            benchlib.check_sim(sim, work, "pods-scale")
            el = time.monotonic() - t0
            cr, bo, ru = w.counts()
            timeline.append((el, cr, bo, ru))
            rss_max = max(rss_max, benchlib.rss_kib(up.pid))
            for k, v in (("created", cr), ("bound", bo), ("running", ru)):
                if v >= total and k not in done:
                    done[k] = el
            if el - last_log >= 10:
                log(f"{el:.0f} s: {cr} created, {bo} bound, {ru} Running of {total}"
                    f"{' (' + w.error + ')' if w.error else ''}")
                last_log = el
            if "running" in done:
                break
        dt = time.monotonic() - t0  # the burst: CPU and status writes over it
        res["cpu"] = (benchlib.cpu_seconds(up.pid) - c0) / dt
        res["sim_cpu"] = (benchlib.cpu_seconds(sim.pid) - sc0) / dt
        res["rss_mib"] = rss_max / 1024
        p1, _ = scrape(port, ctx)
        res["patches"] = (p1 - p0) if p0 is not None and p1 is not None else float("nan")
        res["patches_s"] = res["patches"] / dt
        # the renewals over one renewal period at least (the nodes' renewals may bunch)
        time.sleep(max(0.0, 12 - (time.monotonic() - t0)))
        _, h1 = scrape(port, ctx)
        res["server_lease_p99"] = hist_p99(h0, h1)
        sst = json.loads(benchlib.sim_control(ctl, "stats"))
        res["renew_p99"], res["renew_max"], res["failing"] = sst["renewalP99Ms"], sst["renewalMaxMs"], sst["failing"]
        res.update({f"t_{k}": done.get(k) for k in ("created", "bound", "running")})
        with w.lock:
            lat = [w.running[k] - w.created[k] for k in w.running if k in w.created]
            slowest = sorted(((w.running[k] - w.created[k], k, w.bound.get(k, w.running[k]) - w.created[k])
                              for k in w.running if k in w.created), reverse=True)[:5]
            res["events"] = w.events
        log("slowest pods (created -> Running, of it -> bound): " +
            ", ".join(f"{k} {t:.2f} s ({b:.2f})" for t, k, b in slowest))
        res["lat_p50"], res["lat_p99"], res["lat_max"] = pct(lat, 50), pct(lat, 99), max(lat or [float("nan")])
        res["running"] = timeline[-1][3] if timeline else 0
        w.stopping = True
        res["not_ready"] = benchlib.not_ready(data, "pods-scale")
        tag = f"{n}x{m}" + (f"-rate{args.rate:g}" if args.rate else "")
        dat = out / f"pods-scale-{tag}.dat"
        with open(dat, "w") as f:
            f.write("# seconds_since_created pods_created pods_bound pods_running\n")
            for r in timeline:
                f.write(f"{r[0]:.1f} {r[1]} {r[2]} {r[3]}\n")
        res["png"] = out / f"pods-scale-{tag}.png"
        benchlib.plot(res["png"], f"{total} pods on {n} simulated nodes ({d} Deployments"
                      + (f", scaled up at {args.rate:g} pods/s)" if args.rate else ", created at once)"),
                      "seconds since the Deployments were created", "pods", dat,
                      [(2, "created"), (3, "bound"), (4, "Running (reported by the simulated nodes)")])
    finally:
        benchlib.stop(sim)
        benchlib.stop(up)
    return res


def fmt(x, spec=".1f"):
    return "-" if x is None else format(x, spec)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kite", default=os.environ.get("KITE") or str(REPO / "build" / "kite"))
    ap.add_argument("--sim-kite", help="the simulator's binary (default --kite): one simulator for two servers")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods-per-node", type=int, default=10)
    ap.add_argument("--deployments", type=int, default=10)
    ap.add_argument("--rate", type=float, default=0,
                    help="pods/s: the Deployments scaled up to their size at this rate (0: created at their size at once)")
    ap.add_argument("--ramp", type=int, default=500)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=900, help="seconds after the Deployments for every pod to run")
    ap.add_argument("--out", default=str(REPO / "build" / "bench"), help="where the .dat and .png go")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"pods at scale: {args.nodes} simulated nodes x {args.pods_per_node} pods, {args.deployments} Deployments "
          f"{f'scaled up at {args.rate:g} pods/s' if args.rate else 'created at once'}, kite up --no-agent ({args.connections} shared connections, default timings)")
    with benchlib.workdir("kite-bench-pods-scale-", args.keep, "pods-scale") as tmp:
        r = run(args, tmp, out)
    if "t_running" not in r:
        print(f"{r['pods']} pods: the nodes never all Ready")
        sys.exit(1)
    tc, tr = r["t_created"], r["t_running"]
    ratio = f"{tr / tc:.2f}" if tc and tr else "-"
    print(f"{'pods':>7} {'created s':>10} {'bound s':>8} {'Running s':>10} {'Running/created':>16} "
          f"{'startup p50/p99/max s':>22} {'status PATCH/s':>15} {'per pod':>8} {'renewal p99/max ms':>19} "
          f"{'failing':>8} {'server lease p99 <=':>20} {'api CPU':>8} {'api RSS MiB':>12} {'sim CPU':>8} {'not Ready':>10}")
    print(f"{r['pods']:>7} {fmt(tc):>10} {fmt(r['t_bound']):>8} {fmt(tr):>10} {ratio:>16} "
          f"{r['lat_p50']:>7.2f}/{r['lat_p99']:.2f}/{r['lat_max']:.2f}".ljust(82) +
          f" {r['patches_s']:>15.0f} {r['patches'] / r['pods']:>8.2f} {r['renew_p99']:>9.0f}/{r['renew_max']:.0f}"
          f"{'':>4} {r['failing']:>8} {r['server_lease_p99'] * 1000:>17.0f} ms {r['cpu'] * 100:>7.0f}% {r['rss_mib']:>12.0f} {r['sim_cpu'] * 100:>7.0f}% "
          f"{r['not_ready']:>10}")
    print(f"summary: nodes={r['nodes']} pods={r['pods']} created_s={fmt(tc)} bound_s={fmt(r['t_bound'])} "
          f"running_s={fmt(tr)} running_over_created={ratio} startup_p50_s={r['lat_p50']:.2f} "
          f"startup_p99_s={r['lat_p99']:.2f} status_patches_s={r['patches_s']:.0f} "
          f"patches_per_pod={r['patches'] / r['pods']:.2f} renewal_p99_ms={r['renew_p99']:.0f} "
          f"failing={r['failing']} server_lease_p99_le_ms={r['server_lease_p99'] * 1000:.0f} api_cpu={r['cpu']:.3f} api_rss_mib={r['rss_mib']:.0f} sim_cpu={r['sim_cpu']:.3f} "
          f"not_ready={r['not_ready']} running={r['running']} plot={r['png']}", flush=True)
    print("targets: every pod Running; startup p99 <= 5 s (Kubernetes' pod startup SLO, at its 100-pods/s "
          "creation rate); renewal p99 < 1 s and no node failing while the pods start")
    sys.exit(0 if tr is not None else 1)


if __name__ == "__main__":
    main()
