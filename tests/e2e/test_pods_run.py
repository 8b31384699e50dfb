"""Pods run for real: `kite up` with the runc runtime and the busybox image imported into the
agent's store; pods bound to the node (spec.nodeName) go Pending -> Running -> Succeeded /
Failed with the kubelet's container states, init containers run in order, a crash loop backs
off, a container over its memory limit is OOMKilled, a missing image backs off, deletion is
graceful, and a restarted agent finds its containers again. Needs root, runc, conmon, umoci."""
import json
import os
import time

import pytest

from conftest import pinned_mounts, runc_list, runc_up_cluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NS = "default"


# The agents' container restart back-off starts at 2 s here (--restart-backoff-base) rather than the
# kubelet's 10 s, which test_crash_loop_backoff[default] (slow tier) and the unit tests check.
BACKOFF_BASE = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from _cluster(tmp_path_factory, ["--restart-backoff-base", f"{BACKOFF_BASE}s"])


@pytest.fixture(scope="module")
def default_backoff_cluster(tmp_path_factory):
    yield from _cluster(tmp_path_factory, [])


def _cluster(tmp_path_factory, extra):
    yield from runc_up_cluster(tmp_path_factory, "pods", extra, namespace=NS, privileged=True)


def wait(fn, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}; last: {last!r}")


def pod(c, name, containers, restart="Always", init=None, grace=None):
    spec = {"nodeName": c.node, "restartPolicy": restart, "containers": containers}
    if init:
        spec["initContainers"] = init
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return c.api().ok("POST", f"/api/v1/namespaces/{NS}/pods",
                      {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})


def get(c, name):
    r = c.api().get(f"/api/v1/namespaces/{NS}/pods/{name}")
    return r.json() if r.status == 200 else None


def status_of(c, name):
    p = get(c, name)
    return (p or {}).get("status", {})


def sh(name, script, **kw):
    return {"name": name, "image": "busybox", "command": ["sh", "-c", script], **kw}


def cstatus(st, name, key="containerStatuses"):
    return next((s for s in st.get(key, []) if s["name"] == name), {})


def cond(st, t):
    return next((x["status"] for x in st.get("conditions", []) if x["type"] == t), None)


def events(c, name):
    items = c.api().get(f"/api/v1/namespaces/{NS}/events").json()["items"]
    return [e for e in items if e["involvedObject"].get("name") == name]


def test_succeeded_and_failed(cluster):
    c = cluster
    pod(c, "ok", [sh("c", "sleep 2; exit 0")], restart="Never")
    pod(c, "bad", [sh("c", "sleep 1; exit 1")], restart="Never")
    st = wait(lambda: (s := status_of(c, "ok")).get("phase") == "Running" and s, 15, "ok Running")
    cs = cstatus(st, "c")
    assert "running" in cs["state"] and cs["ready"] is True and cs["started"] is True
    assert cs["containerID"].startswith("kite-runc://") and cs["imageID"].startswith("sha256:")
    assert cond(st, "Ready") == "True" and cond(st, "PodScheduled") == "True"
    assert st["hostIP"] and st["startTime"] and st["qosClass"] == "BestEffort"
    st = wait(lambda: (s := status_of(c, "ok")).get("phase") == "Succeeded" and s, 15, "ok Succeeded")
    t = cstatus(st, "c")["state"]["terminated"]
    assert t["exitCode"] == 0 and t["reason"] == "Completed" and t["finishedAt"] >= t["startedAt"]
    assert cond(st, "Ready") == "False"
    st = wait(lambda: (s := status_of(c, "bad")).get("phase") == "Failed" and s, 15, "bad Failed")
    t = cstatus(st, "c")["state"]["terminated"]
    assert t["exitCode"] == 1 and t["reason"] == "Error"
    reasons = [e["reason"] for e in events(c, "ok")]
    assert {"Pulled", "Created", "Started"} <= set(reasons), reasons
    e = next(e for e in events(c, "ok") if e["reason"] == "Started")
    assert e["involvedObject"]["fieldPath"] == "spec.containers{c}" and e["source"]["component"] == "kite-agent"
    assert e["involvedObject"]["uid"] == get(c, "ok")["metadata"]["uid"]


