"""kite apiserver on etcd (--etcd-servers): a real etcd (Debian's etcd-server) on 127.0.0.1, the
API served from it with kube-apiserver's key layout and etcd's revisions as resourceVersions, two
apiservers over one etcd seeing each other's writes, and /readyz following etcd's health.

Skipped when etcd or etcdctl is not installed (scripts/install-deps installs them)."""
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

from conftest import (AGENT_FAST_FLAGS, KITE, Api, Cluster, KiteProcess, TLSIdentity, free_port, node_manifest,
                      node_name_of_machine, pod_network_flags, wait_for)

ETCD = shutil.which("etcd")
ETCDCTL = shutil.which("etcdctl")
pytestmark = pytest.mark.skipif(not ETCD or not ETCDCTL,
                                reason="etcd is not installed: scripts/install-deps installs Debian's etcd-server "
                                       "and etcd-client")

CMS = "/api/v1/namespaces/default/configmaps"


class Etcd:
    """etcd members on 127.0.0.1, one process each, their data and logs in workdir. tls: a dict
    of PEM paths (ca, cert, key) served on the client and peer ports."""

    def __init__(self, workdir, n=1, tls=None):
        self.workdir = Path(workdir)
        self.tls = tls
        scheme = "https" if tls else "http"
        self.members = [{"name": f"m{i}", "client": free_port(), "peer": free_port(), "proc": None}
                        for i in range(n)]
        self.scheme = scheme
        self.cluster = ",".join(f"{m['name']}={scheme}://127.0.0.1:{m['peer']}" for m in self.members)

    def url(self, m):
        return f"{self.scheme}://127.0.0.1:{m['client']}"

    @property
    def endpoints(self):
        return ",".join(self.url(m) for m in self.members)

    def start_member(self, m, state="new"):
        args = [ETCD, "--name", m["name"], "--data-dir", str(self.workdir / m["name"]),
                "--listen-client-urls", self.url(m), "--advertise-client-urls", self.url(m),
                "--listen-peer-urls", f"{self.scheme}://127.0.0.1:{m['peer']}",
                "--initial-advertise-peer-urls", f"{self.scheme}://127.0.0.1:{m['peer']}",
                "--initial-cluster", self.cluster, "--initial-cluster-state", state,
                "--initial-cluster-token", f"kite-{self.members[0]['client']}"]
        if self.tls:
            t = self.tls
            args += ["--cert-file", t["cert"], "--key-file", t["key"], "--trusted-ca-file", t["ca"],
                     "--client-cert-auth", "--peer-cert-file", t["cert"], "--peer-key-file", t["key"],
                     "--peer-trusted-ca-file", t["ca"], "--peer-client-cert-auth"]
        log = open(self.workdir / f"etcd-{m['name']}.log", "ab")
        m["proc"] = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        log.close()

    def start(self):
        for m in self.members:
            self.start_member(m)
        wait_for(lambda: self.ctl("endpoint", "health", check=False).returncode == 0, 20, 0.2, "etcd healthy")
        return self

    def ctl(self, *args, check=True, endpoints=None):
        cmd = [ETCDCTL, "--endpoints", endpoints or self.endpoints, "--command-timeout", "5s"]
        if self.tls:
            cmd += ["--cacert", self.tls["ca"], "--cert", self.tls["cert"], "--key", self.tls["key"]]
        p = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=20,
                           env={**os.environ, "ETCDCTL_API": "3"})
        if check:
            assert p.returncode == 0, (args, p.stdout, p.stderr)
        return p

    def stop(self):
        for m in self.members:
            if m["proc"] and m["proc"].poll() is None:
                m["proc"].kill()
                m["proc"].wait(timeout=10)


class Proxy:
    """A TCP forwarder from a port of its own to target (an etcd member): cut() closes every
    connection through it and refuses new ones (accepted and closed at once) until resume()."""

    def __init__(self, target_port):
        self.target = target_port
        self.port = free_port()
        self.socks = []
        self.lock = threading.Lock()
        self.open = False
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", self.port))
        self.listener.listen(16)
        threading.Thread(target=self._accept, daemon=True).start()

    def resume(self):
        with self.lock:
            self.open = True
        return self

    def _accept(self):
        while True:
            try:
                c, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                if not self.open:
                    c.close()
                    continue
                u = socket.create_connection(("127.0.0.1", self.target))
                self.socks += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        for x in (a, b):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        with self.lock:
            self.open = False
            for x in self.socks:
                try:
                    x.shutdown(socket.SHUT_RDWR)
                    x.close()
                except OSError:
                    pass
            self.socks = []

    def close(self):
        self.cut()
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()


def apiserver_on(etcd, workdir, pki_from=None, extra=()):
    """A kite apiserver storing in etcd; pki_from: another's data dir whose pki/ it copies (the same
    cluster CA and signing keys, as kubeadm's control-plane join)."""
    data = Path(workdir) / "data"
    if pki_from:
        shutil.copytree(Path(pki_from) / "pki", data / "pki")
    return Cluster("apiserver", workdir, extra_args=["--etcd-servers", etcd.endpoints, *extra])


@pytest.fixture(scope="module")
def etcd(tmp_path_factory):
    e = Etcd(tmp_path_factory.mktemp("etcd")).start()
    yield e
    e.stop()


@pytest.fixture(scope="module")
def pair(etcd, tmp_path_factory):
    """Two kite apiservers, A and B, over the module's etcd."""
    a = apiserver_on(etcd, tmp_path_factory.mktemp("apiserver-a")).start()
    b = apiserver_on(etcd, tmp_path_factory.mktemp("apiserver-b"), pki_from=a.data_dir).start()
    yield a, b
    b.stop()
    a.stop()


def cm(name, data=None, rv=None):
    o = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data or {"k": "v"}}
    if rv:
        o["metadata"]["resourceVersion"] = rv
    return o


def etcd_kv(etcd, key):
    out = json.loads(etcd.ctl("get", key, "-w", "json").stdout)
    return out.get("kvs", [None])[0], out["header"]["revision"]


