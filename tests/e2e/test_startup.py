"""Starting and running on a data dir: one process per data dir, startup failures that name
the file and the cause, storage errors an operator can see, restarts that need no disk space."""
import os
import subprocess
import time

import pytest

from conftest import KITE, LEASES, Cluster, free_port, skip_on_etcd, wait_for


def run_kite(*args, timeout=30):
    return subprocess.run([KITE, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_second_apiserver_on_a_data_dir_is_refused(fresh_apiserver):
    c = fresh_apiserver
    kc = c.kubeconfig.read_bytes()
    p = run_kite("apiserver", "--data-dir", str(c.data_dir), "--listen", f"127.0.0.1:{free_port()}")
    assert p.returncode == 1, p
    err = p.stderr.strip().splitlines()
    assert len(err) == 1, p.stderr
    assert f"data dir {c.data_dir} is in use by another kite process (pid {c.proc.pid}" in err[0], err
    # the running server's kubeconfig is not taken over, and it still serves writes
    assert c.kubeconfig.read_bytes() == kc
    api = c.api()
    api.ok("POST", LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "still-mine"}})
    # the same refusal for `kite up`
    p = run_kite("up", "--no-agent", "--data-dir", str(c.data_dir), "--listen", f"127.0.0.1:{free_port()}")
    assert p.returncode == 1 and "is in use by another kite process" in p.stderr, p


def test_data_dir_lock_goes_with_the_process(tmp_path):
    """A SIGKILLed server leaves the lock file behind but not the lock: the next one starts."""
    c = Cluster("apiserver", tmp_path).start()
    c.kill9()
    c.restart()
    assert (c.data_dir / "kite.lock").read_text().strip() == str(c.proc.pid)
    c.stop()


@pytest.mark.parametrize("listen,names", [
    ("127.0.0.1:notaport", ['"127.0.0.1:notaport"', "HOST:PORT"]),
    ("256.1.1.1:80", ['"256.1.1.1:80"']),
])
def test_bad_listen_names_the_address(tmp_path, listen, names):
    p = run_kite("apiserver", "--data-dir", str(tmp_path / "d"), "--listen", listen)
    assert p.returncode != 0, p
    for n in names:
        assert n in p.stderr, p.stderr


def test_listen_in_use_names_the_address(fresh_apiserver, tmp_path):
    addr = f"127.0.0.1:{fresh_apiserver.port}"
    p = run_kite("apiserver", "--data-dir", str(tmp_path / "d"), "--listen", addr)
    assert p.returncode == 1, p
    assert f"cannot serve on {addr}: Address already in use" in p.stderr, p.stderr