def test_init_containers_in_order(cluster):
    c = cluster
    pod(c, "init", [sh("c", "sleep 1")], restart="Never",
        init=[sh("i1", "sleep 1"), sh("i2", "exit 0")])
    st = wait(lambda: (s := status_of(c, "init")).get("phase") == "Pending"
              and "running" in cstatus(s, "i1", "initContainerStatuses").get("state", {}) and s, 15, "i1 running")
    assert cstatus(st, "i2", "initContainerStatuses")["state"]["waiting"]["reason"] == "PodInitializing"
    assert cstatus(st, "c")["state"]["waiting"]["reason"] == "PodInitializing"
    assert cond(st, "Initialized") == "False"
    st = wait(lambda: (s := status_of(c, "init")).get("phase") == "Succeeded" and s, 20, "init Succeeded")
    i1 = cstatus(st, "i1", "initContainerStatuses")["state"]["terminated"]
    i2 = cstatus(st, "i2", "initContainerStatuses")["state"]["terminated"]
    main = cstatus(st, "c")["state"]["terminated"]
    assert i1["finishedAt"] <= i2["startedAt"] <= i2["finishedAt"] <= main["startedAt"]
    # a failing init container with restartPolicy Never fails the pod; the main one never runs
    pod(c, "initfail", [sh("c", "exit 0")], restart="Never", init=[sh("i1", "exit 2")])
    st = wait(lambda: (s := status_of(c, "initfail")).get("phase") == "Failed" and s, 15, "initfail Failed")
    assert cstatus(st, "i1", "initContainerStatuses")["state"]["terminated"]["exitCode"] == 2
    assert "waiting" in cstatus(st, "c")["state"]


@pytest.mark.parametrize("base", [BACKOFF_BASE, pytest.param(10, marks=pytest.mark.slow)], ids=["short", "default"])
def test_crash_loop_backoff(request, base):
    c = request.getfixturevalue("cluster" if base == BACKOFF_BASE else "default_backoff_cluster")
    pod(c, "crash", [sh("c", "exit 3")])
    seen_backoff = []
    t0 = time.monotonic()
    restarts_at = {}
    while time.monotonic() - t0 < 15 + 3.5 * base and 3 not in restarts_at:
        st = status_of(c, "crash")
        cs = cstatus(st, "c")
        if cs:
            restarts_at.setdefault(cs["restartCount"], time.monotonic() - t0)
            w = cs.get("state", {}).get("waiting", {})
            if w.get("reason") == "CrashLoopBackOff":
                seen_backoff.append(w["message"])
                assert cs["lastState"]["terminated"]["exitCode"] == 3
                assert st["phase"] == "Running"
        time.sleep(0.1)
    assert seen_backoff and f"back-off {base}s restarting failed container=c pod=crash_default(" in seen_backoff[0]
    assert set(restarts_at) >= {1, 2, 3}, restarts_at
    # the first restart is immediate, the second after the base (10 s), the third after twice
    # that: the back-off grows
    assert restarts_at[2] - restarts_at[1] >= base - 0.5, restarts_at
    assert restarts_at[3] - restarts_at[2] >= 2 * base - 0.5, restarts_at
    assert any(e["reason"] == "BackOff" and e["type"] == "Warning" for e in events(c, "crash"))


def test_oom_killed(cluster):
    c = cluster
    pod(c, "oom", [sh("c", "x=aaaaaaaaaaaaaaaa; while true; do x=$x$x; done",
                      resources={"limits": {"memory": "20Mi"}})], restart="Never")
    st = wait(lambda: (s := status_of(c, "oom")).get("phase") == "Failed" and s, 30, "oom Failed")
    t = cstatus(st, "c")["state"]["terminated"]
    assert t["reason"] == "OOMKilled" and t["exitCode"] == 137
    assert st["qosClass"] == "Burstable"


def test_missing_image(cluster):
    c = cluster
    pod(c, "noimg", [{"name": "c", "image": "example.invalid/nothing:1"}])
    reasons = set()
    t0 = time.monotonic()
    while time.monotonic() - t0 < 8 and reasons != {"ErrImagePull", "ImagePullBackOff"}:
        w = cstatus(status_of(c, "noimg"), "c").get("state", {}).get("waiting", {})
        if w.get("reason"):
            reasons.add(w["reason"])
        time.sleep(0.1)
    assert "ImagePullBackOff" in reasons, reasons
    assert status_of(c, "noimg")["phase"] == "Pending"
    ev = events(c, "noimg")
    assert any(e["reason"] == "Failed" and "Failed to pull image" in e["message"] for e in ev), ev


def runc_ids(c):
    return set(runc_list(c.data_dir / "agent" / "runc"))


