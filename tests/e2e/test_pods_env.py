"""What a container sees, as the kubelet makes it: env from ConfigMaps and Secrets (valueFrom and
envFrom), the downward API (fieldRef, resourceFieldRef), $(VAR) expansion in env, command and
args, HOSTNAME and the Service link variables; a missing non-optional key keeps the container
in CreateContainerConfigError until it appears. The agent runs with --seccomp-default (the
kubelet's SeccompDefault): a container that names no seccomp profile runs under RuntimeDefault.
Read back with kubectl logs against `kite up`. Needs root, runc, conmon, umoci."""
import json
import os
import time

import pytest

from conftest import runc_up_cluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NS = "envtest"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from runc_up_cluster(tmp_path_factory, "podsenv", ["--cluster-dns", "10.96.0.10", "--cluster-domain", "cluster.test",
                                                               "--seccomp-default"],
                               namespace=NS)


def wait(fn, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.3)
    pytest.fail(f"timed out waiting for {what}; last: {last!r}")


def apply(c, obj):
    c.kubectl("apply", "-n", NS, "-f", "-", input=json.dumps(obj))


def mkpod(c, name, script, env=None, env_from=None, resources=None, args=None, **spec):
    ctr = {"name": "c", "image": "busybox", "command": ["sh", "-c", script]}
    if args:
        ctr["args"] = args
    if env:
        ctr["env"] = env
    if env_from:
        ctr["envFrom"] = env_from
    if resources:
        ctr["resources"] = resources
    apply(c, {"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": name, "labels": {"app": "envy"}, "annotations": {"note": "hi there"}},
              "spec": {"nodeName": c.node, "restartPolicy": "Never", "containers": [ctr], **spec}})


def phase(c, name):
    return c.kubectl("get", "pod", name, "-n", NS, "-o", "jsonpath={.status.phase}", check=False).stdout


def done(c, name):
    try:
        _done(c, name)
    except BaseException:
        print(json.dumps(pod_json(c, name)["status"], indent=1))
        print(c.kubectl("get", "events", "-n", NS).stdout)
        raise


def _done(c, name):
    wait(lambda: phase(c, name) in ("Succeeded", "Failed") or
         (phase(c, name) == "Pending" and pod_json(c, name)["status"].get("containerStatuses", [{}])[0]
          .get("state", {}).get("waiting", {}).get("reason", "ContainerCreating") not in
          ("ContainerCreating", "CreateContainerConfigError") and pod_json(c, name)["status"]), 40, f"{name} done")


def logs_of(c, name):
    done(c, name)
    out = c.kubectl("logs", name, "-n", NS).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def pod_json(c, name):
    return json.loads(c.kubectl("get", "pod", name, "-n", NS, "-o", "json").stdout)


