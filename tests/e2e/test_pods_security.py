"""A pod's securityContext applied as the kubelet and containerd apply it: the user, groups,
read-only root, capabilities (containerd's default set, drop/add, privileged), no_new_privs and
runAsNonRoot, the image's own User, seen from inside the container with kubectl. Needs root,
runc, conmon, umoci."""
import json
import subprocess

import pytest

from conftest import KITE, busybox_tar
from test_pods_run import NS, _cluster, cstatus, status_of, wait

DEFAULT_CAPS = [0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 27, 29, 31]  # containerd's default set


UNSAFE_SYSCTLS = "kernel.msg*,net.core.somaxconn"  # the kubelet documentation's example


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from _cluster(tmp_path_factory, ["--allowed-unsafe-sysctls", UNSAFE_SYSCTLS])


def run(c, name, script, ctr_sc=None, pod_sc=None, wait_done=True, image="busybox"):
    ctr = {"name": "c", "image": image, "imagePullPolicy": "Never", "command": ["sh", "-c", script]}
    if ctr_sc is not None:
        ctr["securityContext"] = ctr_sc
    spec = {"nodeName": c.node, "restartPolicy": "Never", "containers": [ctr]}
    if pod_sc is not None:
        spec["securityContext"] = pod_sc
    c.kubectl("create", "-n", NS, "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}))
    if not wait_done:
        return None
    return done(c, name)


def done(c, name):
    """The logs of pod name (created by run) once it has ended."""
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
    # the primary group is among the groups, as containerd sets them
    assert out.strip() == "uid=1000 gid=3000 groups=2000,3000,4000,4001", out


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


def images_with_users(c, tmp_path, users):
    """busybox:<tag> for each tag: user of users, the busybox image whose config says User: user,
    imported into the node in one tarball."""
    d = tmp_path / "img-users"
    d.mkdir()
    subprocess.run(["tar", "-C", str(d), "-xf", busybox_tar(tmp_path)], check=True)
    for tag, user in users.items():
        subprocess.run(["umoci", "config", "--image", f"{d}:latest", "--tag", tag, "--config.user", user],
                       check=True, capture_output=True)
    idx = json.load(open(d / "index.json"))
    idx["manifests"] = [m for m in idx["manifests"]
                        if m.get("annotations", {}).get("org.opencontainers.image.ref.name") in users]
    for m in idx["manifests"]:
        m["annotations"]["io.containerd.image.name"] = "docker.io/library/busybox:" + \
            m["annotations"]["org.opencontainers.image.ref.name"]
    json.dump(idx, open(d / "index.json", "w"))
    tar = str(tmp_path / "busybox-users.tar")
    subprocess.run(["tar", "-C", str(d), "-cf", tar, "."], check=True)
    r = subprocess.run([KITE, "images", "import", tar, "--root-dir", str(c.data_dir / "agent")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return {tag: f"busybox:{tag}" for tag in users}


def refused(c, name):
    uid = c.api().get(f"/api/v1/namespaces/{NS}/pods/{name}").json()["metadata"]["uid"]
    w = wait(lambda: cstatus(status_of(c, name), "c").get("state", {}).get("waiting", {}).get("message")
             and cstatus(status_of(c, name), "c")["state"]["waiting"], 30, f"{name} refused")
    return uid, w


@pytest.mark.slow  # five image variants imported, eight pods: over 10 s under ASan
def test_image_user(cluster, tmp_path):
    """The image's User runs the container when the securityContext names none (resolved in the
    image's /etc/passwd), and runAsNonRoot is checked against it as the kubelet does."""
    c = cluster
    img = images_with_users(c, tmp_path, {"nobody": "nobody", "uid1234": "1234", "pair": "1234:nogroup",
                                          "root0": "0:0", "ghost": "ghost"})
    named, numeric, pair, root, ghost = (img[t] for t in ("nobody", "uid1234", "pair", "root0", "ghost"))
    # every pod at once, then their answers
    run(c, "imguser", "id -u; id -g; id -G", image=named, wait_done=False)
    run(c, "imguid", "id -u; id -g", image=numeric, wait_done=False)
    run(c, "imgpair", "id -u; id -g", image=pair, wait_done=False)
    # runAsUser wins over the image's user; its group is the one /etc/passwd gives the uid
    run(c, "imgoverride", "id -u; id -g", image=named, ctr_sc={"runAsUser": 0}, wait_done=False)
    # runAsNonRoot: a numeric non-root image user passes, a name cannot be verified
    run(c, "imgnonroot", "id -u", image=numeric, pod_sc={"runAsNonRoot": True}, wait_done=False)
    run(c, "imgnamed", "id -u", image=named, pod_sc={"runAsNonRoot": True}, wait_done=False)
    run(c, "imgroot", "id -u", image=root, ctr_sc={"runAsNonRoot": True}, wait_done=False)
    # a user the image's /etc/passwd does not list: the runtime cannot create the container
    run(c, "imgghost", "id -u", image=ghost, wait_done=False)
    out = done(c, "imguser")
    assert out.split() == ["65534", "65534", "65534"], out
    out = done(c, "imguid")
    assert out.split() == ["1234", "0"], out  # not in /etc/passwd: group 0
    out = done(c, "imgpair")
    assert out.split() == ["1234", "65534"], out
    out = done(c, "imgoverride")
    assert out.split() == ["0", "0"], out
    out = done(c, "imgnonroot")
    assert out.strip() == "1234", out
    uid, w = refused(c, "imgnamed")
    assert w["reason"] == "CreateContainerConfigError"
    assert w["message"] == ("container has runAsNonRoot and image has non-numeric user (nobody), cannot verify "
                            f"user is non-root (pod: \"imgnamed_{NS}({uid})\", container: c)")
    uid, w = refused(c, "imgroot")
    assert w["message"] == f"container has runAsNonRoot and image will run as root (pod: \"imgroot_{NS}({uid})\", container: c)"
    _, w = refused(c, "imgghost")
    assert w["reason"] == "CreateContainerError" and "no users found" in w["message"], w


def waiting(c, name):
    """The container's waiting state once it has a message (a refused container)."""
    return wait(lambda: cstatus(status_of(c, name), "c").get("state", {}).get("waiting", {}).get("message")
                and cstatus(status_of(c, name), "c")["state"]["waiting"], 30, f"{name} waiting")


def test_seccomp(cluster):
    """seccompProfile as containerd applies it: none (the kubelet's default) and Unconfined install
    no filter; RuntimeDefault is containerd's default profile (creating a user namespace, which
    needs no capability, fails); Localhost loads <agent root>/seccomp/<localhostProfile>."""
    c = cluster
    probe = "grep ^Seccomp: /proc/self/status; unshare -U true 2>/dev/null && echo unshared || echo refused"
    d = c.data_dir / "agent" / "seccomp" / "profiles"
    d.mkdir(parents=True, exist_ok=True)
    # Localhost: a profile that allows all but mkdir (EACCES)
    (d / "no-mkdir.json").write_text(json.dumps({
        "defaultAction": "SCMP_ACT_ALLOW",
        "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13}]}))
    rd, unconf = {"seccompProfile": {"type": "RuntimeDefault"}}, {"seccompProfile": {"type": "Unconfined"}}
    cases = {  # name: (script, container's securityContext, pod's, expected words)
        "sc-none": (probe, None, None, ["Seccomp:", "0", "unshared"]),
        "sc-unconf": (probe, unconf, None, ["Seccomp:", "0", "unshared"]),
        "sc-default": (probe + "; mkdir /tmp/d && echo made", rd, None, ["Seccomp:", "2", "refused", "made"]),
        # the pod's profile for every container; the container's wins
        "sc-pod": (probe, None, rd, ["Seccomp:", "2", "refused"]),
        "sc-podctr": (probe, unconf, rd, ["Seccomp:", "0", "unshared"]),
        # a privileged container runs unconfined, as containerd runs it
        "sc-priv": (probe, {"privileged": True, **rd}, None, ["Seccomp:", "0", "unshared"]),
        "sc-local": ("mkdir /tmp/d 2>/dev/null || echo refused; unshare -U true && echo unshared",
                     {"seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/no-mkdir.json"}}, None,
                     ["refused", "unshared"]),
    }
    for name, (script, csc, psc, _) in cases.items():
        run(c, name, script, ctr_sc=csc, pod_sc=psc, wait_done=False)
    run(c, "sc-missing", "true", wait_done=False,
        ctr_sc={"seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/absent.json"}})
    for name, (_, _, _, want) in cases.items():
        out = done(c, name)
        assert out.split() == want, (name, out)
    w = waiting(c, "sc-missing")
    assert w["reason"] == "CreateContainerError", w
    assert "cannot load seccomp profile" in w["message"] and "profiles/absent.json" in w["message"], w


def test_proc_mount(cluster):
    """procMount Default masks and makes read-only /proc paths as runc's defaults; Unmasked
    leaves /proc as the kernel shows it."""
    c = cluster
    probe = "awk '$5 ~ \"^/proc/\" {print $5}' /proc/self/mountinfo"
    out = run(c, "pm-default", probe)
    assert "/proc/sys" in out.split() and "/proc/keys" in out.split(), out  # read-only, masked
    out = run(c, "pm-unmasked", probe, ctr_sc={"procMount": "Unmasked"})
    assert out.split() == [], out


def test_sysctls(cluster):
    """The pod's sysctls of the kubelet's safe set, and those --allowed-unsafe-sysctls names
    (kernel.msg*, net.core.somaxconn), are set in its namespaces; any other makes the agent
    refuse the pod (SysctlForbidden) as the kubelet's sysctl admission does."""
    c = cluster
    run(c, "sysctl-ok", "cat /proc/sys/net/ipv4/ip_local_port_range /proc/sys/kernel/shm_rmid_forced", wait_done=False,
        pod_sc={"sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "2000 3000"},
                            {"name": "kernel/shm_rmid_forced", "value": "1"}]})
    # the allowed unsafe ones: a name and a prefix, in the pod's own network and IPC namespaces
    run(c, "sysctl-unsafe", "cat /proc/sys/net/core/somaxconn /proc/sys/kernel/msgmax /proc/sys/kernel/msgmnb",
        wait_done=False, pod_sc={"sysctls": [{"name": "net.core.somaxconn", "value": "1234"},
                                             {"name": "kernel.msgmax", "value": "65000"},
                                             {"name": "kernel/msgmnb", "value": "65001"}]})
    run(c, "sysctl-bad", "true", wait_done=False,
        pod_sc={"sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"},
                            {"name": "kernel.sem", "value": "250 32000 32 128"}]})
    # an allowed IPC sysctl with the host's IPC namespace
    c.kubectl("create", "-n", NS, "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sysctl-hostipc"},
        "spec": {"nodeName": c.node, "restartPolicy": "Never", "hostIPC": True,
                 "securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "65000"}]},
                 "containers": [{"name": "c", "image": "busybox", "imagePullPolicy": "Never", "command": ["true"]}]}}))
    out = done(c, "sysctl-ok")
    assert out.split() == ["2000", "3000", "1"], out
    out = done(c, "sysctl-unsafe")
    assert out.split() == ["1234", "65000", "65001"], out
    assert open("/proc/sys/net/core/somaxconn").read().strip() != "1234"  # not the host's
    for name, want in (("sysctl-bad", 'forbidden sysctl: "kernel.sem" not allowlisted'),
                       ("sysctl-hostipc", 'forbidden sysctl: "kernel.msgmax" not allowed with host ipc enabled')):
        st = wait(lambda: status_of(c, name).get("phase") == "Failed" and status_of(c, name), 30, f"{name} refused")
        assert st["reason"] == "SysctlForbidden", st
        assert st["message"] == f"Pod was rejected: {want}", st