def test_delete_is_graceful(cluster):
    c = cluster
    pod(c, "term", [sh("c", "trap 'echo got TERM; exit 0' TERM; while true; do sleep 0.1; done")], grace=30)
    st = wait(lambda: (s := status_of(c, "term")).get("phase") == "Running" and s, 15, "term Running")
    cid = cstatus(st, "c")["containerID"].split("://")[1]
    assert cid in runc_ids(c)
    t0 = time.monotonic()
    r = c.api().delete(f"/api/v1/namespaces/{NS}/pods/term")
    assert r.status in (200, 202), r
    body = r.json()
    if body.get("kind") == "Pod" and get(c, "term"):
        assert body["metadata"].get("deletionTimestamp"), body
    wait(lambda: get(c, "term") is None, 15, "pod gone")
    # the trap answered SIGTERM: far less than the 30 s grace period before SIGKILL
    assert time.monotonic() - t0 < 10
    wait(lambda: cid not in runc_ids(c), 10, "container removed")
    assert any(e["reason"] == "Killing" for e in events(c, "term"))


def test_kubectl_delete_runs_prestop_then_sigterm(cluster, tmp_path):
    """kubectl delete pod: the preStop hook runs first, then SIGTERM reaches the container (its
    trap sees the hook's file), then the pod is gone."""
    c = cluster
    trap = ("trap 'if test -f /v/prestop; then echo after-prestop > /v/term; else echo no-prestop > /v/term; fi; "
            "exit 0' TERM; while true; do sleep 0.1; done")
    hook = {"preStop": {"exec": {"command": ["sh", "-c", "echo ran > /v/prestop"]}}}
    spec = {"nodeName": c.node, "terminationGracePeriodSeconds": 30,
            "containers": [sh("c", trap, lifecycle=hook, volumeMounts=[{"name": "v", "mountPath": "/v"}])],
            "volumes": [{"name": "v", "hostPath": {"path": str(tmp_path), "type": "Directory"}}]}
    c.api().ok("POST", f"/api/v1/namespaces/{NS}/pods",
               {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hooked"}, "spec": spec})
    wait(lambda: status_of(c, "hooked").get("phase") == "Running", 15, "hooked Running")
    out = c.kubectl("delete", "pod", "hooked", "--wait=false").stdout
    assert 'pod "hooked" deleted' in out, out
    wait(lambda: get(c, "hooked") is None, 20, "hooked gone")
    assert (tmp_path / "prestop").read_text() == "ran\n"
    assert (tmp_path / "term").read_text() == "after-prestop\n"
    assert any(e["reason"] == "Killing" for e in events(c, "hooked"))


def test_slow_stop_holds_no_other_pod(cluster):
    """A pod whose preStop hook runs long (the runtime call lasts up to its 10 s limit) holds its
    own worker only: a pod created meanwhile starts, and another pod's exit is reported, while
    the hook still runs (one thread synced every pod before, and both waited for the hook)."""
    c = cluster
    hook = {"preStop": {"exec": {"command": ["sleep", "60"]}}}
    pod(c, "slowstop", [sh("c", "sleep 1000", lifecycle=hook)], grace=15)
    wait(lambda: status_of(c, "slowstop").get("phase") == "Running", 15, "slowstop Running")
    c.api().delete(f"/api/v1/namespaces/{NS}/pods/slowstop")
    # the Killing event comes just before the hook runs
    wait(lambda: any(e["reason"] == "Killing" for e in events(c, "slowstop")), 10, "Killing event")
    time.sleep(0.5)
    t0 = time.monotonic()
    pod(c, "during", [sh("c", "sleep 1000")])
    pod(c, "exiter", [sh("c", "sleep 1; exit 3")], restart="Never")
    wait(lambda: status_of(c, "during").get("phase") == "Running"
         and status_of(c, "exiter").get("phase") == "Failed", 20, "during Running, exiter Failed")
    took = time.monotonic() - t0
    assert get(c, "slowstop") is not None, "the hook should still be running"
    # the hook has ~9.5 s left at t0: waiting for it would take longer than this
    assert took < 7, f"{took:.1f} s: the other pods waited for the slow hook"
    assert cstatus(status_of(c, "exiter"), "c")["state"]["terminated"]["exitCode"] == 3
    # (grace 0: the rest of slowstop's 15 s grace period is no part of the test)
    for name in ("slowstop", "during", "exiter"):
        c.api().delete(f"/api/v1/namespaces/{NS}/pods/{name}?gracePeriodSeconds=0")
    for name in ("slowstop", "during", "exiter"):
        wait(lambda: get(c, name) is None, 40, f"{name} gone")


def test_agent_restart_keeps_containers(cluster):
    c = cluster
    for name in ("crash", "noimg"):  # pods that would create containers meanwhile
        c.api().delete(f"/api/v1/namespaces/{NS}/pods/{name}")
    for name in ("crash", "noimg"):
        wait(lambda: get(c, name) is None, 40, f"{name} gone")
    pod(c, "long", [sh("c", "sleep 1000")])
    pod(c, "short", [sh("c", "sleep 3; exit 4")], restart="Never")
    st = wait(lambda: (s := status_of(c, "long")).get("phase") == "Running" and s, 15, "long Running")
    wait(lambda: status_of(c, "short").get("phase") == "Running", 15, "short Running")
    cid = cstatus(st, "c")["containerID"]
    sid, ip = sandbox_of(c, cid), st["podIP"]
    assert len(pinned_mounts(c.data_dir / "agent" / "sandboxes" / sid)) == 3  # net, ipc, uts
    before = runc_ids(c)
    c.kill9()
    time.sleep(4)  # "short" exits while the agent is down
    c.restart()
    st = wait(lambda: (s := status_of(c, "short")).get("phase") == "Failed" and s, 20, "short Failed after restart")
    assert cstatus(st, "c")["state"]["terminated"]["exitCode"] == 4
    time.sleep(2)
    st = status_of(c, "long")
    assert st["phase"] == "Running" and cstatus(st, "c")["containerID"] == cid
    assert cstatus(st, "c")["restartCount"] == 0
    assert runc_ids(c) <= before, (before, runc_ids(c))
    # the pod's namespaces, pinned without a process, outlived the agent: the same sandbox, its
    # address, and a command run in the container sees them
    assert st["podIP"] == ip and cond(st, "PodReadyToStartContainers") == "True", st
    assert not any(e["reason"] == "SandboxChanged" for e in events(c, "long"))
    out = c.kubectl("exec", "long", "--", "sh", "-c", "hostname; ip -4 addr show eth0").stdout
    assert out.startswith("long\n") and f"inet {ip}/" in out, out


def sandbox_of(c, cid):
    """The sandbox id of container cid ("runc://ID" or ID), from its record in the agent's root."""
    cid = cid.split("://", 1)[-1]
    return json.load(open(c.data_dir / "agent" / "containers" / cid / "meta.json"))["sandbox_id"]


def test_pod_namespaces_pinned_without_a_holder(cluster):
    """A pod without shareProcessNamespace runs no pause holder: runc lists only its containers,
    which share one network and UTS namespace (one hostname; one reaches the other on
    localhost), pinned by bind mounts that its deletion removes. With shareProcessNamespace a
    holder runs under runc and the containers see each other's processes."""
    c = cluster
    pod(c, "pinned", [sh("srv", "while true; do echo from-srv | nc -l -p 7070 -w 1; done"), sh("cli", "sleep 1000")],
        grace=0)
    c.api().ok("POST", f"/api/v1/namespaces/{NS}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sharepid"},
        "spec": {"nodeName": c.node, "shareProcessNamespace": True, "terminationGracePeriodSeconds": 0,
                 "containers": [sh("a", "exec sleep 1234"), sh("b", "sleep 1000")]}})
    st = wait(lambda: (s := status_of(c, "pinned")).get("phase") == "Running" and s, 20, "pinned Running")
    cids = {cstatus(st, n)["containerID"].split("://", 1)[1] for n in ("srv", "cli")}
    sid = sandbox_of(c, cstatus(st, "cli")["containerID"])
    ids = runc_ids(c)
    assert cids <= set(ids) and sid not in ids, (cids, sid, ids)
    sdir = c.data_dir / "agent" / "sandboxes" / sid
    assert sorted(os.path.basename(m) for m in pinned_mounts(sdir)) == ["ipc", "net", "uts"]
    out = c.kubectl("exec", "pinned", "-c", "cli", "--", "sh", "-c",
                    "hostname; for i in 1 2 3 4 5 6 7 8 9 10; do nc -w 2 127.0.0.1 7070 </dev/null && exit 0; "
                    "sleep 0.2; done; exit 1").stdout
    assert out == "pinned\nfrom-srv\n", out
    assert c.kubectl("exec", "pinned", "-c", "srv", "--", "hostname").stdout == "pinned\n"

    st2 = wait(lambda: (s := status_of(c, "sharepid")).get("phase") == "Running" and s, 20, "sharepid Running")
    assert sandbox_of(c, cstatus(st2, "a")["containerID"]) in runc_ids(c)
    out = c.kubectl("exec", "sharepid", "-c", "b", "--", "ps", "-o", "args").stdout
    assert "sleep 1234" in out and "/sleep 2147483647" in out, out

    for name in ("pinned", "sharepid"):
        c.api().delete(f"/api/v1/namespaces/{NS}/pods/{name}")
    wait(lambda: not os.path.exists(sdir), 20, "the sandbox dir removed")
    assert pinned_mounts(sdir) == []
    wait(lambda: not (cids & set(runc_ids(c))), 20, "the containers removed")


