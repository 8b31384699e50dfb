"""The pod network under runc: each pod not on the host's network gets an address from
--pod-cidr on a veth plugged into the agent's bridge; pods reach each other and the host reaches
them; hostNetwork pods report the host's address; deleting a pod removes its veth and frees its
address; a full range is an error on that pod alone; an agent restart keeps every address.
The agent here has its own bridge and a /29 (five pod addresses: .2 to .6), so it runs beside a
`make up` cluster. Needs root, runc, conmon and umoci."""
import ipaddress
import os
import shutil
import subprocess
import time
import urllib.request

import pytest

from conftest import AGENT_FAST_FLAGS, KITE, MAX_WORKERS, WORKER, Cluster, _workdir, delete_pods_now, end_containers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NS = "default"
BRIDGE = f"ktnet{os.getpid() % 100000}"
# (one second octet per xdist worker: no two workers share a range)
CIDR = f"10.{200 + (WORKER % MAX_WORKERS) * 6 + os.getpid() % 6}.{os.getpid() % 200}.8/29"
NET = ipaddress.ip_network(CIDR)
GATEWAY = str(NET.network_address + 1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if os.geteuid() != 0 or not shutil.which("runc") or not shutil.which("conmon") or not shutil.which("umoci"):
        pytest.skip("needs root, runc, conmon and umoci (scripts/install-deps)")
    work = _workdir(tmp_path_factory, "podnet")
    tar = os.path.join(os.path.dirname(KITE), "busybox.tar")
    if not os.path.exists(tar):
        tar = str(work / "busybox.tar")
        subprocess.run([os.path.join(ROOT, "scripts/make-busybox-image"), tar], check=True, capture_output=True)
    c = Cluster("up", work, extra_args=AGENT_FAST_FLAGS + ["--pod-bridge", BRIDGE, "--pod-cidr", CIDR])
    r = subprocess.run([KITE, "images", "import", tar, "--root-dir", str(c.data_dir / "agent")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    c.start()
    # hostPath and hostNetwork pods run here: their namespace allows them (kite up enforces
    # baseline elsewhere), labelled as a user would
    c.kubectl("label", "--overwrite", "namespace", NS, "pod-security.kubernetes.io/enforce=privileged")
    c.node = wait(lambda: (c.api().get("/api/v1/nodes").json().get("items") or [None])[0], 20, "node")["metadata"]["name"]
    yield c
    if c.proc.alive():
        delete_pods_now(c, NS)
    c.stop()
    end_containers(c)
    with open("/proc/mounts") as f:
        for m in [ln.split()[1] for ln in f if str(c.data_dir) in ln.split()[1]]:
            subprocess.run(["umount", "-l", m], capture_output=True)
    assert not os.path.exists(f"/sys/class/net/{BRIDGE}")


def wait(fn, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}; last: {last!r}")


def pod(c, name, script, restart="Always", host_network=False, **container):
    spec = {"nodeName": c.node, "restartPolicy": restart, "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", script], **container}]}
    if host_network:
        spec["hostNetwork"] = True
    return c.api().ok("POST", f"/api/v1/namespaces/{NS}/pods",
                      {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})


def status_of(c, name):
    r = c.api().get(f"/api/v1/namespaces/{NS}/pods/{name}")
    return r.json().get("status", {}) if r.status == 200 else {}


def running(c, name, timeout=20):
    return wait(lambda: (s := status_of(c, name)).get("phase") == "Running" and s.get("podIP") and s, timeout,
                f"{name} Running with a podIP")


def delete(c, name):
    c.api().delete(f"/api/v1/namespaces/{NS}/pods/{name}")
    wait(lambda: c.api().get(f"/api/v1/namespaces/{NS}/pods/{name}").status == 404, 30, f"{name} gone")


def ipam(c):
    """address -> owning sandbox id, as the agent persisted them."""
    d = c.data_dir / "agent" / "ipam"
    return {f.name: f.read_text().strip() for f in d.iterdir() if not f.name.endswith(".tmp")} if d.exists() else {}


def veth_of(c, ip):
    return f"kv{ipam(c)[ip][:12]}"


def events(c, name):
    items = c.api().get(f"/api/v1/namespaces/{NS}/events").json()["items"]
    return [e for e in items if e["involvedObject"].get("name") == name]