def test_crud_with_etcd_revisions(etcd, pair):
    a, _ = pair
    api = a.api()
    try:
        created = api.ok("POST", CMS, cm("e2e-etcd-1"))
        rv = created["metadata"]["resourceVersion"]
        kv, _ = etcd_kv(etcd, "/registry/configmaps/default/e2e-etcd-1")
        # resourceVersion is etcd's mod_revision; create_revision == mod_revision on create
        assert kv is not None and str(kv["mod_revision"]) == rv and kv["create_revision"] == kv["mod_revision"], kv
        import base64
        stored = json.loads(base64.b64decode(kv["value"]))
        assert stored["kind"] == "ConfigMap" and stored["data"] == {"k": "v"}, stored  # JSON values
        assert api.ok("GET", f"{CMS}/e2e-etcd-1")["metadata"]["resourceVersion"] == rv
        names = [i["metadata"]["name"] for i in api.ok("GET", CMS)["items"]]
        assert "e2e-etcd-1" in names
        # create again: 409 AlreadyExists (the Txn's create_revision == 0 compare fails)
        r = api.post(CMS, cm("e2e-etcd-1"))
        assert r.status == 409 and r.json()["reason"] == "AlreadyExists", r
        # update at the current revision: a new mod_revision, version 2
        updated = api.ok("PUT", f"{CMS}/e2e-etcd-1", cm("e2e-etcd-1", {"k": "v2"}, rv))
        rv2 = updated["metadata"]["resourceVersion"]
        kv, _ = etcd_kv(etcd, "/registry/configmaps/default/e2e-etcd-1")
        assert str(kv["mod_revision"]) == rv2 and int(rv2) > int(rv) and kv["version"] == 2, kv
        # update at the old revision: 409 Conflict (mod_revision compare), the object unchanged
        r = api.put(f"{CMS}/e2e-etcd-1", cm("e2e-etcd-1", {"k": "stale"}, rv))
        assert r.status == 409 and r.json()["reason"] == "Conflict", r
        assert api.ok("GET", f"{CMS}/e2e-etcd-1")["data"] == {"k": "v2"}
        # delete with a stale precondition: 409; with the current one: gone from etcd
        r = api.request("DELETE", f"{CMS}/e2e-etcd-1", body=({"preconditions": {"resourceVersion": rv}}))
        assert r.status == 409, r
        api.ok("DELETE", f"{CMS}/e2e-etcd-1", body=({"preconditions": {"resourceVersion": rv2}}))
        assert etcd_kv(etcd, "/registry/configmaps/default/e2e-etcd-1")[0] is None
        assert api.get(f"{CMS}/e2e-etcd-1").status == 404
    finally:
        api.close()


def test_kube_apiserver_key_layout(etcd, pair):
    a, _ = pair
    a.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": "e2e-etcd-node"}}))
    keys = etcd.ctl("get", "--prefix", "/registry/minions/", "--keys-only").stdout.split()
    assert "/registry/minions/e2e-etcd-node" in keys, keys
    keys = etcd.ctl("get", "--prefix", "/registry/services/specs/", "--keys-only").stdout.split()
    assert "/registry/services/specs/default/kubernetes" in keys, keys
    assert etcd.ctl("get", "--prefix", "/registry/nodes/", "--keys-only").stdout.split() == []
    # and the API lists them from there
    assert "e2e-etcd-node" in a.kubectl("get", "nodes", "-o", "name").stdout
    assert "kubernetes" in a.kubectl("get", "services", "-o", "name").stdout


def test_write_on_a_is_seen_by_a_watch_on_b(pair):
    a, b = pair
    api_a, api_b = a.api(), b.api()
    try:
        rv = api_b.ok("GET", CMS)["metadata"]["resourceVersion"]
        got = {}

        def watch():
            got["r"] = api_b.get(f"{CMS}?watch=true&timeoutSeconds=3&resourceVersion={rv}")

        t = threading.Thread(target=watch)
        t.start()
        time.sleep(0.5)
        made = api_a.ok("POST", CMS, cm("e2e-etcd-ab"))
        t.join()
        r = got["r"]
        assert r.status == 200, r
        evs = [json.loads(line) for line in r.body.splitlines() if line.strip()]
        mine = [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in evs
                if e["object"]["metadata"]["name"] == "e2e-etcd-ab"]
        assert mine == [("ADDED", made["metadata"]["resourceVersion"])], evs
        # and B serves it (its cache fed by its own etcd watch); an update on B with A's
        # resourceVersion succeeds, one with a stale revision conflicts
        assert api_b.ok("GET", f"{CMS}/e2e-etcd-ab")["metadata"]["uid"] == made["metadata"]["uid"]
        api_b.ok("PUT", f"{CMS}/e2e-etcd-ab", cm("e2e-etcd-ab", {"k": "b"}, made["metadata"]["resourceVersion"]))
        r = api_a.put(f"{CMS}/e2e-etcd-ab", cm("e2e-etcd-ab", {"k": "a"}, made["metadata"]["resourceVersion"]))
        assert r.status == 409, r
    finally:
        api_a.close()
        api_b.close()


SVCS = "/api/v1/namespaces/default/services"


def svc(name, cluster_ip=None, node_port=False):
    spec = {"ports": [{"port": 80, "protocol": "TCP"}], "type": "NodePort" if node_port else "ClusterIP"}
    if cluster_ip:
        spec["clusterIP"] = cluster_ip
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec}


def range_bits(etcd, key):
    """The offsets set in the RangeAllocation at key (bit i of its big-endian data = the range's
    i-th usable value), and its range."""
    import base64
    kv, _ = etcd_kv(etcd, key)
    assert kv, f"{key} is not in etcd"
    o = json.loads(base64.b64decode(kv["value"]))
    assert o["kind"] == "RangeAllocation" and o["apiVersion"] == "v1", o
    bits = bin(int.from_bytes(base64.b64decode(o.get("data") or ""), "big"))[2:][::-1]
    return {i for i, c in enumerate(bits) if c == "1"}, o["range"]


def ip_offset(ip):
    """10.96.0.0/12's i-th usable address (the network address is not one) -> i."""
    a = [int(x) for x in ip.split(".")]
    return ((a[0] << 24 | a[1] << 16 | a[2] << 8 | a[3]) - (10 << 24 | 96 << 16)) - 1


def create_services_concurrently(servers, prefix, per_server, node_port=False):
    """per_server Services through each server at once (a thread per request batch of 10);
    returns {name: spec} of every one created, asserting each got 201."""
    out, errors, lock = {}, [], threading.Lock()

    def worker(server, names):
        api = server.api()
        try:
            for name in names:
                r = api.post(SVCS, svc(name, node_port=node_port))
                with lock:
                    if r.status == 201:
                        out[name] = r.json()["spec"]
                    else:
                        errors.append((name, r.status, r.body[:300]))
        finally:
            api.close()

    threads = []
    for si, server in enumerate(servers):
        names = [f"{prefix}-{si}-{i}" for i in range(per_server)]
        for k in range(0, per_server, 10):
            threads.append(threading.Thread(target=worker, args=(server, names[k:k + 10])))
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:5]
    return out


@pytest.mark.slow
def test_two_apiservers_allocating_at_once_give_distinct_cluster_ips(etcd, pair):
    """100 Services through A and 100 through B at the same time (20 clients): 200 distinct
    cluster IPs, each marked in the shared RangeAllocation etcd holds; then 40 NodePort Services
    the same way: distinct node ports, marked in theirs."""
    a, b = pair
    made = create_services_concurrently([a, b], "e2e-alloc", 100)
    ips = [spec["clusterIP"] for spec in made.values()]
    assert len(ips) == 200 and len(set(ips)) == 200, sorted(ips)
    bits, rng = range_bits(etcd, "/registry/ranges/serviceips")
    assert rng == "10.96.0.0/12"
    assert {ip_offset(ip) for ip in ips} <= bits
    ports = create_services_concurrently([a, b], "e2e-np", 20, node_port=True)
    nps = [spec["ports"][0]["nodePort"] for spec in ports.values()]
    assert len(nps) == 40 and len(set(nps)) == 40, sorted(nps)
    pbits, prng = range_bits(etcd, "/registry/ranges/servicenodeports")
    assert prng == "30000-32767" and {p - 30000 for p in nps} <= pbits


