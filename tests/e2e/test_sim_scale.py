"""`kite sim --nodes 10000` against `kite up` (the embedded SQLite store) on one machine: every
simulated node turns Ready, and over two minutes afterwards (more than two grace periods of
renewals at default timings: lease 40 s renewed every 10 s, grace 50 s) the node lifecycle
controller marks none of them NotReady/Unknown (no NodeNotReady event, every Ready condition
True), and no simulated node sees its renewals fail.

KITE_SIM_SCALE_NODES overrides the node count (default 10000), KITE_SIM_SCALE_HOLD the hold in
seconds (default 120). Prints a "sim-scale:" line with the time to all Ready and the apiserver's
CPU and RSS over the hold (BENCHMARKS.md records it)."""
import json
import os
import socket
import time

import pytest

from conftest import Cluster, KiteProcess, _workdir

NODES = int(os.environ.get("KITE_SIM_SCALE_NODES", "10000"))
HOLD = float(os.environ.get("KITE_SIM_SCALE_HOLD", "120"))
RAMP = 100  # nodes started per second (also spreads their renewals over the period)
READY_TIMEOUT = NODES / RAMP + 600


def control(path, line):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(60)
    s.connect(str(path))
    s.sendall(line.encode() + b"\n")
    out = b""
    while not out.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
    s.close()
    return out.decode().strip()


def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1]) / 1024
    return 0


def not_ready(c):
    """Names of the nodes whose Ready condition is not True."""
    out = c.kubectl("get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name}{\" \"}"
                    "{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}", timeout=600).stdout
    rows = [ln.split() for ln in out.split("\n") if ln.strip()]
    assert len(rows) == NODES, f"{len(rows)} nodes listed"
    return [r[0] for r in rows if r[1:] != ["True"]]


def not_ready_events(c):
    out = c.kubectl("get", "events", "-A", "--field-selector", "reason=NodeNotReady", "-o", "name", timeout=300).stdout
    return [ln for ln in out.split("\n") if ln.strip()]


@pytest.mark.scale  # 10,000 nodes: ~2 minutes of ramp, then a 2-minute hold
def test_ten_thousand_simulated_nodes_ready_without_false_unknown(tmp_path_factory):
    workdir = _workdir(tmp_path_factory, "simscale")
    c = Cluster("up", workdir, extra_args=["--no-agent"]).start()
    ctl = workdir / "sim.sock"
    sim = KiteProcess(["sim", "--kubeconfig", str(c.kubeconfig), "--data-dir", str(c.data_dir), "--nodes", str(NODES),
                       "--ramp", str(RAMP), "--connections", "64", "--control", str(ctl), "--progress-every", "10s"],
                      workdir, "sim").start()
    try:
        t0 = time.monotonic()
        st = {}
        while time.monotonic() - t0 < READY_TIMEOUT:
            assert sim.alive(), sim.log_tail()
            if ctl.exists():
                st = json.loads(control(ctl, "stats"))
                assert st["failing"] == 0, st
                if st["ready"] == NODES:
                    break
            time.sleep(2)
        ready_s = time.monotonic() - t0
        assert st.get("ready") == NODES, f"only {st.get('ready')} of {NODES} Ready after {ready_s:.0f} s: {st}"

        cpu0, w0 = proc_cpu_s(c.proc.pid), time.monotonic()
        rss_max = 0.0
        while time.monotonic() - w0 < HOLD:
            time.sleep(5)
            st = json.loads(control(ctl, "stats"))
            assert st["failing"] == 0 and st["dead"] == 0, st
            rss_max = max(rss_max, proc_rss_mib(c.proc.pid))
        cpu = (proc_cpu_s(c.proc.pid) - cpu0) / (time.monotonic() - w0)
        # the controller's view, after the hold: no live node was ever marked, none is now
        assert not_ready_events(c) == []
        assert not_ready(c) == []
        st = json.loads(control(ctl, "stats"))
        print(f"\nsim-scale: nodes={NODES} ready_s={ready_s:.0f} hold_s={HOLD:.0f} api_cpu={cpu:.3f} "
              f"api_rss_max_mib={rss_max:.0f} renewal_p99_ms={st['renewalP99Ms']:.0f} "
              f"renewal_max_ms={st['renewalMaxMs']:.0f} sim_rss_mib={st['rssKiB'] / 1024:.0f}")
    finally:
        code = sim.stop(timeout=60)
        c.stop()
    assert code == 0, sim.log_tail()
