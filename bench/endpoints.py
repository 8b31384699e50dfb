#!/usr/bin/python3
"""Readiness change -> EndpointSlice updated, as a watcher sees it.

usage: endpoints.py [--kite PATH] [--pods 4] [--flips 200] [--keep]

Starts `kite up` (apiserver, controllers and agent in one process; its own pod bridge and CIDR)
on a temp dir with the busybox image imported, a Service and --pods pods it selects. Each pod's
container has an exec readiness probe (`test -f /flag/ready`, every second, failureThreshold 1,
timeoutSeconds 10)
on a file of its own in a hostPath volume. The bench removes or creates one pod's file at a time
(every pod in turn, --flips flips in all) and two watchers (pods, endpointslices) record when
the pod's Ready condition changed and when its endpoint's conditions.ready did:
  readiness -> slice: Ready seen on the pod -> the slice's endpoint seen changed (the controller's
                      share: watch delivery, reconcile, the slice's write and its watch event)
  file -> slice:      the file changed -> the slice seen changed (end to end, including the
                      probe's period, up to 1 s, and the agent's status write)
Baseline, same run: a PATCH of a pod's annotation seen by the pod watcher (write -> watch floor).
Prints one line per measure and a final "summary:" line of key=value pairs for bench/run.
Exits 2 when kite could not be started, 1 when a change was not seen in time.
"""
import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pods import Api, free_port, pct, tls_context  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
NS = "default"
PODS = f"/api/v1/namespaces/{NS}/pods"
SLICES = f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices"
TIMEOUT = 60


def log(msg):
    print(f"endpoints: {msg}", file=sys.stderr, flush=True)


