"""Cluster DNS: `kite up`'s node agent answers the cluster domain on the pod network's gateway
(--serve-dns) and pods name it in their resolv.conf: a Deployment + Service is reached by its
full name and by its short name through the search path (busybox nslookup and wget in a pod);
headless Services answer their endpoints and per-pod hostnames; SRV for named ports; unknown
names are NXDOMAIN; other names go to the upstream named by --dns-upstream-conf (a resolver
of the test's own on loopback). Needs root, runc, conmon, umoci, nft."""
import os
import socket
import struct
import subprocess
import threading

import pytest

from conftest import AGENT_FAST_FLAGS, KITE, Cluster, _workdir, wait_for
from test_service_proxy import ROOT, SERVE, needs_root, pod_names, ready_ips, service_cidr, wait

NS = "default"
OUTSIDE = ("outside.example", "192.0.2.7")


# -- a minimal DNS codec for the test's own upstream and host-side queries
def query(name, qtype, qid=0x1234):
    q = b"".join(bytes([len(l)]) + l.encode() for l in name.rstrip(".").split(".")) + b"\0"
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + q + struct.pack(">HH", qtype, 1)


def read_name(msg, off):
    labels = []
    while True:
        n = msg[off]
        if n & 0xC0 == 0xC0:
            ptr = struct.unpack(">H", msg[off:off + 2])[0] & 0x3FFF
            return ".".join(labels + [read_name(msg, ptr)[0]]).strip("."), off + 2
        off += 1
        if n == 0:
            return ".".join(labels), off
        labels.append(msg[off:off + n].decode())
        off += n


def parse(msg):
    """(rcode, [(name, type, ttl, rdata)] of the answer section)"""
    qid, flags, qd, an, ns, ar = struct.unpack(">HHHHHH", msg[:12])
    off = 12
    for _ in range(qd):
        off = read_name(msg, off)[1] + 4
    out = []
    for _ in range(an):
        name, off = read_name(msg, off)
        t, _cls, ttl, rdlen = struct.unpack(">HHIH", msg[off:off + 10])
        off += 10
        rd = msg[off:off + rdlen]
        if t == 1:
            rd = socket.inet_ntoa(rd)
        elif t == 33:
            rd = struct.unpack(">HHH", rd[:6]) + (read_name(msg, off + 6)[0],)
        out.append((name, t, ttl, rd))
        off += rdlen
    return flags & 0xF, out


def ask(server, name, qtype=1, tcp=False):
    if tcp:
        with socket.create_connection((server, 53), timeout=3) as s:
            q = query(name, qtype)
            s.sendall(struct.pack(">H", len(q)) + q)
            data = b""
            while len(data) < 2 or len(data) < 2 + struct.unpack(">H", data[:2])[0]:
                chunk = s.recv(65535)
                if not chunk:
                    break
                data += chunk
            return parse(data[2:])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(3)
        s.sendto(query(name, qtype), (server, 53))
        return parse(s.recv(65535))


