#!/usr/bin/python3
"""Soak: a randomized mix of API operations from several clients against one kite apiserver
(normally the ASan build: `make soak`), failing on anything a user would notice first.

    KITE=$PWD/build-asan/kite ASAN_OPTIONS=detect_leaks=1 SOAK_SECONDS=60 /usr/bin/python3 tests/soak/soak.py

Environment: SOAK_SECONDS (default 600), SOAK_SEED (replays a run's choices; printed at the
start), SOAK_WORKERS (default 4), SOAK_SKIP (comma-separated op names not to run, to look past
a known finding), SOAK_MODE (apiserver or up, default apiserver), SOAK_HOSTILE=1 (hostile shapes
in the mix: YAML bombs, deep nesting, anonymous HTTP/2 bodies, oversized bodies, huge integers in
query parameters; see op_hostile), KITE, KUBECTL.

Each worker thread owns its namespaces (soak-w<i>-<k>) and names (w<i>-...), so it keeps an
exact model of what they hold and checks every answer against it: a create of an existing name
is 409, a GET after an acknowledged write returns what was written at the revision the write
reported, a delete leaves the object gone, a LIST with selectors returns exactly the matching
objects, a watch delivers exactly the worker's own writes in order. Every error is a JSON
Status carrying the HTTP code. Some ops race each other on purpose in one shared namespace
(soak-shared); there only the form of the answer is checked. Two watcher threads follow all
leases and events and check revisions only ever go up.

Fails (exit 1) on: a wrong answer (the op, request and response are printed), a 5xx, a hung
request, the server dying (each worker's request in flight is printed: the reproducer), a
sanitizer report in the server's log, or an unclean exit on SIGTERM (LeakSanitizer reports
then, with ASAN_OPTIONS=detect_leaks=1).
"""
import collections
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))
import conftest as e2e  # noqa: E402  (the e2e tests' process, TLS and HTTP helpers)
import pytest  # noqa: E402

from kubernetes import client as kclient, config as kconfig, watch as kwatch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

Failed = pytest.fail.Exception  # what the e2e helpers raise (pytest.fail) outside a test

SECONDS = float(os.environ.get("SOAK_SECONDS") or 600)
SEED = int(os.environ.get("SOAK_SEED") or random.SystemRandom().randrange(1 << 31))
WORKERS = int(os.environ.get("SOAK_WORKERS") or 4)
SKIP = {s.strip() for s in (os.environ.get("SOAK_SKIP") or "").split(",") if s.strip()}
MODE = os.environ.get("SOAK_MODE") or "apiserver"
# SOAK_SKIP=create-in-missing-namespace: no create (POST, or PUT of an event) in a namespace
# that does not exist, for looking past a known crash there
NO_MISSING_NS_CREATE = "create-in-missing-namespace" in SKIP
# SOAK_SKIP=paged-list: no LIST with limit and continue
NO_PAGED_LIST = "paged-list" in SKIP
# SOAK_HOSTILE=1 mixes hostile shapes into the normal mix (op "hostile", one shape per call;
# SOAK_SKIP=hostile-<shape> leaves a shape out, e.g. one whose fix has not landed)
HOSTILE = os.environ.get("SOAK_HOSTILE", "") not in ("", "0")

LEASES = "/apis/coordination.k8s.io/v1"
EVENTS = "/api/v1"
EVENTS_V1 = "/apis/events.k8s.io/v1"
SHARED_NS = "soak-shared"
NAMES_PER_NS = 6      # few names per namespace: creates collide with existing objects often
NSS_PER_WORKER = 3
COLORS = ("red", "green", "blue")
WATCH_READ_TIMEOUT = 10
STOP_TIMEOUT = 60     # SIGTERM to exit (ASan's leak check at exit takes a while)


class WrongAnswer(Exception):
    pass


class ServerError(WrongAnswer):
    pass


# ------------------------------------------------------------------------- shared state

stop = threading.Event()
failures = []                 # (worker, text)
failures_lock = threading.Lock()
counts = collections.Counter()   # ops done, by kind
answers = collections.Counter()  # raw HTTP answers, by status code
counts_lock = threading.Lock()


def fail(who, text):
    with failures_lock:
        failures.append((who, text))
    print(f"\nsoak: FAILURE in {who}:\n{text}\n", flush=True)
    stop.set()


def count(kind):
    with counts_lock:
        counts[kind] += 1


def q(s):
    from urllib.parse import quote
    return quote(s, safe="")


# ------------------------------------------------------------------------- answer checks

def describe(req, resp):
    method, path, ctype, body = req
    b = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
    if isinstance(b, bytes):
        b = b.decode(errors="replace")
    b = None if b is None else (b if len(b) <= 1500 else b[:1500] + f"...({len(b)} chars)")
    r = "(none)" if resp is None else f"HTTP {resp.status} {resp.body[:3000]!r}"
    return f"  request: {method} {path}\n  content-type: {ctype}\n  body: {b}\n  response: {r}"


def check(cond, what, req=None, resp=None):
    if not cond:
        raise WrongAnswer(what + ("\n" + describe(req, resp) if req else ""))


def check_status(req, resp, codes, reason=None):
    """resp.status is one of codes (an int or a set); an error is a JSON Status with that code."""
    codes = {codes} if isinstance(codes, int) else set(codes)
    if resp.status >= 500 and resp.status not in codes:
        raise ServerError(f"server error {resp.status}\n" + describe(req, resp))
    check(resp.status in codes, f"want HTTP {sorted(codes)}, got {resp.status}", req, resp)
    if resp.status >= 400:
        ctype = resp.headers.get("content-type", "")
        check(ctype.startswith("application/json"), f"error with Content-Type {ctype!r}", req, resp)
        try:
            st = json.loads(resp.body)
        except ValueError:
            raise WrongAnswer("error body is not JSON\n" + describe(req, resp))
        check(isinstance(st, dict) and st.get("kind") == "Status" and st.get("apiVersion") == "v1"
              and st.get("status") == "Failure" and st.get("code") == resp.status
              and isinstance(st.get("message"), str) and st["message"],
              "error body is not a Status with the response's code", req, resp)
        if reason:
            check(st.get("reason") == reason, f"want reason {reason}", req, resp)
        return st
    if resp.status in (200, 201) and resp.body:
        try:
            return json.loads(resp.body)
        except ValueError:
            raise WrongAnswer("2xx body is not JSON\n" + describe(req, resp))
    return None


def rv_of(obj):
    return int(obj["metadata"]["resourceVersion"])


# ------------------------------------------------------------------------- clients

class LoggedApi(e2e.Api):
    """The e2e raw HTTPS client, noting the request in flight (the reproducer if the server dies)."""

    def __init__(self, worker, *a, **kw):
        super().__init__(*a, **kw)
        self.worker = worker

    def request(self, method, path, body=None, ctype=None, headers=None):
        self.worker.inflight = ("raw", method, path, ctype, body if body is None or isinstance(body, (str, bytes))
                                else json.dumps(body))
        r = super().request(method, path, body=body, ctype=ctype, headers=headers)
        self.worker.inflight = None
        return r

    def call(self, method, path, body=None, ctype=None, codes=200, reason=None):
        """One request whose answer must have one of codes; returns (status, parsed body, req, resp)."""
        if body is not None and not isinstance(body, (str, bytes)):
            body = json.dumps(body)
            ctype = ctype or "application/json"
        req = (method, path, ctype, body)
        resp = self.request(method, path, body=body, ctype=ctype)
        with counts_lock:
            answers[resp.status] += 1
        return resp.status, check_status(req, resp, codes, reason), req, resp


