"""The kite command line: flag parsing, help and the small tools, run as processes."""
import subprocess

import yaml

from conftest import KITE


def kite(*args, timeout=30):
    return subprocess.run([KITE, *args], capture_output=True, text=True, timeout=timeout)


def test_kubeconfig_reads_the_server_of_the_current_context(tmp_path):
    """kite kubeconfig takes the server from admin.kubeconfig's current context, read as a
    kubeconfig (not the first "server:" in the text)."""
    data = tmp_path / "data"
    p = kite("certs", "--data-dir", str(data))
    assert p.returncode == 0, p.stderr
    (data / "admin.kubeconfig").write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters:\n"
        "- name: other\n  cluster: {server: 'https://127.0.0.9:1'}\n"
        "- name: kite\n  cluster:\n    server: \"https://127.0.0.1:6443/\"\n"
        "users:\n- name: admin\n  user: {token: t}\n"
        "contexts:\n- name: o\n  context: {cluster: other, user: admin}\n"
        "- name: k\n  context: {cluster: kite, user: admin}\n"
        "current-context: k\n")
    p = kite("kubeconfig", "--data-dir", str(data), "--node", "n1")
    assert p.returncode == 0, p.stderr
    kc = yaml.safe_load(p.stdout)
    assert kc["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443", p.stdout


def test_kubeconfig_without_admin_kubeconfig_names_it(tmp_path):
    data = tmp_path / "data"
    assert kite("certs", "--data-dir", str(data)).returncode == 0
    p = kite("kubeconfig", "--data-dir", str(data), "--node", "n1")
    assert p.returncode == 1
    assert "admin.kubeconfig" in p.stderr, p.stderr


def test_bad_values_get_one_message_and_exit_2(tmp_path):
    d = str(tmp_path / "d")
    cases = [
        (["apiserver", "--data-dir", d, "--threads", "0"], 'kite apiserver: --threads: "0" is not a number from 1 to 256'),
        (["up", "--data-dir", d, "--threads=x"], 'kite up: --threads: "x" is not a number from 1 to 256'),
        (["apiserver", "--data-dir", d, "--max-connections", "200001"],
         'kite apiserver: --max-connections: "200001" is not a number from 1 to 200000'),
        (["apiserver", "--data-dir", d, "--event-ttl", "500ms"],
         'kite apiserver: --event-ttl: "500ms" is not a duration of at least 1s'),
        (["up", "--data-dir", d, "--no-agent=maybe"], 'kite up: --no-agent: "maybe" is not true or false'),
        (["apiserver", "--threads", "4"], "kite apiserver: --data-dir is required"),
        (["certs"], "kite certs: --data-dir is required"),
        (["kubeconfig", "--data-dir", d], "kite kubeconfig: --node is required"),
        (["controller-manager"], "kite controller-manager: --kubeconfig is required"),
        (["agent", "--node-name", "n"], "kite agent: --kubeconfig is required"),
        (["agent", "--kubeconfig", "/nonexistent", "--max-pods", "0"], "kite agent: flag --max-pods:"),
        (["up", "--data-dir", d, "--node-lease-duration-seconds", "x"], "kite up: flag --node-lease-duration-seconds:"),
        (["agent", "--kubeconfig", "k", "--no-such-flag"], "kite agent: unknown flag --no-such-flag"),
        (["version", "--bogus"], "kite version: unknown flag --bogus"),
        (["apiserver", "--data-dir", d, "stray"], 'kite apiserver: unexpected argument "stray"'),
        (["apiserver", "--data-dir", d, "--endpoint-reconciler-type", "master-count"],
         'kite: --endpoint-reconciler-type: "master-count": kite has lease or none'),
        (["apiserver", "--data-dir", d, "--endpoint-lease-ttl", "100ms"],
         'kite apiserver: --endpoint-lease-ttl: "100ms" is not a duration of at least 1s'),
        (["apiserver", "--data-dir", d, "--storage-media-type", "application/yaml"],
         'kite: --storage-media-type: "application/yaml": kite stores application/json or '
         'application/vnd.kubernetes.protobuf'),
        (["up", "--data-dir", d, "--storage-media-type", "application/vnd.kubernetes.protobuf"],
         "kite: --storage-media-type application/vnd.kubernetes.protobuf: only with --etcd-servers "
         "(the SQLite store keeps JSON)"),
    ]
    for args, says in cases:
        p = kite(*args)
        assert p.returncode == 2, (args, p.returncode, p.stdout, p.stderr)
        assert says in p.stderr, (args, p.stderr)
    assert not (tmp_path / "d").exists(), "nothing is created for a refused command line"


def test_help_shows_defaults_from_the_flag_rows():
    p = kite("apiserver", "--help")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "usage: kite apiserver --data-dir DIR [flags]" in out, out
    assert "(default: 127.0.0.1:6443)" in out, out
    assert "(at least 1s, default: 1h)" in out, out
    assert "from 1 to 256, default: the number of CPUs" in out, out
    assert "from 1 to 200000" in out, out
    up = kite("up", "--help").stdout
    for flag in ("--threads", "--event-ttl", "--no-agent", "--node-name", "--max-pods", "--register-with-taints"):
        assert flag in up, (flag, up)
    assert "(default: DATA_DIR/agent)" in up, up
    agent = kite("agent", "--help")
    assert agent.returncode == 0 and "usage: kite agent --kubeconfig FILE [flags]" in agent.stdout, agent.stdout
    assert "(default: 110)" in agent.stdout and "(default: 10s)" in agent.stdout, agent.stdout
    assert "(default: /var/lib/kite-agent)" in agent.stdout, agent.stdout
    for cmd in ("certs", "kubeconfig", "controller-manager", "version"):
        p = kite(cmd, "-h")
        assert p.returncode == 0 and p.stdout.startswith(f"usage: kite {cmd}"), (cmd, p.stdout, p.stderr)


def test_version():
    p = kite("version")
    assert p.returncode == 0 and p.stdout.startswith("kite "), p.stdout


def test_up_agent_flags_win_over_its_config_file(tmp_path):
    """kite up reads --config first and applies the agent flags after it, as kite agent and the
    kubelet do (it used to read the file last, so the file won)."""
    from conftest import Cluster, wait_for
    cfg = tmp_path / "kubelet.yaml"
    cfg.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 5\n")
    c = Cluster("up", tmp_path, extra_args=["--config", str(cfg), "--max-pods", "7", "--node-name", "e2e-cli-up"]).start()
    try:
        api = c.api()

        def pods():
            r = api.get("/api/v1/nodes/e2e-cli-up")
            return r.status == 200 and r.json().get("status", {}).get("capacity", {}).get("pods")
        wait_for(pods, 20, what="node registered")
        assert pods() == "7"
        api.close()
    finally:
        c.stop()