def http_get(ip):
    """GET / on a pod's port 8080 from the host (no proxy: the address is on this machine)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return opener.open(f"http://{ip}:8080/", timeout=5).read().decode()


HTTPD = "mkdir -p /w && echo hello-from-$(hostname) > /w/index.html && exec httpd -f -p 8080 -h /w"


def test_pods_get_distinct_addresses_and_reach_each_other(cluster):
    c = cluster
    node = c.api().get(f"/api/v1/nodes/{c.node}").json()
    assert node["spec"]["podCIDR"] == CIDR and node["spec"]["podCIDRs"] == [CIDR]
    # the agent's httpGet probe dials the pod's address over the bridge
    pod(c, "srv", HTTPD, readinessProbe={"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1})
    pod(c, "idle", "sleep 1000")
    srv, idle = running(c, "srv"), running(c, "idle")
    ready = lambda s: next((x["status"] for x in s.get("conditions", []) if x["type"] == "Ready"), None)
    wait(lambda: ready(status_of(c, "srv")) == "True", 15, "srv Ready through its probe")
    ips = {srv["podIP"], idle["podIP"]}
    assert len(ips) == 2, ips
    for st in (srv, idle):
        assert ipaddress.ip_address(st["podIP"]) in NET and st["podIP"] != GATEWAY
        assert st["podIPs"] == [{"ip": st["podIP"]}]
        assert st["hostIP"] != st["podIP"]
    assert set(ipam(c)) == ips
    # kubectl shows the addresses
    out = c.kubectl("get", "pods", "-o", "wide").stdout
    for name, st in (("srv", srv), ("idle", idle)):
        line = next(ln for ln in out.splitlines() if ln.startswith(name + " "))
        assert st["podIP"] in line.split(), out
    # the host reaches a pod through the bridge
    body = http_get(srv["podIP"])
    assert body.strip() == "hello-from-srv"
    # a pod reaches another over the bridge, and sees its own address and route from the inside
    # (busybox-static's wget crashes in Debian 12: nc speaks the HTTP)
    check = (f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 {srv['podIP']} 8080 | grep -qx hello-from-srv"
             f" && ip -4 addr show eth0 | grep -q 'inet [0-9.]*/{NET.prefixlen}'"
             f" && ip route | grep -q 'default via {GATEWAY} dev eth0'")
    pod(c, "client", check, restart="Never")
    st = wait(lambda: (s := status_of(c, "client")).get("phase") in ("Succeeded", "Failed") and s, 30, "client done")
    assert st["phase"] == "Succeeded", st
    # a finished pod keeps its address until it is deleted
    assert st["podIP"] in ipam(c)
    delete(c, "client")
    # the sandbox (and its address) goes once the pod is gone from the API
    wait(lambda: st["podIP"] not in ipam(c), 15, "client's address released")


def test_host_network_pod_reports_host_ip(cluster):
    c = cluster
    before = set(ipam(c))
    pod(c, "hostnet", "sleep 1000", host_network=True)
    st = running(c, "hostnet")
    assert st["podIP"] == st["hostIP"] and st["podIPs"] == [{"ip": st["hostIP"]}]
    assert ipaddress.ip_address(st["podIP"]) not in NET
    assert set(ipam(c)) == before, "a hostNetwork pod takes no pod address"
    delete(c, "hostnet")


def test_delete_removes_veth_and_frees_address(cluster):
    c = cluster
    st = status_of(c, "idle")
    ip = st["podIP"]
    veth = veth_of(c, ip)
    assert os.path.exists(f"/sys/class/net/{veth}")
    with open(f"/sys/class/net/{veth}/master/uevent") as f:
        assert f"INTERFACE={BRIDGE}" in f.read()
    delete(c, "idle")
    wait(lambda: ip not in ipam(c), 15, "address released")
    wait(lambda: not os.path.exists(f"/sys/class/net/{veth}"), 15, "veth removed")


def test_full_range_fails_that_pod_then_reuses_freed_addresses(cluster):
    c = cluster
    held = set(ipam(c))  # srv's
    names = [f"fill{i}" for i in range(5 - len(held))]
    for n in names:
        pod(c, n, "sleep 1000")
    for n in names:
        held.add(running(c, n)["podIP"])
    assert held == {str(h) for h in list(NET.hosts())[1:]}, held  # every address but the gateway
    pod(c, "extra", "sleep 1000")
    ev = wait(lambda: [e for e in events(c, "extra") if e["reason"] == "FailedCreatePodSandBox"], 20,
              "FailedCreatePodSandBox")
    assert "no free address in the pod CIDR" in ev[0]["message"] and ev[0]["type"] == "Warning", ev
    assert status_of(c, "extra")["phase"] == "Pending" and "podIP" not in status_of(c, "extra")
    assert status_of(c, "srv")["phase"] == "Running", "the other pods are untouched"
    freed = status_of(c, names[0])["podIP"]
    delete(c, names[0])
    # retried after the sync error back-off (10 s): it gets the only free address, the one freed
    st = running(c, "extra", timeout=30)
    assert st["podIP"] == freed


def test_agent_restart_keeps_addresses(cluster):
    c = cluster
    pods = {p["metadata"]["name"]: p["status"].get("podIP")
            for p in c.api().get(f"/api/v1/namespaces/{NS}/pods").json()["items"]}
    assert pods["srv"] and all(pods.values()), pods
    files = ipam(c)
    c.kill9()
    c.restart()
    time.sleep(3)  # the restarted agent has synced its pods
    for name, ip in pods.items():
        st = status_of(c, name)
        assert st["phase"] == "Running" and st["podIP"] == ip, (name, st)
    assert ipam(c) == files
    body = http_get(pods["srv"])
    assert body.strip() == "hello-from-srv"
