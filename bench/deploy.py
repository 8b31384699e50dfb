#!/usr/bin/python3
"""A Deployment of --replicas busybox pods under the real runc runtime: how long it takes to
scale up, roll out a new image and scale down, as `kubectl rollout status` would see it.

usage: deploy.py [--kite PATH] [--replicas 100] [--keep]

Starts `kite up` (apiserver, controllers and an agent with runc) on a temp dir with the busybox
image imported twice (busybox:latest and busybox:v2), with a pod CIDR of its own. Then:
  1. scale up: a Deployment of 1 replica (RollingUpdate maxSurge 0, maxUnavailable 10%: the node
     takes 110 pods, as the kubelet's default maxPods, and a surge past it would be refused with
     OutOfpods), once it is available scaled to --replicas (PATCH of deployments/scale): until
     status.availableReplicas == --replicas with observedGeneration current.
  2. roll: the container's image set to busybox:v2 (strategic merge patch, as `kubectl set image`):
     until updatedReplicas == replicas == availableReplicas == --replicas (rollout complete).
  3. scale down to 1: until status.replicas == 1 and only one pod is left that has not ended
     (the others deleted, their containers stopped by the agent).
Each step's time is from the client's write to the condition, polled every 50 ms.
Prints one line per step and a final "summary:" line of key=value pairs for bench/run.
Exits 2 when kite could not be started, 1 when a step did not finish in time.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))

NS = "default"
APPS = f"/apis/apps/v1/namespaces/{NS}"


def log(msg):
    print(f"deploy: {msg}", file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kite", default=os.environ.get("KITE") or str(REPO / "build" / "kite"))
    ap.add_argument("--replicas", type=int, default=100)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    os.environ["KITE"] = a.kite
    import conftest  # the e2e fixtures' Cluster: kite up with its own pod network
    import test_deployments as td

    work = Path(tempfile.mkdtemp(prefix="kite-deploy-bench."))
    tar = str(work / "busybox.tar")
    subprocess.run([str(REPO / "scripts/make-busybox-image"), tar], check=True, capture_output=True)
    c = conftest.Cluster("up", work)
    for t in (tar, td.retagged(tar, work, "v2")):
        subprocess.run([a.kite, "images", "import", t, "--root-dir", str(c.data_dir / "agent")], check=True,
                       capture_output=True)
    try:
        c.start()
    except Exception as e:  # noqa: BLE001
        log(f"kite up did not start: {e}")
        sys.exit(2)
    api = c.api()
    results = {}

    def until(what, pred):
        t0 = time.monotonic()
        while time.monotonic() - t0 < a.timeout:
            if pred():
                return time.monotonic() - t0
            time.sleep(0.05)
        log(f"{what}: not done in {a.timeout:.0f} s")
        sys.exit(1)

    def status():
        d = api.get(f"{APPS}/deployments/bench").json()
        s = d.get("status", {})
        return d, s, s.get("observedGeneration", 0) >= d["metadata"].get("generation", 1)

    def pods():  # not yet ended: running, starting or terminating
        items = api.get(f"/api/v1/namespaces/{NS}/pods?labelSelector=app%3Dbench").json()["items"]
        return [p for p in items if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]

    try:
        tmpl = {"metadata": {"labels": {"app": "bench"}},
                "spec": {"terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "c", "image": "busybox", "imagePullPolicy": "Never",
                                         "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]}]}}
        api.ok("POST", f"{APPS}/deployments", {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bench"},
                                               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "bench"}},
                                                        "strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "10%"}},
                                                        "template": tmpl}})
        until("first pod", lambda: (s := status())[2] and s[1].get("availableReplicas") == 1)
        n = a.replicas

        t0 = time.monotonic()
        api.ok("PATCH", f"{APPS}/deployments/bench/scale", {"spec": {"replicas": n}}, ctype="application/merge-patch+json")
        results["scale_up_s"] = until("scale up", lambda: (s := status())[2] and s[1].get("availableReplicas") == n)
        log(f"scale 1 -> {n}: {results['scale_up_s']:.1f} s")

        api.ok("PATCH", f"{APPS}/deployments/bench",
               {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:v2"}]}}}},
               ctype="application/strategic-merge-patch+json")
        results["roll_s"] = until("rollout", lambda: (s := status())[2] and s[1].get("updatedReplicas") == n and
                                  s[1].get("replicas") == n and s[1].get("availableReplicas") == n)
        log(f"roll {n} pods to a new image: {results['roll_s']:.1f} s")

        api.ok("PATCH", f"{APPS}/deployments/bench/scale", {"spec": {"replicas": 1}}, ctype="application/merge-patch+json")
        results["scale_down_s"] = until("scale down", lambda: (s := status())[2] and s[1].get("replicas") == 1 and len(pods()) == 1)
        log(f"scale {n} -> 1 (pods gone): {results['scale_down_s']:.1f} s")
    finally:
        c.stop()
        root = str(c.data_dir / "agent" / "runc")
        ids = subprocess.run(["runc", "--root", root, "list", "-q"], capture_output=True, text=True).stdout.split()
        for cid in ids:
            subprocess.run(["runc", "--root", root, "kill", cid, "KILL"], capture_output=True)
        time.sleep(0.5)
        for cid in ids:
            subprocess.run(["runc", "--root", root, "delete", "--force", cid], capture_output=True)
        if not a.keep:
            mounts = [ln.split()[1] for ln in open("/proc/mounts") if ln.split()[1].startswith(str(work))]
            for m in sorted(mounts, key=len, reverse=True):
                subprocess.run(["umount", "-l", m], capture_output=True)
            subprocess.run(["rm", "-rf", str(work)], capture_output=True)
    print(f"scale up 1 -> {a.replicas}: {results['scale_up_s']:.1f} s; roll {a.replicas} to a new image: "
          f"{results['roll_s']:.1f} s; scale down {a.replicas} -> 1: {results['scale_down_s']:.1f} s (runc, busybox)")
    print("summary: " + " ".join(f"{k}={v:.1f}" for k, v in results.items()))


if __name__ == "__main__":
    main()