def lease_body(name, labels, holder, ns=None, extra_meta=None):
    md = {"name": name, "labels": dict(labels)}
    if ns:
        md["namespace"] = ns
    md.update(extra_meta or {})
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": md,
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 40}}


def event_body(name, ns, labels, msg, v1=False):
    if v1:
        return {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name, "labels": labels},
                "regarding": {"kind": "Node", "name": "soak-node", "namespace": ns}, "note": msg,
                "reason": "Soak", "type": "Normal", "action": "Soaking", "reportingController": "soak",
                "reportingInstance": "soak-1", "eventTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())}
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "labels": labels},
            "involvedObject": {"kind": "Node", "name": "soak-node", "namespace": ns}, "reason": "Soak",
            "message": msg, "type": "Normal", "count": 1, "source": {"component": "soak"}}


# ------------------------------------------------------------------------- a worker

class Worker:
    def __init__(self, idx, cluster, seed):
        self.idx = idx
        self.who = f"worker {idx}"
        self.cluster = cluster
        self.rng = random.Random(seed * 1000 + idx)
        self.owner = f"w{idx}"
        self.my_nss = [f"soak-w{idx}-{k}" for k in range(NSS_PER_WORKER)]
        self.nss = set()          # which of my_nss exist
        self.leases = {}          # (ns, name) -> {"rv", "labels", "holder"}
        self.events = {}          # (ns, name) -> {"rv", "labels"}
        self.nodes = {}           # name -> {"rv", "labels"}
        self.n = 0                # a fresh value for every write, so no write is a no-op
        self.last_rv = 0          # revisions of this worker's acknowledged writes only go up
        self.inflight = None
        self.recent = collections.deque(maxlen=8)
        self.api = LoggedApi(self, "127.0.0.1", cluster.port, cluster.identity.ctx)
        self.pyclient = kconfig.new_client_from_config(config_file=str(cluster.kubeconfig))
        self.core = kclient.CoreV1Api(self.pyclient)
        self.coord = kclient.CoordinationV1Api(self.pyclient)
        self.thread = threading.Thread(target=self.run, name=self.who, daemon=True)

    # -- helpers
    def fresh(self):
        self.n += 1
        return f"{self.owner}-{self.n}"

    def labels(self):
        return {"soak-owner": self.owner, "color": self.rng.choice(COLORS)}

    def wrote(self, obj, what):
        """An acknowledged write's revision is past every earlier one of this worker."""
        rv = rv_of(obj)
        check(rv > self.last_rv, f"{what}: resourceVersion {rv} not after this worker's previous write "
                                 f"({self.last_rv})")
        self.last_rv = rv
        return rv

    def pick_ns(self, with_default=True):
        choices = list(self.my_nss) + (["default"] if with_default else [])
        return self.rng.choice(choices)

    def ns_exists(self, ns):
        return ns == "default" or ns in self.nss

    def lease_name(self):
        return f"{self.owner}-l{self.rng.randrange(NAMES_PER_NS)}"

    def lpath(self, ns, name=None):
        return f"{LEASES}/namespaces/{ns}/leases" + (f"/{name}" if name else "")

    def py(self, desc, fn, *a, **kw):
        """A python-client call; returns (status, result or ApiException)."""
        self.inflight = ("python", desc)
        try:
            res = fn(*a, **kw)
            return 200, res
        except ApiException as e:
            if e.status >= 500:
                raise ServerError(f"python client {desc}: server error {e.status}: {e.body!r}"[:4000])
            try:
                st = json.loads(e.body)
            except (TypeError, ValueError):
                raise WrongAnswer(f"python client {desc}: HTTP {e.status} body is not JSON: {e.body!r}")
            check(st.get("kind") == "Status" and st.get("code") == e.status,
                  f"python client {desc}: HTTP {e.status} body is not a Status with that code: {e.body!r}")
            return e.status, e
        finally:
            self.inflight = None

    def kubectl(self, *args, input=None):
        self.inflight = ("kubectl", " ".join(args))
        try:
            return subprocess.run([e2e.KUBECTL, *args], env=self.cluster.kubectl_env(), capture_output=True,
                                  text=True, timeout=e2e.KUBECTL_TIMEOUT, input=input,
                                  cwd=str(self.cluster.workdir))
        finally:
            self.inflight = None

    def expect_lease(self, ns, name, via_python=False):
        """GET agrees with the model (read-your-writes)."""
        want = self.leases.get((ns, name))
        if via_python:
            code, res = self.py(f"read_namespaced_lease({name!r}, {ns!r})", self.coord.read_namespaced_lease, name, ns)
            check(code == (200 if want else 404), f"python read lease {ns}/{name}: want {200 if want else 404}, "
                                                   f"got {code}; model {want}")
            if want:
                got = (int(res.metadata.resource_version), res.metadata.labels or {}, res.spec.holder_identity)
                check(got == (want["rv"], want["labels"], want["holder"]),
                      f"python read lease {ns}/{name}: got {got}, model {want}")
            return
        code, obj, req, resp = self.api.call("GET", self.lpath(ns, name), codes=(200 if want else 404))
        if want:
            got = (rv_of(obj), obj["metadata"].get("labels", {}), obj["spec"].get("holderIdentity"))
            check(got == (want["rv"], want["labels"], want["holder"]), f"GET lease: got {got}, model {want}",
                  req, resp)
            check(obj["kind"] == "Lease" and obj["metadata"]["namespace"] == ns and obj["metadata"]["name"] == name,
                  "GET lease: wrong object", req, resp)

    def set_lease(self, ns, obj, what):
        md = obj["metadata"]
        self.leases[(ns, md["name"])] = {"rv": self.wrote(obj, what), "labels": md.get("labels", {}),
                                         "holder": obj["spec"].get("holderIdentity")}

    def model_names(self, table, ns, sel=lambda v: True):
        return sorted(n for (s, n), v in table.items() if s == ns and sel(v))

    def server_alive(self):
        """False if the server exits within 2 s: a dying server (a sanitizer printing its report)
        resets connections before it is gone, and the main thread reports the death."""
        for _ in range(20):
            if not self.cluster.proc.alive():
                return False
            time.sleep(0.1)
        return True

    # -- the loop
    def run(self):
        ops = [(op, w) for op, w in OPS if op.__name__[3:] not in SKIP]
        fns, weights = zip(*ops)
        while not stop.is_set():
            fn = self.rng.choices(fns, weights)[0]
            kind = fn.__name__[3:]
            self.recent.append(kind)
            try:
                fn(self)
                count(kind)
            except WrongAnswer as e:
                if self.server_alive():
                    fail(self.who, f"op {kind}: {e}")
                return
            except Failed as e:
                fail(self.who, f"op {kind}: {e}")
                return
            except Exception:
                if not self.server_alive() or stop.is_set():
                    return  # the server died: the main thread reports it with what was in flight
                fail(self.who, f"op {kind}: exception (in flight: {self.inflight})\n{traceback.format_exc()}")
                return


# ------------------------------------------------------------------------- operations
# Each op_<kind>(w) does one thing and checks the answer against w's model.

def op_ns_create(w):
    ns = w.rng.choice(w.my_nss)
    want = 409 if ns in w.nss else 201
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"soak-owner": w.owner}}}
    how = w.rng.random()
    if how < 0.1:
        # `kubectl create namespace` sends protobuf, which kite does not read (415); -f sends JSON
        p = w.kubectl("create", "-f", "-", input=json.dumps(body))
        check((p.returncode == 0) == (want == 201) and (want == 201 or "AlreadyExists" in p.stderr),
              f"kubectl create -f (namespace {ns}): rc {p.returncode}, model exists={ns in w.nss}: {p.stderr}")
    elif how < 0.4:
        code, res = w.py(f"create_namespace({ns})", w.core.create_namespace, body)
        check(code == (200 if want == 201 else want), f"python create_namespace({ns}): want {want}, got {code}")
        if code == 201 or code == 200:
            w.last_rv = max(w.last_rv, int(res.metadata.resource_version))
    else:
        code, obj, req, resp = w.api.call("POST", "/api/v1/namespaces", body, codes=want,
                                          reason="AlreadyExists" if want == 409 else None)
        if code == 201:
            w.wrote(obj, "create namespace")
            check(obj["metadata"]["labels"].get("kubernetes.io/metadata.name") == ns,
                  "namespace lacks its name label", req, resp)
    w.nss.add(ns)


