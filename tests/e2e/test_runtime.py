"""kite images: import of the busybox image scripts/make-busybox-image builds, list, rm, and a
corrupted blob refused. Skipped without umoci/busybox-static."""
import os
import shutil
import subprocess
import tarfile

import pytest

KITE = os.environ.get("KITE", "build/kite")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def image_tar(tmp_path_factory):
    if not shutil.which("umoci") or not os.path.exists("/bin/busybox") or not shutil.which("runc"):
        pytest.skip("umoci, busybox-static or runc missing (scripts/install-deps)")
    built = os.path.join(os.path.dirname(KITE), "busybox.tar")  # make's, by the same script
    if os.path.exists(built):
        return built
    out = tmp_path_factory.mktemp("img") / "busybox.tar"
    subprocess.run([os.path.join(ROOT, "scripts/make-busybox-image"), str(out)], check=True, capture_output=True)
    return out


def kite(*args):
    return subprocess.run([KITE, "images", *args], capture_output=True, text=True, timeout=60)


def test_images_import_list_rm(image_tar, tmp_path):
    r = kite("import", str(image_tar), "--root-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "imported docker.io/library/busybox:latest" in r.stdout
    r = kite("list", "--root-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    line = [l for l in r.stdout.splitlines() if l.startswith("docker.io/library/busybox:latest")]
    assert line and int(line[0].split()[-1]) > 100000
    assert kite("rm", "nginx", "--root-dir", str(tmp_path)).returncode == 1
    r = kite("rm", "busybox", "--root-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "busybox" not in kite("list", "--root-dir", str(tmp_path)).stdout
    assert os.listdir(tmp_path / "images" / "blobs" / "sha256") == []


def test_images_import_refuses_corrupted_blob(image_tar, tmp_path):
    src = tmp_path / "x"
    with tarfile.open(image_tar) as t:
        t.extractall(src)
    blobs = src / "blobs" / "sha256"
    biggest = max(blobs.iterdir(), key=lambda p: p.stat().st_size)
    data = bytearray(biggest.read_bytes())
    data[100] ^= 0xFF
    os.chmod(biggest, 0o644)
    biggest.write_bytes(bytes(data))
    bad = tmp_path / "bad.tar"
    with tarfile.open(bad, "w") as t:
        t.add(src, arcname=".")
    r = kite("import", str(bad), "--root-dir", str(tmp_path / "root"))
    assert r.returncode == 1
    assert f"blob sha256:{biggest.name}: content has digest" in r.stderr
