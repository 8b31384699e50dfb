"""Fixtures for kite's end-to-end tests: real kite processes on 127.0.0.1, driven by the machine's
kubectl, python3-kubernetes and raw HTTPS.

Run with /usr/bin/python3 (Debian's python3-kubernetes and python3-pytest live there):
    KITE=$PWD/build/kite /usr/bin/python3 -m pytest -q tests/e2e

Every process a test starts is registered here; when a test fails, the tail of each live
process's log is attached to the report, and every process is killed at teardown.

The store: every `kite up` and `kite apiserver` a test starts stores in SQLite (its data dir's
kite.db), or, with KITE_TEST_STORE=etcd, in a real etcd (Debian's etcd-server): one etcd per
pytest worker, started at the first cluster on ports and a data dir of the worker's own, each
cluster under its own key prefix (derived from its data dir, so a cluster restarted on the same
data dir finds its objects), its values JSON, or kube-apiserver's protobuf envelope with
KITE_TEST_STORAGE_MEDIA_TYPE=application/vnd.kubernetes.protobuf (--storage-media-type). Tests
that name a store themselves (--etcd-servers, --store) keep it.
Modules marked `pytest.mark.both_stores` run their `apiserver`/`fresh_apiserver` tests once on
each store (the `store` fixture's parameter; the etcd pass is marked slow), whatever KITE_TEST_STORE says.
"""
import base64
import hashlib
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
KITE = os.environ.get("KITE") or str(REPO / "build" / "kite")
KUBECTL = os.environ.get("KUBECTL") or "/usr/bin/kubectl"
# Every kubectl call and HTTP request gets a timeout so a hung server fails a test, not the run.
KUBECTL_TIMEOUT = 30
HTTP_TIMEOUT = 15
READY_TIMEOUT = 30

_live_procs = []  # every KiteProcess not yet stopped
_port_lock = threading.Lock()
_ports_given = set()

# pytest-xdist runs the tests in WORKERS processes ("gw0", "gw1", ...; `make test` runs -n 3).
# Whatever a test takes from the machine (ports, pod bridges and CIDRs) comes from its worker's
# own share, so no two workers ever pick the same one.
WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0)
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
MAX_WORKERS = 8
_PORT_LO, _PORT_HI = 20000, 32000

STORES = ("sqlite", "etcd")
TEST_STORE = os.environ.get("KITE_TEST_STORE", "sqlite")
if TEST_STORE not in STORES:
    raise RuntimeError(f"KITE_TEST_STORE={TEST_STORE!r}: give one of {', '.join(STORES)}")
STORAGE_MEDIA_TYPE = os.environ.get("KITE_TEST_STORAGE_MEDIA_TYPE")  # etcd's values; None: kite's default
ETCD_BIN = shutil.which("etcd")
ETCD_MISSING = ("etcd is not installed: scripts/install-deps installs Debian's etcd-server and etcd-client "
                "(these tests run on etcd)")


def free_port():
    """A free TCP port on 127.0.0.1 below 32768: the ephemeral range (>=32768) clashes with
    TIME_WAIT sockets of the many client connections these tests open (kubectl-wire.md §0).
    Under xdist each worker draws from its own slice of 20000-32000."""
    span = (_PORT_HI - _PORT_LO) // MAX_WORKERS
    lo = _PORT_LO + (WORKER % MAX_WORKERS) * span
    with _port_lock:
        for _ in range(1000):
            port = random.randint(lo, lo + span - 1)
            if port in _ports_given:
                continue
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            finally:
                s.close()
            _ports_given.add(port)
            return port
    raise RuntimeError("no free port below 32768")


def _kubeconfig_user(path):
    """(server, ca_pem or None, insecure, cert_pem, key_pem, token) of a kubeconfig's current context."""
    cfg = yaml.safe_load(Path(path).read_text())
    ctx_name = cfg.get("current-context") or cfg["contexts"][0]["name"]
    ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
    cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
    user = next(u["user"] for u in cfg["users"] if u["name"] == ctx["user"])
    base = Path(path).parent

    def data(obj, key):
        if obj.get(key + "-data"):
            return base64.b64decode(obj[key + "-data"])
        if obj.get(key):
            p = Path(obj[key])
            return (p if p.is_absolute() else base / p).read_bytes()
        return None

    return (cluster["server"], data(cluster, "certificate-authority"),
            bool(cluster.get("insecure-skip-tls-verify")),
            data(user, "client-certificate"), data(user, "client-key"), user.get("token"))