def op_ns_delete(w):
    ns = w.rng.choice(w.my_nss)
    exists = ns in w.nss
    code, obj, req, resp = w.api.call("DELETE", f"/api/v1/namespaces/{ns}", codes=200 if exists else 404)
    if exists:
        check(obj.get("kind") == "Namespace" and obj["metadata"]["name"] == ns, "delete namespace reply", req, resp)
        w.nss.discard(ns)
        w.leases = {k: v for k, v in w.leases.items() if k[0] != ns}
        w.events = {k: v for k, v in w.events.items() if k[0] != ns}
    # gone, with what it held: the DELETE leaves it Terminating and the namespace controller
    # (kite controller-manager) empties and finalizes it
    deadline = time.monotonic() + 30
    while True:
        code, _, req, resp = w.api.call("GET", f"/api/v1/namespaces/{ns}", codes={200, 404})
        if code == 404 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    check(code == 404, "a deleted namespace is not gone after 30 s", req, resp)
    code, lst, req, resp = w.api.call("GET", w.lpath(ns))
    check(lst["items"] == [], "a deleted namespace still lists leases", req, resp)
    code, lst, req, resp = w.api.call("GET", f"{EVENTS}/namespaces/{ns}/events")
    check(lst["items"] == [], "a deleted namespace still lists events", req, resp)


def op_lease_create(w):
    ns = w.pick_ns()
    if NO_MISSING_NS_CREATE and not w.ns_exists(ns):
        ns = "default"
    gen = w.rng.random() < 0.1
    name = w.lease_name()
    labels, holder = w.labels(), w.fresh()
    body = lease_body(name, labels, holder, ns=ns if w.rng.random() < 0.5 else None)
    if gen:
        del body["metadata"]["name"]
        body["metadata"]["generateName"] = f"{w.owner}-g"
    if not w.ns_exists(ns):
        want, reason = 404, "NotFound"
    elif not gen and (ns, name) in w.leases:
        want, reason = 409, "AlreadyExists"
    else:
        want, reason = 201, None
    if w.rng.random() < 0.3:
        code, res = w.py(f"create_namespaced_lease({ns!r}, {body})", w.coord.create_namespaced_lease, ns, body)
        check(code == (200 if want == 201 else want), f"python create lease {ns}/{name}: want {want}, got {code}: "
                            f"{getattr(res, 'body', '')!r}; model ns exists={w.ns_exists(ns)}")
        if code == 200:  # the client reports any 2xx as 200 here
            obj = w.pyclient.sanitize_for_serialization(res)
            w.set_lease(ns, obj, "python create lease")
            name = obj["metadata"]["name"]
    else:
        code, obj, req, resp = w.api.call("POST", w.lpath(ns), body, codes=want, reason=reason)
        if code == 201:
            check(obj["metadata"]["namespace"] == ns and obj["metadata"].get("uid"), "created lease", req, resp)
            w.set_lease(ns, obj, "create lease")
            name = obj["metadata"]["name"]
        elif code == 404:
            check(f'namespaces \\"{ns}\\" not found'.encode() in resp.body,
                  "create in a missing namespace: the Status names the namespace", req, resp)
    if gen and code in (200, 201) and w.rng.random() < 0.5:
        # generated names are not in the small name pool: delete it again to keep the model small
        w.api.call("DELETE", w.lpath(ns, name), codes=200)
        del w.leases[(ns, name)]
    w.expect_lease(ns, name, via_python=w.rng.random() < 0.2)


def op_lease_get(w):
    w.expect_lease(w.pick_ns(), w.lease_name(), via_python=w.rng.random() < 0.3)


def op_lease_list(w):
    ns = w.pick_ns()
    sel = ["soak-owner=" + w.owner] if ns == "default" or w.rng.random() < 0.5 else []
    match = lambda v: True  # noqa: E731
    r = w.rng.random()
    color = w.rng.choice(COLORS)
    if r < 0.25:
        sel.append(f"color={color}")
        match = lambda v: v["labels"].get("color") == color  # noqa: E731
    elif r < 0.4:
        sel.append(f"color!={color}")
        match = lambda v: v["labels"].get("color") != color  # noqa: E731
    elif r < 0.55:
        other = w.rng.choice(COLORS)
        sel.append(f"color in ({color},{other})")
        match = lambda v: v["labels"].get("color") in (color, other)  # noqa: E731
    elif r < 0.6:
        sel.append("!color")
        match = lambda v: "color" not in v["labels"]  # noqa: E731
    fsel = None
    if w.rng.random() < 0.2:
        fname = w.lease_name()
        fsel = f"metadata.name={fname}"
        m0 = match
        match = lambda v, m0=m0, fname=fname: m0(v) and v["name"] == fname  # noqa: E731
    want = sorted(n for (s, n), v in w.leases.items() if s == ns and match({**v, "name": n}))
    lsel = ",".join(sel)
    how = w.rng.random()
    if how < 0.05:
        args = ["get", "leases", "-n", ns, "-o", "json"] + (["-l", lsel] if lsel else []) + \
               (["--field-selector", fsel] if fsel else [])
        p = w.kubectl(*args)
        check(p.returncode == 0, f"kubectl {' '.join(args)}: rc {p.returncode}: {p.stderr}")
        got = sorted(i["metadata"]["name"] for i in json.loads(p.stdout)["items"])
        check(got == want, f"kubectl {' '.join(args)}: got {got}, model {want}")
    elif how < 0.35:
        code, res = w.py(f"list_namespaced_lease({ns!r}, label_selector={lsel!r}, field_selector={fsel!r})",
                         w.coord.list_namespaced_lease, ns, label_selector=lsel or None, field_selector=fsel or None)
        check(code == 200, f"python list leases: {code}")
        got = sorted(i.metadata.name for i in res.items)
        check(got == want, f"python list leases in {ns} ({lsel!r}, {fsel!r}): got {got}, model {want}")
        for i in res.items:
            check(int(i.metadata.resource_version) == w.leases[(ns, i.metadata.name)]["rv"],
                  f"python list: {i.metadata.name} at rv {i.metadata.resource_version}, model "
                  f"{w.leases[(ns, i.metadata.name)]}")
    else:
        query = "&".join(x for x in ([f"labelSelector={q(lsel)}"] if lsel else []) +
                         ([f"fieldSelector={q(fsel)}"] if fsel else []))
        if w.rng.random() < 0.3 and not NO_PAGED_LIST:
            query += ("&" if query else "") + "limit=2"
        path = w.lpath(ns) + ("?" + query if query else "")
        got, items = [], []
        while True:
            code, lst, req, resp = w.api.call("GET", path)
            check(lst.get("kind") == "LeaseList" and isinstance(lst.get("items"), list), "LIST shape", req, resp)
            items += lst["items"]
            cont = lst["metadata"].get("continue")
            if not cont:
                break
            path = w.lpath(ns) + "?" + query + "&continue=" + q(cont)
        got = sorted(i["metadata"]["name"] for i in items)
        check(got == want, f"LIST leases in {ns} ({lsel!r}, {fsel!r}): got {got}, model {want}", req, resp)
        for i in items:
            check(rv_of(i) == w.leases[(ns, i["metadata"]["name"])]["rv"], "LIST item revision differs from the "
                  f"model's {w.leases[(ns, i['metadata']['name'])]}", req, resp)


