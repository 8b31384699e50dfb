#!/usr/bin/python3
"""Exec round trips and port-forward throughput through the API server and the agent.

usage: exec.py [--kite PATH] [--kubectl-execs 30] [--ws-execs 200] [--mib 100] [--rounds 5] [--keep]

Starts `kite up` (apiserver, controllers and agent in one process; its own pod bridge and CIDR)
on a temp dir with the busybox image imported, and one busybox pod running `httpd` on port 8080
that serves a file of --mib MiB. Then:
  1. exec round trip: `kubectl exec web -- true` --kubectl-execs times (the whole command: kubectl's
     start, its GET of the pod, the WebSocket upgrade through the apiserver to the agent, `runc
     exec`, the exit status), and a raw WebSocket exec of `true` (v5.channel.k8s.io by hand over
     TLS: handshake -> 101 -> status on channel 3 -> close) --ws-execs times; p50/p99 of each.
  2. port-forward throughput: `kubectl port-forward pod/web LOCAL:8080` (kubectl 1.32: SPDY/3.1
     inside a WebSocket to the apiserver, relayed to the agent, which dials the pod's port in its
     network namespace); a GET of the --mib MiB file through it, timed from the request to its
     last byte, --rounds rounds. Baselines, same run and same client code: the same GET straight to
     the pod IP (the pod bridge), and the same bytes over plain loopback TCP (a local sender).
     Printed as MB/s (10^6 bytes) and the ratio port-forward / loopback.
Prints one line per measure and a final "summary:" line of key=value pairs for bench/run.
Exits 2 when kite could not be started, 1 when a measure failed.
"""
import argparse
import base64
import hashlib
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import cpu_seconds, free_port  # noqa: E402
from pods import Api, pct, tls_context  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
NS = "default"
PODS = f"/api/v1/namespaces/{NS}/pods"
CHUNK = 256 * 1024


def log(msg):
    print(f"exec: {msg}", file=sys.stderr, flush=True)


