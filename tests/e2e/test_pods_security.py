"""A pod's securityContext applied as the kubelet and containerd apply it: the user, groups,
read-only root, capabilities (containerd's default set, drop/add, privileged), no_new_privs and
runAsNonRoot, seen from inside the container with kubectl. Needs root, runc, conmon, umoci."""
import json

import pytest

from test_pods_run import NS, _cluster, cstatus, status_of, wait

DEFAULT_CAPS = [0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 27, 29, 31]  # containerd's default set


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from _cluster(tmp_path_factory, [])


def run(c, name, script, ctr_sc=None, pod_sc=None, wait_done=True):
    ctr = {"name": "c", "image": "busybox", "command": ["sh", "-c", script]}
    if ctr_sc is not None:
        ctr["securityContext"] = ctr_sc
    spec = {"nodeName": c.node, "restartPolicy": "Never", "containers": [ctr]}
    if pod_sc is not None:
        spec["securityContext"] = pod_sc
    c.kubectl("create", "-n", NS, "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}))
    if not wait_done:
        return None
    wait(lambda: status_of(c, name).get("phase") in ("Succeeded", "Failed") or
         (status_of(c, name).get("containerStatuses") or [{}])[0].get("state", {}).get("waiting", {}).get("message"),
         30, f"{name} done")
    assert status_of(c, name).get("phase") in ("Succeeded", "Failed"), str(status_of(c, name).get("containerStatuses"))
    return c.kubectl("logs", "-n", NS, name).stdout


def capeff(out):
    line = next(x for x in out.splitlines() if x.startswith("CapEff:"))
    v = int(line.split()[1], 16)
    return sorted(i for i in range(64) if v >> i & 1)


def test_user_groups(cluster):
    out = run(cluster, "ids", "id", ctr_sc={"runAsUser": 1000},
              pod_sc={"runAsUser": 5, "runAsGroup": 3000, "supplementalGroups": [4000, 4001], "fsGroup": 2000})
    assert out.strip() == "uid=1000 gid=3000 groups=2000,4000,4001", out


def test_read_only_root(cluster):
    out = run(cluster, "ro", "touch /x && echo wrote || echo refused; touch /tmp/y 2>/dev/null; echo done",
              ctr_sc={"readOnlyRootFilesystem": True})
    assert "refused" in out and "wrote" not in out, out
    out = run(cluster, "rw", "touch /x && echo wrote")
    assert "wrote" in out, out


def test_capabilities(cluster):
    c = cluster
    assert capeff(run(c, "capdef", "cat /proc/self/status")) == DEFAULT_CAPS
    out = run(c, "capdrop", "cat /proc/self/status",
              ctr_sc={"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}})
    assert capeff(out) == [10]
    out = run(c, "capadd", "cat /proc/self/status", ctr_sc={"capabilities": {"add": ["NET_ADMIN"], "drop": ["KILL"]}})
    assert capeff(out) == sorted(set(DEFAULT_CAPS) - {5} | {12})
    # every capability the agent (root, as this test) holds in its bounding set
    bnd = int(next(x for x in open("/proc/self/status") if x.startswith("CapBnd:")).split()[1], 16)
    out = run(c, "capall", "cat /proc/self/status",
              ctr_sc={"privileged": True})
    assert capeff(out) == [i for i in range(41) if bnd >> i & 1]
    assert len(capeff(out)) > len(DEFAULT_CAPS)


def test_no_new_privs(cluster):
    out = run(cluster, "nnp", "grep NoNewPrivs /proc/self/status", ctr_sc={"allowPrivilegeEscalation": False})
    assert out.split() == ["NoNewPrivs:", "1"], out
    out = run(cluster, "nnp-default", "grep NoNewPrivs /proc/self/status")
    assert out.split() == ["NoNewPrivs:", "0"], out


def test_run_as_non_root(cluster):
    c = cluster
    run(c, "nonroot", "echo ran", pod_sc={"runAsNonRoot": True}, wait_done=False)
    uid = c.api().get(f"/api/v1/namespaces/{NS}/pods/nonroot").json()["metadata"]["uid"]
    w = wait(lambda: cstatus(status_of(c, "nonroot"), "c").get("state", {}).get("waiting", {}).get("message")
             and cstatus(status_of(c, "nonroot"), "c")["state"]["waiting"], 30, "nonroot refused")
    assert w["reason"] == "CreateContainerConfigError"
    assert w["message"] == ("container has runAsNonRoot and image will run as root "
                            f"(pod: \"nonroot_{NS}({uid})\", container: c)")
    run(c, "nonroot0", "echo ran", ctr_sc={"runAsNonRoot": True, "runAsUser": 0}, wait_done=False)
    uid = c.api().get(f"/api/v1/namespaces/{NS}/pods/nonroot0").json()["metadata"]["uid"]
    w = wait(lambda: cstatus(status_of(c, "nonroot0"), "c").get("state", {}).get("waiting", {}).get("message")
             and cstatus(status_of(c, "nonroot0"), "c")["state"]["waiting"], 30, "nonroot0 refused")
    assert w["message"] == f"container's runAsUser breaks non-root policy (pod: \"nonroot0_{NS}({uid})\", container: c)"
    out = run(c, "nonroot1", "id -u", pod_sc={"runAsNonRoot": True, "runAsUser": 1001})
    assert out.strip() == "1001"
