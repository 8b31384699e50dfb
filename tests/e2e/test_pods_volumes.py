"""configMap, secret, downwardAPI and projected volumes as the kubelet mounts them: the atomic
writer's layout (user-visible symlinks through ..data), items and modes, secrets on tmpfs, a
ConfigMap's change reaching a running pod (a new ..data), optional and missing objects
(FailedMount until the object appears), the downward API's labels and annotations files,
projected volumes, subPath and read-only mounts. What the container sees is read back with
kubectl logs against `kite up`. Needs root, runc, conmon, umoci."""
import base64
import json
import os
import re
import time

import pytest

from conftest import delete_pods_now, runc_up_cluster

NS = "voltest"


def volumes_dir(c):
    return c.data_dir / "agent" / "pods"


def _remove_pods(c):
    delete_pods_now(c, NS)
    # the agent removes the pods' volume directories (and unmounts their tmpfs) after their containers
    vdir = volumes_dir(c)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and vdir.exists() and os.listdir(vdir):
        time.sleep(0.1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from runc_up_cluster(tmp_path_factory, "podsvol", namespace=NS, before_stop=_remove_pods)


def wait(fn, timeout, what, interval=0.3):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out waiting for {what}; last: {last!r}")


def apply(c, obj):
    c.kubectl("apply", "-n", NS, "-f", "-", input=json.dumps(obj))


def mkpod(c, name, script, volumes, mounts, labels=None, annotations=None, restart="Never", resources=None):
    ctr = {"name": "c", "image": "busybox", "command": ["sh", "-c", script], "volumeMounts": mounts}
    if resources:
        ctr["resources"] = resources
    c.kubectl("create", "-n", NS, "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": name, "labels": labels or {"app": "vol"}, "annotations": annotations or {}},
              "spec": {"nodeName": c.node, "restartPolicy": restart, "terminationGracePeriodSeconds": 1,
                       "containers": [ctr], "volumes": volumes}}))


def pod_json(c, name):
    return json.loads(c.kubectl("get", "pod", name, "-n", NS, "-o", "json").stdout)


def phase(c, name):
    return c.kubectl("get", "pod", name, "-n", NS, "-o", "jsonpath={.status.phase}", check=False).stdout


def events(c, name):
    out = c.kubectl("get", "events", "-n", NS, "--field-selector", f"involvedObject.name={name}", "-o", "json").stdout
    return json.loads(out)["items"]


def logs(c, name):
    return c.kubectl("logs", name, "-n", NS, check=False).stdout


def kv(text):
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def finished(c, name, timeout=40):
    try:
        wait(lambda: phase(c, name) in ("Succeeded", "Failed"), timeout, f"{name} to finish")
    except BaseException:
        print(json.dumps(pod_json(c, name)["status"], indent=1))
        print(c.kubectl("get", "events", "-n", NS).stdout)
        raise
    return kv(logs(c, name))


def running_log(c, name, pred, timeout=40, what=None):
    """Waits for the pod's log to satisfy pred (its key=value lines, the last value of a key
    winning); returns them."""
    return wait(lambda: (lambda d: d if pred(d) else None)(kv(logs(c, name))), timeout, what or f"{name}'s log")