class TLSIdentity:
    """An ssl.SSLContext built from a kubeconfig (client cert + CA), kept with its temp files."""

    def __init__(self, kubeconfig, workdir, with_client_cert=True):
        server, ca, insecure, cert, key, token = _kubeconfig_user(kubeconfig)
        self.server = server
        self.token = token
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.set_alpn_protocols(["http/1.1"])
        if ca and not insecure:
            ctx.load_verify_locations(cadata=ca.decode())
            ctx.check_hostname = False  # the cert has SAN IP:127.0.0.1; no SNI for IPs anyway
        else:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if with_client_cert and cert and key:
            d = Path(tempfile.mkdtemp(dir=workdir, prefix="tls-"))
            (d / "c.pem").write_bytes(cert)
            (d / "k.pem").write_bytes(key)
            ctx.load_cert_chain(str(d / "c.pem"), str(d / "k.pem"))
        self.ctx = ctx


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # dict, lower-cased names
        self.body = body

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return f"<Response {self.status} {self.body[:300]!r}>"


class Api:
    """Minimal HTTPS client for raw requests (one keep-alive connection per Api object)."""

    def __init__(self, host, port, ctx, token=None):
        self.host, self.port, self.ctx, self.token = host, port, ctx, token
        self.conn = None

    def connect(self):
        self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=HTTP_TIMEOUT)
        return self.conn

    def close(self):
        if self.conn:
            self.conn.close()
            self.conn = None

    def request(self, method, path, body=None, ctype=None, headers=None):
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
            ctype = ctype or "application/json"
        if isinstance(body, str):
            body = body.encode()
        h = {"Accept": "application/json"}
        if ctype:
            h["Content-Type"] = ctype
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        h.update(headers or {})
        for attempt in range(2):
            if self.conn is None:
                self.connect()
            try:
                self.conn.request(method, path, body=body, headers=h)
                r = self.conn.getresponse()
                data = r.read()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # a keep-alive connection the server closed while idle: retry once on a new one
                self.close()
                if attempt:
                    raise
        resp = Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
        if r.will_close:
            self.close()
        return resp

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.request("POST", path, body=body, **kw)

    def put(self, path, body, **kw):
        return self.request("PUT", path, body=body, **kw)

    def patch(self, path, body, ctype="application/strategic-merge-patch+json", **kw):
        return self.request("PATCH", path, body=json.dumps(body) if not isinstance(body, (str, bytes)) else body,
                            ctype=ctype, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def ok(self, method, path, body=None, **kw):
        """Request that must succeed (2xx); returns the parsed JSON body."""
        r = self.request(method, path, body=body, **kw)
        assert 200 <= r.status < 300, f"{method} {path} -> {r.status}: {r.body[:2000]!r}"
        return r.json()


# What a sanitizer prints when it reports: ASan, LeakSanitizer (at exit), UBSan, ThreadSanitizer.
SANITIZER_MARKS = (b"ERROR: AddressSanitizer", b"ERROR: LeakSanitizer", b"runtime error:",
                   b"WARNING: ThreadSanitizer", b"FATAL: ThreadSanitizer")


def sanitizer_report(data):
    """The text of data (a log's bytes) from the line of its first sanitizer report on, or None."""
    at = min((i for i in (data.find(m) for m in SANITIZER_MARKS) if i >= 0), default=-1)
    if at < 0:
        return None
    return data[data.rfind(b"\n", 0, at) + 1:].decode(errors="replace")


class KiteProcess:
    """One kite subcommand running in the foreground, its stdout+stderr in a log file."""

    def __init__(self, args, workdir, name):
        self.args = [KITE] + list(args)
        self.workdir = Path(workdir)
        self.name = name
        self.proc = None
        self.log_path = self.workdir / f"{name}.log"
        self.starts = 0

    def start(self):
        self.starts += 1
        log = open(self.log_path, "ab")
        log.write(f"\n=== start #{self.starts}: {' '.join(self.args)}\n".encode())
        log.flush()
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                     cwd=str(self.workdir), start_new_session=True)
        log.close()
        if self not in _live_procs:
            _live_procs.append(self)
        return self

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        if self.alive():
            self.proc.send_signal(sig)

    def kill9(self):
        """SIGKILL and reap (crash simulation)."""
        if self.alive():
            self.proc.kill()
        if self.proc:
            self.proc.wait(timeout=10)

    def stop(self, timeout=10):
        """SIGTERM, then SIGKILL after timeout. Returns the exit code."""
        if self.proc is None:
            return None
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self in _live_procs:
            _live_procs.remove(self)
        self.check_sanitizers()
        return self.proc.returncode

    def sanitizer_report(self):
        """The first sanitizer report in the log (text from its first line on), or None."""
        try:
            return sanitizer_report(self.log_path.read_bytes())
        except OSError:
            return None

    def check_sanitizers(self):
        """With a sanitizer build (make test-e2e-asan, test-e2e-tsan), any report in the log fails the test."""
        report = self.sanitizer_report()
        if report is not None:
            pytest.fail(f"sanitizer report in {self.log_path}:\n" + report[:20000])

    def log_tail(self, n=8000):
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return "(no log)"
        return data[-n:].decode(errors="replace")


