#!/usr/bin/python3
"""Pods under the runc runtime: how soon a watcher sees what happened on the node.

usage: pods.py [--kite PATH] [--pods 100] [--rate 2] [--exits 200] [--burst 30] [--keep]

Starts `kite apiserver` and a separate agent (its own process, so its memory is its own):
`kite-agent` (the agent linked alone) when it is beside the kite binary, else `kite agent`; on
a temp dir, with the busybox image imported. Then:
  1. pod start: creates --pods pods (spec.nodeName set: no scheduler in the path) at --rate pods/s;
     a watcher records when each is first seen Running. Baseline, same run: `runc run -d` of the
     same busybox image unpacked by umoci (a bare container: no sandbox, no API), 20 times.
     Kubernetes' SLO for the same measure is p99 <= 5 s.
  2. agent RSS with 0 pods (before 1), 10 and --pods pods running; with 0 pods also by mapping
     (/proc/PID/smaps: the largest shared libraries and anonymous memory).
  3. container exit -> status: every pod's container blocks reading a FIFO in a hostPath volume;
     the bench writes to one FIFO (the container exits at once, code 3) and the watcher records
     when the pod's status shows the container terminated. --exits exits in all (pods are
     replaced in rounds). Baseline, same run: a PATCH of a pod's status by this client until the
     same watcher sees it (the API's own write -> watch floor). The kubelet's relist alone is 1 s.
  4. a burst through the scheduler (Kubernetes' pod startup SLO case): `kite scheduler` is
     started, --burst pods without spec.nodeName are created at once (one POST after another, no
     pause); the watcher records when each is first seen Running, and each container's first
     command stamps a file in a hostPath dir (its mtime: when the process ran). Reported:
     create -> Running seen p50/p99/max (SLO p99 <= 5 s) and first command -> Running seen lag
     p50/p99/max (what the agent's status path adds to the start itself; negative when Running
     is seen before the process ran its first command, as `runc start` returns first).
Prints one line per measure and a final "summary:" line of key=value pairs for bench/run.
Exits 2 when kite could not be started, 1 when a pod did not reach the state in time.
"""
import argparse
import base64
import http.client
import json
import os
import shutil
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
NS = "default"
PODS = f"/api/v1/namespaces/{NS}/pods"
TIMEOUT = 60


def log(msg):
    print(f"pods: {msg}", file=sys.stderr, flush=True)


def free_port():
    return benchlib.free_port("pods")


def tls_context(kubeconfig, workdir):
    cfg = yaml.safe_load(Path(kubeconfig).read_text())
    cluster, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
    paths = []
    for obj, key, name in ((cluster, "certificate-authority", "ca.pem"), (user, "client-certificate", "c.pem"),
                           (user, "client-key", "k.pem")):
        p = Path(workdir) / name
        p.write_bytes(base64.b64decode(obj[key + "-data"]) if obj.get(key + "-data") else Path(obj[key]).read_bytes())
        paths.append(str(p))
    ctx = ssl.create_default_context(cafile=paths[0])
    ctx.check_hostname = False
    ctx.load_cert_chain(paths[1], paths[2])
    return ctx


class Api:
    def __init__(self, port, ctx):
        self.port, self.ctx = port, ctx
        self.conn = None

    def req(self, method, path, body=None, ctype="application/json"):
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=30)
            try:
                data = json.dumps(body).encode() if body is not None else None
                self.conn.request(method, path, body=data, headers={"Content-Type": ctype} if data else {})
                r = self.conn.getresponse()
                out = r.read()
                try:
                    return r.status, json.loads(out) if out else None
                except ValueError:
                    return r.status, out
            except (OSError, http.client.HTTPException):
                self.conn = None
                if attempt:
                    raise
        return None