def op_lease_update(w):
    ns, name = w.pick_ns(), w.lease_name()
    cur = w.leases.get((ns, name))
    labels, holder = w.labels(), w.fresh()
    body = lease_body(name, labels, holder)
    r = w.rng.random()
    if not cur:
        want = 404
        if r < 0.5:
            body["metadata"]["resourceVersion"] = str(w.rng.randrange(1, 1000))
    elif r < 0.4:
        body["metadata"]["resourceVersion"] = str(cur["rv"])
        want = 200
    elif r < 0.6 and cur["rv"] > 1:
        body["metadata"]["resourceVersion"] = str(w.rng.randrange(1, cur["rv"]))
        want = 409
    else:
        want = 200  # leases take unconditional updates
    if w.rng.random() < 0.2:
        code, res = w.py(f"replace_namespaced_lease({name!r}, {ns!r}, {body})", w.coord.replace_namespaced_lease,
                         name, ns, body)
        check(code == (200 if want == 200 else want), f"python replace lease {ns}/{name}: want {want}, got {code}")
        if code == 200:
            w.set_lease(ns, w.pyclient.sanitize_for_serialization(res), "python replace lease")
    else:
        code, obj, req, resp = w.api.call("PUT", w.lpath(ns, name), body, codes=want,
                                          reason={404: "NotFound", 409: "Conflict"}.get(want))
        if code == 200:
            w.set_lease(ns, obj, "update lease")
    w.expect_lease(ns, name)


def op_lease_patch(w):
    ns, name = w.pick_ns(), w.lease_name()
    cur = w.leases.get((ns, name))
    color, holder = w.rng.choice(COLORS), w.fresh()
    kind = w.rng.choice(["merge", "strategic", "json", "json-test"])
    ctype = {"merge": "application/merge-patch+json", "strategic": "application/strategic-merge-patch+json"}.get(
        kind, "application/json-patch+json")
    if kind in ("merge", "strategic"):
        patch = {"metadata": {"labels": {"color": color}}, "spec": {"holderIdentity": holder}}
    else:
        patch = [{"op": "replace", "path": "/spec/holderIdentity", "value": holder},
                 {"op": "add", "path": "/metadata/labels/color", "value": color}]
        if kind == "json-test" and cur:
            # a test of the current holder: passes on the model's value, fails on another
            ok = w.rng.random() < 0.6
            patch.insert(0, {"op": "test", "path": "/spec/holderIdentity", "value": cur["holder"] if ok else "x"})
    want = 200 if cur else 404
    if cur and kind == "json-test" and patch[0]["value"] == "x":
        want = 422
    if w.rng.random() < 0.2 and kind in ("merge", "strategic", "json"):
        # the python client picks the patch type from the body (a list: JSON patch)
        code, res = w.py(f"patch_namespaced_lease({name!r}, {ns!r}, {patch})", w.coord.patch_namespaced_lease,
                         name, ns, patch)
        check(code == want, f"python patch lease {ns}/{name}: want {want}, got {code}")
        if code == 200:
            w.set_lease(ns, w.pyclient.sanitize_for_serialization(res), "python patch lease")
    else:
        code, obj, req, resp = w.api.call("PATCH", w.lpath(ns, name), json.dumps(patch), ctype=ctype, codes=want)
        if code == 200:
            check(obj["spec"]["holderIdentity"] == holder and obj["metadata"]["labels"]["color"] == color,
                  "patched lease", req, resp)
            w.set_lease(ns, obj, "patch lease")
    w.expect_lease(ns, name)


def op_lease_delete(w):
    ns, name = w.pick_ns(), w.lease_name()
    cur = w.leases.get((ns, name))
    how = w.rng.random()
    if how < 0.05:
        p = w.kubectl("delete", "lease", name, "-n", ns)
        check((p.returncode == 0) == bool(cur), f"kubectl delete lease {ns}/{name}: rc {p.returncode}, "
                                                 f"model {cur}: {p.stderr}")
    elif how < 0.25:
        code, res = w.py(f"delete_namespaced_lease({name!r}, {ns!r})", w.coord.delete_namespaced_lease, name, ns)
        check(code == (200 if cur else 404), f"python delete lease {ns}/{name}: got {code}, model {cur}")
    else:
        body, want = None, (200 if cur else 404)
        if cur and w.rng.random() < 0.3:
            stale = cur["rv"] > 1 and w.rng.random() < 0.5
            rv = w.rng.randrange(1, cur["rv"]) if stale else cur["rv"]
            body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": str(rv)}}
            want = 409 if stale else 200
        code, st, req, resp = w.api.call("DELETE", w.lpath(ns, name), body, codes=want)
        if code == 200:
            check(st.get("status") == "Success" and st["details"]["name"] == name, "delete Status", req, resp)
        if code != 200:
            w.expect_lease(ns, name)
            return
    w.leases.pop((ns, name), None)
    w.expect_lease(ns, name)


def op_lease_deletecollection(w):
    ns = w.pick_ns()
    color = w.rng.choice(COLORS)
    lsel = f"soak-owner={w.owner},color={color}"
    want = sorted(n for (s, n), v in w.leases.items() if s == ns and v["labels"].get("color") == color)
    if w.rng.random() < 0.3:
        code, res = w.py(f"delete_collection_namespaced_lease({ns!r}, label_selector={lsel!r})",
                         w.coord.delete_collection_namespaced_lease, ns, label_selector=lsel)
        check(code == 200, f"python deletecollection leases: {code}")
    else:
        code, lst, req, resp = w.api.call("DELETE", w.lpath(ns) + "?labelSelector=" + q(lsel))
        got = sorted(i["metadata"]["name"] for i in lst["items"])
        check(got == want, f"deletecollection in {ns} ({lsel}): deleted {got}, model {want}", req, resp)
    for n in want:
        del w.leases[(ns, n)]
    code, lst, req, resp = w.api.call("GET", w.lpath(ns) + "?labelSelector=" + q(lsel))
    check(lst["items"] == [], "deletecollection left matching leases", req, resp)


