#!/usr/bin/python3
"""The Service proxy at --services Services x --endpoints endpoints: how fast a change reaches the
kernel, and what the rules cost a request.

usage: proxy.py [--kite PATH] [--services 1000] [--endpoints 10] [--changes 40] [--rounds 3]
                [--seconds 5] [--keep]

1. The kernel write alone (build/proxy-sync, bench/proxy-sync.c): one changed Service written as
   the whole table (the baseline: what every sync wrote before partial syncs) vs as a partial
   sync, alternating in the same run.
2. End to end: `kite up` (the e2e fixtures' runc cluster: its own pod bridge, service range and
   proxy table, the busybox image) with --services selectorless Services, each with one
   EndpointSlice of --endpoints ready endpoints (the agent's proxy programs every one), then one
   slice at a time changed: all its endpoints not ready (the Service leaves the `cluster-ips`
   map for the `no-ep` set: rejected), then ready again, each timed from the PATCH's answer to
   the set seen changed in the kernel (`nft list set`, polled).
3. Request rate through a ClusterIP vs the pod's IP directly, same run, with the Services of 2
   programmed: one busybox httpd pod behind a Service; wrk from the host, --rounds alternating
   rounds of --seconds each (busybox httpd closes every connection, so each request is a new
   connection through the NAT rules). Target: ClusterIP/pod IP >= 0.9.
Prints a final "summary:" line. Needs root, nft, runc, conmon, umoci, wrk.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
NS = "default"
SERVE = "mkdir -p /www; echo ok > /www/index.html; trap 'kill $!; exit 0' TERM; httpd -f -p 8080 -h /www & wait"


def log(msg):
    print(f"proxy: {msg}", file=sys.stderr, flush=True)


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, max(0, (len(v) * p + 99) // 100 - 1))]


def kernel_write(a):
    """bench/proxy-sync.c, built against this tree's libraries when missing or older."""
    exe = REPO / "build" / "proxy-sync"
    libs = [REPO / "build" / "lib" / f"libkite_{m}.a" for m in ("agent", "client", "http", "pki", "api", "json", "base")]
    src = REPO / "bench" / "proxy-sync.c"
    if not exe.exists() or any(p.stat().st_mtime > exe.stat().st_mtime for p in [src, *libs] if p.exists()):
        pk = subprocess.run(["pkg-config", "--libs", "gnutls", "json-c", "sqlite3", "yaml-0.1", "libmnl", "libnghttp2",
                             "libnftables", "zlib", "ldns"], capture_output=True, text=True).stdout.split()
        subprocess.run(["cc", "-O2", "-g", "-std=gnu11", "-D_GNU_SOURCE", "-Isrc", "-I/usr/include/json-c", "-o",
                        str(exe), str(src), *map(str, libs), *pk, "-lhttp_parser", "-lwslay", "-lpthread", "-lm"],
                       cwd=REPO, check=True)
    out = subprocess.run([str(exe), str(a.services), str(a.endpoints), str(a.changes // 2)], capture_output=True,
                         text=True, check=True).stdout
    print(out.splitlines()[0])
    return dict(kv.split("=") for kv in out.splitlines()[-1].split()[1:])


class Factory:
    """tmp_path_factory's mktemp for the fixtures' cluster generator"""

    def __init__(self, root):
        self.root = root

    def mktemp(self, name):
        p = self.root / name
        p.mkdir(parents=True, exist_ok=True)
        return p


def wrk_rate(url, seconds):
    out = subprocess.run(["wrk", "-t1", "-c4", f"-d{seconds}s", url], capture_output=True, text=True).stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    errs = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", out)
    if errs:
        log(f"wrk {url}: {errs.group(0)}")
    return float(m.group(1)) if m else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kite", default=os.environ.get("KITE") or str(REPO / "build" / "kite"))
    ap.add_argument("--services", type=int, default=1000)
    ap.add_argument("--endpoints", type=int, default=10)
    ap.add_argument("--changes", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0 or not shutil.which("nft") or not shutil.which("wrk"):
        log("needs root, nft and wrk")
        sys.exit(2)
    os.environ["KITE"] = a.kite
    summary = kernel_write(a)

    import conftest  # the e2e fixtures: kite up with runc, its own pod network and proxy table
    import tempfile
    work = Path(tempfile.mkdtemp(prefix="kite-bench-proxy-"))
    gen = conftest.runc_up_cluster(Factory(work), "proxy", ["--service-cluster-ip-range", "172.28.0.0/16"])
    c = next(gen)
    try:
        api = c.api()
        table = c.proxy_table
        api.ok("POST", f"/api/v1/namespaces/{NS}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [
                {"name": "c", "image": "busybox", "imagePullPolicy": "Never", "command": ["sh", "-c", SERVE],
                 "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1}}]}})
        web = api.ok("POST", f"/api/v1/namespaces/{NS}/services", {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}})
        t0 = time.monotonic()
        ips = []
        for i in range(a.services):
            svc = api.ok("POST", f"/api/v1/namespaces/{NS}/services", {
                "apiVersion": "v1", "kind": "Service", "metadata": {"name": f"s{i}"},
                "spec": {"ports": [{"port": 80, "targetPort": 8080}]}})
            ips.append(svc["spec"]["clusterIP"])
            api.ok("POST", f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices", slice_body(i, a, True))
        log(f"{a.services} Services x {a.endpoints} endpoints created in {time.monotonic() - t0:.1f} s")

        def nft_list(kind, name):
            return subprocess.run(["nft", "list", kind, "ip", table, name], capture_output=True, text=True).stdout

        def in_noep(ip):
            return f"{ip} . tcp . 80" in nft_list("set", "no-ep")

        deadline = time.monotonic() + 300
        while f"{ips[-1]} . tcp . 80" not in nft_list("map", "cluster-ips"):
            if time.monotonic() > deadline:
                log("the rules never reached the kernel")
                sys.exit(1)
            time.sleep(0.5)
        t_poll = time.monotonic()
        in_noep(ips[0])
        t_poll = time.monotonic() - t_poll
        lat = []
        for n in range(a.changes):
            i = (n // 2 * 37) % a.services
            ready = n % 2 == 1
            api.ok("PATCH", f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices/s{i}",
                   {"endpoints": slice_body(i, a, ready)["endpoints"]}, ctype="application/merge-patch+json")
            t = time.monotonic()
            deadline = t + 60
            while in_noep(ips[i]) == ready:
                if time.monotonic() > deadline:
                    log(f"change {n} not seen in the kernel")
                    sys.exit(1)
            lat.append((time.monotonic() - t) * 1000)
        print(f"slice change -> kernel, end to end, {a.services} Services x {a.endpoints} endpoints, {a.changes} "
              f"changes: p50 {pct(lat, 50):.0f} ms, p99 {pct(lat, 99):.0f} ms, max {max(lat):.0f} ms "
              f"(one `nft list set` poll: {t_poll * 1000:.0f} ms)")
        summary.update(proxy_p50_ms=f"{pct(lat, 50):.0f}", proxy_p99_ms=f"{pct(lat, 99):.0f}",
                       poll_ms=f"{t_poll * 1000:.0f}")

        pod = conftest.wait_for(lambda: (p := api.get(f"/api/v1/namespaces/{NS}/pods/web").json())
                                .get("status", {}).get("podIP") and any(
                                    x["type"] == "Ready" and x["status"] == "True"
                                    for x in p["status"].get("conditions", [])) and p, 120, what="the web pod ready")
        pod_url, cip_url = f"http://{pod['status']['podIP']}:8080/", f"http://{web['spec']['clusterIP']}:80/"
        conftest.wait_for(lambda: subprocess.run(["wget", "-qO-", "-T", "2", cip_url], capture_output=True).returncode
                          == 0, 60, what="the ClusterIP answering")
        rates = {"cip": [], "pod": []}
        for _ in range(a.rounds):
            rates["pod"].append(wrk_rate(pod_url, a.seconds))
            rates["cip"].append(wrk_rate(cip_url, a.seconds))
        cip, direct = statistics.median(rates["cip"]), statistics.median(rates["pod"])
        ratio = cip / direct if direct else 0
        print(f"requests/s, new connection each (busybox httpd), with {a.services + 1} Services programmed, "
              f"median of {a.rounds} alternating {a.seconds} s rounds: through the ClusterIP {cip:.0f}, to the pod IP "
              f"{direct:.0f}: ratio {ratio:.3f} (target >= 0.9); rounds {rates}")
        summary.update(rate_cip=f"{cip:.0f}", rate_pod=f"{direct:.0f}", rate_ratio=f"{ratio:.3f}")
        print("summary: " + " ".join(f"{k}={v}" for k, v in summary.items()))
    finally:
        try:
            next(gen)
        except StopIteration:
            pass
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"kept {work}")


def slice_body(i, a, ready):
    base = 10 + i // 250
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": {"name": f"s{i}", "labels": {"kubernetes.io/service-name": f"s{i}"}},
            "ports": [{"name": "", "port": 8080, "protocol": "TCP"}],
            "endpoints": [{"addresses": [f"10.{base}.{i % 250}.{j + 1}"], "conditions": {"ready": ready}}
                          for j in range(a.endpoints)]}


if __name__ == "__main__":
    main()