class WorkerEtcd:
    """This pytest worker's etcd (one member, plain HTTP on 127.0.0.1, its data in a temp dir of
    its own): started by the first cluster stored in etcd, stopped at the end of the session."""
    proc = None
    url = None
    dir = None

    @classmethod
    def endpoint(cls):
        if cls.proc is not None and cls.proc.poll() is None:
            return cls.url
        if not ETCD_BIN:
            pytest.skip(ETCD_MISSING)
        cls.stop()
        cls.dir = tempfile.mkdtemp(prefix=f"kite-e2e-etcd-gw{WORKER}-")
        client, peer = free_port(), free_port()
        cls.url = f"http://127.0.0.1:{client}"
        log = open(os.path.join(cls.dir, "etcd.log"), "ab")
        cls.proc = subprocess.Popen(
            [ETCD_BIN, "--name", f"gw{WORKER}", "--data-dir", os.path.join(cls.dir, "data"),
             "--listen-client-urls", cls.url, "--advertise-client-urls", cls.url,
             "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls",
             f"http://127.0.0.1:{peer}", "--initial-cluster", f"gw{WORKER}=http://127.0.0.1:{peer}",
             "--log-level", "warn", "--logger", "zap"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if cls.proc.poll() is not None:
                pytest.fail(f"etcd exited with {cls.proc.returncode}:\n" + cls.log_tail())
            try:
                with socket.create_connection(("127.0.0.1", client), timeout=1) as sk:
                    sk.sendall(b"GET /health HTTP/1.0\r\n\r\n")
                    if b'"health":"true"' in sk.recv(4096):
                        return cls.url
            except OSError:
                pass
            time.sleep(0.1)
        pytest.fail("etcd not healthy after 20 s:\n" + cls.log_tail())

    @classmethod
    def log_tail(cls, n=4000):
        try:
            return Path(cls.dir, "etcd.log").read_bytes()[-n:].decode(errors="replace")
        except (OSError, TypeError):
            return "(no log)"

    @classmethod
    def stop(cls):
        if cls.proc is not None and cls.proc.poll() is None:
            cls.proc.kill()
            cls.proc.wait(timeout=10)
        cls.proc = None
        if cls.dir:
            shutil.rmtree(cls.dir, ignore_errors=True)
            cls.dir = None


def store_args(store, data_dir, extra_args):
    """The flags that put a cluster on data_dir in store ("sqlite", "etcd", None: KITE_TEST_STORE),
    unless extra_args name a store already."""
    store = store or TEST_STORE
    if store == "sqlite" or any(a.split("=")[0] in ("--etcd-servers", "--store") for a in extra_args):
        return []
    prefix = "/kite-" + hashlib.sha256(str(Path(data_dir).resolve()).encode()).hexdigest()[:12]
    media = ["--storage-media-type", STORAGE_MEDIA_TYPE] if STORAGE_MEDIA_TYPE else []
    return ["--etcd-servers", WorkerEtcd.endpoint(), "--etcd-prefix", prefix, *media]


def etcd_range(endpoint, prefix):
    """Every key and value under prefix in the etcd at endpoint (its JSON gateway), as bytes pairs."""
    import urllib.request
    end = bytearray(prefix.encode())
    end[-1] += 1
    body = json.dumps({"key": base64.b64encode(prefix.encode()).decode(),
                       "range_end": base64.b64encode(bytes(end)).decode()}).encode()
    req = urllib.request.Request(endpoint + "/v3/kv/range", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT) as r:
        kvs = json.loads(r.read()).get("kvs", [])
    return [(base64.b64decode(kv["key"]), base64.b64decode(kv.get("value", ""))) for kv in kvs]


def skip_on_etcd(store=None, why=""):
    """Skips the calling test when its clusters store in etcd (why: what it tests that etcd has not)."""
    if (store or TEST_STORE) == "etcd":
        pytest.skip(f"not on the etcd store: {why}")


_POD_NETS = iter(range(1, 1 << 30))


def _pod_net_octet():
    """The second octet of this process's pod CIDRs (10.X.n.0/24): 100-195, from the run (one
    value per pytest run, so that concurrent runs rarely meet) and the xdist worker (distinct
    within a run)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or str(os.getpid())
    return 100 + (int(hashlib.sha1(run.encode()).hexdigest(), 16) % 12) * MAX_WORKERS + WORKER % MAX_WORKERS


def pod_network_flags():
    """A pod bridge and CIDR of this test's own, so that test agents' pods never share an address
    or a bridge with each other, with another xdist worker's or with a `make up` cluster (kite0,
    10.88.0.0/16)."""
    pid, octet = os.getpid(), _pod_net_octet()
    # a bridge a killed run left behind keeps its address: a subnet in use on this host is skipped
    used = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
    for _ in range(256):
        n = next(_POD_NETS)
        if f" 10.{octet}.{n % 256}.1/" not in used:
            break
    return ["--pod-bridge", f"kt{pid % 100000}n{n}", "--pod-cidr", f"10.{octet}.{n % 256}.0/24"]


class Cluster:
    """A kite apiserver (from `kite up` or `kite apiserver`) plus the clients that drive it."""

    def __init__(self, mode, workdir, extra_args=(), port=None, store=None):
        self.mode = mode
        self.store = store or TEST_STORE
        self.pod_bridge = self.proxy_table = None
        if mode == "up" and "--no-agent" not in extra_args:
            if "--pod-bridge" not in extra_args:
                extra_args = [*extra_args, *pod_network_flags()]
            # the agent's log endpoint on a free port: 10250 may be another cluster's (kite up
            # refuses to start on a taken port)
            if "--port" not in extra_args:
                extra_args = [*extra_args, "--port", "0"]
            self.pod_bridge = extra_args[list(extra_args).index("--pod-bridge") + 1]
            # the Service proxy's nftables table of this cluster's own: two clusters on one
            # machine never replace each other's rules
            if "--proxy-table" not in extra_args:
                extra_args = [*extra_args, "--proxy-table", f"kite-proxy-{self.pod_bridge}"]
            self.proxy_table = extra_args[list(extra_args).index("--proxy-table") + 1]
        self.workdir = Path(workdir)
        self.data_dir = self.workdir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.home = self.workdir / "home"
        self.home.mkdir(exist_ok=True)
        self.port = port or free_port()
        self.kubeconfig = self.data_dir / "admin.kubeconfig"
        if mode in ("up", "apiserver"):
            extra_args = [*extra_args, *store_args(self.store, self.data_dir, extra_args)]
        self.proc = KiteProcess([mode, "--data-dir", str(self.data_dir), "--listen", f"127.0.0.1:{self.port}",
                                 *extra_args], self.workdir, mode)
        self.identity = None

    # -- lifecycle
    def start(self, timeout=READY_TIMEOUT):
        if not os.access(KITE, os.X_OK):
            pytest.fail(f"kite binary not found at {KITE} (set KITE=/abs/path/to/kite)")
        self.proc.start()
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout=READY_TIMEOUT):
        """Waits for DIR/admin.kubeconfig and GET /readyz == 200 "ok" (with the admin cert)."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if not self.proc.alive():
                pytest.fail(f"kite {self.mode} exited with {self.proc.proc.returncode} before ready:\n"
                            + self.proc.log_tail())
            if self.kubeconfig.exists():
                try:
                    if self.identity is None:
                        self.identity = TLSIdentity(self.kubeconfig, self.workdir)
                    api = self.api()
                    r = api.get("/readyz")
                    api.close()
                    last = r
                    if r.status == 200 and r.body.strip() == b"ok":
                        return
                except (OSError, ssl.SSLError, http.client.HTTPException, yaml.YAMLError, KeyError,
                        StopIteration, TypeError) as e:
                    last = e
                    if isinstance(e, (yaml.YAMLError, KeyError, StopIteration, TypeError)):
                        self.identity = None  # kubeconfig half-written; re-read
            time.sleep(0.1)
        pytest.fail(f"kite {self.mode} not ready after {timeout}s (last: {last!r}):\n" + self.proc.log_tail())

    def kill9(self):
        self.proc.kill9()

    def restart(self, timeout=READY_TIMEOUT):
        self.proc.start()
        self.wait_ready(timeout)

    def stop(self):
        r = self.proc.stop()
        # the agent leaves its bridge for the pods that outlive it; the test's goes with the test
        if self.pod_bridge and os.path.exists(f"/sys/class/net/{self.pod_bridge}"):
            subprocess.run(["ip", "link", "del", self.pod_bridge], capture_output=True)
        # and so do the pod namespaces it pinned (bind mounts under its sandboxes dir)
        for m in pinned_mounts(self.data_dir):
            subprocess.run(["umount", "-l", m], capture_output=True)
        return r

    def store_bytes(self):
        """What the cluster's store holds, raw: the SQLite files' bytes, or every key and value
        under the cluster's etcd prefix."""
        args = self.proc.args
        if "--etcd-servers" in args:
            endpoint = args[args.index("--etcd-servers") + 1].split(",")[0]
            prefix = args[args.index("--etcd-prefix") + 1] if "--etcd-prefix" in args else "/registry"
            return b"".join(k + b"\n" + v + b"\n" for k, v in etcd_range(endpoint, prefix.rstrip("/") + "/"))
        return b"".join(f.read_bytes() for f in sorted(self.data_dir.glob("kite.db*")))

    # -- clients
    def api(self, token=None, with_client_cert=True):
        if with_client_cert:
            ctx = self.identity.ctx
        else:
            ctx = TLSIdentity(self.kubeconfig, self.workdir, with_client_cert=False).ctx
        return Api("127.0.0.1", self.port, ctx, token=token)

    def kubectl_env(self):
        env = dict(os.environ)
        env["KUBECONFIG"] = str(self.kubeconfig)
        env["HOME"] = str(self.home)  # fresh discovery cache per cluster
        env.pop("KUBECTL_EXTERNAL_DIFF", None)
        return env

    def kubectl(self, *args, check=True, timeout=KUBECTL_TIMEOUT, input=None):
        """Runs kubectl; returns CompletedProcess (text). check=True asserts rc 0."""
        cmd = [KUBECTL, *args]
        try:
            p = subprocess.run(cmd, env=self.kubectl_env(), capture_output=True, text=True, timeout=timeout,
                               input=input, cwd=str(self.workdir))
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"kubectl {' '.join(args)} timed out after {timeout}s; stdout={e.stdout!r} "
                        f"stderr={e.stderr!r}")
        if check:
            assert p.returncode == 0, (f"kubectl {' '.join(args)} -> rc {p.returncode}\nstdout:\n{p.stdout}\n"
                                       f"stderr:\n{p.stderr}")
        return p

    def kubectl_popen(self, *args):
        # SIGINT as a terminal's Ctrl-C gives it: a suite started in the background by a
        # non-interactive shell (nohup ... &) inherits SIGINT ignored, and kubectl with it
        return subprocess.Popen([KUBECTL, *args], env=self.kubectl_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=str(self.workdir), start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def python_client(self):
        from kubernetes import client, config
        return client.CoreV1Api(config.new_client_from_config(config_file=str(self.kubeconfig)))

    def python_api_client(self):
        from kubernetes import config
        return config.new_client_from_config(config_file=str(self.kubeconfig))


def runc_list(root):
    """The ids of the containers under a runc root dir. `runc list` fails while a container's
    state is being written or removed (a crash-looping pod's): it is asked again then."""
    for _ in range(50):
        r = subprocess.run(["runc", "--root", str(root), "list", "-q"], capture_output=True, text=True)
        if r.returncode == 0 or not os.path.isdir(root):
            return r.stdout.split()
        time.sleep(0.1)
    raise AssertionError(f"runc list --root {root}: {r.stderr}")


def pinned_mounts(under):
    """The namespaces pinned under a dir (an agent's sandboxes/<id>/{net,ipc,uts}): the mount
    points of nsfs mounts there, from /proc/self/mounts."""
    prefix = os.path.realpath(str(under)) + "/"
    with open("/proc/self/mounts") as f:
        return [m.split()[1] for m in f if m.split()[2] == "nsfs" and m.split()[1].startswith(prefix)]


def runc_ids(c):
    """The containers runc knows under cluster c's agent (its root dir DATA_DIR/agent/runc)."""
    return runc_list(c.data_dir / "agent" / "runc")


def delete_pods_now(c, namespace="default", timeout=40):
    """Teardown of a cluster with a node agent: deletes every pod of namespace with grace 0 (no
    fixture waits out a pod's grace period), SIGKILLs the node's containers (the agent, as the kubelet,
    would give a force-deleted pod its whole grace period: 30 s for a `sleep` that ignores
    SIGTERM) and waits until the API has none and the agent has removed their containers (and
    with them their rootfs mounts)."""
    api = c.api()
    path = f"/api/v1/namespaces/{namespace}/pods"
    for p in api.get(path).json().get("items", []):
        api.delete(f"{path}/{p['metadata']['name']}?gracePeriodSeconds=0")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and c.proc.alive() and api.get(path).json().get("items"):
        time.sleep(0.1)
    root = str(c.data_dir / "agent" / "runc")
    for cid in runc_ids(c):
        subprocess.run(["runc", "--root", root, "kill", cid, "KILL"], capture_output=True)
    while time.monotonic() < deadline and c.proc.alive() and (runc_ids(c) or pinned_mounts(c.data_dir / "agent")):
        time.sleep(0.1)
    api.close()


def end_containers(c):
    """After c.stop(): ends the containers that outlive the agent by design (and any a pod deleted
    during teardown left behind), so no run leaves them on the machine."""
    root = str(c.data_dir / "agent" / "runc")
    for cid in runc_ids(c):
        subprocess.run(["runc", "--root", root, "kill", cid, "KILL"], capture_output=True)
    time.sleep(0.5)
    for cid in runc_ids(c):
        subprocess.run(["runc", "--root", root, "delete", "--force", cid], capture_output=True)


def needs_containers():
    if os.geteuid() != 0 or not shutil.which("runc") or not shutil.which("conmon") or not shutil.which("umoci"):
        pytest.skip("needs root, runc, conmon and umoci (scripts/install-deps)")


def busybox_tar(work):
    """The busybox image the build made (build*/busybox.tar), else one made into work."""
    tar = os.path.join(os.path.dirname(KITE), "busybox.tar")
    if not os.path.exists(tar):
        tar = str(work / "busybox.tar")
        subprocess.run([str(REPO / "scripts" / "make-busybox-image"), tar], check=True, capture_output=True)
    return tar


def runc_up_cluster(tmp_path_factory, name, extra_args=(), images=(), namespace="default",
                    privileged=False, before_stop=None):
    """For a module fixture (`yield from`): `kite up` whose agent runs real containers under runc,
    with short agent periods and the busybox image (and any further image tars) imported; c.node
    is the agent's node name. privileged labels namespace Pod Security `privileged` (hostPath and
    hostNetwork pods; kite up enforces baseline elsewhere), as a user would. Teardown deletes the
    pods with grace 0 (before_stop(c) first, e.g. to delete their controllers), stops the
    cluster and ends the containers that outlive the agent by design."""
    needs_containers()
    work = _workdir(tmp_path_factory, name)
    c = Cluster("up", work, extra_args=[*AGENT_FAST_FLAGS, *extra_args])
    for tar in (busybox_tar(work), *images):
        r = subprocess.run([KITE, "images", "import", tar, "--root-dir", str(c.data_dir / "agent")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    c.start()
    if namespace != "default":
        c.kubectl("create", "namespace", namespace)
    if privileged:
        c.kubectl("label", "--overwrite", "namespace", namespace, "pod-security.kubernetes.io/enforce=privileged")
    api = c.api()
    c.node = wait_for(lambda: next((n for n in api.get("/api/v1/nodes").json().get("items", [])
                                    if "status" in n), None), 20, what="the agent's node")["metadata"]["name"]
    yield c
    if c.proc.alive():
        if before_stop:
            before_stop(c)
        # pods deleted through the API: the agent removes their containers and rootfs mounts
        delete_pods_now(c, namespace)
    c.stop()
    end_containers(c)


# Leases in the default namespace, the ones most tests write.
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"


def _workdir(tmp_path_factory, name):
    return tmp_path_factory.mktemp(name)


@pytest.fixture(scope="module")
def store(request):
    """The store of the module's `apiserver` and of `fresh_apiserver`: KITE_TEST_STORE, or each of
    STORES in turn in a module marked both_stores (pytest_generate_tests)."""
    s = getattr(request, "param", TEST_STORE)
    if s == "etcd" and not ETCD_BIN:
        pytest.skip(ETCD_MISSING)
    return s


def pytest_generate_tests(metafunc):
    if "store" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_stores"):
        # the etcd pass is in the slow tier (CI runs it, under ASan too); make test keeps the
        # SQLite pass and test_store_parity, which compares both stores' answers side by side
        metafunc.parametrize("store", [pytest.param(s, marks=pytest.mark.slow) if s == "etcd" else s for s in STORES],
                             indirect=True, scope="module")


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory, store):
    """A `kite apiserver` on a fresh data dir, shared by one test module."""
    c = Cluster("apiserver", _workdir(tmp_path_factory, "apiserver"), store=store).start()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def api(apiserver):
    """A raw HTTPS client of the module's apiserver (admin credentials)."""
    a = apiserver.api()
    yield a
    a.close()


@pytest.fixture
def fresh_apiserver(tmp_path, store):
    """A `kite apiserver` for one test (where state matters)."""
    c = Cluster("apiserver", tmp_path, store=store).start()
    yield c
    c.stop()


AGENT_FAST_FLAGS = ["--node-status-update-frequency", "1s", "--node-status-report-frequency", "1s",
                    "--node-lease-duration-seconds", "4"]


@pytest.fixture(scope="module")
def up_cluster(tmp_path_factory):
    """`kite up` with short agent periods (status every 1 s, lease renewed every 1 s)."""
    c = Cluster("up", _workdir(tmp_path_factory, "up"), extra_args=AGENT_FAST_FLAGS).start()
    yield c
    c.stop()


def node_name_of_machine():
    return socket.gethostname().lower()


# ---------------------------------------------------------------- object helpers

def node_manifest(name, labels=None, ready="True", with_status=True, unschedulable=None, annotations=None):
    """A Node like a kubelet registers it (status is kept on create, as kube-apiserver does)."""
    md = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
    if annotations:
        md["annotations"] = annotations
    obj = {"apiVersion": "v1", "kind": "Node", "metadata": md, "spec": {}}
    if unschedulable is not None:
        obj["spec"]["unschedulable"] = unschedulable
    if with_status:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        conds = [
            ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ]
        if ready is not None:
            conds.append(("Ready", ready, "KubeletReady" if ready == "True" else "KubeletNotReady",
                          "kubelet is posting ready status" if ready == "True" else "container runtime down"))
        obj["status"] = {
            "capacity": {"cpu": "4", "memory": "8167848Ki", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8065448Ki", "pods": "110"},
            "conditions": [{"type": t, "status": s, "lastHeartbeatTime": now, "lastTransitionTime": now,
                            "reason": r, "message": m} for t, s, r, m in conds],
            "addresses": [{"type": "InternalIP", "address": "10.9.0.7"}, {"type": "Hostname", "address": name}],
            "nodeInfo": {"machineID": "e2e0machine0id", "systemUUID": "e2e-uuid", "bootID": "e2e-boot-id",
                         "kernelVersion": "6.1.0-e2e-amd64", "osImage": "E2E Linux 1.0",
                         "containerRuntimeVersion": "fake://1.0.0", "kubeletVersion": "v1.32.4",
                         "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
        }
    return obj


def create_node(api, name, **kw):
    return api.ok("POST", "/api/v1/nodes", node_manifest(name, **kw))


def delete_node_if_exists(api, name):
    r = api.delete(f"/api/v1/nodes/{name}")
    assert r.status in (200, 202, 404), r


def parse_table(text):
    """Parses kubectl's column output (tabwriter, left-aligned) into (headers, rows of dicts).

    Columns are located by where each header starts, so empty cells (e.g. VERSION "") parse."""
    lines = [l for l in text.splitlines() if l.strip()]
    assert lines, f"no output: {text!r}"
    header = lines[0]
    # headers are separated by >= 2 spaces; a header may contain one space ("LAST SEEN")
    spans = [(m.start(), m.group(0)) for m in re.finditer(r"\S+(?: \S+)*", header)]
    names = [s[1] for s in spans]
    starts = [s[0] for s in spans]
    rows = []
    for line in lines[1:]:
        cells = {}
        for i, name in enumerate(names):
            end = starts[i + 1] if i + 1 < len(starts) else None
            cells[name] = line[starts[i]:end].strip()
        rows.append(cells)
    return names, rows


AGE_RE = re.compile(r"^(\d+s|\d+m(\d+s)?|\d+h(\d+m)?|\d+d(\d+h)?|\d+y(\d+d)?)$")


def wait_for(pred, timeout, interval=0.1, what="condition"):
    """Polls pred() until it returns a truthy value (returned) or timeout (assertion error)."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = pred()
            if last:
                return last
        except AssertionError as e:
            last = e
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last={last!r}")
        time.sleep(interval)


def assert_status_body(resp, code, reason=None):
    """Kubernetes error bodies are meta/v1 Status objects with the HTTP code repeated in them."""
    assert resp.status == code, f"want HTTP {code}, got {resp.status}: {resp.body[:1000]!r}"
    ctype = resp.headers.get("content-type", "")
    assert ctype.startswith("application/json"), f"Status must be JSON, got Content-Type {ctype!r}"
    st = resp.json()
    assert st.get("kind") == "Status", st
    assert st.get("apiVersion") == "v1", st
    assert st.get("status") == "Failure", st
    assert st.get("code") == code, st
    assert isinstance(st.get("message"), str) and st["message"], st
    if reason is not None:
        assert st.get("reason") == reason, st
    return st


# ---------------------------------------------------------------- markers

def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a test that cannot be made short (a real minute-long outage, "
                            "upstream's default back-offs; over ~15 s under ASan); `make test` leaves it out, "
                            "`make test-slow` (CI) runs it")
    config.addinivalue_line("markers", "scale: a run that needs the machine to itself (10,000 simulated nodes); "
                            "skipped unless KITE_SCALE_TESTS=1 (`make test-scale`)")
    config.addinivalue_line("markers", "both_stores: the module's `apiserver` and `fresh_apiserver` tests run "
                            "once on SQLite and once on etcd (the `store` fixture's parameter)")


def pytest_collection_modifyitems(config, items):
    """Tests marked scale are skipped unless KITE_SCALE_TESTS=1. With KITE_TEST_STORE=etcd, the
    modules that choose their stores themselves (test_etcd*: on etcd; test_store_parity: on both)
    are left out: every run has them already."""
    scale = pytest.mark.skip(reason="needs the machine to itself: KITE_SCALE_TESTS=1 (make test-scale)")
    chosen = pytest.mark.skip(reason="chooses its stores itself: runs in every run, not again under KITE_TEST_STORE=etcd")
    for item in items:
        if "scale" in item.keywords and os.environ.get("KITE_SCALE_TESTS") != "1":
            item.add_marker(scale)
        elif TEST_STORE == "etcd" and (item.path.name.startswith("test_etcd") or item.path.name == "test_store_parity.py"):
            item.add_marker(chosen)


# ---------------------------------------------------------------- failure reporting

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for p in list(_live_procs):
            rep.sections.append((f"kite {p.name} log (tail, {p.log_path})", p.log_tail()))


def pytest_sessionfinish(session, exitstatus):
    for p in list(_live_procs):
        try:
            p.stop(timeout=3)
        except Exception:  # best effort at the very end
            pass
    WorkerEtcd.stop()
