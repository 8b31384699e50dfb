"""What a user meets when setting up: `kite nodes` finds its kubeconfig as kubectl does (also as
the kubectl plugin `kubectl kite nodes`), a second `kite up` whose port or pod bridge another
cluster holds is refused at start naming what is taken and the flag to change, and
`kite up --update-kubeconfig` adds its context to the user's kubeconfig (as kind and k3d do)
without touching other contexts, and removes it at a clean stop."""
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import KITE, KUBECTL, Cluster, free_port, pod_network_flags, wait_for

BUILD = Path(KITE).parent


def env_with(**kw):
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update({k: str(v) for k, v in kw.items() if v is not None})
    return env


def run(args, env, timeout=30):
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)


def test_kite_nodes_finds_the_kubeconfig_as_kubectl_does(apiserver, tmp_path):
    admin = str(apiserver.kubeconfig)
    home = tmp_path / "home"
    home.mkdir()
    # no --kubeconfig, no KUBECONFIG, no ~/.kube/config: an error naming what to give
    p = run([KITE, "nodes"], env_with(HOME=home))
    assert p.returncode == 1 and "kubeconfig" in p.stderr and ".kube/config" in p.stderr, p.stderr
    # $KUBECONFIG, a list whose missing files are skipped
    p = run([KITE, "nodes"], env_with(HOME=home, KUBECONFIG=f"{tmp_path}/missing:{admin}"))
    assert p.returncode == 0 and p.stdout.split()[:3] == ["NAME", "STATE", "EVIDENCE"], (p.stdout, p.stderr)
    # ~/.kube/config
    (home / ".kube").mkdir()
    shutil.copy(admin, home / ".kube" / "config")
    p = run([KITE, "nodes"], env_with(HOME=home))
    assert p.returncode == 0 and p.stdout.startswith("NAME"), p.stderr
    # merged files: the first to set current-context wins, contexts come from any file
    cfg = yaml.safe_load(Path(admin).read_text())
    ctx = cfg["current-context"]
    first = tmp_path / "first.yaml"
    first.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": ctx}))
    p = run([KITE, "nodes"], env_with(HOME=tmp_path, KUBECONFIG=f"{first}:{admin}"))
    assert p.returncode == 0, p.stderr
    p = run([KITE, "nodes", "--context", "nope"], env_with(HOME=home))
    assert p.returncode == 1 and 'context "nope" not found' in p.stderr, p.stderr
    # the kubectl plugin: kubectl finds kubectl-kite on PATH
    assert os.access(BUILD / "kubectl-kite", os.X_OK), "make all builds build/kubectl-kite"
    env = env_with(HOME=home, KUBECONFIG=admin, PATH=f"{BUILD}:{os.environ['PATH']}")
    p = run([KUBECTL, "kite", "nodes", "-o", "json"], env)
    assert p.returncode == 0, p.stderr
    assert '"items"' in p.stdout, p.stdout


def wait_exit(proc, timeout=30):
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("a second kite up that should be refused kept running")


def test_second_up_refused_naming_what_is_taken(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root (the pod bridge)")
    port = free_port()
    net = pod_network_flags()
    a = Cluster("up", tmp_path / "a", extra_args=[*net, "--port", str(port)]).start()
    try:
        def second(name, *args):
            d = tmp_path / name
            d.mkdir()
            log = d / "up.log"
            with open(log, "wb") as f:
                p = subprocess.Popen([KITE, "up", "--data-dir", str(d / "data"), *args], stdout=f, stderr=f,
                                     cwd=str(d), start_new_session=True)
            return wait_exit(p), log.read_text()

        other_net = pod_network_flags()
        rc, log = second("b", "--listen", f"127.0.0.1:{free_port()}", "--port", str(port), *other_net)
        assert rc == 1, log
        assert f"port {port} is in use" in log and "--port" in log, log
        rc, log = second("c", "--listen", f"127.0.0.1:{free_port()}", "--port", "0", *net)
        assert rc == 1, log
        bridge = net[net.index("--pod-bridge") + 1]
        assert f"the pod bridge {bridge} is in use by another node agent (pid {a.proc.pid}" in log, log
        assert "--pod-bridge" in log, log
        rc, log = second("d", "--listen", f"127.0.0.1:{a.port}", "--port", "0", *other_net)
        assert rc == 1, log
        assert f"127.0.0.1:{a.port} is in use" in log and "--listen" in log, log
        assert a.proc.alive()
        # the first cluster is untouched: its node still reports
        api = a.api()
        wait_for(lambda: api.get("/api/v1/nodes").json().get("items"), 20, what="the first cluster's node")
        api.close()
        for n in ("b", "c", "d"):
            b2 = other_net[other_net.index("--pod-bridge") + 1]
            if os.path.exists(f"/sys/class/net/{b2}"):
                subprocess.run(["ip", "link", "del", b2], capture_output=True)
    finally:
        a.stop()


def test_update_kubeconfig_adds_and_removes_its_context(tmp_path):
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    other = {"apiVersion": "v1", "kind": "Config", "current-context": "other", "preferences": {},
             "clusters": [{"name": "other", "cluster": {"server": "https://10.0.0.1:6443"}}],
             "users": [{"name": "other", "user": {"token": "abc"}}],
             "contexts": [{"name": "other", "context": {"cluster": "other", "user": "other"}}]}
    cfg_path = home / ".kube" / "config"
    cfg_path.write_text(yaml.safe_dump(other))
    port = free_port()
    env = env_with(HOME=home)
    log = open(tmp_path / "up.log", "wb")
    p = subprocess.Popen([KITE, "up", "--data-dir", str(tmp_path / "data"), "--listen", f"127.0.0.1:{port}",
                          "--no-agent", "--update-kubeconfig"], stdout=log, stderr=log, env=env,
                         start_new_session=True)
    try:
        cfg = wait_for(lambda: (c := yaml.safe_load(cfg_path.read_text())).get("current-context") == "kite" and c, 30,
                       what="context kite in ~/.kube/config\n" + (tmp_path / "up.log").read_text())
        assert {c["name"] for c in cfg["contexts"]} == {"other", "kite"}, cfg
        assert next(c for c in cfg["clusters"] if c["name"] == "other") == other["clusters"][0]
        assert next(u for u in cfg["users"] if u["name"] == "other") == other["users"][0]
        assert next(c for c in cfg["clusters"] if c["name"] == "kite")["cluster"]["server"] == f"https://127.0.0.1:{port}"
        assert oct(cfg_path.stat().st_mode & 0o777) == "0o600"
        # kubectl with no KUBECONFIG reaches the new cluster
        k = run([KUBECTL, "get", "namespaces", "-o", "name"], env)
        assert k.returncode == 0 and "namespace/default" in k.stdout, k.stderr
    finally:
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=20)
        log.close()
    assert rc == 0
    cfg = yaml.safe_load(cfg_path.read_text())
    assert {c["name"] for c in cfg["contexts"]} == {"other"}, cfg
    assert {c["name"] for c in cfg["clusters"]} == {"other"} and {u["name"] for u in cfg["users"]} == {"other"}
    assert not cfg.get("current-context"), cfg
    assert not (home / ".kube" / "config.lock").exists()
