"""`kite-agent`, the node agent linked alone (build/kite-agent beside build/kite): the same flags
as `kite agent`, none of the apiserver's libraries (its memory is the agent's: BENCHMARKS.md), nor
the DNS server's and the Service proxy's unless they are turned on (they are loaded with dlopen),
and a node that registers, becomes Ready and runs a pod under runc against a separate
`kite apiserver`. The pod test needs root, runc, conmon and umoci, as test_pods_run.py."""
import os
import shutil
import subprocess
import time

import pytest

from conftest import AGENT_FAST_FLAGS, KITE, Cluster, KiteProcess, _workdir, pod_network_flags, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KITE_AGENT = os.path.join(os.path.dirname(KITE), "kite-agent")
NS = "default"
NODE = "e2e-kite-agent"


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=30)


def needed_libraries(binary):
    """The shared libraries ldd resolves for binary, by soname ("libsqlite3.so.0")."""
    p = run("ldd", binary)
    assert p.returncode == 0, p.stderr
    return {line.split()[0] for line in p.stdout.splitlines() if line.strip()}


@pytest.fixture(scope="module", autouse=True)
def kite_agent_binary():
    if not os.access(KITE_AGENT, os.X_OK):
        pytest.fail(f"no kite-agent beside {KITE} (make all builds both)")


def test_links_none_of_the_apiserver_libraries():
    agent = needed_libraries(KITE_AGENT)
    assert not [lib for lib in agent if lib.startswith("libsqlite3")], sorted(agent)
    assert not [lib for lib in agent if lib.startswith("libmimalloc")], sorted(agent)
    # the same check on build/kite finds them: it is the check, not ldd's output, that holds
    kite = needed_libraries(KITE)
    assert [lib for lib in kite if lib.startswith("libsqlite3")], sorted(kite)
    assert {"libgnutls.so.30", "libc.so.6"} <= agent, sorted(agent)


# loaded with dlopen only by the agent that serves DNS (libldns, which brings OpenSSL) or runs the
# Service proxy (libnftables): an agent without --serve-dns and --proxy-mode nftables maps none
DLOPENED = ("libldns.so", "libssl.so", "libcrypto.so", "libnftables.so", "libnftnl.so")


def mapped_libraries(pid):
    """The file names of the shared objects mapped into process pid."""
    with open(f"/proc/{pid}/maps") as f:
        return {os.path.basename(line.split()[5]) for line in f if len(line.split()) > 5 and ".so" in line}


def test_links_neither_the_dns_nor_the_proxy_libraries():
    for binary in (KITE_AGENT, KITE):
        linked = [lib for lib in needed_libraries(binary) if lib.startswith(DLOPENED)]
        assert not linked, (binary, linked)


def test_takes_kite_agents_flags():
    own, sub = run(KITE_AGENT, "--help"), run(KITE, "agent", "--help")
    assert own.returncode == 0 and sub.returncode == 0, (own.stderr, sub.stderr)
    assert own.stdout.splitlines()[0] == "usage: kite-agent --kubeconfig FILE [flags]", own.stdout
    assert own.stdout.splitlines()[1:] == sub.stdout.splitlines()[1:]
    for flag in ("--node-name", "--bootstrap-kubeconfig", "--pod-cidr", "--max-pods", "--config"):
        assert flag + " " in own.stdout, own.stdout
    # errors name the program as it was run
    bad = run(KITE_AGENT, "--kubeconfig", "k", "--no-such-flag")
    assert bad.returncode == 2 and bad.stderr.strip() == \
        "kite-agent: unknown flag --no-such-flag (see kite-agent --help)", bad.stderr
    bad = run(KITE_AGENT, "--node-name", "n")
    assert bad.returncode == 2 and "kite-agent: --kubeconfig is required" in bad.stderr, bad.stderr
    bad = run(KITE_AGENT, "--kubeconfig", "/nonexistent", "--max-pods", "0")
    assert bad.returncode == 2 and bad.stderr.startswith("kite-agent: flag --max-pods:"), bad.stderr


# ---------------------------------------------------------------- a node of its own