class Watcher(threading.Thread):
    """Watches the namespace's pods; records the first time each condition is seen."""

    def __init__(self, port, ctx, rv):
        super().__init__(daemon=True)
        self.port, self.ctx, self.rv = port, ctx, rv
        self.running, self.exited, self.patched = {}, {}, {}
        self.cv = threading.Condition()
        self.stop = False

    def run(self):
        while not self.stop:
            conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=600)
            conn.request("GET", f"{PODS}?watch=true&allowWatchBookmarks=true&resourceVersion={self.rv}")
            r = conn.getresponse()
            buf = b""
            while not self.stop:
                chunk = r.read1(65536)
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    self.seen(json.loads(line), time.monotonic())
            conn.close()

    def seen(self, ev, now):
        o = ev["object"]
        md = o.get("metadata", {})
        if md.get("resourceVersion"):
            self.rv = md["resourceVersion"]
        if ev["type"] not in ("ADDED", "MODIFIED"):
            return
        name, st = md["name"], o.get("status", {})
        with self.cv:
            if st.get("phase") == "Running" and name not in self.running:
                self.running[name] = now
            for cs in st.get("containerStatuses", []):
                t = cs.get("state", {}).get("terminated")
                if t and t.get("exitCode") == 3 and name not in self.exited:
                    self.exited[name] = now
            mark = (md.get("annotations") or {}).get("bench/mark")
            if mark and mark not in self.patched:
                self.patched[mark] = now
            self.cv.notify_all()

    def wait_for(self, table, key, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        with self.cv:
            while key not in table:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cv.wait(left)
            return table[key]


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))] if v else float("nan")


def rss_kb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def rss_by_mapping(pid, top=10):
    """"NAME RSS_kB" of the agent's largest mappings in /proc/PID/smaps (a shared library by file
    name, anonymous memory as [anon]), largest first: where its idle RSS is (BENCHMARKS.md)."""
    rss, name = {}, None
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        f = line.split()
        if f and "-" in f[0] and len(f) >= 5 and ":" not in f[0]:
            name = os.path.basename(f[5]) if len(f) > 5 else "[anon]"
        elif f and f[0] == "Rss:":
            rss[name] = rss.get(name, 0) + int(f[1])
    return ", ".join(f"{n} {k}" for n, k in sorted(rss.items(), key=lambda kv: -kv[1])[:top] if k)


def settle_rss(pid, seconds=3):
    time.sleep(seconds)
    return rss_kb(pid)


