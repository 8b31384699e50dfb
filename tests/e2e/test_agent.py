"""The node agent: `kite up` (apiserver + agent for this machine) with short periods, and
`kite apiserver` + `kite agent` as separate processes for the outage test."""
import calendar
import json
import os
import re
import subprocess
import time

import pytest

from conftest import AGENT_FAST_FLAGS, KITE, Cluster, KiteProcess, node_name_of_machine, parse_table, pod_network_flags, wait_for

NODE = node_name_of_machine()
RENEW_INTERVAL = 1.0  # 0.25 x --node-lease-duration-seconds 4
STATUS_INTERVAL = 1.0  # --node-status-update-frequency 1s
SLACK = float(os.environ.get("KITE_RESUME_SLACK", "3"))
# The apiserver killed for 60 s (the case; slow tier), and for 10 s in `make test`: longer
# than every back-off cap the agent's lease and status loops reach (7 s), so the same retries run.
# KITE_OUTAGE_SECONDS sets both.
OUTAGES = [float(os.environ.get("KITE_OUTAGE_SECONDS", "10")),
           pytest.param(float(os.environ.get("KITE_OUTAGE_SECONDS", "60")), marks=pytest.mark.slow)]
LEASE_NS_PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


# ---------------------------------------------------------------- what the machine says

def default_route_ip():
    routes = json.loads(subprocess.run(["ip", "-4", "-j", "route", "show", "default"], capture_output=True,
                                       text=True, check=True).stdout)
    dev = routes[0]["dev"]
    addrs = json.loads(subprocess.run(["ip", "-4", "-j", "addr", "show", "dev", dev], capture_output=True,
                                      text=True, check=True).stdout)
    return addrs[0]["addr_info"][0]["local"]


def os_pretty_name():
    for line in open("/etc/os-release"):
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return None


def mem_total_ki():
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal:"):
            return int(line.split()[1])
    raise AssertionError("no MemTotal")


def boot_id():
    return open("/proc/sys/kernel/random/boot_id").read().strip()


def machine_id():
    return open("/etc/machine-id").read().strip()


def parse_time(s):
    """RFC 3339 (seconds or microseconds, Z) -> epoch seconds (float)."""
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z$", s)
    assert m, f"not an RFC 3339 UTC time: {s!r}"
    t = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S"))
    return t + (float(m.group(2)) if m.group(2) else 0.0)


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def api(up_cluster):
    a = up_cluster.api()
    yield a
    a.close()


def get_node(api, name=NODE):
    r = api.get(f"/api/v1/nodes/{name}")
    return r.json() if r.status == 200 else None


def get_lease(api, name=NODE):
    r = api.get(f"{LEASE_NS_PATH}/{name}")
    return r.json() if r.status == 200 else None


def ready_condition(node):
    for c in (node or {}).get("status", {}).get("conditions", []):
        if c["type"] == "Ready":
            return c
    return None


@pytest.fixture(scope="module")
def ready_node(up_cluster, api):
    wait_for(lambda: (ready_condition(get_node(api)) or {}).get("status") == "True", 20,
             what=f"node {NODE} Ready")
    return get_node(api)


# ---------------------------------------------------------------- kite up

def test_node_ready_in_kubectl(up_cluster, ready_node):
    out = up_cluster.kubectl("get", "nodes").stdout
    headers, rows = parse_table(out)
    by = {r["NAME"]: r for r in rows}
    assert NODE in by, out
    assert by[NODE]["STATUS"] == "Ready", out
    assert re.match(r"^v1\.\d+\.\d+", by[NODE]["VERSION"]), out


def test_wide_values_match_machine(up_cluster, ready_node):
    out = up_cluster.kubectl("get", "nodes", NODE, "-o", "wide").stdout
    headers, rows = parse_table(out)
    row = rows[0]
    assert row["INTERNAL-IP"] == default_route_ip(), out
    assert row["EXTERNAL-IP"] == "<none>", out
    assert row["OS-IMAGE"] == os_pretty_name(), out
    assert row["KERNEL-VERSION"] == os.uname().release, out
    assert row["CONTAINER-RUNTIME"] and row["CONTAINER-RUNTIME"] != "<unknown>", out