def test_configmap_items_modes_subpath_and_read_only(cluster):
    c = cluster
    apply(c, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app-cfg"},
              "data": {"a": "alpha", "b": "beta\nline2", "c": "gamma"},
              "binaryData": {"bin": base64.b64encode(bytes([0, 1, 0xfe, 0xff])).decode()}})
    script = """
stat -L -c 'mode_a=%a' /cfg/dir/a.txt
echo "a=$(cat /cfg/dir/a.txt)"
stat -L -c 'mode_b=%a' /cfg/b
echo "link_b=$(readlink /cfg/b)"
echo "link_dir=$(readlink /cfg/dir)"
echo "data=$(readlink /cfg/..data)"
echo "listing=$(ls /cfg | tr '\\n' ,)"
echo "all=$(ls /all | tr '\\n' ,)"
stat -L -c 'mode_all=%a' /all/c
echo "bin=$(od -An -tx1 /all/bin | tr -d ' \\n')"
echo "sub=$(cat /etc/b.conf | tr '\\n' '|')"
echo "touch=$(touch /cfg/x 2>&1)"
echo "write=$( (echo z > /all/a) 2>&1)"
echo "sub_write=$( (echo z > /etc/b.conf) 2>&1)"
echo "mounts=$(grep -E ' /(cfg|all) ' /proc/mounts | cut -d' ' -f4 | cut -d, -f1 | tr '\\n' ,)"
"""
    mkpod(c, "cm-items", script,
          volumes=[{"name": "cfg", "configMap": {"name": "app-cfg", "defaultMode": 0o640,
                                                 "items": [{"key": "a", "path": "dir/a.txt", "mode": 0o600},
                                                           {"key": "b", "path": "b"}]}},
                   {"name": "all", "configMap": {"name": "app-cfg"}}],
          mounts=[{"name": "cfg", "mountPath": "/cfg"}, {"name": "all", "mountPath": "/all", "readOnly": False},
                  {"name": "all", "mountPath": "/etc/b.conf", "subPath": "b"}])
    d = finished(c, "cm-items")
    assert d["mode_a"] == "600" and d["a"] == "alpha"
    assert d["mode_b"] == "640"  # defaultMode
    assert d["link_b"] == "..data/b" and d["link_dir"] == "..data/dir"
    assert re.fullmatch(r"\.\.\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d\.\d+", d["data"]), d["data"]
    assert d["listing"] == "b,dir,"  # only the items; c is not there
    assert d["all"] == "a,b,bin,c,"
    assert d["mode_all"] == "644"  # the default defaultMode
    assert d["bin"] == "0001feff"
    assert d["sub"] == "beta|line2"
    # configMap volumes are read-only whatever the mount says
    assert "Read-only file system" in d["touch"], d
    assert "Read-only file system" in d["write"], d
    assert "Read-only file system" in d["sub_write"], d
    assert d["mounts"] == "ro,ro,", d


def test_secret_volume_on_tmpfs(cluster):
    c = cluster
    c.kubectl("create", "secret", "generic", "db", "-n", NS, "--from-literal=password=s3cr=t!",
              "--from-literal=user=admin")
    script = """
echo "fs=$(grep ' /sec ' /proc/mounts | cut -d' ' -f3)"
echo "password=$(cat /sec/password)"
echo "user=$(cat /sec/user)"
stat -L -c 'mode=%a' /sec/password
stat -L -c 'mode_key=%a' /key/k
echo "key=$(cat /key/k)"
"""
    mkpod(c, "secret-vol", script,
          volumes=[{"name": "sec", "secret": {"secretName": "db"}},
                   {"name": "key", "secret": {"secretName": "db", "defaultMode": 0o400,
                                              "items": [{"key": "user", "path": "k"}]}}],
          mounts=[{"name": "sec", "mountPath": "/sec"}, {"name": "key", "mountPath": "/key"}])
    d = finished(c, "secret-vol")
    assert d["fs"] == "tmpfs", d
    assert d["password"] == "s3cr=t!" and d["user"] == "admin"
    assert d["mode"] == "644" and d["mode_key"] == "400" and d["key"] == "admin"
    # on the node too: the secret's directory is a tmpfs of its own
    uid = pod_json(c, "secret-vol")["metadata"]["uid"]
    d = str(volumes_dir(c) / uid / "volumes" / "kubernetes.io~secret" / "sec")
    with open("/proc/self/mounts") as f:
        assert any(line.split()[1] == d and line.split()[2] == "tmpfs" for line in f), d