# Invalid requests: the answer is the documented error and nothing changes. need_obj: a check
# made only on the current object (a PUT or a patch's content): 404 before it when there is none.
def op_invalid(w):
    ns, name = w.pick_ns(), w.lease_name()
    good = lease_body(name, w.labels(), w.fresh())
    p, o = w.lpath(ns), w.lpath(ns, name)
    J, M, S = "application/json", "application/merge-patch+json", "application/strategic-merge-patch+json"
    JP = "application/json-patch+json"
    cases = [  # method, path, body, content type, code(s), need_obj
        ("POST", p, '{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {', J, 400, False),
        ("POST", p, json.dumps({**good, "kind": "Pod", "apiVersion": "v1"}), J, 400, False),
        ("POST", p, json.dumps({**good, "apiVersion": "coordination.k8s.io/v9"}), J, 400, False),
        ("POST", p, json.dumps(lease_body("Bad_Name." + name, {}, "x")), J, 422, False),
        ("POST", p, json.dumps(lease_body(name + "-" + "a" * w.rng.choice([250, 300, 70000]), {}, "x")), J, 422,
         False),
        ("POST", p, json.dumps(lease_body(name, {"bad label!": "x"}, "x")), J, 422, False),
        ("POST", p, json.dumps({**good, "spec": {"leaseDurationSeconds": -5}}), J, 422, False),
        ("POST", p, json.dumps(good), "text/plain", 415, False),
        ("POST", p, "[]", J, 400, False),
        ("POST", p, "", None, 400, False),
        ("POST", p, "[" * 200 + "]" * 200, J, 400, False),
        ("POST", p, json.dumps(lease_body(name, {}, "x", ns=ns + "-other")), J, 400, False),
        ("PUT", o, json.dumps(lease_body(name + "-other", {}, "x")), J, 400, True),
        ("PUT", o, json.dumps(lease_body(name, {}, "x", extra_meta={"resourceVersion": "abc"})), J, 400, True),
        ("PUT", o, "{nope", J, 400, False),
        ("PATCH", o, '{"metadata": ', M, 400, False),
        ("PATCH", o, json.dumps({"spec": {}}), "application/x-yaml", 415, False),
        ("PATCH", o, json.dumps({"a": 1}), JP, 400, True),
        ("PATCH", o, json.dumps([{"op": "remove", "path": "/nope/x"}]), JP, 422, True),
        ("PATCH", o, json.dumps([{"op": "bogus", "path": "/spec"}]), JP, {400, 422}, True),
        ("PATCH", o, json.dumps([{"op": "add", "path": "", "value": 5}]), JP, {400, 422}, True),
        ("PATCH", o, json.dumps({"metadata": {"name": "other"}}), M, 400, True),
        ("PATCH", o, json.dumps({"metadata": {"$patch": "bogus"}}), S, 422, True),
        ("PATCH", o, json.dumps({"spec": {"leaseDurationSeconds": "x"}}), M, 400, True),
        ("PATCH", o, json.dumps({"kind": "Node"}), S, 400, True),
        ("GET", p + "?labelSelector=" + q("a===b!"), None, None, 400, False),
        ("GET", p + "?fieldSelector=" + q("spec.holderIdentity=x"), None, None, 400, False),
        ("GET", p + "?limit=abc", None, None, 400, False),
        ("GET", p + "?resourceVersion=abc", None, None, 400, False),
        ("GET", p + "?watch=true&timeoutSeconds=abc", None, None, 400, False),
        ("GET", p + "?continue=" + q("not-a-token"), None, None, 400, False),
        ("GET", w.lpath(ns, "a" * 20000), None, None, 414, False),
        ("GET", w.lpath(ns, "x" * 3000), None, None, 404, False),
        ("DELETE", o, "{nope", J, 400, False),
        ("DELETE", p + "?labelSelector=" + q("x in (a"), None, None, 400, False),
        ("GET", f"{LEASES}/namespaces/{ns}/nosuchthings", None, None, 404, False),
    ]
    method, path, body, ctype, want, need_obj = w.rng.choice(cases)
    if need_obj and (ns, name) not in w.leases:
        want = 404
    w.api.call(method, path, body, ctype=ctype, codes=want)
    w.expect_lease(ns, name)


def op_watch(w):
    """A watch of one of the worker's namespaces from a LIST's revision sees exactly the worker's
    own writes after it, in order, at the revisions the writes reported; then it is cancelled."""
    existing = sorted(w.nss)
    if not existing:
        return op_ns_create(w)
    ns = w.rng.choice(existing)
    code, lst, req, resp = w.api.call("GET", w.lpath(ns))
    rv0 = lst["metadata"]["resourceVersion"]
    sel = "&labelSelector=" + q("soak-owner=" + w.owner) if w.rng.random() < 0.5 else ""
    path = w.lpath(ns) + f"?watch=true&resourceVersion={rv0}&allowWatchBookmarks=true&timeoutSeconds=30{sel}"
    conn = http.client.HTTPSConnection("127.0.0.1", w.cluster.port, context=w.cluster.identity.ctx,
                                       timeout=WATCH_READ_TIMEOUT)
    try:
        w.inflight = ("raw watch", "GET", path)
        conn.request("GET", path, headers={"Accept": "application/json"})
        r = conn.getresponse()
        w.inflight = None
        if r.status != 200:
            raise WrongAnswer(f"watch {path}: HTTP {r.status}: {r.read()[:500]!r}")
        expected = []
        for _ in range(w.rng.randrange(0, 5)):
            name = w.lease_name()
            if (ns, name) in w.leases:
                if w.rng.random() < 0.5:
                    w.api.call("DELETE", w.lpath(ns, name), codes=200)
                    w.leases.pop((ns, name))
                    # a delete's Status carries no revision: the event's is checked to be past the last
                    expected.append(("DELETED", name, None))
                else:
                    code, obj, req, resp = w.api.call("PATCH", w.lpath(ns, name),
                                                      {"spec": {"holderIdentity": w.fresh()}},
                                                      ctype="application/merge-patch+json")
                    w.set_lease(ns, obj, "patch lease (watched)")
                    expected.append(("MODIFIED", name, rv_of(obj)))
            else:
                code, obj, req, resp = w.api.call("POST", w.lpath(ns), lease_body(name, w.labels(), w.fresh()),
                                                  codes=201)
                w.set_lease(ns, obj, "create lease (watched)")
                expected.append(("ADDED", name, rv_of(obj)))
        got, last = [], int(rv0)
        while len(got) < len(expected):
            line = r.readline()
            check(line, f"watch {path} ended after {got}, expected {expected}")
            ev = json.loads(line)
            rv = rv_of(ev["object"])
            if ev["type"] == "BOOKMARK":
                check(rv >= last, f"watch {path}: bookmark at {rv} before the last event's {last}")
                continue
            check(rv > last, f"watch {path}: event {ev['type']} at rv {rv} not after {last}")
            last = rv
            got.append((ev["type"], ev["object"]["metadata"]["name"], rv))
        for (t, n, rv), (gt, gn, grv) in zip(expected, got):
            check((t, n) == (gt, gn) and (rv is None or rv == grv),
                  f"watch {path}: events {got}, expected {expected}")
        for t, n, rv in got:
            if t == "DELETED":
                w.last_rv = max(w.last_rv, rv)
        if w.rng.random() < 0.3:
            # resume from the middle with the python client: the same events from there
            if len(got) >= 2:
                start = got[0][2]
                seen = []
                wt = kwatch.Watch()
                w.inflight = ("python watch", ns, start)
                for ev in wt.stream(w.coord.list_namespaced_lease, ns, resource_version=str(start),
                                    timeout_seconds=1):
                    seen.append((ev["type"], ev["object"].metadata.name, int(ev["object"].metadata.resource_version)))
                w.inflight = None
                check(seen[:len(got) - 1] == got[1:], f"python watch from {start}: {seen}, expected {got[1:]}")
    finally:
        conn.close()  # cancels the watch (mid-stream)


def op_watch_cancel(w):
    """Watches that end early: cancelled right after the headers, or before them, or timed out."""
    ns = w.pick_ns()
    choice = w.rng.random()
    path = w.lpath(ns) + "?watch=true" + ("&timeoutSeconds=1" if choice < 0.3 else "")
    if w.rng.random() < 0.2:
        path = f"{LEASES}/leases?watch=true&timeoutSeconds=1"
    conn = http.client.HTTPSConnection("127.0.0.1", w.cluster.port, context=w.cluster.identity.ctx,
                                       timeout=WATCH_READ_TIMEOUT)
    try:
        w.inflight = ("raw watch", "GET", path)
        conn.request("GET", path, headers={"Accept": "application/json"})
        if choice < 0.3:
            r = conn.getresponse()
            body = r.read()
            check(r.status == 200, f"watch {path}: HTTP {r.status}")
            for line in body.splitlines():
                # without a resourceVersion a watch starts with the current objects, in no order
                ev = json.loads(line)
                check(ev["type"] in ("ADDED", "MODIFIED", "DELETED") and ev["object"]["kind"] == "Lease",
                      f"watch {path}: event {line[:1000]!r}")
        elif choice < 0.7:
            r = conn.getresponse()
            check(r.status == 200, f"watch {path}: HTTP {r.status}")
        w.inflight = None
    finally:
        conn.close()