def test_shared_allocations_across_two_apiservers(etcd, pair):
    """10 Services through each of A and B at once get distinct addresses, all marked in the
    shared bitmap; a delete through B releases its address before it answers, so A hands it out
    again at once and B then refuses it; a create that fails leaves nothing set."""
    a, b = pair
    made = create_services_concurrently([a, b], "e2e-share", 10)
    ips = [spec["clusterIP"] for spec in made.values()]
    assert len(set(ips)) == 20, sorted(ips)
    assert {ip_offset(ip) for ip in ips} <= range_bits(etcd, "/registry/ranges/serviceips")[0]
    api_a, api_b = a.api(), b.api()
    try:
        name, spec = next(iter(made.items()))
        api_b.ok("DELETE", f"{SVCS}/{name}")
        assert ip_offset(spec["clusterIP"]) not in range_bits(etcd, "/registry/ranges/serviceips")[0]
        again = api_a.ok("POST", SVCS, svc("e2e-share-again", spec["clusterIP"]))
        assert again["spec"]["clusterIP"] == spec["clusterIP"]
        r = api_b.post(SVCS, svc("e2e-share-dup", spec["clusterIP"]))
        assert r.status == 422 and "provided IP is already allocated" in r.body.decode(), r
        # a create refused by validation after its allocation leaves the address free, for B too
        free_ip = "10.96.0.77"
        assert ip_offset(free_ip) not in range_bits(etcd, "/registry/ranges/serviceips")[0]
        bad = svc("e2e-share-bad", free_ip)
        bad["spec"]["ports"][0]["port"] = 70000
        assert api_a.post(SVCS, bad).status == 422
        assert api_b.ok("POST", SVCS, svc("e2e-share-77", free_ip))["spec"]["clusterIP"] == free_ip
        # a dry run takes nothing
        assert api_a.ok("POST", f"{SVCS}?dryRun=All", svc("e2e-share-dry", "10.96.0.78"))["spec"]["clusterIP"] == "10.96.0.78"
        assert ip_offset("10.96.0.78") not in range_bits(etcd, "/registry/ranges/serviceips")[0]
        # a node port let go by an update (NodePort -> ClusterIP) is released
        np = api_a.ok("POST", SVCS, svc("e2e-share-np", node_port=True))
        port = np["spec"]["ports"][0]["nodePort"]
        assert port - 30000 in range_bits(etcd, "/registry/ranges/servicenodeports")[0]
        np["spec"]["type"] = "ClusterIP"
        api_b.ok("PUT", f"{SVCS}/e2e-share-np", np)
        assert port - 30000 not in range_bits(etcd, "/registry/ranges/servicenodeports")[0]
    finally:
        api_a.close()
        api_b.close()


def test_a_missing_allocation_bitmap_is_rebuilt_from_the_services(etcd, pair, tmp_path):
    """The repair pass at start: with /registry/ranges/serviceips gone, an apiserver starting over
    the store writes it again from the Services stored there."""
    a, _ = pair
    api = a.api()
    try:
        made = api.ok("POST", SVCS, svc("e2e-repair"))["spec"]["clusterIP"]
    finally:
        api.close()
    etcd.ctl("del", "/registry/ranges/serviceips")
    c = apiserver_on(etcd, tmp_path / "c", pki_from=a.data_dir).start()
    try:
        bits, _ = range_bits(etcd, "/registry/ranges/serviceips")
        assert ip_offset(made) in bits and ip_offset("10.96.0.1") in bits, sorted(bits)[:20]
    finally:
        c.stop()


def test_writes_by_other_etcd_clients_reach_the_caches(etcd, pair):
    a, _ = pair
    # as kube-apiserver stores objects: JSON without metadata.resourceVersion
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "e2e-etcd-ext", "namespace": "default", "uid": "6c9b7d1e-0000-4000-8000-000000000001",
        "creationTimestamp": "2026-01-01T00:00:00Z"}, "data": {"from": "etcdctl"}}
    etcd.ctl("put", "/registry/configmaps/default/e2e-etcd-ext", json.dumps(obj))
    kv, _ = etcd_kv(etcd, "/registry/configmaps/default/e2e-etcd-ext")
    api = a.api()
    try:
        wait_for(lambda: api.get(f"{CMS}/e2e-etcd-ext").status == 200, 5, 0.05, "the etcdctl put served")
        got = api.ok("GET", f"{CMS}/e2e-etcd-ext")
        assert got["data"] == {"from": "etcdctl"} and got["metadata"]["resourceVersion"] == str(kv["mod_revision"]), got
        listed = [i for i in api.ok("GET", CMS)["items"] if i["metadata"]["name"] == "e2e-etcd-ext"]
        assert listed[0]["metadata"]["resourceVersion"] == str(kv["mod_revision"]), listed
        etcd.ctl("del", "/registry/configmaps/default/e2e-etcd-ext")
        wait_for(lambda: api.get(f"{CMS}/e2e-etcd-ext").status == 404, 5, 0.05, "the etcdctl delete served")
        # a value in kube-apiserver's protobuf envelope is left out, not served as a broken object
        subprocess.run([ETCDCTL, "--endpoints", etcd.endpoints, "put", "/registry/configmaps/default/e2e-etcd-pb"],
                       input=b"k8s\x00\x0a\x0c\x0a\x02v1\x12\x06Secret", check=True, capture_output=True,
                       env={**os.environ, "ETCDCTL_API": "3"})
        api.ok("POST", CMS, cm("e2e-etcd-after-pb"))  # its revision is past the protobuf put's
        assert api.get(f"{CMS}/e2e-etcd-pb").status == 404
        assert "e2e-etcd-pb" not in {i["metadata"].get("name") for i in api.ok("GET", CMS)["items"]}
        assert "is kube-apiserver's protobuf that kite does not read (v1 Secret is not a kind kite reads from " \
               "protobuf under this key): left out" in a.proc.log_path.read_text()
    finally:
        api.close()


PB_MEDIA_TYPE = "application/vnd.kubernetes.protobuf"


def pb_varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7f | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def pb_bytes(field, data):
    data = data.encode() if isinstance(data, str) else data
    return pb_varint(field << 3 | 2) + pb_varint(len(data)) + data


def pb_uint(field, v):
    return pb_varint(field << 3) + pb_varint(v)


def kube_apiserver_configmap(name, uid, created, data):
    """A ConfigMap as kube-apiserver stores it with --storage-media-type=application/vnd.kubernetes.protobuf:
    "k8s\0" + runtime.Unknown {1 TypeMeta {1 apiVersion, 2 kind}, 2 raw, 3 contentEncoding, 4 contentType},
    raw a v1.ConfigMap {1 ObjectMeta, 2 data entries {1 key, 2 value}} with every field Go's
    marshaller writes (k8s.io/api and k8s.io/apimachinery generated.proto numbers)."""
    meta = (pb_bytes(1, name) + pb_bytes(2, "") + pb_bytes(3, "default") + pb_bytes(4, "") + pb_bytes(5, uid) +
            pb_bytes(6, "") + pb_uint(7, 0) + pb_bytes(8, pb_uint(1, created) + pb_uint(2, 0)))
    raw = pb_bytes(1, meta) + b"".join(pb_bytes(2, pb_bytes(1, k) + pb_bytes(2, v)) for k, v in sorted(data.items()))
    return (b"k8s\x00" + pb_bytes(1, pb_bytes(1, "v1") + pb_bytes(2, "ConfigMap")) + pb_bytes(2, raw) +
            pb_bytes(3, "") + pb_bytes(4, ""))