def runc_baseline(work, tar, n=20):
    """Median and p99 ms of `runc run -d` of the busybox image: a bare container."""
    oci = work / "raw-oci"
    oci.mkdir()
    subprocess.run(["tar", "-xf", str(tar), "-C", str(oci)], check=True)
    bundle = work / "raw-bundle"
    subprocess.run(["umoci", "unpack", "--image", f"{oci}:latest", str(bundle)], check=True, capture_output=True)
    cfgp = bundle / "config.json"
    cfg = json.loads(cfgp.read_text())
    cfg["process"]["args"] = ["sleep", "3600"]
    cfg["process"]["terminal"] = False
    cfgp.write_text(json.dumps(cfg))
    root = work / "raw-runc"
    times = []
    for i in range(n):
        cid = f"kite-bench-raw-{os.getpid()}-{i}"
        t = time.monotonic()
        subprocess.run(["runc", "--root", str(root), "run", "-d", "-b", str(bundle), cid], check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append((time.monotonic() - t) * 1000)
        subprocess.run(["runc", "--root", str(root), "delete", "-f", cid], capture_output=True)
    return pct(times, 50), pct(times, 99)


def agent_command(kite):
    """kite-agent beside the kite binary (the agent linked alone, as nodes run it), else `kite agent`."""
    alone = Path(kite).parent / "kite-agent"
    return [str(alone)] if os.access(alone, os.X_OK) else [kite, "agent"]


def pod_body(name, node, fifo_dir):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": node, "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "busybox",
                                     "command": ["sh", "-c", f"read x < /f/{name}; exit 3"],
                                     "volumeMounts": [{"name": "f", "mountPath": "/f"}]}],
                     "volumes": [{"name": "f", "hostPath": {"path": str(fifo_dir)}}]}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kite", default=os.environ.get("KITE") or str(REPO / "build" / "kite"))
    ap.add_argument("--pods", type=int, default=100)
    ap.add_argument("--rate", type=float, default=2.0)
    ap.add_argument("--exits", type=int, default=200)
    ap.add_argument("--burst", type=int, default=30)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    for tool in ("runc", "conmon", "umoci"):
        if not shutil.which(tool):
            log(f"{tool} missing (scripts/install-deps)")
            sys.exit(2)
    work = Path(tempfile.mkdtemp(prefix="kite-bench-pods-"))
    procs = []
    node = f"bench-pods-{os.getpid()}"
    try:
        tar = Path(a.kite).parent / "busybox.tar"
        if not tar.exists():
            tar = work / "busybox.tar"
            subprocess.run([str(REPO / "scripts/make-busybox-image"), str(tar)], check=True, capture_output=True)
        raw50, raw99 = runc_baseline(work, tar)
        log(f"baseline: runc run -d p50 {raw50:.0f} ms, p99 {raw99:.0f} ms")

        port = free_port()
        api_dir, agent_dir = work / "api", work / "agent"
        apisrv = subprocess.Popen([a.kite, "apiserver", "--data-dir", str(api_dir), "--listen", f"127.0.0.1:{port}"],
                                  stdout=open(work / "apiserver.log", "w"), stderr=subprocess.STDOUT)
        procs.append(apisrv)
        kc = api_dir / "admin.kubeconfig"
        for _ in range(100):
            if kc.exists():
                break
            time.sleep(0.1)
        ctx = tls_context(kc, work)
        api = Api(port, ctx)
        for _ in range(100):
            try:
                if api.req("GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        subprocess.run([a.kite, "images", "import", str(tar), "--root-dir", str(agent_dir)], check=True,
                       capture_output=True)
        akc = work / "agent.kubeconfig"
        akc.write_text(subprocess.run([a.kite, "kubeconfig", "--data-dir", str(api_dir), "--node", node],
                                      check=True, capture_output=True, text=True).stdout)
        agent_cmd = agent_command(a.kite)
        log(f"agent: {' '.join(agent_cmd)}")
        agent = subprocess.Popen([*agent_cmd, "--kubeconfig", str(akc), "--node-name", node,
                                  "--root-dir", str(agent_dir),
                                  "--max-pods", str(max(110, a.pods + a.burst + 10))],
                                 stdout=open(work / "agent.log", "w"), stderr=subprocess.STDOUT)
        procs.append(agent)
        for _ in range(200):
            st, n = api.req("GET", f"/api/v1/nodes/{node}")
            if st == 200 and any(c["type"] == "Ready" and c["status"] == "True"
                                 for c in n.get("status", {}).get("conditions", [])):
                break
            time.sleep(0.1)
        else:
            log("the agent's node never became Ready")
            sys.exit(2)
        rss0 = settle_rss(agent.pid)
        idle_maps = rss_by_mapping(agent.pid)
        st, lst = api.req("GET", PODS)
        w = Watcher(port, ctx, lst["metadata"]["resourceVersion"])
        w.start()
        fifo_dir = work / "fifos"
        fifo_dir.mkdir()

        # 1 + 2: starts, and RSS at 10 and at --pods
        created, start_ms, rss10 = {}, [], None
        seq = 0

        def create(n_pods):
            nonlocal seq
            names = []
            for _ in range(n_pods):
                name = f"p{seq}"
                seq += 1
                os.mkfifo(fifo_dir / name)
                t = time.monotonic()
                st, body = api.req("POST", PODS, pod_body(name, node, fifo_dir))
                if st != 201:
                    log(f"create {name}: {st} {body}")
                    sys.exit(1)
                created[name] = t
                names.append(name)
                time.sleep(max(0.0, 1.0 / a.rate - (time.monotonic() - t)))
            return names

        def running(names, out):
            for name in names:
                seen = w.wait_for(w.running, name)
                if seen is None:
                    log(f"pod {name} not Running within {TIMEOUT} s")
                    sys.exit(1)
                if out is not None:
                    out.append((seen - created[name]) * 1000)

        first = create(min(10, a.pods))
        running(first, start_ms)
        rss10 = settle_rss(agent.pid)
        rest = create(a.pods - len(first))
        running(rest, start_ms)
        rssN = settle_rss(agent.pid)
        live = first + rest
        log(f"pod start over {len(start_ms)} pods: p50 {pct(start_ms, 50):.0f} ms, p99 {pct(start_ms, 99):.0f} ms")
        log(f"agent RSS: {rss0} kB idle, {rss10} kB with 10 pods, {rssN} kB with {a.pods}")

        # 3: exits, and the API's own write -> watch floor
        exit_ms, floor_ms = [], []
        done = 0
        while done < a.exits:
            if not live:
                live = create(min(a.pods, a.exits - done))
                running(live, None)
            name = live.pop(0)
            # floor: a status PATCH through the API seen by the same watcher
            mark = f"m{done}"
            t = time.monotonic()
            api.req("PATCH", f"{PODS}/{name}", {"metadata": {"annotations": {"bench/mark": mark}}},
                    "application/merge-patch+json")
            seen = w.wait_for(w.patched, mark)
            floor_ms.append((seen - t) * 1000)
            time.sleep(0.05)
            fd = os.open(fifo_dir / name, os.O_WRONLY)
            t = time.monotonic()
            os.write(fd, b"go\n")
            os.close(fd)
            seen = w.wait_for(w.exited, name)
            if seen is None:
                log(f"pod {name}: the exit was not seen within {TIMEOUT} s")
                sys.exit(1)
            exit_ms.append((seen - t) * 1000)
            api.req("DELETE", f"{PODS}/{name}")
            done += 1
        log(f"exit -> status over {len(exit_ms)} exits: p50 {pct(exit_ms, 50):.1f} ms, p99 {pct(exit_ms, 99):.1f} ms;"
            f" API write -> watch floor p50 {pct(floor_ms, 50):.1f} ms, p99 {pct(floor_ms, 99):.1f} ms")
        # 4: a burst through the scheduler
        burst_ms, lag_ms = [], []
        if a.burst > 0:
            sched = subprocess.Popen([a.kite, "scheduler", "--kubeconfig", str(kc), "--leader-elect=false"],
                                     stdout=open(work / "scheduler.log", "w"), stderr=subprocess.STDOUT)
            procs.append(sched)
            time.sleep(2)  # its informers synced
            stamps = work / "stamps"
            stamps.mkdir()
            names = [f"burst{i}" for i in range(a.burst)]
            bcreated = {}
            for name in names:
                body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                        "spec": {"terminationGracePeriodSeconds": 0,
                                 "containers": [{"name": "c", "image": "busybox",
                                                 "command": ["sh", "-c", f"echo > /s/{name}; exec sleep 3600"],
                                                 "volumeMounts": [{"name": "s", "mountPath": "/s"}]}],
                                 "volumes": [{"name": "s", "hostPath": {"path": str(stamps)}}]}}
                t = time.monotonic()
                st, out = api.req("POST", PODS, body)
                if st != 201:
                    log(f"create {name}: {st} {out}")
                    sys.exit(1)
                bcreated[name] = t
            mono_off = time.time() - time.monotonic()
            for name in names:
                seen = w.wait_for(w.running, name)
                if seen is None:
                    log(f"burst pod {name} not Running within {TIMEOUT} s")
                    sys.exit(1)
                burst_ms.append((seen - bcreated[name]) * 1000)
                for _ in range(100):  # Running may be seen before the process ran its first command
                    if (stamps / name).exists():
                        break
                    time.sleep(0.1)
                first_cmd = (stamps / name).stat().st_mtime_ns / 1e9 - mono_off
                lag_ms.append((seen - first_cmd) * 1000)
            log(f"burst of {a.burst}: create -> Running p50 {pct(burst_ms, 50):.0f} ms, p99 {pct(burst_ms, 99):.0f} ms; "
                f"first command -> Running lag p50 {pct(lag_ms, 50):.0f} ms, p99 {pct(lag_ms, 99):.0f} ms")
        per_pod = (rssN - rss0) / max(1, a.pods)
        print(f"pod start (created -> Running seen by a watcher, {len(start_ms)} pods at {a.rate}/s): "
              f"p50 {pct(start_ms, 50):.0f} ms, p99 {pct(start_ms, 99):.0f} ms; baseline runc run -d of the same image "
              f"p50 {raw50:.0f} ms (ratio p50 {pct(start_ms, 50) / raw50:.1f}x); Kubernetes SLO p99 <= 5000 ms")
        print(f"container exit -> pod status seen by a watcher ({len(exit_ms)} exits): p50 {pct(exit_ms, 50):.1f} ms, "
              f"p99 {pct(exit_ms, 99):.1f} ms; baseline API write -> watch p50 {pct(floor_ms, 50):.1f} ms "
              f"(ratio p50 {pct(exit_ms, 50) / max(0.001, pct(floor_ms, 50)):.1f}x); target p99 < 50 ms")
        print(f"agent RSS ({' '.join(agent_cmd)}): {rss0 / 1024:.1f} MB with 0 pods, {rss10 / 1024:.1f} MB with 10, "
              f"{rssN / 1024:.1f} MB with {a.pods} ({per_pod:.0f} kB per pod); target < 8 MB + 100 kB per pod")
        print(f"agent RSS with 0 pods by mapping, kB: {idle_maps}")
        if a.burst > 0:
            print(f"burst through the scheduler ({a.burst} pods created at once, created -> Running seen by a watcher): "
                  f"p50 {pct(burst_ms, 50):.0f} ms, p99 {pct(burst_ms, 99):.0f} ms, max {max(burst_ms):.0f} ms; "
                  f"Kubernetes SLO p99 <= 5000 ms. First command in the container -> Running seen: "
                  f"p50 {pct(lag_ms, 50):.0f} ms, p99 {pct(lag_ms, 99):.0f} ms, max {max(lag_ms):.0f} ms; target p99 < 100 ms")
        print(f"summary: start_p50_ms={pct(start_ms, 50):.0f} start_p99_ms={pct(start_ms, 99):.0f} "
              f"runc_p50_ms={raw50:.0f} exit_p50_ms={pct(exit_ms, 50):.1f} exit_p99_ms={pct(exit_ms, 99):.1f} "
              f"floor_p50_ms={pct(floor_ms, 50):.1f} rss0_kb={rss0} rss10_kb={rss10} rssN_kb={rssN} "
              f"per_pod_kb={per_pod:.0f} agent={Path(agent_cmd[0]).name} "
              f"burst_p99_ms={pct(burst_ms, 99):.0f} burst_lag_p99_ms={pct(lag_ms, 99):.0f}")
        w.stop = True
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        # containers outlive the agent by design: end this run's own ones
        root = work / "agent" / "runc"
        if root.exists():
            ids = subprocess.run(["runc", "--root", str(root), "list", "-q"], capture_output=True, text=True).stdout
            for cid in ids.split():
                subprocess.run(["runc", "--root", str(root), "delete", "-f", cid], capture_output=True)
        subprocess.run(["sh", "-c", f"grep ' {work}/' /proc/mounts | cut -d' ' -f2 | xargs -r umount -l"],
                       capture_output=True)
        if a.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