def test_node_object_matches_machine(api, ready_node):
    n = get_node(api)
    st = n["status"]
    assert st["capacity"]["cpu"] == str(len(os.sched_getaffinity(0))), st["capacity"]
    assert st["capacity"]["memory"] == f"{mem_total_ki()}Ki", st["capacity"]
    assert "pods" in st["capacity"] and "cpu" in st["allocatable"] and "memory" in st["allocatable"], st
    info = st["nodeInfo"]
    assert info["bootID"] == boot_id(), info
    assert info["machineID"] == machine_id(), info
    assert info["kernelVersion"] == os.uname().release, info
    assert info["osImage"] == os_pretty_name(), info
    assert info["operatingSystem"] == "linux" and info["architecture"] == "amd64", info
    addrs = {(a["type"], a["address"]) for a in st["addresses"]}
    assert ("InternalIP", default_route_ip()) in addrs and ("Hostname", NODE) in addrs, addrs
    labels = n["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == NODE
    assert labels["kubernetes.io/os"] == "linux" and labels["kubernetes.io/arch"] == "amd64", labels
    conds = {c["type"]: c for c in st["conditions"]}
    want = {"MemoryPressure": ("False", "KubeletHasSufficientMemory"),
            "DiskPressure": ("False", "KubeletHasNoDiskPressure"),
            "PIDPressure": ("False", "KubeletHasSufficientPID"),
            "Ready": ("True", "KubeletReady")}
    for t, (status, reason) in want.items():
        assert t in conds, conds
        assert (conds[t]["status"], conds[t]["reason"]) == (status, reason), conds[t]
    assert conds["Ready"]["message"].startswith("kubelet is posting ready status"), conds["Ready"]
    # Ready is reported last (upstream setter order)
    assert st["conditions"][-1]["type"] == "Ready", st["conditions"]


def test_describe_agent_node(up_cluster, ready_node):
    out = up_cluster.kubectl("describe", "node", NODE).stdout
    assert re.search(rf"^Lease:\s*\n\s+HolderIdentity:\s+{re.escape(NODE)}$", out, re.M), out
    assert re.search(r"^\s+Ready\s+True\s+.*KubeletReady", out, re.M), out
    assert re.search(rf"^\s+InternalIP:\s+{re.escape(default_route_ip())}$", out, re.M), out
    assert re.search(rf"^\s+cpu:\s+{len(os.sched_getaffinity(0))}$", out, re.M), out
    assert re.search(rf"^\s+Boot ID:\s+{boot_id()}$", out, re.M), out
    assert re.search(rf"^\s+Machine ID:\s+{machine_id()}$", out, re.M), out
    assert re.search(rf"^\s+Kernel Version:\s+{re.escape(os.uname().release)}$", out, re.M), out
    assert re.search(r"^Events:", out, re.M), out


def test_lease_renews_every_interval(up_cluster, api, ready_node):
    out = up_cluster.kubectl("-n", "kube-node-lease", "get", "lease", NODE).stdout
    headers, rows = parse_table(out)
    assert headers == ["NAME", "HOLDER", "AGE"] and rows[0]["HOLDER"] == NODE, out
    lease = get_lease(api)
    spec = lease["spec"]
    assert spec["holderIdentity"] == NODE and spec["leaseDurationSeconds"] == 4, spec
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$", spec["renewTime"]), spec
    node = get_node(api)
    assert lease["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": NODE,
                                                     "uid": node["metadata"]["uid"]}], lease["metadata"]
    samples = []
    for _ in range(5):
        samples.append(parse_time(get_lease(api)["spec"]["renewTime"]))
        time.sleep(RENEW_INTERVAL * 1.1)
    assert all(a < b for a, b in zip(samples, samples[1:])), f"renewTime did not advance each interval: {samples}"
    gaps = [b - a for a, b in zip(samples, samples[1:])]
    assert max(gaps) < RENEW_INTERVAL * 2.5, gaps
    assert abs(time.time() - samples[-1]) < RENEW_INTERVAL * 2.5 + 1.2, (time.time(), samples)


def test_status_heartbeat_advances(api, ready_node):
    h1 = parse_time(ready_condition(get_node(api))["lastHeartbeatTime"])
    t1 = parse_time(ready_condition(get_node(api))["lastTransitionTime"])
    time.sleep(STATUS_INTERVAL * 2.5)
    c = ready_condition(get_node(api))
    assert parse_time(c["lastHeartbeatTime"]) > h1, c
    # lastTransitionTime only changes when the status flips
    assert parse_time(c["lastTransitionTime"]) == t1, c


def test_deleted_node_comes_back(up_cluster, api, ready_node):
    old_uid = get_node(api)["metadata"]["uid"]
    p = up_cluster.kubectl("delete", "node", NODE)
    assert p.stdout.strip() == f'node "{NODE}" deleted'
    t0 = time.monotonic()

    def back():
        n = get_node(api)
        if not n or n["metadata"]["uid"] == old_uid:
            return None
        lease = get_lease(api)
        refs = (lease or {}).get("metadata", {}).get("ownerReferences") or []
        if [r.get("uid") for r in refs if r.get("kind") == "Node"] != [n["metadata"]["uid"]]:
            return None
        return n

    n = wait_for(back, STATUS_INTERVAL + 5, what="node re-registered with a new uid and lease owner")
    print(f"node back after {time.monotonic() - t0:.2f}s")
    assert n["metadata"]["uid"] != old_uid
    wait_for(lambda: (ready_condition(get_node(api)) or {}).get("status") == "True", 10, what="Ready again")


