#!/usr/bin/python3
"""EndpointSlice change -> the rule in the kernel, at --services Services x --endpoints endpoints.

usage: proxy.py [--kite PATH] [--services 1000] [--endpoints 10] [--changes 40] [--keep]

Starts `kite up` (its own pod bridge, service range and proxy table) on a temp dir, creates
--services selectorless Services, each with one EndpointSlice of --endpoints ready endpoints
(the agent's proxy programs every one), then changes one slice at a time: all its endpoints
not ready (the Service leaves the `cluster-ips` map for the `no-ep` set: rejected), then ready
again. Each change is timed from the PATCH's answer to the set seen changed in the kernel
(`nft list set`, polled). Prints p50/p99/max and a final "summary:" line. Needs root and nft.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pods import Api, free_port, pct, tls_context  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
NS = "default"


def log(msg):
    print(f"proxy: {msg}", file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kite", default=os.environ.get("KITE") or str(REPO / "build" / "kite"))
    ap.add_argument("--services", type=int, default=1000)
    ap.add_argument("--endpoints", type=int, default=10)
    ap.add_argument("--changes", type=int, default=40)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0 or not shutil.which("nft"):
        log("needs root and nft")
        sys.exit(2)
    work = Path(tempfile.mkdtemp(prefix="kite-bench-proxy-"))
    table = f"kite-bench-proxy-{os.getpid()}"
    proc = None
    try:
        data = work / "data"
        port = free_port()
        proc = subprocess.Popen([a.kite, "up", "--data-dir", str(data), "--listen", f"127.0.0.1:{port}",
                                 "--pod-bridge", f"kbp{os.getpid() % 100000}", "--pod-cidr",
                                 f"10.{200 + os.getpid() % 50}.1.0/24", "--port", "0",
                                 "--service-cluster-ip-range", "172.28.0.0/16", "--proxy-table", table],
                                stdout=open(work / "up.log", "w"), stderr=subprocess.STDOUT)
        kc = data / "admin.kubeconfig"
        for _ in range(200):
            if kc.exists():
                break
            time.sleep(0.1)
        ctx = tls_context(kc, work)
        api = Api(port, ctx)
        for _ in range(300):
            try:
                if api.req("GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        t0 = time.monotonic()
        ips = []
        for i in range(a.services):
            st, svc = api.req("POST", f"/api/v1/namespaces/{NS}/services", {
                "apiVersion": "v1", "kind": "Service", "metadata": {"name": f"s{i}"},
                "spec": {"ports": [{"port": 80, "targetPort": 8080}]}})
            assert st == 201, (st, svc)
            ips.append(svc["spec"]["clusterIP"])
            st, sl = api.req("POST", f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices", slice_body(i, a, True))
            assert st == 201, (st, sl)
        log(f"{a.services} Services x {a.endpoints} endpoints created in {time.monotonic() - t0:.1f} s")

        def in_noep(ip):
            out = subprocess.run(["nft", "list", "set", "ip", table, "no-ep"], capture_output=True, text=True).stdout
            return f"{ip} . tcp . 80" in out

        # the whole set programmed: the last Service is in the map
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            out = subprocess.run(["nft", "list", "map", "ip", table, "cluster-ips"], capture_output=True, text=True).stdout
            if f"{ips[-1]} . tcp . 80" in out:
                break
            time.sleep(0.2)
        else:
            log("the rules never reached the kernel")
            sys.exit(1)
        t_poll = time.monotonic()
        in_noep(ips[0])
        t_poll = time.monotonic() - t_poll
        lat = []
        for n in range(a.changes):
            i = (n // 2 * 37) % a.services
            ready = n % 2 == 1
            st, out = api.req("PATCH", f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices/s{i}",
                              {"endpoints": slice_body(i, a, ready)["endpoints"]}, ctype="application/merge-patch+json")
            assert st == 200, (st, out)
            t = time.monotonic()
            deadline = t + 60
            while in_noep(ips[i]) == ready:
                if time.monotonic() > deadline:
                    log(f"change {n} not seen in the kernel")
                    sys.exit(1)
            lat.append((time.monotonic() - t) * 1000)
        lat.sort()
        print(f"slice change -> kernel, {a.services} Services x {a.endpoints} endpoints, {a.changes} changes: "
              f"p50 {pct(lat, 50):.0f} ms, p99 {pct(lat, 99):.0f} ms, max {lat[-1]:.0f} ms "
              f"(one `nft list set` poll: {t_poll * 1000:.0f} ms)")
        print(f"summary: proxy_p50_ms={pct(lat, 50):.0f} proxy_p99_ms={pct(lat, 99):.0f} poll_ms={t_poll * 1000:.0f}")
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=60)
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