def op_node(w):
    name = f"{w.owner}-n{w.rng.randrange(3)}"
    cur = w.nodes.get(name)
    r = w.rng.random()
    if r < 0.3:
        want = 409 if cur else 201
        code, obj, req, resp = w.api.call("POST", "/api/v1/nodes",
                                          e2e.node_manifest(name, labels={"soak-owner": w.owner}), codes=want)
        if code == 201:
            w.nodes[name] = {"rv": w.wrote(obj, "create node"), "labels": obj["metadata"]["labels"]}
    elif r < 0.5:
        want = 200 if cur else 404
        color = w.rng.choice(COLORS)
        code, obj, req, resp = w.api.call("PATCH", f"/api/v1/nodes/{name}",
                                          {"metadata": {"labels": {"color": color},
                                                        "annotations": {"soak-n": w.fresh()}},
                                           "spec": {"unschedulable": w.rng.random() < 0.5}},
                                          ctype="application/strategic-merge-patch+json", codes=want)
        if code == 200:
            check(obj["metadata"]["labels"]["color"] == color, "patched node", req, resp)
            w.nodes[name] = {"rv": w.wrote(obj, "patch node"), "labels": obj["metadata"]["labels"]}
    elif r < 0.6:
        want = 200 if cur else 404
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        code, obj, req, resp = w.api.call(
            "PATCH", f"/api/v1/nodes/{name}/status",
            {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                        "message": w.fresh(), "lastHeartbeatTime": now,
                                        "lastTransitionTime": now}]}},
            ctype="application/strategic-merge-patch+json", codes=want)
        if code == 200:
            msgs = [c["message"] for c in obj["status"]["conditions"] if c["type"] == "Ready"]
            check(msgs == [f"{w.owner}-{w.n}"], "node status patch", req, resp)
            w.nodes[name]["rv"] = w.wrote(obj, "patch node status")
    elif r < 0.75:
        want = 200 if cur else 404
        w.api.call("DELETE", f"/api/v1/nodes/{name}", codes=want)
        w.nodes.pop(name, None)
    else:
        if w.rng.random() < 0.5:
            code, res = w.py("list_node(label_selector=soak-owner)", w.core.list_node,
                             label_selector="soak-owner=" + w.owner)
            got = sorted(i.metadata.name for i in res.items)
        else:
            code, lst, req, resp = w.api.call("GET", "/api/v1/nodes?labelSelector=" + q("soak-owner=" + w.owner))
            got = sorted(i["metadata"]["name"] for i in lst["items"])
        check(got == sorted(w.nodes), f"list nodes of {w.owner}: got {got}, model {sorted(w.nodes)}")
        return
    code, obj, req, resp = w.api.call("GET", f"/api/v1/nodes/{name}", codes=200 if name in w.nodes else 404)
    if name in w.nodes:
        check(rv_of(obj) == w.nodes[name]["rv"], f"GET node: model {w.nodes[name]}", req, resp)


def op_event(w):
    ns = w.pick_ns()
    if NO_MISSING_NS_CREATE and not w.ns_exists(ns):
        ns = "default"
    v1 = w.rng.random() < 0.3
    name = f"{w.owner}-e{w.rng.randrange(NAMES_PER_NS)}"
    cur = w.events.get((ns, name))
    base = f"{EVENTS_V1 if v1 else EVENTS}/namespaces/{ns}/events"
    labels = w.labels()
    r = w.rng.random()
    if r < 0.35:
        want = 404 if not w.ns_exists(ns) else (409 if cur else 201)
        code, obj, req, resp = w.api.call("POST", base, event_body(name, ns, labels, w.fresh(), v1), codes=want)
    elif r < 0.6:
        # events take unconditional updates and a PUT of a missing one creates it
        want = 404 if not w.ns_exists(ns) else (200 if cur else 201)
        code, obj, req, resp = w.api.call("PUT", f"{base}/{name}", event_body(name, ns, labels, w.fresh(), v1),
                                          codes=want)
    elif r < 0.75:
        want = 200 if cur else 404
        code, obj, req, resp = w.api.call("DELETE", f"{base}/{name}", codes=want)
        w.events.pop((ns, name), None)
        obj = None
    else:
        fname = f"{w.owner}-e{w.rng.randrange(NAMES_PER_NS)}"
        color = w.rng.choice(COLORS)
        if w.rng.random() < 0.5:
            code, lst, req, resp = w.api.call(
                "GET", f"{EVENTS}/namespaces/{ns}/events?labelSelector=" + q(f"soak-owner={w.owner},color={color}")
                + ("&fieldSelector=" + q(f"metadata.name={fname},involvedObject.kind=Node") if w.rng.random() < 0.3
                   else ""))
            names = sorted(i["metadata"]["name"] for i in lst["items"])
            want = sorted(n for (s, n), v in w.events.items() if s == ns and v["labels"].get("color") == color
                          and ("fieldSelector" not in req[1] or n == fname))
        else:
            code, res = w.py(f"list_namespaced_event({ns})", w.core.list_namespaced_event, ns,
                             label_selector="soak-owner=" + w.owner)
            names = sorted(i.metadata.name for i in res.items)
            want = sorted(n for (s, n) in w.events if s == ns)
        check(names == want, f"list events in {ns}: got {names}, model {want}")
        return
    if obj is not None and code in (200, 201):
        check(obj["apiVersion"] == ("events.k8s.io/v1" if v1 else "v1"), "event apiVersion", req, resp)
        w.events[(ns, name)] = {"rv": w.wrote(obj, "write event"), "labels": labels}
    want = w.events.get((ns, name))
    code, obj, req, resp = w.api.call("GET", f"{base}/{name}", codes=200 if want else 404)
    if want:
        check(rv_of(obj) == want["rv"], f"GET event: model {want}", req, resp)


def op_kubectl_label(w):
    ns, name = w.pick_ns(), w.lease_name()
    cur = w.leases.get((ns, name))
    color = w.rng.choice(COLORS)
    p = w.kubectl("label", "lease", name, "-n", ns, f"color={color}", "--overwrite")
    check((p.returncode == 0) == bool(cur), f"kubectl label lease {ns}/{name}: rc {p.returncode}, model {cur}: "
                                             f"{p.stderr}")
    if cur:
        # (kubectl label -o json prints the object it read with the label set, at the old revision)
        code, obj, req, resp = w.api.call("GET", w.lpath(ns, name))
        check(obj["metadata"]["labels"].get("color") == color, f"kubectl label {color}: {p.stdout}", req, resp)
        if color == cur["labels"].get("color"):
            check(rv_of(obj) == cur["rv"], "kubectl label (no change) moved the revision", req, resp)
        else:
            check(rv_of(obj) > cur["rv"], f"kubectl label {ns}/{name} color={color}: model {cur}", req, resp)
            w.set_lease(ns, obj, "kubectl label")
    w.expect_lease(ns, name)