class Upstream:
    """The host's resolver for the test: answers OUTSIDE, NXDOMAIN otherwise, on 127.x.y.z:53."""

    def __init__(self):
        self.addr = f"127.{53 + os.getpid() % 64}.{os.getpid() // 64 % 256}.53"
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((self.addr, 53))
        self.sock.settimeout(0.2)
        self.names = []
        self.stopping = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.stopping:
            try:
                msg, peer = self.sock.recvfrom(4096)
            except OSError:
                continue
            name, off = read_name(msg, 12)
            qtype = struct.unpack(">H", msg[off:off + 2])[0]
            self.names.append(name)
            hit = name == OUTSIDE[0] and qtype == 1
            hdr = struct.pack(">HHHHHH", struct.unpack(">H", msg[:2])[0], 0x8180 | (0 if name == OUTSIDE[0] else 3),
                              1, 1 if hit else 0, 0, 0)
            ans = (b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton(OUTSIDE[1])) if hit else b""
            self.sock.sendto(hdr + msg[12:off + 4] + ans, peer)

    def stop(self):
        self.stopping = True
        self.thread.join()
        self.sock.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    needs_root()
    work = _workdir(tmp_path_factory, "dns")
    up = Upstream()
    conf = work / "upstream-resolv.conf"
    conf.write_text(f"search example\nnameserver {up.addr}\n")
    tar = os.path.join(os.path.dirname(KITE), "busybox.tar")
    if not os.path.exists(tar):
        tar = str(work / "busybox.tar")
        subprocess.run([os.path.join(ROOT, "scripts/make-busybox-image"), tar], check=True, capture_output=True)
    cidr = service_cidr()
    c = Cluster("up", work, extra_args=[*AGENT_FAST_FLAGS, "--service-cluster-ip-range", cidr,
                                        "--dns-upstream-conf", str(conf)])
    r = subprocess.run([KITE, "images", "import", tar, "--root-dir", str(c.data_dir / "agent")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    c.start()
    c.upstream = up
    c.dns = dns_address(c.proc.args[c.proc.args.index("--pod-cidr") + 1])
    # the kube-dns Service's address: the service range's 10th, as kubeadm's 10.96.0.10
    net = cidr.split("/")[0].split(".")
    c.kube_dns = ".".join(net[:3] + [str(int(net[3]) + 10)])
    yield c
    api = c.api()
    for kind in ("deployment", "service", "pod"):
        c.kubectl("delete", kind, "--all", "--grace-period=0", "--force", check=False)
    wait(lambda: not api.get(f"/api/v1/namespaces/{NS}/pods").json().get("items"), 60, "pods gone")
    c.stop()
    up.stop()
    # a clean stop leaves nothing listening on the DNS address
    listening = subprocess.run(["ss", "-Hlntu", "src", f"{c.dns}:53"], capture_output=True, text=True).stdout
    assert not listening.strip(), listening


def dns_address(cidr):
    """The pod gateway: the CIDR's first address (what pods' resolv.conf names)."""
    net = cidr.split("/")[0].split(".")
    return ".".join(net[:3] + [str(int(net[3]) + 1)])


def run_pod(c, name, script, timeout=60, **spec):
    c.api().ok("POST", f"/api/v1/namespaces/{NS}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", **spec,
                 "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", script]}]}})
    wait(lambda: c.api().get(f"/api/v1/namespaces/{NS}/pods/{name}").json()["status"].get("phase")
         in ("Succeeded", "Failed"), timeout, f"{name} done")
    return c.kubectl("logs", name).stdout


def test_the_serving_agent_loaded_ldns(cluster):
    # libldns is loaded with dlopen by the DNS server (kite-agent without --serve-dns maps it
    # not: test_kite_agent.py); kite up's agent serves DNS, so it is mapped there
    def maps():
        with open(f"/proc/{cluster.proc.pid}/maps") as f:
            return f.read()
    wait_for(lambda: "/libldns.so" in (m := maps()) and "/libnftables.so" in m, 10,
             what="libldns and libnftables mapped by kite up\n" + cluster.proc.log_tail())


def test_deployment_and_service_by_name_from_a_pod(cluster):
    c = cluster
    c.kubectl("create", "deployment", "web", "--image=busybox", "--", "sh", "-c", SERVE)
    c.kubectl("expose", "deployment", "web", "--port", "80", "--target-port", "8080")
    cip = c.api().get(f"/api/v1/namespaces/{NS}/services/web").json()["spec"]["clusterIP"]
    wait(lambda: len(ready_ips(c, "web")) == 1, 60, "one ready endpoint")
    pod = pod_names(c, "web")[0]
    out = run_pod(c, "client", "cat /etc/resolv.conf; echo ---; nslookup web.default.svc.cluster.local; echo ---; "
                               "wget -qO- http://web; echo; echo ---; wget -qO- web.default.svc.cluster.local")
    resolv, ns_out, short, full = out.split("---\n")
    # the kube-dns Service's ClusterIP, routed by the node's proxy to its own responder
    assert f"nameserver {c.kube_dns}" in resolv and "ndots:5" in resolv, resolv
    assert "search default.svc.cluster.local svc.cluster.local cluster.local" in resolv, resolv
    assert f"Address: {cip}" in ns_out, ns_out
    # the short name through the search path, then the full name, reach the Deployment's pod
    assert short.strip() == pod, out
    assert full.strip() == pod, out