def test_data_dir_not_a_directory_names_the_path(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    p = run_kite("apiserver", "--data-dir", str(f), "--listen", f"127.0.0.1:{free_port()}")
    assert p.returncode == 1, p
    assert str(f) in p.stderr and "Not a directory" in p.stderr, p.stderr


def test_unchanged_admin_kubeconfig_is_not_rewritten(tmp_path):
    port = free_port()
    c = Cluster("apiserver", tmp_path, port=port).start()
    st = os.stat(c.kubeconfig)
    c.stop()
    time.sleep(0.05)
    c.restart()
    st2 = os.stat(c.kubeconfig)
    assert (st2.st_ino, st2.st_mtime_ns) == (st.st_ino, st.st_mtime_ns)
    assert not (c.data_dir / "admin.kubeconfig.tmp").exists()
    c.stop()


def _mount_tmpfs(path, size):
    path.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                       text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill (needs root): {p.stderr.strip()}")


def test_full_disk_is_logged_counted_and_survives_a_restart(tmp_path):
    skip_on_etcd(why="a full disk under the SQLite file (etcd's disk is etcd's)")
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, "48m")
    try:
        c = Cluster("apiserver", disk)
        c.proc.log_path = tmp_path / "apiserver.log"  # the log is not on the full disk
        c.start()
        api = c.api()
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "before"},
                 "spec": {"holderIdentity": "x" * 1000}}
        api.ok("POST", LEASES, lease)
        filler = disk / "filler"
        with open(filler, "wb") as f:
            try:
                while True:
                    f.write(b"\0" * (1 << 20))
                    f.flush()
            except OSError:
                pass
        codes = []
        for i in range(300):
            lease["metadata"]["name"] = f"full-{i}"
            codes.append(api.post(LEASES, lease).status)
        assert 500 in codes, codes
        failed = codes.count(500)
        metrics = api.get("/metrics").body.decode()
        n = [l for l in metrics.splitlines() if l.startswith("kite_store_write_errors_total ")]
        assert n and int(n[0].split()[1]) >= failed, n
        log = c.proc.log_path.read_text()
        lines = [l for l in log.splitlines() if "storage error writing /registry/leases/default/full-" in l]
        assert lines, log[-3000:]
        assert len(lines) < failed or failed == 1, f"{len(lines)} log lines for {failed} failures: not rate-limited"
        # reads still work, the acknowledged write is there
        assert api.get(LEASES + "/before").status == 200
        api.close()
        # a restart with the disk still full: nothing to rewrite
        c.stop()
        c.restart()
        api = c.api()
        assert api.get(LEASES + "/before").status == 200
        filler.unlink()
        lease["metadata"]["name"] = "after"
        wait_for(lambda: api.post(LEASES, lease).status == 201, 10, what="writes after space was freed")
        api.close()
        c.stop()
    finally:
        subprocess.run(["umount", "-l", str(disk)])


def _leases(api, n, prefix):
    for i in range(n):
        api.ok("POST", LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                "metadata": {"name": f"{prefix}-{i}"}})


def test_truncated_store_is_refused_not_served_empty(tmp_path):
    """A store older than what it acknowledged (here: emptied after a clean stop) is refused
    with a message naming the file; --force-recover starts anyway, revisions never go back."""
    skip_on_etcd(why="a truncated SQLite file")
    c = Cluster("apiserver", tmp_path).start()
    api = c.api()
    _leases(api, 30, "keep")
    rv = int(api.get(LEASES).json()["metadata"]["resourceVersion"])
    api.close()
    c.stop()
    db = c.data_dir / "kite.db"
    os.truncate(db, 0)
    p = run_kite("apiserver", "--data-dir", str(c.data_dir), "--listen", f"127.0.0.1:{free_port()}")
    assert p.returncode == 1, p
    assert str(db) in p.stderr and "acknowledged" in p.stderr and "--force-recover" in p.stderr, p.stderr
    assert db.stat().st_size == 0, "a refused open changes nothing"
    c.proc.args.append("--force-recover")
    c.restart()
    api = c.api()
    assert api.get(LEASES).json()["items"] == []
    api.ok("POST", LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "after"}})
    assert int(api.get(LEASES).json()["metadata"]["resourceVersion"]) > rv
    api.close()
    c.stop()


def test_damaged_wal_after_a_crash_is_refused(tmp_path):
    skip_on_etcd(why="a damaged SQLite WAL")
    c = Cluster("apiserver", tmp_path).start()
    api = c.api()
    _leases(api, 200, "acked")
    api.close()
    time.sleep(0.3)  # the acknowledged revision reaches its marker (at most every 100 ms)
    c.kill9()
    wal = c.data_dir / "kite.db-wal"
    size = wal.stat().st_size
    assert size > 4096, size
    with open(wal, "r+b") as f:  # one flipped byte in the middle of the WAL
        f.seek(size // 2)
        b = f.read(1)
        f.seek(size // 2)
        f.write(bytes([b[0] ^ 0xFF]))
    p = run_kite("apiserver", "--data-dir", str(c.data_dir), "--listen", f"127.0.0.1:{free_port()}")
    assert p.returncode == 1, p
    assert "kite.db" in p.stderr and "acknowledged" in p.stderr, p.stderr