def etcd_value(etcd, key):
    import base64
    kv, _ = etcd_kv(etcd, key)
    return (base64.b64decode(kv["value"]), kv) if kv else (None, None)


@pytest.fixture(scope="module")
def pb_server(etcd, pair, tmp_path_factory):
    """A third apiserver of the pair's cluster writing kube-apiserver's protobuf envelope."""
    a, _ = pair
    p = apiserver_on(etcd, tmp_path_factory.mktemp("apiserver-pb"), pki_from=a.data_dir,
                     extra=["--storage-media-type", PB_MEDIA_TYPE]).start()
    yield p
    p.stop()


def test_protobuf_storage_is_read_by_kubectl_and_by_json_apiservers(etcd, pair, pb_server):
    a, b = pair
    key = "/registry/configmaps/default/e2e-etcd-pbw"
    pb_server.kubectl("create", "configmap", "e2e-etcd-pbw", "--from-literal=k=v", "--from-literal=a=b")
    value, kv = etcd_value(etcd, key)
    # kube-apiserver's envelope: magic, TypeMeta {v1, ConfigMap}, the object, contentEncoding and contentType empty
    assert value.startswith(b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09ConfigMap\x12"), value
    assert value.endswith(b"\x1a\x00\x22\x00"), value
    assert b"\x12\x06\x0a\x01k\x12\x01v" in value, value  # data's entries {1 key, 2 value}, not JSON
    # what etcdctl shows: the k8s\0 prefix
    shown = subprocess.run([ETCDCTL, "--endpoints", etcd.endpoints, "get", key, "--print-value-only"],
                           capture_output=True, check=True, env={**os.environ, "ETCDCTL_API": "3"}).stdout
    assert shown.startswith(b"k8s\x00"), shown
    # kubectl through the writer, and through the two JSON-configured apiservers on the same etcd
    for server in (pb_server, a, b):
        wait_for(lambda: server.kubectl("get", "configmap", "e2e-etcd-pbw", check=False).returncode == 0, 5, 0.05,
                 "the configmap served")
        got = json.loads(server.kubectl("get", "configmap", "e2e-etcd-pbw", "-o", "json").stdout)
        assert got["data"] == {"k": "v", "a": "b"}, got
        assert got["metadata"]["resourceVersion"] == str(kv["mod_revision"]), (got, kv)
        assert got["metadata"]["uid"] and got["metadata"]["creationTimestamp"], got
    # a pod (every field of its schema) through protobuf both ways
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "e2e-etcd-pbw-pod", "labels": {"app": "pb"}},
           "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "9"],
                                    "env": [{"name": "E", "value": "1"}],
                                    "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}}]}}
    pb_server.kubectl("create", "-f", "-", input=json.dumps(pod))
    value, _ = etcd_value(etcd, "/registry/pods/default/e2e-etcd-pbw-pod")
    assert value.startswith(b"k8s\x00\x0a\x09\x0a\x02v1\x12\x03Pod"), value
    wait_for(lambda: a.kubectl("get", "pod", "e2e-etcd-pbw-pod", check=False).returncode == 0, 5, 0.05, "the pod on A")
    via_a = json.loads(a.kubectl("get", "pod", "e2e-etcd-pbw-pod", "-o", "json").stdout)
    via_pb = json.loads(pb_server.kubectl("get", "pod", "e2e-etcd-pbw-pod", "-o", "json").stdout)
    assert via_a == via_pb, (via_a, via_pb)
    c = via_a["spec"]["containers"][0]
    assert c["env"] == [{"name": "E", "value": "1"}] and c["resources"]["limits"] == {"cpu": "100m", "memory": "64Mi"}, c
    assert via_a["metadata"]["labels"] == {"app": "pb"} and via_a["spec"]["restartPolicy"] == "Always", via_a
    # a JSON-configured apiserver writes JSON over it; the protobuf one reads that too
    a.kubectl("label", "configmap", "e2e-etcd-pbw", "by=a")
    value, _ = etcd_value(etcd, key)
    assert json.loads(value)["metadata"]["labels"] == {"by": "a"}, value
    wait_for(lambda: json.loads(pb_server.kubectl("get", "configmap", "e2e-etcd-pbw", "-o", "json").stdout)
             ["metadata"].get("labels") == {"by": "a"}, 5, 0.1, "the JSON update seen by the protobuf writer")
    # and its next write is the envelope again
    pb_server.kubectl("label", "configmap", "e2e-etcd-pbw", "by=pb", "--overwrite")
    assert etcd_value(etcd, key)[0].startswith(b"k8s\x00"), "written back as protobuf"
    wait_for(lambda: json.loads(b.kubectl("get", "configmap", "e2e-etcd-pbw", "-o", "json").stdout)
             ["metadata"].get("labels") == {"by": "pb"}, 5, 0.1, "the protobuf update seen by B")
    pb_server.kubectl("delete", "configmap", "e2e-etcd-pbw")
    pb_server.kubectl("delete", "pod", "e2e-etcd-pbw-pod", "--wait=false")


def test_an_envelope_put_with_etcdctl_is_served(etcd, pair):
    a, _ = pair
    key = "/registry/configmaps/default/e2e-etcd-kube-pb"
    value = kube_apiserver_configmap("e2e-etcd-kube-pb", "6c9b7d1e-0000-4000-8000-000000000003", 1767225600,
                                     {"from": "kube-apiserver", "x": "y"})
    subprocess.run([ETCDCTL, "--endpoints", etcd.endpoints, "put", key], input=value, check=True,
                   capture_output=True, env={**os.environ, "ETCDCTL_API": "3"})
    _, kv = etcd_value(etcd, key)
    api = a.api()
    try:
        wait_for(lambda: api.get(f"{CMS}/e2e-etcd-kube-pb").status == 200, 5, 0.05, "the envelope served")
        got = api.ok("GET", f"{CMS}/e2e-etcd-kube-pb")
        assert got["kind"] == "ConfigMap" and got["apiVersion"] == "v1", got
        assert got["data"] == {"from": "kube-apiserver", "x": "y"}, got
        m = got["metadata"]
        assert (m["uid"], m["creationTimestamp"], m["namespace"]) == (
            "6c9b7d1e-0000-4000-8000-000000000003", "2026-01-01T00:00:00Z", "default"), m
        assert m["resourceVersion"] == str(kv["mod_revision"]) and "generation" not in m, m
        listed = [i for i in api.ok("GET", CMS)["items"] if i["metadata"]["name"] == "e2e-etcd-kube-pb"]
        assert listed and listed[0]["data"] == got["data"], listed
        # a write through the JSON-configured apiserver replaces it with JSON
        upd = dict(got, data={"from": "kite"})
        api.ok("PUT", f"{CMS}/e2e-etcd-kube-pb", upd)
        assert json.loads(etcd_value(etcd, key)[0])["data"] == {"from": "kite"}
        api.ok("DELETE", f"{CMS}/e2e-etcd-kube-pb")
    finally:
        api.close()