def test_kube_dns_service_routes_to_the_node_responder(cluster):
    c = cluster
    svc = c.api().get("/api/v1/namespaces/kube-system/services/kube-dns").json()
    assert svc["spec"]["clusterIP"] == c.kube_dns, svc
    assert svc["metadata"]["labels"]["k8s-app"] == "kube-dns", svc["metadata"]
    assert sorted((p["name"], p["protocol"], p["port"]) for p in svc["spec"]["ports"]) == \
        [("dns", "UDP", 53), ("dns-tcp", "TCP", 53)], svc["spec"]["ports"]
    # from the host through the ClusterIP (the proxy's output hook), UDP and TCP
    rc, ans = wait(lambda: (r := ask(c.kube_dns, "kube-dns.kube-system.svc.cluster.local"))[1] and r, 30,
                   "an answer through the kube-dns ClusterIP")
    assert rc == 0 and ans == [("kube-dns.kube-system.svc.cluster.local", 1, 30, c.kube_dns)], ans
    kcip = c.api().get("/api/v1/namespaces/default/services/kubernetes").json()["spec"]["clusterIP"]
    assert ask(c.kube_dns, "kubernetes.default.svc.cluster.local", tcp=True) == \
        (0, [("kubernetes.default.svc.cluster.local", 1, 30, kcip)])


def test_records_from_the_host(cluster):
    c = cluster
    c.api().ok("POST", f"/api/v1/namespaces/{NS}/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "named"},
        "spec": {"selector": {"app": "nothing"}, "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}})
    cip = c.api().get(f"/api/v1/namespaces/{NS}/services/named").json()["spec"]["clusterIP"]
    rc, ans = wait(lambda: (r := ask(c.dns, "named.default.svc.cluster.local"))[1] and r, 20, "an A record")
    assert rc == 0 and ans == [("named.default.svc.cluster.local", 1, 30, cip)], ans
    rc, ans = ask(c.dns, "_http._tcp.named.default.svc.cluster.local", 33)
    assert rc == 0 and ans == [("_http._tcp.named.default.svc.cluster.local", 33, 30,
                                (0, 100, 80, "named.default.svc.cluster.local"))], ans
    # NXDOMAIN inside the cluster domain; the pod names of `pods insecure`
    assert ask(c.dns, "nope.default.svc.cluster.local")[0] == 3
    assert ask(c.dns, "10-1-2-3.default.pod.cluster.local")[1][0][3] == "10.1.2.3"
    # other names: the upstream's answer, relayed
    assert ask(c.dns, OUTSIDE[0]) == (0, [(OUTSIDE[0], 1, 60, OUTSIDE[1])])
    # asked again: from the responder's cache (kubeadm's `cache 30`: the TTL capped at 30 s),
    # over TCP too; the upstream was asked once
    for tcp in (False, True):
        rc, ans = ask(c.dns, OUTSIDE[0], tcp=tcp)
        assert rc == 0 and len(ans) == 1 and ans[0][3] == OUTSIDE[1] and ans[0][2] <= 30, ans
    assert c.upstream.names.count(OUTSIDE[0]) == 1, c.upstream.names
    assert ask(c.dns, "nothing.example")[0] == 3
    assert OUTSIDE[0] in c.upstream.names and not any("cluster.local" in n for n in c.upstream.names)


def test_headless_service_hostnames_and_forwarding_from_a_pod(cluster):
    c = cluster
    c.api().ok("POST", f"/api/v1/namespaces/{NS}/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "hl"},
        "spec": {"clusterIP": "None", "selector": {"app": "hl"}, "ports": [{"name": "web", "port": 8080}]}})
    for i in range(2):
        c.api().ok("POST", f"/api/v1/namespaces/{NS}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"hl-{i}", "labels": {"app": "hl"}},
            "spec": {"hostname": f"hl-{i}", "subdomain": "hl", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", SERVE]}]}})
    ips = wait(lambda: len(r := ready_ips(c, "hl")) == 2 and r, 60, "two ready endpoints")
    ip0 = c.api().get(f"/api/v1/namespaces/{NS}/pods/hl-0").json()["status"]["podIP"]
    out = run_pod(c, "client-hl", "nslookup hl.default.svc.cluster.local; echo ---; "
                                  "nslookup hl-0.hl.default.svc.cluster.local; echo ---; wget -qO- http://hl-0.hl:8080; "
                                  "echo; echo ---; nslookup -type=srv _web._tcp.hl.default.svc.cluster.local; echo ---; "
                                  "nslookup nope.default.svc.cluster.local; echo ---; nslookup outside.example")
    all_, one, web, srv, nx, outside = out.split("---\n")
    assert all(f"Address: {ip}" in all_ for ip in ips), all_
    assert f"Address: {ip0}" in one and len([l for l in one.splitlines() if l.startswith("Address: 10.")]) == 1, one
    assert web.strip() == "hl-0", out
    assert "hl-0.hl.default.svc.cluster.local" in srv and "hl-1.hl.default.svc.cluster.local" in srv, srv
    assert "NXDOMAIN" in nx, nx
    assert f"Address: {OUTSIDE[1]}" in outside, outside