def test_env_from_sources(cluster):
    c = cluster
    c.kubectl("create", "configmap", "cfg", "-n", NS, "--from-literal=color=blue", "--from-literal=size=L")
    c.kubectl("create", "configmap", "odd", "-n", NS, "--from-literal=1st=x", "--from-literal=fine=y")
    c.kubectl("create", "secret", "generic", "sec", "-n", NS, "--from-literal=password=s3cr=t!",
              "--from-literal=user=admin")
    env = [
        {"name": "COLOR", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "color"}}},
        {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "password"}}},
        {"name": "GONE", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "nokey", "optional": True}}},
        {"name": "NOCM", "valueFrom": {"configMapKeyRef": {"name": "nocm", "key": "k", "optional": True}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        {"name": "NOTE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['note']"}}},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
        {"name": "CPU_M", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}}},
        {"name": "MEM_MI", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
        {"name": "GREETING", "value": "$(COLOR)-$(POD_NAME)-$(UNKNOWN)-$$(COLOR)"},
        {"name": "E_size", "value": "overridden"},
    ]
    env_from = [{"configMapRef": {"name": "cfg"}, "prefix": "E_"}, {"secretRef": {"name": "sec"}},
                {"configMapRef": {"name": "absent", "optional": True}}, {"configMapRef": {"name": "odd"}}]
    # args are expanded by the kubelet ($1 is the second arg: sh -c's first is $0)
    mkpod(c, "envy", "env | sort; echo ARG=$1", env=env, env_from=env_from, args=["x", "$(COLOR)/$(NOPE)"],
          resources={"limits": {"cpu": "250m", "memory": "64Mi"}})
    got = logs_of(c, "envy")
    p = pod_json(c, "envy")
    assert p["status"]["phase"] == "Succeeded", p["status"]
    assert got["COLOR"] == "blue" and got["PASS"] == "s3cr=t!"
    assert "GONE" not in got and "NOCM" not in got
    assert got["POD_NAME"] == "envy" and got["POD_NS"] == NS and got["POD_UID"] == p["metadata"]["uid"]
    assert got["APP"] == "envy" and got["NOTE"] == "hi there" and got["NODE"] == c.node
    assert got["POD_IP"] == p["status"]["podIP"] and got["HOST_IP"] == p["status"]["hostIP"]
    assert got["CPU_M"] == "250" and got["MEM_MI"] == "64"
    assert got["GREETING"] == "blue-envy-$(UNKNOWN)-$(COLOR)"
    assert got["E_color"] == "blue" and got["E_size"] == "overridden"
    assert got["user"] == "admin" and got["password"] == "s3cr=t!"
    assert got["ARG"] == "blue/$(NOPE)"
    assert got["HOSTNAME"] == "envy"
    # the key that is not a variable name was skipped, with the kubelet's event
    ev = json.loads(c.kubectl("get", "events", "-n", NS, "-o", "json").stdout)["items"]
    msgs = [e["message"] for e in ev if e["reason"] == "InvalidEnvironmentVariableNames"]
    assert got["fine"] == "y" and "1st" not in got
    assert f"Keys [1st] from the EnvFrom configMap {NS}/odd were skipped since they are considered " \
           "invalid environment variable names." in msgs, msgs


def test_service_links(cluster):
    c = cluster
    apply(c, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web-front"},
              "spec": {"selector": {"app": "nothing"}, "ports": [{"name": "http", "port": 8080}]}})
    ip = c.kubectl("get", "svc", "web-front", "-n", NS, "-o", "jsonpath={.spec.clusterIP}").stdout
    kip = c.kubectl("get", "svc", "kubernetes", "-n", "default", "-o", "jsonpath={.spec.clusterIP}").stdout
    mkpod(c, "links", "env | sort")
    got = logs_of(c, "links")
    assert got["WEB_FRONT_SERVICE_HOST"] == ip and got["WEB_FRONT_SERVICE_PORT"] == "8080"
    assert got["WEB_FRONT_SERVICE_PORT_HTTP"] == "8080"
    assert got["WEB_FRONT_PORT"] == f"tcp://{ip}:8080" and got["WEB_FRONT_PORT_8080_TCP_ADDR"] == ip
    assert got["WEB_FRONT_PORT_8080_TCP_PROTO"] == "tcp" and got["WEB_FRONT_PORT_8080_TCP_PORT"] == "8080"
    assert got["KUBERNETES_SERVICE_HOST"] == kip and got["KUBERNETES_SERVICE_PORT"]
    assert got["KUBERNETES_PORT"].startswith(f"tcp://{kip}:")
    # enableServiceLinks: false keeps the namespace's services out, the master's in
    mkpod(c, "nolinks", "env | sort", enableServiceLinks=False)
    got = logs_of(c, "nolinks")
    assert "WEB_FRONT_SERVICE_HOST" not in got and got["KUBERNETES_SERVICE_HOST"] == kip