# ---------------------------------------------------------------- separate processes

def start_agent(cluster, name, tmp_path):
    kc = tmp_path / f"{name}.kubeconfig"
    p = subprocess.run([KITE, "kubeconfig", "--data-dir", str(cluster.data_dir), "--node", name],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode == 0, p.stderr
    kc.write_text(p.stdout)
    # a root dir, log port and pod bridge of its own: never another agent's (an agent refuses a
    # taken port or bridge at start)
    agent = KiteProcess(["agent", "--kubeconfig", str(kc), "--node-name", name, "--root-dir", str(tmp_path / f"root-{name}"),
                         "--port", "0", *pod_network_flags(), *AGENT_FAST_FLAGS], tmp_path, f"agent-{name}")
    return agent.start()


def test_node_kubeconfig_identity(fresh_apiserver, tmp_path):
    p = subprocess.run([KITE, "kubeconfig", "--data-dir", str(fresh_apiserver.data_dir), "--node", "e2e-id"],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode == 0, p.stderr
    kc = tmp_path / "id.kubeconfig"
    kc.write_text(p.stdout)
    from conftest import _kubeconfig_user
    server, ca, insecure, cert, key, token = _kubeconfig_user(kc)
    assert server == f"https://127.0.0.1:{fresh_apiserver.port}", server
    subj = subprocess.run(["openssl", "x509", "-noout", "-subject", "-nameopt", "RFC2253"], input=cert,
                          capture_output=True, timeout=10).stdout.decode()
    assert "CN=system:node:e2e-id" in subj and "O=system:nodes" in subj, subj


@pytest.mark.parametrize("outage", OUTAGES, ids=["short", "minute"])
def test_agent_survives_apiserver_outage(fresh_apiserver, tmp_path, outage):
    c = fresh_apiserver
    name = "e2e-agent"
    agent = start_agent(c, name, tmp_path)
    try:
        api = c.api()
        wait_for(lambda: (ready_condition(get_node(api, name)) or {}).get("status") == "True", 20,
                 what="agent node Ready")
        uid = get_node(api, name)["metadata"]["uid"]
        wait_for(lambda: get_lease(api, name), 5, what="agent lease")
        api.close()

        c.kill9()
        time.sleep(outage)
        assert agent.alive(), "the agent exited while the apiserver was down:\n" + agent.log_tail()
        c.restart()
        t_ready = time.time()
        t0 = time.monotonic()
        api = c.api()
        deadline = RENEW_INTERVAL + SLACK
        wait_for(lambda: parse_time(get_lease(api, name)["spec"]["renewTime"]) >= t_ready - 0.05, deadline,
                 interval=0.05, what=f"lease renewed within {deadline}s of the apiserver's return")
        lease_after = time.monotonic() - t0
        wait_for(lambda: parse_time(ready_condition(get_node(api, name))["lastHeartbeatTime"]) >= int(t_ready),
                 STATUS_INTERVAL + SLACK, interval=0.05, what="node status heartbeat resumed")
        status_after = time.monotonic() - t0
        print(f"after a {outage:.0f}s outage: lease renewed {lease_after:.2f}s, status {status_after:.2f}s "
              f"after the apiserver was ready")
        n = get_node(api, name)
        assert n["metadata"]["uid"] == uid, "the node was re-created instead of resumed"
        assert ready_condition(n)["status"] == "True"
        assert agent.alive()
        api.close()
    except BaseException:
        print(f"--- agent log ({agent.log_path}):\n{agent.log_tail()}")
        raise
    finally:
        rc = agent.stop()
    assert rc == 0, f"agent exit code on SIGTERM: {rc}\n" + agent.log_tail()


def test_sigterm_exits_cleanly(tmp_path):
    c = Cluster("up", tmp_path, extra_args=AGENT_FAST_FLAGS).start()
    t0 = time.monotonic()
    rc = c.stop()
    assert rc == 0, f"kite up exit code on SIGTERM: {rc}\n" + c.proc.log_tail()
    assert time.monotonic() - t0 < 5
    # and it starts again on the same data dir with the same state
    c2 = Cluster("up", tmp_path, extra_args=AGENT_FAST_FLAGS, port=c.port)
    c2.start()
    try:
        api = c2.api()
        wait_for(lambda: (ready_condition(get_node(api)) or {}).get("status") == "True", 20, what="Ready")
        api.close()
    finally:
        c2.stop()