def ws_exec(port, ctx, command):
    """One exec over a WebSocket by hand (v5.channel.k8s.io): returns (stdout bytes, status JSON)."""
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=30))
    try:
        key = base64.b64encode(os.urandom(16)).decode()
        q = "&".join(f"command={c}" for c in command)
        s.sendall((f"GET {PODS}/web/exec?{q}&stdout=true HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\n"
                   f"Upgrade: websocket\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                   "Sec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n").encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(4096)
            if not chunk:
                raise OSError("connection closed before the 101")
            buf += chunk
        head, buf = buf.split(b"\r\n\r\n", 1)
        if not head.startswith(b"HTTP/1.1 101 "):
            raise OSError(f"no upgrade: {head[:200]!r}")
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        if accept not in head:
            raise OSError("bad Sec-WebSocket-Accept")
        out, status = b"", None
        while True:
            while len(buf) < 2 or len(buf) < 2 + _extra(buf) + _plen(buf):
                chunk = s.recv(65536)
                if not chunk:
                    return out, status
                buf += chunk
            op, n, hl = buf[0] & 0x0F, _plen(buf), 2 + _extra(buf)
            payload, buf = buf[hl:hl + n], buf[hl + n:]
            if op == 8:
                return out, status
            if op == 2 and payload[:1] == b"\x01":
                out += payload[1:]
            elif op == 2 and payload[:1] == b"\x03":
                status = payload[1:]
    finally:
        s.close()


def _extra(buf):
    n = buf[1] & 0x7F
    return 2 if n == 126 else 8 if n == 127 else 0


def _plen(buf):
    n = buf[1] & 0x7F
    if n == 126:
        return struct.unpack(">H", buf[2:4])[0] if len(buf) >= 4 else 0
    if n == 127:
        return struct.unpack(">Q", buf[2:10])[0] if len(buf) >= 10 else 0
    return n


def http_get_timed(host, port, path, want):
    """GET path over HTTP/1.0; the seconds from the request to the body's last byte, and its length."""
    s = socket.create_connection((host, port), timeout=60)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    t0 = time.monotonic()
    s.sendall(f"GET {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
    got, head, buf = 0, None, bytearray(CHUNK)
    view = memoryview(buf)
    pending = b""
    while True:
        n = s.recv_into(view)
        if not n:
            break
        if head is None:
            pending += bytes(view[:n])
            if b"\r\n\r\n" in pending:
                head, rest = pending.split(b"\r\n\r\n", 1)
                got = len(rest)
        else:
            got += n
        if head is not None and got >= want:
            break
    dt = time.monotonic() - t0
    s.close()
    return dt, got


def loopback_sender(total):
    """A local sender of total bytes per connection (the plain-TCP baseline), in an HTTP/1.0 frame so
    that the same client code reads it. Returns its port."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(4)
    block = b"\0" * CHUNK

    def serve():
        while True:
            c, _ = ls.accept()
            c.recv(4096)
            c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % total)
            left = total
            while left:
                n = c.send(block[:min(left, CHUNK)])
                left -= n
            c.close()

    threading.Thread(target=serve, daemon=True).start()
    return ls.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kite", default=os.environ.get("KITE") or str(REPO / "build" / "kite"))
    ap.add_argument("--kubectl-execs", type=int, default=30)
    ap.add_argument("--ws-execs", type=int, default=200)
    ap.add_argument("--mib", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    for tool in ("runc", "conmon", "umoci", "kubectl"):
        if not shutil.which(tool):
            log(f"{tool} missing (scripts/install-deps)")
            sys.exit(2)
    work = Path(tempfile.mkdtemp(prefix="kite-bench-exec-"))
    proc = pf = None
    bridge = f"kbx{os.getpid() % 100000}"
    total = a.mib << 20
    try:
        tar = Path(a.kite).parent / "busybox.tar"
        if not tar.exists():
            tar = work / "busybox.tar"
            subprocess.run([str(REPO / "scripts/make-busybox-image"), str(tar)], check=True, capture_output=True)
        data = work / "data"
        subprocess.run([a.kite, "images", "import", str(tar), "--root-dir", str(data / "agent")], check=True,
                       capture_output=True)
        port = free_port("exec")
        proc = subprocess.Popen([a.kite, "up", "--data-dir", str(data), "--listen", f"127.0.0.1:{port}",
                                 "--pod-bridge", bridge, "--pod-cidr", f"10.{150 + os.getpid() % 50}.0.0/24",
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
        script = (f"mkdir -p /www && head -c {total} /dev/zero > /www/big && touch /www/ready && "
                  "exec httpd -f -p 8080 -h /www")
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
               "spec": {"terminationGracePeriodSeconds": 0,
                        "containers": [{"name": "web", "image": "busybox", "command": ["sh", "-c", script]}]}}
        st, body = api.req("POST", PODS, pod)
        if st != 201:
            log(f"creating the pod: {st} {body}")
            sys.exit(2)
        ip = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not ip:
            st, p = api.req("GET", f"{PODS}/web")
            if st == 200 and p.get("status", {}).get("phase") == "Running" and p["status"].get("podIP"):
                ip = p["status"]["podIP"]
            else:
                time.sleep(0.2)
        if not ip:
            log("the pod did not run")
            sys.exit(2)
        env = {**os.environ, "KUBECONFIG": str(kc)}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            r = subprocess.run(["kubectl", "exec", "web", "--", "test", "-f", "/www/ready"], env=env,
                               capture_output=True)
            if r.returncode == 0:
                break
            time.sleep(0.5)

        # 1. exec round trips, interleaved with the baseline (`runc exec` of the same command in the
        # same container by hand: the agent's own step) so that all see the same machine load
        st, p = api.req("GET", f"{PODS}/web")
        cid = p["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
        kt, wt, rt = [], [], []
        for i in range(max(a.kubectl_execs, a.ws_execs)):
            if i < a.kubectl_execs:
                t0 = time.monotonic()
                r = subprocess.run(["kubectl", "exec", "web", "--", "true"], env=env, capture_output=True)
                kt.append((time.monotonic() - t0) * 1000)
                if r.returncode != 0:
                    log(f"kubectl exec failed: {r.stderr.decode()[-500:]}")
                    sys.exit(1)
                t0 = time.monotonic()
                r = subprocess.run(["runc", "--root", str(data / "agent" / "runc"), "exec", "--env",
                                    "PATH=/bin:/usr/bin", cid, "true"], capture_output=True)
                rt.append((time.monotonic() - t0) * 1000)
                if r.returncode != 0:
                    log(f"runc exec failed: {r.stderr.decode()[-500:]}")
                    sys.exit(1)
            if i < a.ws_execs:
                t0 = time.monotonic()
                out, status = ws_exec(port, ctx, ["true"])
                wt.append((time.monotonic() - t0) * 1000)
                if not status or b'"Success"' not in status:
                    log(f"raw exec: status {status!r}")
                    sys.exit(1)
        print(f"baseline, runc exec of true by hand: p50 {pct(rt, 50):.0f} ms, p99 {pct(rt, 99):.0f} ms ({len(rt)} runs)")
        print(f"kubectl exec -- true: p50 {pct(kt, 50):.0f} ms, p99 {pct(kt, 99):.0f} ms ({len(kt)} runs)")
        print(f"WebSocket exec of true (by hand): p50 {pct(wt, 50):.1f} ms, p99 {pct(wt, 99):.1f} ms ({len(wt)} runs)")

        # 2. port-forward throughput, next to the pod IP and plain loopback
        lport = free_port("exec")
        pf = subprocess.Popen(["kubectl", "port-forward", "pod/web", f"{lport}:8080"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = pf.stdout.readline()
        if "Forwarding from" not in line:
            log(f"kubectl port-forward: {line} {pf.stderr.read()[-500:] if pf.poll() is not None else ''}")
            sys.exit(1)
        lb = loopback_sender(total)
        rates = {"port-forward": [], "pod IP": [], "loopback": []}
        cpu = {"kite": 0.0, "kubectl": 0.0}
        for _ in range(a.rounds):
            for name, host, p, path in (("port-forward", "127.0.0.1", lport, "/big"), ("pod IP", ip, 8080, "/big"),
                                        ("loopback", "127.0.0.1", lb, "/")):
                c0 = (cpu_seconds(proc.pid), cpu_seconds(pf.pid))
                dt, got = http_get_timed(host, p, path, total)
                if name == "port-forward":
                    cpu["kite"] += cpu_seconds(proc.pid) - c0[0]
                    cpu["kubectl"] += cpu_seconds(pf.pid) - c0[1]
                if got < total:
                    log(f"{name}: {got} of {total} bytes")
                    sys.exit(1)
                rates[name].append(total / dt / 1e6)
        best = {k: max(v) for k, v in rates.items()}
        med = {k: sorted(v)[len(v) // 2] for k, v in rates.items()}
        for k in rates:
            print(f"{a.mib} MiB over {k}: median {med[k]:.0f} MB/s, best {best[k]:.0f} MB/s "
                  f"({', '.join(f'{x:.0f}' for x in rates[k])})")
        ratio = med["port-forward"] / med["loopback"]
        print(f"CPU per {a.mib} MiB through port-forward: kite (apiserver + agent) {cpu['kite'] / a.rounds:.2f} s, "
              f"kubectl {cpu['kubectl'] / a.rounds:.2f} s")
        print(f"port-forward / loopback (medians): {ratio:.3f}")
        print(f"load average at the end: {os.getloadavg()[0]:.1f} (this machine has {os.cpu_count()} CPUs)")
        print(f"summary: runc_p50_ms={pct(rt, 50):.0f} kexec_p50_ms={pct(kt, 50):.0f} kexec_p99_ms={pct(kt, 99):.0f} "
              f"wsexec_p50_ms={pct(wt, 50):.1f} wsexec_p99_ms={pct(wt, 99):.1f} "
              f"pf_mbs={med['port-forward']:.0f} podip_mbs={med['pod IP']:.0f} lo_mbs={med['loopback']:.0f} "
              f"pf_ratio={ratio:.3f} pf_kite_cpu_s={cpu['kite'] / a.rounds:.2f} pf_kubectl_cpu_s={cpu['kubectl'] / a.rounds:.2f}")
    finally:
        if pf and pf.poll() is None:
            pf.terminate()
            pf.wait()
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
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"kept {work}")


if __name__ == "__main__":
    main()