def op_shared(w):
    """Racing writes of shared names in a shared namespace that is itself created and deleted:
    only the form of each answer is checked."""
    name = f"shared-{w.rng.randrange(4)}"
    lp = f"{LEASES}/namespaces/{SHARED_NS}/leases"
    r = w.rng.random()
    if NO_MISSING_NS_CREATE and (0.15 <= r < 0.4 or r >= 0.9):
        r = 0.85  # the shared namespace may be gone: a LIST instead
    if r < 0.1:
        w.api.call("POST", "/api/v1/namespaces",
                   {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SHARED_NS}}, codes={201, 409})
    elif r < 0.15:
        w.api.call("DELETE", f"/api/v1/namespaces/{SHARED_NS}", codes={200, 202, 404})  # 202: already Terminating
    elif r < 0.4:
        # 403: the shared namespace is being deleted (Terminating)
        w.api.call("POST", lp, lease_body(name, {"soak-owner": "shared"}, w.fresh()), codes={201, 403, 404, 409})
    elif r < 0.55:
        w.api.call("PATCH", f"{lp}/{name}", {"spec": {"holderIdentity": w.fresh()}},
                   ctype=w.rng.choice(["application/merge-patch+json", "application/strategic-merge-patch+json"]),
                   codes={200, 404, 409})
    elif r < 0.65:
        w.api.call("PUT", f"{lp}/{name}", lease_body(name, {"soak-owner": "shared"}, w.fresh()),
                   codes={200, 404, 409})
    elif r < 0.75:
        w.api.call("DELETE", f"{lp}/{name}", codes={200, 404, 409})
    elif r < 0.8:
        w.api.call("DELETE", lp + "?labelSelector=soak-owner%3Dshared")
    elif r < 0.9:
        code, lst, req, resp = w.api.call("GET", lp)
        check(all(i["metadata"]["namespace"] == SHARED_NS for i in lst["items"]), "LIST namespace", req, resp)
    else:
        w.api.call("PUT", f"{EVENTS}/namespaces/{SHARED_NS}/events/{name}",
                   event_body(name, SHARED_NS, {"soak-owner": "shared"}, w.fresh()), codes={200, 201, 403, 404})


# ---- hostile shapes (SOAK_HOSTILE=1): any answer but a 5xx (and the server living) is right,
# unless the shape says which

def _hostile_yaml_bomb(w):
    """An 8 KiB scalar reached through 99^3 aliases, as a SelfSubjectAccessReview: refused, bounded."""
    doc = ["apiVersion: authorization.k8s.io/v1", "kind: SelfSubjectAccessReview",
           "a: &a [\"" + "x" * 8192 + "\"]", "b: &b [" + ",".join(["*a"] * 99) + "]",
           "c: &c [" + ",".join(["*b"] * 99) + "]", "d: [" + ",".join(["*c"] * 99) + "]",
           "spec: {resourceAttributes: {verb: get, resource: pods}}"]
    w.api.call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "\n".join(doc) + "\n",
               ctype="application/yaml", codes={400, 413, 422})


def _hostile_yaml_deep(w):
    depth = w.rng.choice([100, 5000, 20000])
    w.api.call("POST", w.lpath(w.pick_ns()), "[" * depth + "]" * depth, ctype="application/yaml", codes=400)


def _hostile_json_deep(w):
    depth = w.rng.choice([100, 5000, 100000])
    w.api.call("POST", w.lpath(w.pick_ns()), "[" * depth + "]" * depth, ctype="application/json", codes=400)


