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