def test_compacted_revisions_answer_410(etcd, pair):
    a, b = pair
    api, api_b = a.api(), b.api()
    try:
        old = api.ok("POST", CMS, cm("e2e-etcd-c1"))["metadata"]["resourceVersion"]
        new = api.ok("POST", CMS, cm("e2e-etcd-c2"))["metadata"]["resourceVersion"]
        etcd.ctl("compaction", new)
        # a list at a compacted revision: 410 Expired, read from etcd
        r = api.get(f"{CMS}?resourceVersion={old}&resourceVersionMatch=Exact")
        assert r.status == 410 and r.json()["reason"] == "Expired", r
        # at the compaction revision itself it still reads
        items = api.ok("GET", f"{CMS}?resourceVersion={new}&resourceVersionMatch=Exact")["items"]
        assert {"e2e-etcd-c1", "e2e-etcd-c2"} <= {i["metadata"]["name"] for i in items}
        # a watch from before B's cache was loaded (B started on a store A had filled): 410, the
        # client relists, as with kube-apiserver's cacher after a restart
        r = api_b.get(f"{CMS}?watch=true&timeoutSeconds=1&resourceVersion=2")
        evs = [json.loads(line) for line in r.body.splitlines() if line.strip()]
        assert r.status == 200 and evs[0]["type"] == "ERROR" and evs[0]["object"]["code"] == 410, (r, evs)
        # A, whose cache holds every change since etcd's first revision, still serves it
        r = api.get(f"{CMS}?watch=true&timeoutSeconds=1&resourceVersion=2")
        evs = [json.loads(line) for line in r.body.splitlines() if line.strip()]
        assert r.status == 200 and "e2e-etcd-c1" in {e["object"]["metadata"].get("name") for e in evs}, evs
    finally:
        api.close()
        api_b.close()


def test_a_watch_compacted_away_is_resynchronized(etcd, pair, tmp_path):
    """C reaches etcd through a proxy; while the proxy is down A updates, deletes and creates, and
    etcd is compacted past C's watch. When C reconnects its watch is refused (compacted): it reads
    everything again and its caches, and its watchers, get the difference."""
    a, _ = pair
    proxy = Proxy(etcd.members[0]["client"]).resume()
    c = Cluster("apiserver", tmp_path, extra_args=["--etcd-servers", f"http://127.0.0.1:{proxy.port}",
                                                   "--etcd-healthcheck-timeout", "1s"])
    shutil.copytree(a.data_dir / "pki", c.data_dir / "pki")
    c.start()
    api, api_c = a.api(), c.api()
    try:
        api.ok("POST", CMS, cm("e2e-etcd-r1"))
        api.ok("POST", CMS, cm("e2e-etcd-r2"))
        wait_for(lambda: api_c.get(f"{CMS}/e2e-etcd-r2").status == 200, 5, 0.05, "C has r2")
        rv_before = api_c.ok("GET", CMS)["metadata"]["resourceVersion"]
        proxy.cut()
        wait_for(lambda: api_c.get("/readyz").status == 500, 8, 0.1, "C not ready")
        api.ok("PATCH", f"{CMS}/e2e-etcd-r1", {"data": {"k": "changed"}}, ctype="application/merge-patch+json")
        api.ok("DELETE", f"{CMS}/e2e-etcd-r2")
        made = api.ok("POST", CMS, cm("e2e-etcd-r3"))
        etcd.ctl("compaction", made["metadata"]["resourceVersion"])
        proxy.resume()
        wait_for(lambda: api_c.get("/readyz").status == 200, 10, 0.1, "C ready again")
        wait_for(lambda: api_c.get(f"{CMS}/e2e-etcd-r3").status == 200, 5, 0.05, "C has r3")
        assert api_c.ok("GET", f"{CMS}/e2e-etcd-r1")["data"] == {"k": "changed"}
        assert api_c.get(f"{CMS}/e2e-etcd-r2").status == 404
        r = api_c.get(f"{CMS}?watch=true&timeoutSeconds=1&resourceVersion={rv_before}")
        evs = [json.loads(line) for line in r.body.splitlines() if line.strip()]
        got = sorted((e["type"], e["object"]["metadata"]["name"]) for e in evs)
        assert got == [("ADDED", "e2e-etcd-r3"), ("DELETED", "e2e-etcd-r2"), ("MODIFIED", "e2e-etcd-r1")], evs
        assert "resynchronized" in c.proc.log_path.read_text()
    finally:
        api.close()
        api_c.close()
        c.stop()
        proxy.close()


def test_events_get_a_shared_etcd_lease(etcd, pair):
    """Events are stored with an etcd lease for --event-ttl (1 h) plus the reuse window (60 s), one
    lease shared by the events of that window, as kube-apiserver does."""
    a, _ = pair
    api = a.api()
    try:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())  # recent: the TTL clean-up leaves them
        for name in ("e2e-etcd-ev1", "e2e-etcd-ev2"):
            api.ok("POST", "/api/v1/namespaces/default/events", {
                "apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
                "involvedObject": {"kind": "ConfigMap", "name": "x", "namespace": "default"},
                "reason": "Test", "message": "m", "type": "Normal",
                "firstTimestamp": now, "lastTimestamp": now, "count": 1})
        leases = [etcd_kv(etcd, f"/registry/events/default/{n}")[0].get("lease") for n in ("e2e-etcd-ev1", "e2e-etcd-ev2")]
        assert leases[0] and leases[0] == leases[1], leases
        ttl = json.loads(etcd.ctl("lease", "timetolive", format(int(leases[0]), "x"), "-w", "json").stdout)
        assert ttl["granted-ttl"] == 3600 + 60 and 3600 < ttl["ttl"] <= 3660, ttl
        # other kinds get none
        assert not etcd_kv(etcd, "/registry/services/specs/default/kubernetes")[0].get("lease")
    finally:
        api.close()


