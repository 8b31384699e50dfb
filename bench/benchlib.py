"""What the Python benches share (they run as `python3 bench/NAME.py`, so this directory is on
their import path)."""
import random
import socket
import sys


def free_port(who):
    """A free port below 32768 (the ephemeral range collides with TIME_WAIT client sockets)."""
    for _ in range(1000):
        port = random.randint(20000, 32000)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    sys.exit(f"{who}: no free port")


def start_up(kite, workdir, extra=(), who="bench", timeout=120, port=None):
    """Starts `kite up --no-agent` on a fresh data dir under workdir (its log in workdir/up.log)
    and waits for /readyz. Returns (process, port, data_dir); stop it with stop(). With port, on
    that port (a restart: the data dir under workdir is reused)."""
    import os
    import ssl
    import subprocess
    import time
    import http.client
    from pathlib import Path
    workdir = Path(workdir)
    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    port = port or free_port(who)
    log = open(workdir / "up.log", "ab")
    p = subprocess.Popen([kite, "up", "--no-agent", "--data-dir", str(data), "--listen", f"127.0.0.1:{port}", *extra],
                         stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    crt, key = data / "pki" / "admin.crt", data / "pki" / "admin.key"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if p.poll() is not None:
            sys.exit(f"{who}: kite up exited with {p.returncode} (log {workdir / 'up.log'})")
        if (data / "admin.kubeconfig").exists() and crt.exists():
            try:
                ctx.load_cert_chain(str(crt), str(key))
                c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
                c.request("GET", "/readyz")
                r = c.getresponse()
                ok = r.status == 200 and r.read().strip() == b"ok"
                c.close()
                if ok:
                    return p, port, data
            except (OSError, ssl.SSLError, http.client.HTTPException):
                pass
        time.sleep(0.2)
    stop(p)
    sys.exit(f"{who}: kite up not ready after {timeout}s (log {workdir / 'up.log'})")


def stop(p, timeout=20):
    """SIGTERM, then SIGKILL after timeout."""
    import subprocess
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def cpu_seconds(pid):
    """utime + stime of a process, seconds."""
    import os
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def plot(png, title, xlabel, ylabel, data, columns, y2=None, y2label=None, logx=False):
    """Writes a PNG line plot of the whitespace-separated table `data` (its first column x) with
    gnuplot: columns is [(column number, title)], y2 the same for the right axis. Without
    gnuplot (Debian gnuplot-nox) the plot is skipped with a message; returns whether it was made."""
    import shutil
    import subprocess
    import sys
    if not shutil.which("gnuplot"):
        print(f"(no gnuplot: {png} not drawn; apt-get install gnuplot-nox)", file=sys.stderr, flush=True)
        return False
    def q(x):  # a gnuplot single-quoted string
        return "'" + str(x).replace("'", "''") + "'"
    lines = [f"set terminal pngcairo size 900,500" if _has_cairo() else "set terminal png size 900,500",
             f"set output {q(png)}", f"set title {q(title)}", f"set xlabel {q(xlabel)}", f"set ylabel {q(ylabel)}",
             "set grid", "set key left top", "set ytics nomirror"]
    if logx:
        lines.append("set logscale x")
    plots = [f"{q(data)} using 1:{c} with linespoints title {q(t)}" for c, t in columns]
    if y2:
        lines += ["set y2tics", f"set y2label {q(y2label or '')}"]
        plots += [f"{q(data)} using 1:{c} axes x1y2 with linespoints title {q(t)}" for c, t in y2]
    lines.append("plot " + ", ".join(plots))
    r = subprocess.run(["gnuplot"], input="\n".join(lines) + "\n", text=True, capture_output=True)
    if r.returncode != 0:
        print(f"gnuplot failed for {png}: {r.stderr.strip()}", file=sys.stderr, flush=True)
        return False
    return True


def _has_cairo():
    import subprocess
    r = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True, text=True)
    return "pngcairo" in (r.stdout + r.stderr)