@pytest.mark.slow  # 21 s under the sanitizers
def test_missing_key_is_create_container_config_error(cluster):
    c = cluster
    env = [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "later", "key": "k"}}}]
    mkpod(c, "waits", "echo X=$X", env=env)

    def waiting():
        st = pod_json(c, "waits")["status"]
        w = (st.get("containerStatuses") or [{}])[0].get("state", {}).get("waiting", {})
        return w if w.get("reason") == "CreateContainerConfigError" else None
    w = wait(waiting, 30, "CreateContainerConfigError")
    assert w["message"] == 'configmap "later" not found', w
    assert phase(c, "waits") == "Pending"
    c.kubectl("create", "configmap", "later", "-n", NS, "--from-literal=other=1")
    w = wait(lambda: (x := waiting()) and x["message"] != 'configmap "later" not found' and x, 30, "key message")
    assert w["message"] == f"couldn't find key k in ConfigMap {NS}/later", w
    ev = json.loads(c.kubectl("get", "events", "-n", NS, "-o", "json").stdout)["items"]
    assert any(e["reason"] == "Failed" and e["message"] == 'Error: configmap "later" not found'
               and e["involvedObject"]["name"] == "waits" for e in ev)
    # retried: the key appears, the container starts
    c.kubectl("patch", "configmap", "later", "-n", NS, "-p", '{"data":{"k":"found"}}')
    got = logs_of(c, "waits")
    assert got["X"] == "found"


def host_resolv(key):
    words = []
    with open("/etc/resolv.conf") as f:
        for line in f:
            p = line.split()
            if p and p[0] == key:
                words = (words + p[1:]) if key == "nameserver" else p[1:]
    return words


def test_hosts_hostname_and_resolv_conf(cluster):
    c = cluster
    script = "cat /etc/hosts; echo ---; cat /etc/hostname; echo ---; cat /etc/resolv.conf"
    mkpod(c, "named", script, hostname="web-0", subdomain="web",
          hostAliases=[{"ip": "10.1.2.3", "hostnames": ["foo.local", "bar.local"]}])
    done(c, "named")
    hosts, hostname, resolv = c.kubectl("logs", "named", "-n", NS).stdout.split("---\n")
    ip = pod_json(c, "named")["status"]["podIP"]
    assert hosts == ("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"
                     "::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\n"
                     "fe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"
                     f"{ip}\tweb-0.web.{NS}.svc.cluster.test\tweb-0\n"
                     "\n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n"), hosts
    assert hostname == "web-0\n"
    # ClusterFirst with --cluster-dns: the cluster's server and search list, the host's searches after
    search = " ".join([f"{NS}.svc.cluster.test", "svc.cluster.test", "cluster.test"] +
                      [s for s in host_resolv("search") if s not in ("cluster.test",)])
    assert resolv == f"search {search}\nnameserver 10.96.0.10\noptions ndots:5\n", resolv
    # None: only dnsConfig; Default: the node's servers, plus dnsConfig merged in
    mkpod(c, "dns-none", "cat /etc/resolv.conf", dnsPolicy="None",
          dnsConfig={"nameservers": ["1.2.3.4"], "searches": ["a.example", "b.example"],
                     "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]})
    done(c, "dns-none")
    out = c.kubectl("logs", "dns-none", "-n", NS).stdout
    assert out == "search a.example b.example\nnameserver 1.2.3.4\noptions ndots:2 edns0\n", out
    mkpod(c, "dns-default", "cat /etc/resolv.conf", dnsPolicy="Default",
          dnsConfig={"options": [{"name": "ndots", "value": "1"}]})
    done(c, "dns-default")
    out = c.kubectl("logs", "dns-default", "-n", NS).stdout
    servers = [l.split()[1] for l in out.splitlines() if l.startswith("nameserver")]
    assert servers == host_resolv("nameserver")[:3], out
    assert "ndots:1" in out.splitlines()[-1], out


def test_seccomp_default(cluster):
    """--seccomp-default: a container that names no profile runs under RuntimeDefault (a filter:
    Seccomp 2, creating a user namespace refused; without the flag it runs unconfined, as
    test_pods_security's sc-none shows)."""
    c = cluster
    mkpod(c, "sd-none", "grep ^Seccomp: /proc/self/status; unshare -U true 2>/dev/null && echo unshared || echo refused")
    done(c, "sd-none")
    out = c.kubectl("logs", "sd-none", "-n", NS).stdout
    assert out.split() == ["Seccomp:", "2", "refused"], out
