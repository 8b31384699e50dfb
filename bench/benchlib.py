"""What the Python benches share (they run as `python3 bench/NAME.py`, so this directory is on
their import path)."""
import contextlib
import random
import socket
import sys


@contextlib.contextmanager
def workdir(prefix, keep, who):
    """A fresh temporary directory for a bench's runs: removed after them, or with keep left
    there (and said on stderr)."""
    import shutil
    import tempfile
    from pathlib import Path
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield tmp
    finally:
        if keep:
            print(f"{who}: kept {tmp}", file=sys.stderr, flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


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


def admin_context(data):
    """A TLS client context with the admin certificate of kite's data dir data (the server's
    certificate is not checked: loopback only)."""
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(str(data / "pki" / "admin.crt"), str(data / "pki" / "admin.key"))
    return ctx


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


def start_sim(kite, data, work, *args):
    """Starts `kite sim` with args against the `kite up` of data dir data (its log in
    work/sim.log). Returns the process; stop it with stop()."""
    import subprocess
    from pathlib import Path
    slog = open(Path(work) / "sim.log", "ab")
    p = subprocess.Popen([kite, "sim", "--kubeconfig", str(data / "admin.kubeconfig"), "--data-dir", str(data), *args],
                         stdout=slog, stderr=slog, stdin=subprocess.DEVNULL, start_new_session=True)
    slog.close()
    return p


def check_sim(sim, work, who):
    """Exits (as who) when the simulator has exited."""
    from pathlib import Path
    if sim.poll() is not None:
        sys.exit(f"{who}: kite sim exited with {sim.returncode} (log {Path(work) / 'sim.log'})")


def sim_control(path, line, timeout=30, tries=1):
    """One line to the simulator's control socket and its one-line answer; tries: connection
    attempts 0.1 s apart (the socket file appears just before the simulator listens on it)."""
    import time
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    for attempt in range(tries):
        try:
            s.connect(str(path))
            break
        except ConnectionRefusedError:
            if attempt == tries - 1:
                raise
            time.sleep(0.1)
    s.sendall(line.encode() + b"\n")
    out = b""
    while not out.endswith(b"\n"):
        chunk = s.recv(1 << 16)
        if not chunk:
            break
        out += chunk
    s.close()
    return out.decode().strip()


def wait_sim_ready(sim, ctl, n, deadline, work, who):
    """Polls the simulator's stats every 2 s until its n nodes are Ready or the monotonic
    deadline passes; returns the last stats ({} when none could be read)."""
    import json
    import time
    st = {}
    while time.monotonic() < deadline:
        check_sim(sim, work, who)
        if ctl.exists():
            try:
                st = json.loads(sim_control(ctl, "stats"))
            except (OSError, ValueError):
                st = {}
            if st.get("ready") == n:
                break
        time.sleep(2)
    return st


def not_ready(data, who="bench"):
    """Nodes whose Ready condition is not True (the node lifecycle controller's false Unknown);
    -1 when kubectl fails."""
    import subprocess
    out = subprocess.run(["kubectl", "--kubeconfig", str(data / "admin.kubeconfig"), "get", "nodes", "-o",
                          "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}"],
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        print(f"{who}: kubectl get nodes: {out.stderr.strip()}", file=sys.stderr, flush=True)
        return -1
    return sum(1 for ln in out.stdout.split("\n") if ln.strip() and ln.strip() != "True")


def cpu_over(pid, seconds):
    """The CPU a process used over the next seconds, as a fraction of one core."""
    import time
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - c0) / (time.monotonic() - t0)


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