def apparmor_enabled():
    try:
        return open("/sys/module/apparmor/parameters/enabled").read().startswith("Y")
    except OSError:
        return False


def test_apparmor_refused_without_apparmor(cluster):
    """On a kernel without AppArmor the kubelet refuses a pod that asks for a profile (its
    appArmorProfile field or the legacy annotation) and runs one that asks for unconfined."""
    if apparmor_enabled():
        pytest.skip("this kernel enforces AppArmor")
    c = cluster
    run(c, "aa-field", "true", wait_done=False, ctr_sc={"appArmorProfile": {"type": "RuntimeDefault"}})
    c.kubectl("create", "-n", NS, "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": "aa-annotation",
            "annotations": {"container.apparmor.security.beta.kubernetes.io/c": "localhost/k8s-apparmor-example"}},
        "spec": {"nodeName": c.node, "restartPolicy": "Never",
                 "containers": [{"name": "c", "image": "busybox", "imagePullPolicy": "Never", "command": ["true"]}]}}))
    for name in ("aa-field", "aa-annotation"):
        st = wait(lambda: status_of(c, name).get("phase") == "Failed" and status_of(c, name), 30, f"{name} refused")
        assert st["reason"] == "AppArmor", st
        assert st["message"] == "Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host", st
    out = run(c, "aa-unconfined", "echo ran", pod_sc={"appArmorProfile": {"type": "Unconfined"}})
    assert out.strip() == "ran", out