def runc_ids(root):
    r = subprocess.run(["runc", "--root", str(root), "list", "-q"], capture_output=True, text=True)
    return set(r.stdout.split())


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    if os.geteuid() != 0 or not shutil.which("runc") or not shutil.which("conmon") or not shutil.which("umoci"):
        pytest.skip("needs root, runc, conmon and umoci (scripts/install-deps)")
    work = _workdir(tmp_path_factory, "kite-agent")
    tar = os.path.join(os.path.dirname(KITE), "busybox.tar")
    if not os.path.exists(tar):
        tar = str(work / "busybox.tar")
        subprocess.run([os.path.join(ROOT, "scripts/make-busybox-image"), tar], check=True, capture_output=True)
    root = work / "agent-root"
    r = subprocess.run([KITE, "images", "import", tar, "--root-dir", str(root)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    c = Cluster("apiserver", work).start()
    kc = work / "node.kubeconfig"
    p = run(KITE, "kubeconfig", "--data-dir", str(c.data_dir), "--node", NODE)
    assert p.returncode == 0, p.stderr
    kc.write_text(p.stdout)
    net = pod_network_flags()
    agent = KiteProcess([], work, "kite-agent")
    agent.args = [KITE_AGENT, "--kubeconfig", str(kc), "--node-name", NODE, "--root-dir", str(root), "--port", "0",
                  *net, *AGENT_FAST_FLAGS]
    agent.start()
    c.agent, c.root = agent, root
    yield c
    api = c.api()
    for pod in api.get(f"/api/v1/namespaces/{NS}/pods").json().get("items", []):
        api.delete(f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and api.get(f"/api/v1/namespaces/{NS}/pods").json().get("items"):
        time.sleep(0.5)
    api.close()
    code = agent.stop()
    c.stop()
    runc_root = root / "runc"
    for cid in runc_ids(runc_root):  # containers outlive the agent by design: end the test's own
        subprocess.run(["runc", "--root", str(runc_root), "kill", cid, "KILL"], capture_output=True)
    time.sleep(0.5)
    for cid in runc_ids(runc_root):
        subprocess.run(["runc", "--root", str(runc_root), "delete", "--force", cid], capture_output=True)
    bridge = net[net.index("--pod-bridge") + 1]
    if os.path.exists(f"/sys/class/net/{bridge}"):
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)
    assert code == 0, agent.log_tail()


def conditions(obj):
    return {x["type"]: x["status"] for x in (obj or {}).get("status", {}).get("conditions", [])}


def test_registers_and_runs_a_pod(node):
    c = node
    api = c.api()
    n = wait_for(lambda: (r := api.get(f"/api/v1/nodes/{NODE}")).status == 200
                 and conditions(r.json()).get("Ready") == "True" and r.json(), 30,
                 what=f"node {NODE} Ready\n" + c.agent.log_tail())
    assert n["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("runc://"), n["status"]["nodeInfo"]
    assert any(name.startswith("busybox") or name.endswith("busybox:latest")
               for img in n["status"].get("images", []) for name in img.get("names", [])), n["status"].get("images")
    api.ok("POST", f"/api/v1/namespaces/{NS}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "alone"},
        "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 1, "containers": [
            {"name": "c", "image": "busybox", "command": ["sh", "-c", "echo up; sleep 3600"]}]}})
    st = wait_for(lambda: (p := api.get(f"/api/v1/namespaces/{NS}/pods/alone").json()).get("status", {})
                  .get("phase") == "Running" and p["status"], 30, what="pod Running\n" + c.agent.log_tail())
    cs = st["containerStatuses"][0]
    assert "running" in cs["state"] and cs["ready"] is True, cs
    assert cs["containerID"].startswith("kite-runc://")
    assert cs["containerID"].split("://")[1] in runc_ids(c.root / "runc")
    assert conditions({"status": st}).get("Ready") == "True", st
    assert c.agent.alive()
    api.close()


def test_maps_no_dns_or_proxy_library_at_default_flags(node):
    # a registered node running a pod: what a node without --serve-dns and --proxy-mode does
    c = node
    wait_for(lambda: c.agent.alive() and conditions(c.api().get(f"/api/v1/nodes/{NODE}").json()).get("Ready")
             == "True", 30, what="node Ready\n" + c.agent.log_tail())
    libs = mapped_libraries(c.agent.pid)
    assert [lib for lib in libs if lib.startswith("libgnutls.so")], sorted(libs)  # the maps were read
    mapped = [lib for lib in libs if lib.startswith(DLOPENED)]
    assert not mapped, mapped