def kite_nodes(c):
    p = subprocess.run([KITE, "nodes", "--kubeconfig", str(c.kubeconfig), "-o", "json"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    return {i["name"]: i for i in json.loads(p.stdout)["items"]}


IDENTITIES = "/apis/coordination.k8s.io/v1/namespaces/kite-node-identities/leases"


def test_orphan_identity_calling_only_b_is_reported_by_a(pair):
    """A node credential calling only apiserver B while its Node does not exist is OrphanMachine in
    `kite nodes` asked of A: B publishes the identity as a Lease in kite-node-identities, which A
    merges from its watch cache; once the Node exists the Lease is deleted and ignored."""
    a, b = pair
    name = "e2e-etcd-orphan"
    kc = b.workdir / f"{name}.kubeconfig"
    subprocess.run([KITE, "kubeconfig", "--data-dir", str(b.data_dir), "--node", name, "-o", str(kc)],
                   check=True, capture_output=True, timeout=30)
    machine = Api("127.0.0.1", b.port, TLSIdentity(kc, b.workdir).ctx)
    api = a.api()
    try:
        r = machine.get(f"/api/v1/nodes/{name}")
        assert r.status == 404, r.status
        wait_for(lambda: kite_nodes(a).get(name, {}).get("state") == "OrphanMachine", 8, 0.2,
                 f"{name} OrphanMachine on A")
        item = kite_nodes(a)[name]
        assert not item["hasNode"] and "no Node object" in item["evidence"], item
        assert f"/api/v1/nodes/{name}" in item["evidence"], item
        lease = api.ok("GET", f"{IDENTITIES}/{name}")
        assert lease["spec"]["holderIdentity"] == f"system:node:{name}", lease
        # the Node comes: the identity is no longer an orphan, and its Lease goes
        api.ok("POST", "/api/v1/nodes", node_manifest(name))
        wait_for(lambda: api.get(f"{IDENTITIES}/{name}").status == 404, 8, 0.2, "identity Lease deleted")
        assert kite_nodes(a).get(name, {}).get("state") != "OrphanMachine"
    finally:
        api.delete(f"/api/v1/nodes/{name}")
        machine.close()
        api.close()


def test_readyz_follows_etcd(etcd, pair):
    """etcd stopped (SIGSTOP: no answer to the keepalive): /readyz fails its etcd check within the
    health-check timeout, writes fail instead of hanging; etcd back: ready again and writes work."""
    a, _ = pair
    api = a.api()
    proc = etcd.members[0]["proc"]
    try:
        proc.send_signal(signal.SIGSTOP)
        wait_for(lambda: api.get("/readyz").status == 500, 8, 0.1, "/readyz failing")
        r = api.get("/readyz?verbose")
        assert r.status == 500 and b"[-]etcd failed" in r.body and b"[+]ping ok" in r.body, r
        assert api.get("/readyz/etcd").status == 500
        proc.send_signal(signal.SIGCONT)
        wait_for(lambda: api.get("/readyz").status == 200, 10, 0.1, "/readyz ok again")
        assert b"[+]etcd ok" in api.get("/readyz?verbose").body
        api.ok("POST", CMS, cm("e2e-etcd-after"))
    finally:
        proc.send_signal(signal.SIGCONT)
        api.close()


def test_apiservers_take_turns_at_compaction(etcd, pair, tmp_path):
    """Two apiservers compacting every second take turns on kube-apiserver's compact_rev_key
    (a compare-and-swap on its version): every compaction etcd ran was claimed there first."""
    a, _ = pair
    log = etcd.workdir / "etcd-m0.log"
    before = log.read_text().count("finished scheduled compaction")
    v0 = json.loads(etcd.ctl("get", "compact_rev_key", "-w", "json").stdout).get("kvs", [{"version": 0}])[0]["version"]
    flags = ["--etcd-compaction-interval", "1s"]
    c1 = apiserver_on(etcd, tmp_path / "c1", pki_from=a.data_dir, extra=flags).start()
    c2 = apiserver_on(etcd, tmp_path / "c2", pki_from=a.data_dir, extra=flags).start()
    api = c1.api()
    try:
        for i in range(4):
            api.ok("POST", CMS, cm(f"e2e-etcd-t{i}"))
            time.sleep(0.4)

        def key():
            kvs = json.loads(etcd.ctl("get", "compact_rev_key", "-w", "json").stdout).get("kvs")
            return kvs and kvs[0]["version"] - v0 >= 2 and kvs[0]

        wait_for(key, 5, 0.2, "two rounds of compaction claimed")
        # counted before the claims are read again: a round claimed and run in between (the
        # apiservers' lease renewals keep the revision moving) is then in both
        ran = log.read_text().count("finished scheduled compaction") - before
        kv = key()
        assert 1 <= ran <= kv["version"] - v0, (ran, kv)
    finally:
        api.close()
        c2.stop()
        c1.stop()


def test_kite_up_over_an_external_etcd(etcd, tmp_path):
    """`kite up --etcd-servers`: a single node whose control plane stores in etcd (its own prefix);
    the agent's Node is Ready and lives under <prefix>/minions/."""
    # without the cluster DNS: its port 53 on the pod gateway is not what this test is about
    c = Cluster("up", tmp_path, extra_args=["--etcd-servers", etcd.endpoints, "--etcd-prefix", "/up",
                                            "--serve-dns=false", *AGENT_FAST_FLAGS])
    c.start()
    try:
        node = node_name_of_machine()
        wait_for(lambda: "True" in c.kubectl("get", "node", node, "-o",
                                             "jsonpath={.status.conditions[?(@.type=='Ready')].status}",
                                             check=False).stdout, 20, 0.2, "the node Ready")
        keys = etcd.ctl("get", "--prefix", "/up/minions/", "--keys-only").stdout.split()
        assert f"/up/minions/{node}" in keys, keys
        wait_for(lambda: etcd.ctl("get", "--prefix", "/up/leases/kube-node-lease/", "--keys-only").stdout.split(),
                 10, 0.2, "the node's Lease in etcd")
    finally:
        c.stop()


@pytest.mark.slow
def test_store_copy_sqlite_to_etcd_and_back(etcd, tmp_path):
    """kite store copy: a stopped SQLite cluster's objects into etcd (under a prefix of their own),
    served from there by an apiserver with the same pki; into a store that has objects: refused;
    back into a new SQLite file: the same objects."""
    src = Cluster("apiserver", tmp_path / "sqlite").start()
    api = src.api()
    made = api.ok("POST", CMS, cm("e2e-etcd-copied", {"k": "from-sqlite"}))
    api.close()
    src.stop()
    db = src.data_dir / "kite.db"
    to = f"etcd:{etcd.endpoints}"

    def copy(*args):
        return subprocess.run([KITE, "store", "copy", *args], capture_output=True, text=True, timeout=60)

    p = copy("--from", f"sqlite:{db}", "--to", to, "--etcd-prefix", "/copied")
    assert p.returncode == 0, p.stderr
    assert "copied" in p.stdout and "resourceVersions changed" in p.stdout, p.stdout
    keys = etcd.ctl("get", "--prefix", "/copied/", "--keys-only").stdout.split()
    assert "/copied/configmaps/default/e2e-etcd-copied" in keys and "/copied/minions/" not in keys, keys
    assert "/copied/services/specs/default/kubernetes" in keys, keys
    # again: the destination is not empty
    p = copy("--from", f"sqlite:{db}", "--to", to, "--etcd-prefix", "/copied")
    assert p.returncode == 1 and "holds objects already" in p.stderr, (p.stdout, p.stderr)
    dst = Cluster("apiserver", tmp_path / "on-etcd", extra_args=["--etcd-servers", etcd.endpoints,
                                                                  "--etcd-prefix", "/copied"])
    shutil.copytree(src.data_dir / "pki", dst.data_dir / "pki")
    dst.start()
    api = dst.api()
    try:
        got = api.ok("GET", f"{CMS}/e2e-etcd-copied")
        assert got["data"] == {"k": "from-sqlite"} and got["metadata"]["uid"] == made["metadata"]["uid"], got
        n_etcd = len(api.ok("GET", "/api/v1/namespaces")["items"])
    finally:
        api.close()
        dst.stop()
    # an object kube-apiserver stored as protobuf comes out as JSON, which SQLite serves
    subprocess.run([ETCDCTL, "--endpoints", etcd.endpoints, "put", "/copied/configmaps/default/e2e-etcd-copied-pb"],
                   input=kube_apiserver_configmap("e2e-etcd-copied-pb", "6c9b7d1e-0000-4000-8000-000000000004",
                                                  1767225600, {"k": "from-protobuf"}),
                   check=True, capture_output=True, env={**os.environ, "ETCDCTL_API": "3"})
    back = tmp_path / "back.db"
    p = copy("--from", to, "--to", f"sqlite:{back}", "--etcd-prefix", "/copied")
    assert p.returncode == 0, p.stderr
    again = Cluster("apiserver", tmp_path / "back", extra_args=["--store", f"sqlite:{back}"])
    shutil.copytree(src.data_dir / "pki", again.data_dir / "pki")
    again.start()
    api = again.api()
    try:
        assert api.ok("GET", f"{CMS}/e2e-etcd-copied")["data"] == {"k": "from-sqlite"}
        assert api.ok("GET", f"{CMS}/e2e-etcd-copied-pb")["data"] == {"k": "from-protobuf"}
        assert len(api.ok("GET", "/api/v1/namespaces")["items"]) == n_etcd
    finally:
        api.close()
        again.stop()


def make_tls(d):
    """A CA and one certificate (server and client use, IP SAN 127.0.0.1) for every member and the
    apiserver, with openssl."""
    d = Path(d)
    ext = d / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n"
                   "keyUsage=digitalSignature,keyEncipherment\n")

    def run(*a):
        subprocess.run(["openssl", *a], check=True, capture_output=True, cwd=str(d))

    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
        "-out", "ca.pem", "-days", "2", "-subj", "/CN=e2e-etcd-ca")
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "member.key",
        "-out", "member.csr", "-subj", "/CN=e2e-etcd-member")
    run("x509", "-req", "-in", "member.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "member.pem", "-days", "2", "-extfile", str(ext))
    return {"ca": str(d / "ca.pem"), "cert": str(d / "member.pem"), "key": str(d / "member.key")}


def leader_of(etcd):
    out = json.loads(etcd.ctl("endpoint", "status", "-w", "json").stdout)
    for st in out:
        if st["Status"]["header"]["member_id"] == st["Status"]["leader"]:
            port = int(st["Endpoint"].rsplit(":", 1)[1])
            return next(m for m in etcd.members if m["client"] == port)
    raise AssertionError(f"no leader: {out}")


@pytest.mark.slow
def test_leader_killed_under_writers_loses_no_acknowledged_write(tmp_path):
    """A 3-member etcd cluster with TLS; an apiserver knowing all three; 32 writers creating
    ConfigMaps; the etcd leader SIGKILLed. Every write answered 201 is in etcd and served; writes
    started 5 s after the kill all succeed; the apiserver's /readyz recovers."""
    tls = make_tls(tmp_path)
    etcd = Etcd(tmp_path / "etcd", n=3, tls=tls)
    (tmp_path / "etcd").mkdir()
    etcd.start()
    a = Cluster("apiserver", tmp_path / "a", extra_args=[
        "--etcd-servers", etcd.endpoints, "--etcd-cafile", tls["ca"], "--etcd-certfile", tls["cert"],
        "--etcd-keyfile", tls["key"], "--etcd-healthcheck-timeout", "1s"])
    try:
        a.start()
        stop = threading.Event()
        results = []  # (name, status, rv, started, ended)
        lock = threading.Lock()

        def writer(i):
            api = a.api()
            n = 0
            while not stop.is_set():
                name = f"w{i}-{n}"
                n += 1
                t0 = time.monotonic()
                try:
                    r = api.post(CMS, cm(name))
                    status, rv = r.status, (r.json()["metadata"]["resourceVersion"] if r.status == 201 else None)
                except Exception:  # a connection the server closed mid-write: not acknowledged
                    api.close()
                    api = a.api()
                    status, rv = -1, None
                with lock:
                    results.append((name, status, rv, t0, time.monotonic()))
            api.close()

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(32)]
        for t in threads:
            t.start()
        time.sleep(2)
        victim = leader_of(etcd)
        killed_at = time.monotonic()
        victim["proc"].kill()
        victim["proc"].wait()
        time.sleep(8)
        stop.set()
        for t in threads:
            t.join(30)
        acked = {name: rv for name, status, rv, _, _ in results if status == 201}
        before = [r for r in results if r[3] < killed_at]
        late = [r for r in results if r[3] >= killed_at + 5]
        assert len(before) > 50 and len(late) > 50, (len(before), len(late))
        failed_late = [r for r in late if r[1] != 201]
        assert not failed_late, failed_late[:10]
        assert max(r[4] - r[3] for r in late) < 5, "a write after the failover took 5 s or more"
        # every acknowledged write is in etcd, at the revision the client was given
        live = [m for m in etcd.members if m is not victim]
        eps = ",".join(etcd.url(m) for m in live)
        out = json.loads(etcd.ctl("get", "--prefix", "/registry/configmaps/default/w", "-w", "json",
                                  endpoints=eps).stdout)
        import base64
        stored = {base64.b64decode(kv["key"]).decode().rsplit("/", 1)[1]: str(kv["mod_revision"])
                  for kv in out.get("kvs", [])}
        lost = [n for n, rv in acked.items() if stored.get(n) != rv]
        assert not lost, f"{len(lost)} acknowledged writes lost: {lost[:10]}"
        api = a.api()
        try:
            wait_for(lambda: api.get("/readyz").status == 200, 10, 0.1, "/readyz ok after the failover")
            # in pages: thousands of ConfigMaps in one answer took longer than the client's
            # timeout under the sanitizers on a loaded machine
            served, cont = set(), ""
            while True:
                page = api.ok("GET", f"{CMS}?limit=500" + (f"&continue={urllib.parse.quote(cont)}" if cont else ""))
                served |= {i["metadata"]["name"] for i in page["items"]}
                cont = page["metadata"].get("continue")
                if not cont:
                    break
            assert set(acked) <= served
        finally:
            api.close()
    finally:
        a.stop()
        etcd.stop()