def test_fs_group_reads_a_secret_volume(cluster):
    """With fsGroup, a non-root user reads a 0400 secret: the files get the group and its read
    bit (the kubelet's SetVolumeOwnership)."""
    c = cluster
    c.kubectl("create", "secret", "generic", "grp", "-n", NS, "--from-literal=k=shared")
    c.kubectl("create", "-n", NS, "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fsgroup"},
        "spec": {"nodeName": c.node, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                 "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 2000},
                 "volumes": [{"name": "s", "secret": {"secretName": "grp", "defaultMode": 0o400}}],
                 "containers": [{"name": "c", "image": "busybox", "volumeMounts": [{"name": "s", "mountPath": "/s"}],
                                 "command": ["sh", "-c", "echo \"k=$(cat /s/k)\"; stat -L -c 'st=%a %g' /s/k"]}]}}))
    d = finished(c, "fsgroup")
    assert d["k"] == "shared"
    assert d["st"] == "440 2000"


def test_configmap_update_reaches_the_running_pod(cluster):
    c = cluster
    c.kubectl("create", "configmap", "live", "-n", NS, "--from-literal=color=blue")
    script = ("while true; do echo \"color=$(cat /cfg/color)\"; echo \"data=$(readlink /cfg/..data)\"; "
              "echo \"sub=$(cat /sub)\"; echo \"new=$(cat /cfg/new 2>/dev/null)\"; sleep 0.2; done")
    mkpod(c, "cm-live", script, volumes=[{"name": "cfg", "configMap": {"name": "live"}}],
          mounts=[{"name": "cfg", "mountPath": "/cfg"}, {"name": "cfg", "mountPath": "/sub", "subPath": "color"}],
          restart="Always")
    before = running_log(c, "cm-live", lambda d: d.get("color") == "blue")
    apply(c, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "live"},
              "data": {"color": "green", "new": "key"}})
    t0 = time.monotonic()
    after = running_log(c, "cm-live", lambda d: d.get("color") == "green", timeout=30, what="the new value")
    took = time.monotonic() - t0
    assert took < 5, f"the update took {took:.1f} s"
    assert after["data"] != before["data"] and after["data"].startswith("..")
    after = running_log(c, "cm-live", lambda d: d.get("new") == "key", timeout=5)
    # a subPath mount is not updated (as upstream: it is bound to the file of its time)
    assert after["sub"] == "blue"
    # the old timestamped directory is gone from the node
    uid = pod_json(c, "cm-live")["metadata"]["uid"]
    vdir = volumes_dir(c) / uid / "volumes" / "kubernetes.io~configmap" / "cfg"
    tsdirs = sorted(n for n in os.listdir(vdir) if n.startswith("..") and n not in ("..data",))
    assert tsdirs == [after["data"]], tsdirs
    # deleted: the pod keeps its files (the kubelet's FailedMount, not an empty volume)
    c.kubectl("delete", "configmap", "live", "-n", NS)
    wait(lambda: any(e["reason"] == "FailedMount" and 'configmap "live" not found' in e["message"]
                     for e in events(c, "cm-live")), 20, "FailedMount after the delete")
    assert kv(logs(c, "cm-live"))["color"] == "green"
    assert phase(c, "cm-live") == "Running"


def test_optional_missing_configmap_runs(cluster):
    c = cluster
    script = 'echo "listing=$(ls -A /opt/cfg | grep -v "^\\.\\." | tr "\\n" ,)"; echo "key=$(cat /opt/key/k 2>&1)"'
    mkpod(c, "cm-optional", script,
          volumes=[{"name": "cfg", "configMap": {"name": "no-such-cm", "optional": True}},
                   {"name": "key", "configMap": {"name": "opt-keys", "optional": True,
                                                 "items": [{"key": "absent", "path": "k"}]}},
                   {"name": "sec", "secret": {"secretName": "no-such-secret", "optional": True}}],
          mounts=[{"name": "cfg", "mountPath": "/opt/cfg"}, {"name": "key", "mountPath": "/opt/key"},
                  {"name": "sec", "mountPath": "/opt/sec"}])
    d = finished(c, "cm-optional")
    assert phase(c, "cm-optional") == "Succeeded"
    assert d["listing"] == ""
    assert "No such file" in d["key"]