def _hostile_oversized(w):
    """A body over the 3 MiB limit: 413 from its head (Content-Length), before any body is sent."""
    from hostile import h1_head_answer, tls_context
    anon = w.rng.random() < 0.5
    length = w.rng.choice([3 * 1024 * 1024 + 1, 1 << 40])
    head = (f"POST {w.lpath(w.pick_ns())} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()
    w.inflight = ("raw head", head)
    _, data = h1_head_answer(w.cluster.port, tls_context(w.cluster.data_dir, cert=None if anon else "admin"),
                             head, timeout=10)
    w.inflight = None
    want = b"HTTP/1.1 401 " if anon else b"HTTP/1.1 413 "
    check(data.startswith(want), f"oversized head ({'anonymous' if anon else 'admin'}): want {want!r} at once, "
                                 f"got {data[:300]!r}")


def _hostile_h2_anonymous(w):
    """An anonymous HTTP/2 connection: streams announcing 2.9 MB bodies, each refused 401 at its
    HEADERS and reset, whatever DATA follows."""
    from hostile import H2, tls_context
    c = H2(w.cluster.port, tls_context(w.cluster.data_dir, alpn=("h2",)))
    try:
        w.inflight = ("h2 anonymous", "20 streams of 2.9 MB")
        sids = [c.head("POST", w.lpath(w.pick_ns()), length=2_900_000) for _ in range(20)]
        for s in sids:
            c.send_some(s, 2_900_000, chunk=65536)
        check(c.wait(lambda: all(s in c.status for s in sids), 10),
              f"anonymous HTTP/2 streams unanswered: {len(c.status)} of {len(sids)}")
        check({c.status[s] for s in sids} == {401}, f"anonymous HTTP/2 streams: {sorted(c.status.values())}")
    finally:
        w.inflight = None
        c.close()


def _hostile_int_timeout(w):
    """A watch with timeoutSeconds past int32 seconds: a 200 stream or a 400, never a crash."""
    from hostile import h1_head_answer
    path = w.lpath(w.pick_ns()) + "?watch=1&timeoutSeconds=" + w.rng.choice(["9300000000", "9223372036854775807"])
    head = f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    w.inflight = ("raw", "GET", path)
    _, data = h1_head_answer(w.cluster.port, w.cluster.identity.ctx, head, timeout=1)
    w.inflight = None
    check(data.startswith((b"HTTP/1.1 200 ", b"HTTP/1.1 400 ")), f"GET {path}: {data[:300]!r}")


def _hostile_int_grace(w):
    """DELETE of a pod with gracePeriodSeconds=INT64_MAX: the pod is marked deleted, no crash."""
    ns = w.pick_ns()
    if not w.ns_exists(ns):
        return
    name = w.fresh()
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    w.api.call("POST", f"/api/v1/namespaces/{ns}/pods", pod, codes={201, 404})
    w.api.call("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}?gracePeriodSeconds=9223372036854775807",
               codes={200, 404})


def _hostile_rv_exact(w):
    """A list at a resourceVersion far in the future: 504 Too large resource version, as upstream."""
    path = w.lpath(w.pick_ns()) + "?resourceVersionMatch=Exact&resourceVersion=9223372036854775807"
    w.api.call("GET", path, codes={504})


HOSTILE_SHAPES = [(_hostile_yaml_bomb, "yaml-bomb"), (_hostile_yaml_deep, "yaml-deep"),
                  (_hostile_json_deep, "json-deep"), (_hostile_oversized, "oversized"),
                  (_hostile_h2_anonymous, "h2-anonymous"), (_hostile_int_timeout, "int-timeout"),
                  (_hostile_int_grace, "int-grace"), (_hostile_rv_exact, "rv-exact")]


def op_hostile(w):
    shapes = [(fn, name) for fn, name in HOSTILE_SHAPES if "hostile-" + name not in SKIP]
    if shapes:
        fn, name = w.rng.choice(shapes)
        w.recent.append("hostile-" + name)
        fn(w)
        count("hostile-" + name)
        w.expect_lease(w.pick_ns(), w.lease_name())  # and the server still answers right


OPS = [
    (op_ns_create, 4), (op_ns_delete, 2), (op_lease_create, 14), (op_lease_get, 8), (op_lease_list, 10),
    (op_lease_update, 8), (op_lease_patch, 10), (op_lease_delete, 7), (op_lease_deletecollection, 2),
    (op_invalid, 10), (op_watch, 4), (op_watch_cancel, 3), (op_node, 6), (op_event, 8), (op_kubectl_label, 1),
    (op_shared, 8),
] + ([(op_hostile, 6)] if HOSTILE else [])


# ------------------------------------------------------------------------- whole-server watchers

class Follower:
    """Watches one resource across all namespaces for the whole run: revisions only go up."""

    def __init__(self, cluster, path):
        self.cluster, self.path = cluster, path
        self.who = f"watcher {path}"
        self.events = 0
        self.thread = threading.Thread(target=self.run, name=self.who, daemon=True)

    def run(self):
        rv = None
        try:
            while not stop.is_set():
                api = e2e.Api("127.0.0.1", self.cluster.port, self.cluster.identity.ctx)
                if rv is None:
                    rv = api.ok("GET", self.path)["metadata"]["resourceVersion"]
                api.close()
                path = f"{self.path}?watch=true&allowWatchBookmarks=true&timeoutSeconds=20&resourceVersion={rv}"
                conn = http.client.HTTPSConnection("127.0.0.1", self.cluster.port, context=self.cluster.identity.ctx,
                                                   timeout=30)
                try:
                    conn.request("GET", path, headers={"Accept": "application/json"})
                    r = conn.getresponse()
                    check(r.status == 200, f"watch {path}: HTTP {r.status}")
                    last = int(rv)
                    while not stop.is_set():
                        line = r.readline()
                        if not line:
                            break  # timed out; resume from the last revision
                        ev = json.loads(line)
                        if ev["type"] == "ERROR":
                            check(ev["object"].get("code") == 410, f"watch {path}: {line[:1000]!r}")
                            rv = None
                            break
                        erv = rv_of(ev["object"])
                        if ev["type"] == "BOOKMARK":
                            check(erv >= last, f"watch {path}: bookmark {erv} before {last}")
                        else:
                            check(erv > last, f"watch {path}: {ev['type']} "
                                              f"{ev['object']['metadata'].get('name')} at {erv} not after {last}")
                            self.events += 1
                        last = erv
                        rv = str(erv)
                finally:
                    conn.close()
        except WrongAnswer as e:
            if self.cluster.proc.alive():
                fail(self.who, str(e))
        except Exception:
            if self.cluster.proc.alive() and not stop.is_set():
                fail(self.who, traceback.format_exc())


# ------------------------------------------------------------------------- the run

def final_check(w):
    """After the run: the server holds exactly the model."""
    for ns in w.my_nss + ["default"]:
        code, lst, req, resp = w.api.call("GET", w.lpath(ns) + "?labelSelector=" + q("soak-owner=" + w.owner))
        got = {i["metadata"]["name"]: rv_of(i) for i in lst["items"]}
        want = {n: v["rv"] for (s, n), v in w.leases.items() if s == ns}
        check(got == want, f"final: leases in {ns}: server {got}, model {want}")
        code, obj, req, resp = w.api.call("GET", f"/api/v1/namespaces/{ns}",
                                          codes=200 if w.ns_exists(ns) else 404)


class LogScan:
    """Finds a sanitizer report in the growing server log, reading each byte about once."""

    def __init__(self, path):
        self.path, self.off = path, 0

    def report(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(max(0, self.off - 64))  # a mark split across two reads
                data = f.read()
        except OSError:
            return None
        if e2e.sanitizer_report(data) is None:
            self.off = max(0, self.off - 64) + len(data)
            return None
        return e2e.sanitizer_report(self.path.read_bytes())


def main():
    if not os.access(e2e.KITE, os.X_OK):
        print(f"soak: no kite binary at {e2e.KITE} (set KITE)", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="kite-soak-"))
    print(f"soak: seed {SEED} (SOAK_SEED={SEED} replays), {SECONDS:g} s, {WORKERS} workers, kite {e2e.KITE}, "
          f"mode {MODE}, workdir {workdir}" + (f", skipping {sorted(SKIP)}" if SKIP else ""), flush=True)
    random.seed(SEED)
    # the soak models the API, not the controllers: only the namespace controller runs (it
    # finishes namespace deletes); node lifecycle would taint and mark the soak's nodes
    extra = e2e.AGENT_FAST_FLAGS + ["--controllers=namespace"] if MODE == "up" else []
    cluster = e2e.Cluster(MODE, workdir, extra_args=extra)
    try:
        cluster.start()
    except Failed as e:
        print(f"soak: the server did not start: {e}", file=sys.stderr)
        return 1
    cm = None
    if MODE == "apiserver":  # kite up runs the controllers itself
        cm = e2e.KiteProcess(["controller-manager", "--kubeconfig", str(cluster.kubeconfig),
                              "--controllers=namespace"], workdir, "controller-manager").start()
    workers = [Worker(i, cluster, SEED) for i in range(WORKERS)]
    followers = [Follower(cluster, f"{LEASES}/leases"), Follower(cluster, f"{EVENTS}/events")]
    t0 = time.monotonic()
    for t in workers + followers:
        t.thread.start()
    deadline = t0 + SECONDS
    next_report = t0 + 30
    died = None
    report = None
    scan = LogScan(cluster.proc.log_path)
    while not stop.is_set() and time.monotonic() < deadline:
        time.sleep(0.5)
        if not cluster.proc.alive():
            died = cluster.proc.proc.returncode
            break
        report = scan.report()
        if report:
            break
        if time.monotonic() >= next_report:
            next_report += 30
            with counts_lock:
                total = sum(counts.values())
            print(f"soak: {time.monotonic() - t0:.0f} s, {total} ops", flush=True)
    if died is not None or report:
        stop.set()
        time.sleep(1)  # the log's last lines
        report = cluster.proc.sanitizer_report()
        lines = [f"the server {'exited with ' + str(died) if died is not None else 'reported'}"
                 f" after {time.monotonic() - t0:.0f} s; requests in flight then:"]
        for w in workers:
            lines.append(f"  {w.who}: {w.inflight!r} (recent ops: {list(w.recent)})")
        lines.append(report[:12000] if report else "log tail:\n" + cluster.proc.log_tail(6000))
        fail("server", "\n".join(lines))
    stop.set()
    for t in workers + followers:
        t.thread.join(timeout=e2e.HTTP_TIMEOUT + e2e.KUBECTL_TIMEOUT)
    if not failures and cluster.proc.alive():
        for w in workers:
            try:
                final_check(w)
            except WrongAnswer as e:
                fail(w.who, str(e))
                break
    if cm is not None:
        cm.stop()  # the controller-manager first: it is a client of the server
    # SIGTERM: a clean exit, and a clean log (LeakSanitizer reports at exit)
    rc = None
    if cluster.proc.alive():
        cluster.proc.signal(signal.SIGTERM)
        try:
            rc = cluster.proc.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            fail("server", f"did not exit within {STOP_TIMEOUT} s of SIGTERM:\n" + cluster.proc.log_tail(4000))
            cluster.proc.kill9()
        if rc is not None and rc != 0:
            fail("server", f"exited with {rc} on SIGTERM:\n" + (cluster.proc.sanitizer_report() or "")[:12000]
                 + "\nlog tail:\n" + cluster.proc.log_tail(3000))
        elif rc == 0:
            rep = cluster.proc.sanitizer_report()
            if rep:
                fail("server", "sanitizer report in the log:\n" + rep[:12000])
    elif died is not None:
        rc = died
    elif not failures:
        fail("server", "not running at the end:\n" + cluster.proc.log_tail(4000))
    with counts_lock:
        summary = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
        codes = " ".join(f"{k}:{v}" for k, v in sorted(answers.items()))
        total = sum(counts.values())
    watched = " ".join(f"{f.path}={f.events}" for f in followers)
    print(f"soak: seed {SEED}, {time.monotonic() - t0:.0f} s, {total} ops ({summary}), HTTP answers ({codes}), "
          f"watch events ({watched}), "
          f"{len(failures)} failure(s), server exit {rc}", flush=True)
    if failures:
        print(f"soak: FAILED (replay: SOAK_SEED={SEED}; log {cluster.proc.log_path})", flush=True)
        return 1
    shutil_ok = os.environ.get("SOAK_KEEP") is None
    if shutil_ok:
        import shutil
        shutil.rmtree(workdir, ignore_errors=True)
    print("soak: ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