class Watch(threading.Thread):
    """Follows a collection; on every event calls seen(obj, monotonic time) under cv."""

    def __init__(self, port, ctx, path, rv, seen, cv):
        super().__init__(daemon=True)
        self.port, self.ctx, self.path, self.rv, self.seen, self.cv = port, ctx, path, rv, seen, cv
        self.stop = False

    def run(self):
        while not self.stop:
            conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=600)
            sep = "&" if "?" in self.path else "?"
            conn.request("GET", f"{self.path}{sep}watch=true&allowWatchBookmarks=true&resourceVersion={self.rv}")
            r = conn.getresponse()
            buf = b""
            while not self.stop:
                chunk = r.read1(65536)
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    now = time.monotonic()
                    ev = json.loads(line)
                    o = ev["object"]
                    if o.get("metadata", {}).get("resourceVersion"):
                        self.rv = o["metadata"]["resourceVersion"]
                    if ev["type"] in ("ADDED", "MODIFIED"):
                        with self.cv:
                            self.seen(o, now)
                            self.cv.notify_all()
            conn.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kite", default=os.environ.get("KITE") or str(REPO / "build" / "kite"))
    ap.add_argument("--pods", type=int, default=4)
    ap.add_argument("--flips", type=int, default=200)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    for tool in ("runc", "conmon", "umoci"):
        if not shutil.which(tool):
            log(f"{tool} missing (scripts/install-deps)")
            sys.exit(2)
    work = Path(tempfile.mkdtemp(prefix="kite-bench-eps-"))
    proc = None
    bridge = f"kbe{os.getpid() % 100000}"
    try:
        tar = Path(a.kite).parent / "busybox.tar"
        if not tar.exists():
            tar = work / "busybox.tar"
            subprocess.run([str(REPO / "scripts/make-busybox-image"), str(tar)], check=True, capture_output=True)
        data = work / "data"
        subprocess.run([a.kite, "images", "import", str(tar), "--root-dir", str(data / "agent")], check=True,
                       capture_output=True)
        port = free_port()
        proc = subprocess.Popen([a.kite, "up", "--data-dir", str(data), "--listen", f"127.0.0.1:{port}",
                                 "--pod-bridge", bridge, "--pod-cidr", f"10.{200 + os.getpid() % 50}.0.0/24",
                                 "--port", "0"],
                                stdout=open(work / "up.log", "w"), stderr=subprocess.STDOUT)
        kc = data / "admin.kubeconfig"
        for _ in range(200):
            if kc.exists():
                break
            time.sleep(0.1)
        ctx = tls_context(kc, work)
        api = Api(port, ctx)
        node = None
        for _ in range(300):
            try:
                st, nodes = api.req("GET", "/api/v1/nodes")
                if st == 200 and nodes["items"]:
                    node = nodes["items"][0]["metadata"]["name"]
                    break
            except OSError:
                pass
            time.sleep(0.1)
        if not node:
            log("kite up did not register its node")
            sys.exit(2)
        # the pods mount hostPath volumes: their namespace allows it (kite up enforces baseline)
        st, _ = api.req("PATCH", f"/api/v1/namespaces/{NS}",
                        {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}},
                        ctype="application/merge-patch+json")
        if st != 200:
            log(f"labelling namespace {NS} privileged: {st}")
            sys.exit(2)

        cv = threading.Condition()
        pod_ready, pod_changed, ep_ready, ep_changed, marks = {}, {}, {}, {}, {}

        def pod_seen(o, now):
            name = o["metadata"]["name"]
            mark = (o["metadata"].get("annotations") or {}).get("bench/mark")
            if mark and mark not in marks:
                marks[mark] = now
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in o.get("status", {}).get("conditions", []))
            if pod_ready.get(name) != ready:
                pod_ready[name], pod_changed[name] = ready, now

        def slice_seen(o, now):
            for e in o.get("endpoints") or []:
                name = (e.get("targetRef") or {}).get("name")
                ready = bool((e.get("conditions") or {}).get("ready"))
                if name and ep_ready.get(name) != ready:
                    ep_ready[name], ep_changed[name] = ready, now

        st, svc = api.req("POST", f"/api/v1/namespaces/{NS}/services",
                          {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "bench"},
                           "spec": {"selector": {"app": "bench"}, "ports": [{"port": 80, "targetPort": "web"}]}})
        if st != 201:
            log(f"service: {st} {svc}")
            sys.exit(2)
        rv_p = api.req("GET", PODS)[1]["metadata"]["resourceVersion"]
        rv_s = api.req("GET", SLICES)[1]["metadata"]["resourceVersion"]
        watchers = [Watch(port, ctx, PODS, rv_p, pod_seen, cv), Watch(port, ctx, SLICES, rv_s, slice_seen, cv)]
        for w in watchers:
            w.start()
        flags = work / "flags"
        names = [f"b{i}" for i in range(a.pods)]
        # a generous timeout: on a loaded machine a `runc exec` can take over the default 1 s, and a
        # probe that times out would flip readiness on its own
        probe = {"exec": {"command": ["test", "-f", "/flag/ready"]}, "periodSeconds": 1, "failureThreshold": 1,
                 "timeoutSeconds": 10}
        for name in names:
            (flags / name).mkdir(parents=True)
            (flags / name / "ready").touch()
            st, body = api.req("POST", PODS, {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "bench"}},
                "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"],
                                         "readinessProbe": probe, "ports": [{"name": "web", "containerPort": 8080}],
                                         "volumeMounts": [{"name": "f", "mountPath": "/flag"}]}],
                         "volumes": [{"name": "f", "hostPath": {"path": str(flags / name)}}]}})
            if st != 201:
                log(f"create {name}: {st} {body}")
                sys.exit(2)

        def wait(pred, what):
            deadline = time.monotonic() + TIMEOUT
            with cv:
                while not pred():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        log(f"not seen within {TIMEOUT} s: {what() if callable(what) else what}")
                        sys.exit(1)
                    cv.wait(left)

        wait(lambda: all(ep_ready.get(n) for n in names), "every pod ready in the slice")
        log(f"{a.pods} pods ready in the slice; {a.flips} flips")
        ctl_ms, e2e_ms, floor_ms = [], [], []
        for i in range(a.flips):
            name = names[i % a.pods]
            f = flags / name / "ready"
            want = not f.exists()
            t0 = time.monotonic()
            if want:
                f.touch()
            else:
                f.unlink()
            wait(lambda: pod_ready.get(name) == want and ep_ready.get(name) == want,
                 lambda: f"{name} ready={want} (pod Ready seen: {pod_ready.get(name)}, "
                         f"endpoint ready seen: {ep_ready.get(name)})")
            with cv:
                ctl_ms.append((ep_changed[name] - pod_changed[name]) * 1000)
                e2e_ms.append((ep_changed[name] - t0) * 1000)
            if i % 4 == 0:  # the floor, interleaved: a pod write seen by the same watcher
                mark = f"m{i}"
                t = time.monotonic()
                api.req("PATCH", f"{PODS}/{name}", {"metadata": {"annotations": {"bench/mark": mark}}},
                        "application/merge-patch+json")
                wait(lambda: mark in marks, f"mark {mark}")
                floor_ms.append((marks[mark] - t) * 1000)
        for w in watchers:
            w.stop = True
        log(f"readiness -> slice over {len(ctl_ms)} flips: p50 {pct(ctl_ms, 50):.1f} ms, p99 {pct(ctl_ms, 99):.1f} ms, "
            f"max {max(ctl_ms):.1f} ms")
        log(f"file -> slice (probe period 1 s included): p50 {pct(e2e_ms, 50):.0f} ms, p99 {pct(e2e_ms, 99):.0f} ms")
        log(f"API write -> watch floor: p50 {pct(floor_ms, 50):.1f} ms, p99 {pct(floor_ms, 99):.1f} ms")
        print(f"readiness -> EndpointSlice seen, {len(ctl_ms)} flips of {a.pods} pods: p50 {pct(ctl_ms, 50):.1f} ms, "
              f"p99 {pct(ctl_ms, 99):.1f} ms, max {max(ctl_ms):.1f} ms")
        print(f"probe file -> EndpointSlice seen (1 s probe period included): p50 {pct(e2e_ms, 50):.0f} ms, "
              f"p99 {pct(e2e_ms, 99):.0f} ms")
        print(f"API write -> watch floor: p50 {pct(floor_ms, 50):.1f} ms, p99 {pct(floor_ms, 99):.1f} ms")
        print(f"summary: eps_p50_ms={pct(ctl_ms, 50):.1f} eps_p99_ms={pct(ctl_ms, 99):.1f} "
              f"e2e_p50_ms={pct(e2e_ms, 50):.0f} e2e_p99_ms={pct(e2e_ms, 99):.0f} floor_p50_ms={pct(floor_ms, 50):.1f} "
              f"flips={len(ctl_ms)}")
    finally:
        if proc:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        root = work / "data" / "agent" / "runc"
        if root.exists():
            ids = subprocess.run(["runc", "--root", str(root), "list", "-q"], capture_output=True, text=True).stdout
            for cid in ids.split():
                subprocess.run(["runc", "--root", str(root), "delete", "-f", cid], capture_output=True)
        subprocess.run(["sh", "-c", f"grep ' {work}/' /proc/mounts | cut -d' ' -f2 | xargs -r umount -l"],
                       capture_output=True)
        if os.path.exists(f"/sys/class/net/{bridge}"):
            subprocess.run(["ip", "link", "del", bridge], capture_output=True)
        if a.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