def test_missing_configmap_fails_mount_until_created(cluster):
    c = cluster
    mkpod(c, "cm-later", "cat /cfg/k; echo; cat /cfg/..data/k",
          volumes=[{"name": "cfg", "configMap": {"name": "later"}}], mounts=[{"name": "cfg", "mountPath": "/cfg"}])
    msg = 'MountVolume.SetUp failed for volume "cfg" : configmap "later" not found'
    wait(lambda: any(e["reason"] == "FailedMount" and e["message"] == msg and e["type"] == "Warning"
                     for e in events(c, "cm-later")), 20, "the FailedMount event")
    st = pod_json(c, "cm-later")["status"]
    assert st["phase"] == "Pending"
    assert st["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"
    # a missing key is the kubelet's message too
    mkpod(c, "cm-nokey", "true", volumes=[{"name": "cfg", "configMap": {"name": "partial",
                                                                        "items": [{"key": "zz", "path": "z"}]}}],
          mounts=[{"name": "cfg", "mountPath": "/cfg"}])
    c.kubectl("create", "configmap", "partial", "-n", NS, "--from-literal=k=v")
    msg2 = 'MountVolume.SetUp failed for volume "cfg" : configmap references non-existent config key: zz'
    wait(lambda: any(e["message"] == msg2 for e in events(c, "cm-nokey")), 20, "the missing key's FailedMount")
    # the ConfigMap appears: the pod's container is created without waiting for the retry
    # period (10 s after the last FailedMount)
    t0 = time.monotonic()
    c.kubectl("create", "configmap", "later", "-n", NS, "--from-literal=k=arrived")

    def created():
        st = pod_json(c, "cm-later")["status"].get("containerStatuses", [{}])[0].get("state", {})
        return st.get("waiting", {}).get("reason") != "ContainerCreating"
    wait(created, 30, "cm-later's container", interval=0.1)
    took = time.monotonic() - t0
    assert took < 6, f"the container came {took:.1f} s after the ConfigMap"
    wait(lambda: phase(c, "cm-later") == "Succeeded", 30, "cm-later to run")
    assert logs(c, "cm-later").split() == ["arrived", "arrived"]


def test_downward_api_volume(cluster):
    c = cluster
    script = ("while true; do echo \"labels=$(cat /info/labels | tr '\\n' '|')\"; "
              "echo \"annotations=$(cat /info/annotations | tr '\\n' '|')\"; echo \"name=$(cat /info/name)\"; "
              "echo \"ns=$(cat /info/ns)\"; echo \"tier=$(cat /info/tier)\"; echo \"cpu=$(cat /info/cpu_m)\"; "
              "echo \"mem=$(cat /info/mem_mi)\"; echo \"fs=$(grep ' /info ' /proc/mounts | cut -d' ' -f3)\"; "
              "stat -L -c 'mode=%a' /info/name; sleep 0.2; done")
    mkpod(c, "downward", script, labels={"app": "vol", "tier": "back"},
          annotations={"note": "say \"hi\"", "b.example/x": "1"}, restart="Always",
          resources={"limits": {"cpu": "250m", "memory": "64Mi"}},
          volumes=[{"name": "info", "downwardAPI": {"defaultMode": 0o444, "items": [
              {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
              {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
              {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
              {"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}},
              {"path": "tier", "fieldRef": {"fieldPath": "metadata.labels['tier']"}},
              {"path": "cpu_m", "resourceFieldRef": {"containerName": "c", "resource": "limits.cpu", "divisor": "1m"}},
              {"path": "mem_mi", "resourceFieldRef": {"containerName": "c", "resource": "limits.memory",
                                                      "divisor": "1Mi"}}]}}],
          mounts=[{"name": "info", "mountPath": "/info"}])
    d = running_log(c, "downward", lambda x: "mode" in x)
    assert d["labels"] == 'app="vol"|tier="back"'  # no newline at the end, as upstream
    assert d["annotations"] == 'b.example/x="1"|note="say \\"hi\\""'
    assert d["ns"] == NS and d["tier"] == "back" and d["cpu"] == "250" and d["mem"] == "64"
    assert d["fs"] == "tmpfs" and d["mode"] == "444"
    # a label change reaches the file
    c.kubectl("label", "pod", "downward", "-n", NS, "tier=front", "--overwrite")
    running_log(c, "downward", lambda x: x.get("labels") == 'app="vol"|tier="front"', timeout=15,
                what="the new labels file")
    running_log(c, "downward", lambda x: x.get("tier") == "front", timeout=5, what="the new label's file")


def test_projected_volume(cluster):
    c = cluster
    c.kubectl("create", "configmap", "proj-cm", "-n", NS, "--from-literal=setting=on", "--from-literal=other=x")
    c.kubectl("create", "secret", "generic", "proj-sec", "-n", NS, "--from-literal=token=t0k")
    script = """
echo "listing=$(ls /p | tr '\\n' ,)"
echo "setting=$(cat /p/conf/setting)"
echo "token=$(cat /p/token)"
echo "name=$(cat /p/podname)"
stat -L -c 'mode_setting=%a' /p/conf/setting
stat -L -c 'mode_token=%a' /p/token
echo "fs=$(grep ' /p ' /proc/mounts | cut -d' ' -f3)"
"""
    mkpod(c, "projected", script,
          volumes=[{"name": "p", "projected": {"defaultMode": 0o440, "sources": [
              {"configMap": {"name": "proj-cm", "items": [{"key": "setting", "path": "conf/setting"}]}},
              {"secret": {"name": "proj-sec", "items": [{"key": "token", "path": "token", "mode": 0o400}]}},
              {"downwardAPI": {"items": [{"path": "podname", "fieldRef": {"fieldPath": "metadata.name"}}]}},
              {"configMap": {"name": "proj-absent", "optional": True}}]}}],
          mounts=[{"name": "p", "mountPath": "/p"}])
    d = finished(c, "projected")
    assert d["listing"] == "conf,podname,token,"
    assert d["setting"] == "on" and d["token"] == "t0k" and d["name"] == "projected"
    assert d["mode_setting"] == "440" and d["mode_token"] == "400"
    assert d["fs"] == "tmpfs"


def test_projected_source_not_served_is_a_failed_mount(cluster):
    c = cluster
    mkpod(c, "proj-bundle", "true",
          volumes=[{"name": "b", "projected": {"sources": [
              {"clusterTrustBundle": {"path": "bundle", "name": "x"}}]}}],
          mounts=[{"name": "b", "mountPath": "/b"}])
    msg = 'MountVolume.SetUp failed for volume "b" : projected source clusterTrustBundle is not supported by this node'
    wait(lambda: any(e["reason"] == "FailedMount" and e["message"] == msg for e in events(c, "proj-bundle")), 20,
         "the FailedMount of the clusterTrustBundle source")
    assert phase(c, "proj-bundle") == "Pending"


def test_volumes_removed_with_the_pod(cluster):
    c = cluster
    c.kubectl("create", "secret", "generic", "gone-sec", "-n", NS, "--from-literal=k=v")
    mkpod(c, "vol-gone", "sleep 3600", restart="Always",
          volumes=[{"name": "s", "secret": {"secretName": "gone-sec"}},
                   {"name": "cm", "configMap": {"name": "none", "optional": True}}],
          mounts=[{"name": "s", "mountPath": "/s"}, {"name": "cm", "mountPath": "/cm"}])
    wait(lambda: phase(c, "vol-gone") == "Running", 30, "vol-gone running")
    uid = pod_json(c, "vol-gone")["metadata"]["uid"]
    pod_dir = str(volumes_dir(c) / uid)
    sec_dir = os.path.join(pod_dir, "volumes", "kubernetes.io~secret", "s")

    def mounted():
        with open("/proc/self/mounts") as f:
            return any(line.split()[1] == sec_dir for line in f)
    assert mounted()
    c.kubectl("delete", "pod", "vol-gone", "-n", NS, "--grace-period=1")
    wait(lambda: not os.path.exists(pod_dir), 30, "the pod's volume directory to go")
    assert not mounted()


def test_sub_path_symlink_out_of_its_volume_is_refused(cluster):
    """A container's symlink in an emptyDir pointing at / must not give another container the
    node's root through a subPath (the kubelet's CVE-2017-1002101 check)."""
    c = cluster
    c.kubectl("create", "-n", NS, "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "escape"},
        "spec": {"nodeName": c.node, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                 "volumes": [{"name": "w", "emptyDir": {}}],
                 "initContainers": [{"name": "mk", "image": "busybox",
                                     "command": ["sh", "-c", "ln -s / /w/escape; mkdir -p /w/ok; echo in > /w/ok/f"],
                                     "volumeMounts": [{"name": "w", "mountPath": "/w"}]}],
                 "containers": [{"name": "c", "image": "busybox", "command": ["ls", "/host"],
                                 "volumeMounts": [{"name": "w", "mountPath": "/host", "subPath": "escape"}]}]}}))

    def waiting():
        st = pod_json(c, "escape")["status"].get("containerStatuses", [{}])[0].get("state", {}).get("waiting", {})
        return st if st.get("reason") == "CreateContainerConfigError" else None
    st = wait(waiting, 30, "CreateContainerConfigError")
    assert st["message"] == 'failed to prepare subPath for volumeMount "w" of container "c"'
    assert not logs(c, "escape")


@pytest.mark.slow
def test_volume_byte_budget(cluster):
    """A projected volume gathering objects past the node's 4 MiB per volume fails to mount with
    the limit in its message; each object alone is within the API's 1 MiB."""
    c = cluster
    chunk = "x" * (900 * 1024)
    for i in range(5):
        c.kubectl("create", "-n", NS, "-f", "-", input=json.dumps(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"big{i}"}, "data": {f"k{i}": chunk}}))
    mkpod(c, "too-big", "true", mounts=[{"name": "big", "mountPath": "/big"}],
          volumes=[{"name": "big", "projected": {"sources": [{"configMap": {"name": f"big{i}"}} for i in range(5)]}}])
    msg = (f'MountVolume.SetUp failed for volume "big" : the volume\'s files are {5 * 900 * 1024} bytes, '
           f"more than this node's limit of 4194304")
    wait(lambda: any(e["reason"] == "FailedMount" and e["message"] == msg for e in events(c, "too-big")), 30,
         "the FailedMount of the byte budget")
    assert phase(c, "too-big") == "Pending"


@pytest.mark.slow
def test_volumes_kept_across_an_agent_restart(cluster):
    """Restarted, the agent finds the running pod's volumes as they were (its tmpfs mounted once,
    ..data unchanged) and watches its Secret again. Runs last: it restarts the cluster."""
    c = cluster
    c.kubectl("create", "secret", "generic", "rs", "-n", NS, "--from-literal=v=one")
    mkpod(c, "restart-vol", "while true; do echo \"v=$(cat /s/v)\"; sleep 0.2; done", restart="Always",
          volumes=[{"name": "s", "secret": {"secretName": "rs"}}], mounts=[{"name": "s", "mountPath": "/s"}])
    running_log(c, "restart-vol", lambda d: d.get("v") == "one")
    uid = pod_json(c, "restart-vol")["metadata"]["uid"]
    sec_dir = str(volumes_dir(c) / uid / "volumes" / "kubernetes.io~secret" / "s")
    before = os.readlink(os.path.join(sec_dir, "..data"))

    def mounts():
        with open("/proc/self/mounts") as f:
            return sum(line.split()[1] == sec_dir for line in f)
    assert mounts() == 1
    c.proc.stop()
    c.restart()
    wait(lambda: pod_json(c, "restart-vol")["status"].get("containerStatuses", [{}])[0].get("ready"), 30,
         "the pod ready again")
    time.sleep(2)  # a few syncs of the recovered pod
    assert mounts() == 1
    assert os.readlink(os.path.join(sec_dir, "..data")) == before
    c.kubectl("patch", "secret", "rs", "-n", NS, "-p", json.dumps({"data": {"v": base64.b64encode(b"two").decode()}}))
    running_log(c, "restart-vol", lambda d: d.get("v") == "two", timeout=15, what="the Secret's change")