# ---- several apiservers behind a load balancer, as a kubeadm HA control plane -----------------

HAPROXY = shutil.which("haproxy") or (os.path.exists("/usr/sbin/haproxy") and "/usr/sbin/haproxy")
LEASE_TTL = 3  # --endpoint-lease-ttl of the HA cluster's apiservers


class Haproxy:
    """Debian's haproxy in TCP mode on a port of its own, in front of apiservers (TLS passes
    through: clients check the apiservers' certificate, whose SAN 127.0.0.1 fits), with health
    checks every 500 ms; a backend marked down has its sessions shut."""

    def __init__(self, workdir, ports):
        self.workdir = Path(workdir)
        self.port = free_port()
        servers = "\n".join(f"    server s{i} 127.0.0.1:{p} check inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions"
                            for i, p in enumerate(ports))
        self.cfg = self.workdir / "haproxy.cfg"
        self.cfg.write_text(f"""global
    maxconn 4096
defaults
    mode tcp
    timeout connect 2s
    timeout client 1h
    timeout server 1h
    retries 2
    option redispatch
frontend apiservers
    bind 127.0.0.1:{self.port}
    default_backend apiservers
backend apiservers
    balance roundrobin
{servers}
""")
        self.proc = None

    def start(self):
        log = open(self.workdir / "haproxy.log", "ab")
        self.proc = subprocess.Popen([HAPROXY, "-db", "-f", str(self.cfg)], stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=log, start_new_session=True)
        log.close()

        def up():
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                return False
        wait_for(up, 10, 0.1, "haproxy listening")
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def kubeconfig(self, src, direct_port, dest):
        """src (a kubeconfig naming https://127.0.0.1:direct_port) written to dest naming haproxy."""
        text = Path(src).read_text()
        assert f"https://127.0.0.1:{direct_port}" in text, text[:300]
        Path(dest).write_text(text.replace(f"https://127.0.0.1:{direct_port}", f"https://127.0.0.1:{self.port}"))
        return dest