@pytest.mark.slow
def test_volumes(cluster, tmp_path):
    """emptyDir shared from an init container to the main one, a tmpfs emptyDir (medium Memory),
    hostPath DirectoryOrCreate, readOnly and subPath mounts; the pod's volume dir goes with it."""
    c = cluster
    host = tmp_path / "created-by-kubelet"
    script = ("set -e; test \"$(cat /shared/msg)\" = from-init; "
              "grep -q ' /mem tmpfs ' /proc/mounts; echo x > /mem/f; "
              "echo from-pod > /host/out; if (echo y > /ro/f) 2>/dev/null; then exit 9; fi; "
              "echo sub > /sub/f")
    spec = {"nodeName": c.node, "restartPolicy": "Never",
            "initContainers": [sh("init", "echo from-init > /shared/msg",
                                  volumeMounts=[{"name": "shared", "mountPath": "/shared"}])],
            "containers": [sh("c", script, volumeMounts=[
                {"name": "shared", "mountPath": "/shared"},
                {"name": "mem", "mountPath": "/mem"},
                {"name": "host", "mountPath": "/host"},
                {"name": "shared", "mountPath": "/ro", "readOnly": True},
                {"name": "host", "mountPath": "/sub", "subPath": "nested/dir"}])],
            "volumes": [{"name": "shared", "emptyDir": {}},
                        {"name": "mem", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}},
                        {"name": "host", "hostPath": {"path": str(host), "type": "DirectoryOrCreate"}}]}
    api = c.api()
    r = api.ok("POST", f"/api/v1/namespaces/{NS}/pods",
               {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vols"}, "spec": spec})
    uid = r["metadata"]["uid"]
    st = wait(lambda: (s := status_of(c, "vols")).get("phase") in ("Succeeded", "Failed") and s, 30, "vols done")
    assert st["phase"] == "Succeeded", json.dumps(st, indent=1)
    assert (host / "out").read_text() == "from-pod\n"
    assert (host / "nested" / "dir" / "f").read_text() == "sub\n"
    pod_dir = c.data_dir / "agent" / "pods" / uid
    assert (pod_dir / "volumes" / "kubernetes.io~empty-dir" / "shared" / "msg").exists()
    api.delete(f"/api/v1/namespaces/{NS}/pods/vols")
    wait(lambda: get(c, "vols") is None, 30, "vols gone")
    wait(lambda: not pod_dir.exists(), 15, "the pod's volume dir removed")
    assert (host / "out").exists(), "a hostPath's content is the host's: it stays"
    with open("/proc/mounts") as f:
        assert str(pod_dir) not in f.read(), "the tmpfs emptyDir was unmounted"


def test_volume_type_check_fails_mount(cluster, tmp_path):
    """hostPath type File on a directory: FailedMount with the kubelet's message, the container
    waits in ContainerCreating and never starts."""
    c = cluster
    spec = {"nodeName": c.node, "restartPolicy": "Never",
            "containers": [sh("c", "true", volumeMounts=[{"name": "h", "mountPath": "/h"}])],
            "volumes": [{"name": "h", "hostPath": {"path": str(tmp_path), "type": "File"}}]}
    c.api().ok("POST", f"/api/v1/namespaces/{NS}/pods",
               {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "badvol"}, "spec": spec})
    ev = wait(lambda: [e for e in events(c, "badvol") if e["reason"] == "FailedMount"], 20, "FailedMount")
    assert f'MountVolume.SetUp failed for volume "h" : hostPath type check failed: {tmp_path} is not a file' \
        == ev[0]["message"], ev[0]["message"]
    # the event and the status are two writes: the status may come a moment after the event
    st = wait(lambda: (lambda s: cstatus(s, "c").get("state") and s)(status_of(c, "badvol")), 10, "badvol's status")
    assert st["phase"] == "Pending"
    assert cstatus(st, "c")["state"]["waiting"]["reason"] == "ContainerCreating"
    c.api().delete(f"/api/v1/namespaces/{NS}/pods/badvol")
    wait(lambda: get(c, "badvol") is None, 30, "badvol gone")