def kubernetes_endpoints(api):
    """(address, port) of every endpoint the kubernetes Service's EndpointSlices list."""
    out = set()
    sl = api.ok("GET", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
                       "?labelSelector=kubernetes.io%2Fservice-name%3Dkubernetes")
    for s in sl["items"]:
        for p in s.get("ports") or []:
            for e in s.get("endpoints") or []:
                for a in e["addresses"]:
                    out.add((a, p["port"]))
    return out


def node_ready(node):
    return next((c["status"] for c in node.get("status", {}).get("conditions", []) if c["type"] == "Ready"), None)


@pytest.mark.slow
@pytest.mark.skipif(not HAPROXY, reason="haproxy is not installed: scripts/install-deps installs Debian's haproxy")
def test_ha_control_plane_behind_haproxy_survives_an_apiserver(tmp_path):
    """A 3-member etcd cluster with TLS; apiservers A and B (B with A's pki/) behind haproxy; a
    controller-manager, a scheduler and 2 agents all through haproxy. Both apiservers hold an
    identity Lease and are listed by the kubernetes Service; a write through A is seen by a watch
    on B; A SIGKILLed: the Service drops A within its lease, the nodes stay Ready (their lease
    renewals reach B through haproxy) and the control plane keeps working (a pod is scheduled)."""
    tls = make_tls(tmp_path)
    (tmp_path / "etcd").mkdir()
    etcd = Etcd(tmp_path / "etcd", n=3, tls=tls)
    procs, clusters = [], []
    etcd.start()
    try:
        flags = ["--etcd-servers", etcd.endpoints, "--etcd-cafile", tls["ca"], "--etcd-certfile", tls["cert"],
                 "--etcd-keyfile", tls["key"], "--endpoint-lease-ttl", f"{LEASE_TTL}s"]
        a = Cluster("apiserver", tmp_path / "a", extra_args=flags)
        clusters.append(a)
        a.start()
        shutil.copytree(a.data_dir / "pki", tmp_path / "b" / "data" / "pki")
        b = Cluster("apiserver", tmp_path / "b", extra_args=flags)
        clusters.append(b)
        b.start()
        lb = Haproxy(tmp_path, [a.port, b.port]).start()
        procs.append(lb)
        cm_kc = lb.kubeconfig(a.data_dir / "controller-manager.kubeconfig", a.port, tmp_path / "cm.kubeconfig")
        sched_kc = lb.kubeconfig(a.data_dir / "scheduler.kubeconfig", a.port, tmp_path / "sched.kubeconfig")
        procs.append(KiteProcess(["controller-manager", "--kubeconfig", str(cm_kc), "--node-monitor-grace-period", "6s",
                                  "--node-monitor-period", "1s"], tmp_path, "controller-manager").start())
        procs.append(KiteProcess(["scheduler", "--kubeconfig", str(sched_kc)], tmp_path, "scheduler").start())
        nodes = ["e2e-ha-n1", "e2e-ha-n2"]
        for n in nodes:
            p = subprocess.run([KITE, "kubeconfig", "--data-dir", str(a.data_dir), "--node", n], capture_output=True,
                               text=True, timeout=20)
            assert p.returncode == 0, p.stderr
            (tmp_path / f"{n}.direct").write_text(p.stdout)
            kc = lb.kubeconfig(tmp_path / f"{n}.direct", a.port, tmp_path / f"{n}.kubeconfig")
            procs.append(KiteProcess(["agent", "--kubeconfig", str(kc), "--node-name", n, "--root-dir",
                                      str(tmp_path / f"root-{n}"), "--port", "0", *pod_network_flags(),
                                      *AGENT_FAST_FLAGS], tmp_path, f"agent-{n}").start())
        api_b = b.api()
        api_a = a.api()
        wait_for(lambda: all(node_ready(api_b.ok("GET", f"/api/v1/nodes/{n}")) == "True"
                             if api_b.get(f"/api/v1/nodes/{n}").status == 200 else False for n in nodes),
                 40, 0.5, "both nodes Ready")
        # every apiserver: an identity lease and an endpoint of the kubernetes Service
        ids = api_b.ok("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
                              "?labelSelector=apiserver.kubernetes.io%2Fidentity%3Dkube-apiserver")["items"]
        assert len(ids) == 2 and all(i["metadata"]["name"].startswith("apiserver-") for i in ids), ids
        wait_for(lambda: kubernetes_endpoints(api_b) == {("127.0.0.1", a.port), ("127.0.0.1", b.port)}, 10, 0.2,
                 "the kubernetes Service lists A and B")

        # a write through A is seen by a watch on B
        rv = api_b.ok("GET", CMS)["metadata"]["resourceVersion"]
        got = {}
        t = threading.Thread(target=lambda: got.setdefault(
            "r", b.api().get(f"{CMS}?watch=true&timeoutSeconds=3&resourceVersion={rv}")))
        t.start()
        time.sleep(0.5)
        made = api_a.ok("POST", CMS, cm("e2e-ha-ab"))
        t.join()
        evs = [json.loads(line) for line in got["r"].body.splitlines() if line.strip()]
        assert ("ADDED", made["metadata"]["resourceVersion"]) in [
            (e["type"], e["object"]["metadata"]["resourceVersion"]) for e in evs
            if e["object"]["metadata"]["name"] == "e2e-ha-ab"], evs
        api_a.close()

        # A dies
        a.kill9()
        killed = time.monotonic()
        wait_for(lambda: kubernetes_endpoints(api_b) == {("127.0.0.1", b.port)}, LEASE_TTL + 5, 0.2,
                 "the kubernetes Service drops A")
        dropped = time.monotonic() - killed
        assert dropped <= LEASE_TTL + 2, dropped
        # the nodes stay Ready past the controller-manager's grace period, their leases renewed
        # through haproxy by B
        renewed = {n: api_b.ok("GET", f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{n}")
                   ["spec"]["renewTime"] for n in nodes}
        end = time.monotonic() + 9
        while time.monotonic() < end:
            for n in nodes:
                assert node_ready(api_b.ok("GET", f"/api/v1/nodes/{n}")) == "True", n
            time.sleep(0.5)
        for n in nodes:
            lease = api_b.ok("GET", f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{n}")
            assert lease["spec"]["renewTime"] > renewed[n], (n, lease["spec"], renewed[n])
        # the scheduler (through haproxy, now to B) still binds pods
        api_b.ok("POST", "/api/v1/namespaces/default/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "e2e-ha-pod"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
        wait_for(lambda: api_b.ok("GET", "/api/v1/namespaces/default/pods/e2e-ha-pod")["spec"].get("nodeName") in nodes,
                 20, 0.2, "the pod scheduled after A's death")
        api_b.close()
    finally:
        for p in reversed(procs):
            p.stop()
        for c in clusters:
            c.stop()
        etcd.stop()
