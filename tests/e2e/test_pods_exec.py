"""`kubectl exec`, `exec -it`, `attach` and `cp` end to end with kubectl 1.32's defaults (WebSocket,
v5.channel.k8s.io; no KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false) and the python client's stream()
(v4.channel.k8s.io): the API server authorizes pods/exec and pods/attach and hands the upgraded
connection to the node agent, which runs `runc exec` in the pod's container (pipes, or a pty for
a tty) or reads conmon's attach socket; port-forward with the python client's framing and with
kubectl's SPDY/3.1 (inside the WebSocket, and plain). Real runc containers: needs root, runc, conmon and umoci,
as test_pods_logs.py, whose cluster fixture this module reuses."""
import hashlib
import json
import os
import pty
import select
import signal
import subprocess
import time

import pytest

from conftest import KUBECTL
from test_pods_logs import cluster, pod, running  # noqa: F401 (the module-scoped runc cluster)
from test_pods_run import NS, sh, status_of, wait  # noqa: F401
from test_rbac import User


@pytest.fixture(scope="module")
def box(cluster):  # noqa: F811
    pod(cluster, "box", [sh("main", "echo started; sleep 3600")])
    running(cluster, "box")
    return cluster


def test_exec_streams_and_exit_code(box):
    r = box.kubectl("exec", "box", "--", "sh", "-c", "echo out; echo err >&2; exit 3", check=False)
    assert r.returncode == 3, r
    assert r.stdout == "out\n"
    assert "err\n" in r.stderr
    r = box.kubectl("exec", "box", "--", "true")
    assert r.stdout == ""


def test_exec_stdin(box):
    r = box.kubectl("exec", "-i", "box", "--", "cat", input="hi\nthere\n", timeout=30)
    assert r.stdout == "hi\nthere\n"
    # a large stdin passes whole (flow control through the API server and the agent)
    blob = "".join(f"line {i:07d}\n" for i in range(200000))  # 2.6 MB
    r = box.kubectl("exec", "-i", "box", "--", "sh", "-c", "wc -c; md5sum", input=blob, timeout=60)
    assert r.stdout.split()[0] == str(len(blob))


def _run_in_pty(args, env, cwd, send=None, timeout=30, rows=None, cols=None, resize=None, ready=b"READY"):
    """Runs kubectl with a pseudo-terminal as its stdin/stdout; once it printed `ready`, resizes the
    terminal (resize: (rows, cols); kubectl sees SIGWINCH) and types send. Returns (rc, output)."""
    pid, fd = pty.fork()
    if pid == 0:
        if rows:
            import fcntl
            import struct
            import termios
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.chdir(cwd)
        os.execvpe(args[0], args, env)
    out = b""
    sent = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        if send and not sent and ready in out:
            if resize:
                import fcntl
                import struct
                import termios
                fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", resize[0], resize[1], 0, 0))
                time.sleep(1)
            os.write(fd, send)
            sent = True
    else:
        os.kill(pid, signal.SIGKILL)
    _, st = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(st), out.decode(errors="replace")


def test_exec_tty(box):
    env = box.kubectl_env()
    # stdin is a terminal inside the container, and the client's window size reaches it
    rc, out = _run_in_pty([KUBECTL, "exec", "-it", "box", "--", "sh", "-c",
                           "test -t 0 && echo IS-A-TTY; stty size; echo READY; read x; echo got-$x; stty size; exit 5"],
                          env, str(box.workdir), send=b"abc\r", rows=33, cols=101, resize=(41, 123))
    assert "IS-A-TTY" in out, out
    # the window size the client starts with is not asserted: the command starts before the
    # agent reads the first resize message, so under load its first `stty size` can win the race
    assert "got-abc" in out, out
    assert "41 123" in out.split("got-abc", 1)[1], out  # the resize message (channel 4) reached it
    assert rc == 5, out


def test_exec_killed_when_client_leaves(box):
    """A command whose client went away does not keep running in the container."""
    p = box.kubectl_popen("exec", "box", "--", "sleep", "4242")
    wait(lambda: "sleep 4242" in box.kubectl("exec", "box", "--", "ps", "-o", "args").stdout, 15, "sleep running")
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(timeout=10)
    wait(lambda: "sleep 4242" not in box.kubectl("exec", "box", "--", "ps", "-o", "args").stdout, 15, "sleep killed")


def test_cp_both_ways(box, tmp_path):
    src = tmp_path / "payload.bin"
    src.write_bytes(os.urandom(300 * 1024))
    box.kubectl("cp", str(src), f"{NS}/box:/tmp/payload.bin", "-c", "main", timeout=60)
    r = box.kubectl("exec", "box", "--", "md5sum", "/tmp/payload.bin")
    assert r.stdout.split()[0] == hashlib.md5(src.read_bytes()).hexdigest()
    back = tmp_path / "back.bin"
    box.kubectl("cp", f"{NS}/box:/tmp/payload.bin", str(back), "-c", "main", timeout=60)
    assert back.read_bytes() == src.read_bytes()


def test_attach(box):
    c = box
    pod(c, "ticker", [sh("t", "i=0; while true; do echo tick-$i; i=$((i+1)); sleep 0.3; done")])
    running(c, "ticker")
    # attached once the container has written: conmon's attach socket is there by then
    wait(lambda: "tick-" in c.kubectl("logs", "ticker", check=False).stdout, 30, "ticker's output")
    p = c.kubectl_popen("attach", "ticker")
    # interrupted once its output flows (attached then, whatever the load)
    first = b""
    deadline = time.monotonic() + 30
    while b"tick-" not in first and time.monotonic() < deadline:
        r, _, _ = select.select([p.stdout], [], [], 0.5)
        if r:
            chunk = os.read(p.stdout.fileno(), 4096)
            if not chunk:
                break
            first += chunk
    assert b"tick-" in first, first
    os.killpg(p.pid, signal.SIGINT)
    try:
        out, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail(f"kubectl attach still running 10 s after SIGINT; stderr: {err!r}")
    out = first.decode() + out
    assert "tick-" in out, (out, err)
    # the container's end is the attach's: kubectl returns by itself. The container waits for the
    # test to say go once the attach is seen to be under way (a fixed sleep before its last lines
    # lost the race under load: the container had ended before kubectl attached, and the agent's
    # "not running" answer sent kubectl to SPDY)
    pod(c, "short", [sh("s", "while [ ! -e /tmp/go ]; do echo waiting; sleep 0.3; done; "
                              "for i in 1 2 3; do echo t$i; sleep 0.3; done")], restart="Never")
    running(c, "short")
    p = c.kubectl_popen("attach", "short")
    try:
        first = p.stdout.readline()
        assert first == "waiting\n", (first, p.stderr.read() if p.poll() is not None else "")
        c.kubectl("exec", "short", "--", "touch", "/tmp/go")
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 0, (out, err)
    assert "t1\nt2\nt3\n" in out, (out, err)


def test_attach_to_a_stopped_container_says_so(box):
    """kubectl tries SPDY after a WebSocket upgrade is answered anything but 101, and reports the
    SPDY answer: the agent gives the container's state there too, not only "SPDY is not served"."""
    c = box
    pod(c, "half", [sh("gone", "exit 0"), sh("stays", "sleep 3600")], restart="Never")
    wait(lambda: (s := status_of(c, "half")) and s.get("phase") == "Running" and
         any(x.get("state", {}).get("terminated") for x in s.get("containerStatuses", [])), 30, "gone ended")
    r = c.kubectl("attach", "half", "-c", "gone", check=False, timeout=30)
    assert r.returncode != 0
    assert 'container "gone" in pod "half" is not running' in r.stderr, r.stderr


def test_attach_stdin(box):
    """kubectl attach -i to a container started with stdin: its stdin is the client's; with
    stdinOnce the end of the client's input is the end of the container's."""
    c = box
    pod(c, "reader", [sh("r", "echo ready; while read l; do echo got-$l; done; echo eof", stdin=True, stdinOnce=True)],
        restart="Never")
    running(c, "reader")
    wait(lambda: "ready" in c.kubectl("logs", "reader", check=False).stdout, 30, "reader's output")
    r = c.kubectl("attach", "-i", "reader", input="one\ntwo\n", timeout=30)
    assert "got-one\ngot-two\neof\n" in r.stdout, r
    assert c.kubectl("logs", "reader").stdout == "ready\ngot-one\ngot-two\neof\n"


def test_missing_container_and_pod(box):
    r = box.kubectl("exec", "box", "-c", "nope", "--", "true", check=False)
    assert r.returncode != 0
    assert "container nope is not valid for pod box" in r.stderr, r.stderr
    r = box.kubectl("exec", "no-such-pod", "--", "true", check=False)
    assert r.returncode != 0
    assert 'pods "no-such-pod" not found' in r.stderr, r.stderr


def test_exec_needs_create_on_pods_exec(box):
    """kubectl falls back to SPDY (POST, create) after a refused WebSocket (GET): both are 403 for a user
    who may only read pods, or who holds get on pods/exec but not create (kube-apiserver 1.35 checks
    create for a WebSocket upgrade too); a node's credential cannot exec; edit can."""
    c = box
    c.kubectl("create", "role", "pod-reader", "--verb=get,list", "--resource=pods")
    c.kubectl("create", "rolebinding", "reader-pods", "--role=pod-reader", "--user=reader")
    reader = User(c, "reader")
    assert reader.kubectl("get", "pod", "box").returncode == 0
    r = reader.kubectl("exec", "box", "--", "true")
    assert r.returncode != 0
    assert 'cannot create resource "pods/exec"' in r.stderr and "Forbidden" in r.stderr, r.stderr
    c.kubectl("create", "role", "exec-getter", "--verb=get", "--resource=pods,pods/exec")
    c.kubectl("create", "rolebinding", "getter", "--role=exec-getter", "--user=getter")
    r = User(c, "getter").kubectl("exec", "box", "--", "true")
    assert r.returncode != 0 and "Forbidden" in r.stderr, r.stderr
    r = User(c, "getter").kubectl("attach", "box")
    assert r.returncode != 0 and 'cannot create resource "pods/attach"' in r.stderr, r.stderr
    node = User(c, f"system:node:{c.node}", groups=["system:nodes"])
    safe = c.workdir / "node-user.kubeconfig"  # KUBECONFIG splits at ':'
    safe.write_text(node.kubeconfig.read_text())
    node.kubeconfig = safe
    r = node.kubectl("exec", "box", "--", "true")
    assert r.returncode != 0 and "Forbidden" in r.stderr, r.stderr
    c.kubectl("create", "rolebinding", "editor", "--clusterrole=edit", "--user=editor")
    r = User(c, "editor").kubectl("exec", "box", "--", "echo", "allowed")
    assert r.returncode == 0 and r.stdout == "allowed\n", r


def test_exec_not_upgraded_is_refused(box):
    """A plain GET (no Upgrade) and a SPDY upgrade are told what is served."""
    api = box.api()
    r = api.get(f"/api/v1/namespaces/{NS}/pods/box/exec?command=true&stdout=true")
    assert r.status == 400 and "Upgrade request required" in r.json()["message"]
    r = api.request("POST", f"/api/v1/namespaces/{NS}/pods/box/exec?command=true&stdout=true", None,
                    headers={"Connection": "Upgrade", "Upgrade": "SPDY/3.1"})
    assert r.status == 400 and "SPDY/3.1 exec and attach streams are not served" in r.json()["message"], r.body


def test_python_client_exit_code(box):
    """kubernetes-client/python's e2e test_exit_code, rewritten to the same calls."""
    from kubernetes import client
    from kubernetes.stream import stream
    api = client.CoreV1Api(box.python_api_client())
    for command, value in ((["false"], 1), (["/bin/sh", "-c", "sleep 1; exit 3"], 3), (["true"], 0),
                           (["/bin/sh", "-c", "ls /"], 0)):
        ws = stream(api.connect_get_namespaced_pod_exec, "box", NS, command=command, stderr=True, stdin=False,
                    stdout=True, tty=False, _preload_content=False)
        assert ws.returncode is None
        ws.run_forever(timeout=10)
        assert ws.returncode == value, command
        assert ws.returncode == value


def test_python_client_pod_apis(box):
    """kubernetes-client/python's e2e test_pod_apis (its exec part), rewritten to the same calls."""
    from kubernetes import client
    from kubernetes.stream import stream
    from kubernetes.stream.ws_client import ERROR_CHANNEL
    api = client.CoreV1Api(box.python_api_client())
    resp = stream(api.connect_get_namespaced_pod_exec, "box", NS, command=["/bin/sh", "-c", "for i in $(seq 1 3); do date; done"],
                  stderr=False, stdin=False, stdout=True, tty=False)
    assert isinstance(resp, str) and len(resp.splitlines()) == 3
    resp = stream(api.connect_post_namespaced_pod_exec, "box", NS, command=["uptime"], stderr=False, stdin=False,
                  stdout=True, tty=False)
    assert len(resp.splitlines()) == 1
    resp = stream(api.connect_post_namespaced_pod_exec, "box", NS, command=["/bin/sh"], stderr=True, stdin=True,
                  stdout=True, tty=False, _preload_content=False)
    resp.write_stdin("echo test string 1\n")
    assert resp.readline_stdout(timeout=5) == "test string 1"
    assert not resp.peek_stderr()
    resp.write_stdin("echo test string 2 >&2\n")
    assert resp.readline_stderr(timeout=5) == "test string 2"
    assert not resp.peek_stdout()
    resp.write_stdin("exit\n")
    resp.update(timeout=5)
    deadline = time.monotonic() + 10
    line = ""
    while not line and time.monotonic() < deadline:
        line = resp.read_channel(ERROR_CHANNEL)
        if not line:
            resp.update(timeout=1)
    assert json.loads(line)["status"] == "Success"
    resp.update(timeout=5)
    assert not resp.is_open()
    # output and the exit code of one call
    ws = stream(api.connect_get_namespaced_pod_exec, "box", NS, command=["sh", "-c", "echo py-out; exit 7"],
                stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
    ws.run_forever(timeout=20)
    assert ws.read_stdout() == "py-out\n"
    assert ws.returncode == 7


@pytest.fixture(scope="module")
def web(box):
    # httpd on every address, and a second one on the pod's loopback alone (reached only from
    # inside the pod's network namespace, as the kubelet's port-forward reaches it)
    pod(box, "web", [sh("httpd", "mkdir -p /www && echo hello-from-the-pod > /www/index.html && "
                                 "httpd -p 8080 -h /www && httpd -f -p 127.0.0.1:8081 -h /www")])
    running(box, "web")
    wait(lambda: "hello" in box.kubectl("exec", "web", "--", "wget", "-qO-", "http://127.0.0.1:8081/",
                                        check=False).stdout, 15, "httpd answering")
    return box


def test_python_client_portforward_http(web):
    """kubernetes-client/python's e2e test_portforward_http, rewritten to the same calls (busybox
    httpd for nginx): urllib through socket.create_connection replaced by pf.socket."""
    import socket
    import urllib.request
    from kubernetes import client
    from kubernetes.stream import portforward
    api = client.CoreV1Api(web.python_api_client())

    def kubernetes_create_connection(address, *args, **kwargs):
        dns_name = address[0]
        if isinstance(dns_name, bytes):
            dns_name = dns_name.decode()
        dns_name = dns_name.split(".")
        if len(dns_name) != 3 or dns_name[2] != "kubernetes":
            return socket_create_connection(address, *args, **kwargs)
        pf = portforward(api.connect_get_namespaced_pod_portforward, dns_name[0], dns_name[1], ports=str(address[1]))
        return pf.socket(address[1])

    socket_create_connection = socket.create_connection
    try:
        socket.create_connection = kubernetes_create_connection
        for port in (8080, 8081):
            response = urllib.request.urlopen(f"http://web.{NS}.kubernetes:{port}/", timeout=20)
            assert response.code == 200
            assert response.read().decode() == "hello-from-the-pod\n"
    finally:
        socket.create_connection = socket_create_connection


def test_python_client_portforward_ports_and_errors(web):
    """Two ports in one session (channels 0/1 and 2/3), and a closed port's error on its error channel."""
    import select
    from kubernetes import client
    from kubernetes.stream import portforward
    api = client.CoreV1Api(web.python_api_client())
    pf = portforward(api.connect_get_namespaced_pod_portforward, "web", NS, ports="8080,8081,1236")
    assert pf.connected
    for port in (8080, 8081):
        s = pf.socket(port)
        s.setblocking(True)
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        data = b""
        deadline = time.monotonic() + 20
        # (the pod's side closing one port ends nothing the client sees: the session ends with its last port)
        while time.monotonic() < deadline and not data.endswith(b"hello-from-the-pod\n"):
            r, _, _ = select.select([s], [], [], 1)
            if r:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        assert data.split(b"\r\n", 1)[0].endswith(b" 200 OK"), data
        assert data.endswith(b"hello-from-the-pod\n"), data
    s = pf.socket(1236)
    s.setblocking(True)
    assert s.recv(1024) == b""
    assert "connection refused" in (pf.error(1236) or "").lower(), pf.error(1236)
    assert pf.error(8080) is None
    # every port's connection ended: so does the session
    wait(lambda: not pf.connected, 10, "the session to end")


def _port_forward(c, *args, env=None):
    """`kubectl port-forward` in the background: the process and the local port it listens on."""
    import re
    p = subprocess.Popen([KUBECTL, "port-forward", *args], env={**c.kubectl_env(), **(env or {})},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(c.workdir),
                         start_new_session=True)
    line = ""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "Forwarding from 127.0.0.1:" not in line:
        r, _, _ = select.select([p.stdout], [], [], 1)
        if r:
            line = p.stdout.readline()
            if not line:
                break
    if "Forwarding from 127.0.0.1:" not in line:
        p.kill()
        pytest.fail(f"kubectl port-forward did not start: {line!r} {p.stderr.read()!r}")
    return p, int(re.search(r"127\.0\.0\.1:(\d+) ->", line).group(1))


def _http_get(port, path="/"):
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk


def _agent_threads_and_fds(pid):
    return len(os.listdir(f"/proc/{pid}/task")), len(os.listdir(f"/proc/{pid}/fd"))


def _stop(p):
    os.killpg(p.pid, signal.SIGINT)
    try:
        return p.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        pytest.fail("kubectl port-forward did not stop on SIGINT")


@pytest.mark.parametrize("websocket", [True, False], ids=["spdy-in-websocket", "spdy"])
def test_kubectl_port_forward(web, websocket):
    """kubectl 1.32 tunnels SPDY/3.1 inside the WebSocket (SPDY/3.1+portforward.k8s.io) by default;
    with KUBECTL_PORT_FORWARD_WEBSOCKETS=false it upgrades to SPDY/3.1 itself. Either way: two
    connections in a row get the pod's answer, a larger body arrives whole, and stopping kubectl
    ends the streams (the agent's threads and descriptors go back to what they were)."""
    c = web
    before = _agent_threads_and_fds(c.proc.pid)
    env = {} if websocket else {"KUBECTL_PORT_FORWARD_WEBSOCKETS": "false"}
    p, port = _port_forward(c, "pod/web", "0:8080", env=env)
    try:
        for _ in range(2):
            data = _http_get(port)
            assert data.split(b"\r\n", 1)[0].endswith(b" 200 OK"), data
            assert data.endswith(b"hello-from-the-pod\n"), data
        # a body larger than a SPDY window (64 KiB) and than one read
        c.kubectl("exec", "web", "--", "sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x > /www/big.txt")
        data = _http_get(port, "/big.txt")
        assert data.endswith(b"x" * 300000) and b"x" * 300001 not in data, len(data)
    finally:
        out, err = _stop(p)
    assert "error" not in err.lower(), err
    wait(lambda: _agent_threads_and_fds(c.proc.pid)[0] <= before[0] and
         _agent_threads_and_fds(c.proc.pid)[1] <= before[1], 15, f"threads and fds back to {before}")


def test_kubectl_port_forward_to_a_closed_port(web):
    """Nothing listens on the pod's port: the connection gets nothing, kubectl prints the agent's
    error from the error stream and ends (1.32 closes the session on a port's error), no hang."""
    c = web
    p, port = _port_forward(c, "pod/web", "0:1236")
    try:
        assert _http_get(port) == b""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.2)
        assert p.poll() is not None, "kubectl still running after the port's error"
    finally:
        out, err = _stop(p) if p.poll() is None else p.communicate()
    assert "error forwarding port 1236" in err and "refused" in err.lower(), err


def _raw_ws(c, path, protocol="v5.channel.k8s.io"):
    """A WebSocket handshake by hand through the API server (admin cert, HTTP/1.1): the socket after 101."""
    import base64
    import socket
    s = c.identity.ctx.wrap_socket(socket.create_connection(("127.0.0.1", c.port), timeout=20))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: {protocol}\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        assert chunk, head
        head += chunk
    assert head.startswith(b"HTTP/1.1 101 "), head
    accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
    assert b"Sec-WebSocket-Accept: " + accept in head, head
    assert f"Sec-WebSocket-Protocol: {protocol}".encode() in head, head
    return s


def _ws_send(s, payload):
    """One masked binary WebSocket message."""
    import struct
    mask = os.urandom(4)
    n = len(payload)
    head = bytes([0x82, 0x80 | n]) if n < 126 else bytes([0x82, 0x80 | 126]) + struct.pack(">H", n)
    s.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


def _ws_recv(s):
    """One WebSocket frame from the server: (opcode, payload)."""
    import struct

    def exactly(n):
        b = b""
        while len(b) < n:
            chunk = s.recv(n - len(b))
            assert chunk, b
            b += chunk
        return b
    b0, b1 = exactly(2)
    n = b1 & 0x7f
    if n == 126:
        n = struct.unpack(">H", exactly(2))[0]
    elif n == 127:
        n = struct.unpack(">Q", exactly(8))[0]
    return b0 & 0x0f, exactly(n)


def test_spdy_tunnel_by_hand(web):
    """SPDY frames are one byte stream across WebSocket messages: a PING split over two messages is
    echoed; a SPDY/2 frame ends the session with GOAWAY PROTOCOL_ERROR and a close 1002."""
    import struct
    s = _raw_ws(web, f"/api/v1/namespaces/{NS}/pods/web/portforward", protocol="SPDY/3.1+portforward.k8s.io")
    ping = struct.pack(">HHII", 0x8003, 6, 4, 7)
    _ws_send(s, ping[:5])
    _ws_send(s, ping[5:])
    assert _ws_recv(s) == (2, ping)
    _ws_send(s, struct.pack(">HHII", 0x8002, 6, 4, 9))
    op, goaway = _ws_recv(s)
    assert op == 2 and goaway[:8] == struct.pack(">HHI", 0x8003, 7, 8) and goaway[12:16] == b"\0\0\0\x01", goaway
    op, close = _ws_recv(s)
    assert op == 8 and struct.unpack(">H", close[:2])[0] == 1002, close
    s.close()


def _rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))


def test_client_that_stops_reading_is_not_buffered(box):
    """`yes` floods stdout to a client that never reads: the agent stops reading the command once
    --stream-buffer (KITE_STREAM_BUFFER) waits, the API server once its buffer is full; memory stays flat."""
    c = box
    s = _raw_ws(c, f"/api/v1/namespaces/{NS}/pods/box/exec?command=yes&command=flood-marker&stdout=true")
    time.sleep(2)
    before = _rss_kib(c.proc.pid)
    time.sleep(4)
    after = _rss_kib(c.proc.pid)
    assert after - before < 32 * 1024, (before, after)
    # held back, not dropped: once the client reads, the flood flows again, whole lines in order
    got = b""
    while len(got) < (1 << 20):
        op, payload = _ws_recv(s)
        assert op == 2 and payload[:1] == b"\x01", (op, payload[:20])
        got += payload[1:]
    lines = got.split(b"\n")[1:-1]  # (the first and last may be cut at a message's edge)
    assert lines and set(lines) == {b"flood-marker"}, set(lines)
    s.close()
    wait(lambda: "flood-marker" not in c.kubectl("exec", "box", "--", "ps", "-o", "args").stdout, 15, "yes killed")


def test_stream_cut_mid_frame(box):
    """A client that sends half a frame and vanishes: its command is killed, nothing else is hurt."""
    c = box
    s = _raw_ws(c, f"/api/v1/namespaces/{NS}/pods/box/exec?command=sleep&command=4343&stdin=true&stdout=true")
    wait(lambda: "sleep 4343" in c.kubectl("exec", "box", "--", "ps", "-o", "args").stdout, 15, "sleep running")
    # a masked binary frame announcing 100 bytes on channel 0, of which 3 arrive
    s.sendall(bytes([0x82, 0x80 | 100]) + os.urandom(4) + b"\x00ab")
    s.close()
    wait(lambda: "sleep 4343" not in c.kubectl("exec", "box", "--", "ps", "-o", "args").stdout, 15, "sleep killed")
    assert c.kubectl("exec", "box", "--", "echo", "still-fine").stdout == "still-fine\n"


def test_discovery_lists_the_stream_subresources(box):
    res = {r["name"]: r for r in box.api().get("/api/v1").json()["resources"]}
    for sub, kind in (("exec", "PodExecOptions"), ("attach", "PodAttachOptions"), ("portforward", "PodPortForwardOptions")):
        assert res[f"pods/{sub}"]["kind"] == kind
        assert sorted(res[f"pods/{sub}"]["verbs"]) == ["create", "get"]
    assert res["pods/log"]["verbs"] == ["get"]


def test_message_limit_and_port_limit(box):
    """A WebSocket message past KITE_STREAM_MAX_MESSAGE (1 MiB) closes the stream with 1009 and kills
    the command; a port-forward of more than KITE_STREAM_MAX_PORTS (64) ports is a 400."""
    import struct
    c = box
    s = _raw_ws(c, f"/api/v1/namespaces/{NS}/pods/box/exec?command=sleep&command=4444&stdin=true&stdout=true")
    wait(lambda: "sleep 4444" in c.kubectl("exec", "box", "--", "ps", "-o", "args").stdout, 15, "sleep running")
    s.sendall(bytes([0x82, 0x80 | 127]) + struct.pack(">Q", 2 << 20) + os.urandom(4) + b"\x00" * 1024)
    got = b""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and len(got) < 4:
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
    assert got[:1] == b"\x88" and struct.unpack(">H", got[2:4])[0] == 1009, got
    s.close()
    wait(lambda: "sleep 4444" not in c.kubectl("exec", "box", "--", "ps", "-o", "args").stdout, 15, "sleep killed")
    ports = ",".join(str(p) for p in range(1000, 1065))
    r = c.api().request("GET", f"/api/v1/namespaces/{NS}/pods/box/portforward?ports={ports}", None,
                        headers={"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                                 "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                                 "Sec-WebSocket-Protocol": "v4.channel.k8s.io"})
    assert r.status == 400 and "at most 64 ports" in r.json()["message"], r.body


# ---- kubectl debug: ephemeral containers ----

def _ephemeral(c, pod_name, name, **extra):
    return {"spec": {"ephemeralContainers": [{"name": name, "image": "busybox", "command": ["sh"],
                                              "stdin": True, "tty": True, **extra}]}}


def test_ephemeral_containers_subresource(box):
    """pods/ephemeralcontainers: read as the Pod; a strategic merge patch adds ephemeral containers
    and nothing else; kube-apiserver's validation (no ports, probes or resources; unique names; a
    target among the pod's containers; none removed or changed; none on create)."""
    c = box
    pod(c, "eph", [sh("main", "sleep 3600")])
    api = c.api()
    base = f"/api/v1/namespaces/{NS}/pods/eph"
    got = api.ok("GET", base + "/ephemeralcontainers")
    assert got["kind"] == "Pod" and got["metadata"]["name"] == "eph"

    def refused(body, *needles, method="PATCH"):
        r = api.request(method, base + "/ephemeralcontainers", body=json.dumps(body),
                        ctype="application/strategic-merge-patch+json" if method == "PATCH" else "application/json")
        assert r.status == 422, (r.status, r.body)
        st = r.json()
        assert st["reason"] == "Invalid", st
        for n in needles:
            assert n in st["message"], st["message"]
        return st

    refused(_ephemeral(c, "eph", "dbg", ports=[{"containerPort": 80}]),
            "spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container")
    refused(_ephemeral(c, "eph", "dbg", readinessProbe={"exec": {"command": ["true"]}}),
            "spec.ephemeralContainers[0].readinessProbe: Forbidden")
    refused(_ephemeral(c, "eph", "dbg", resources={"limits": {"cpu": "1"}}),
            "spec.ephemeralContainers[0].resources: Forbidden")
    refused(_ephemeral(c, "eph", "main"), 'spec.ephemeralContainers[0].name: Duplicate value: "main"')
    refused(_ephemeral(c, "eph", "dbg", targetContainerName="nope"),
            'spec.ephemeralContainers[0].targetContainerName: Not found: "nope"')
    # Pod Security judges the added container (kite up's baseline: no privileged one)
    r = api.patch(base + "/ephemeralcontainers", _ephemeral(c, "eph", "priv", securityContext={"privileged": True}))
    assert r.status == 403 and 'violates PodSecurity "baseline:latest": privileged' in r.json()["message"], r.body
    # kubectl debug's patch: the new container with its defaults; spec's other fields untouched
    ok = api.ok("PATCH", base + "/ephemeralcontainers", {**_ephemeral(c, "eph", "dbg", targetContainerName="main"),
                                                         "metadata": {"labels": {"through": "eph"}}},
                ctype="application/strategic-merge-patch+json")
    ec = ok["spec"]["ephemeralContainers"]
    assert [e["name"] for e in ec] == ["dbg"] and ec[0]["terminationMessagePolicy"] == "File", ec
    assert ok["spec"]["containers"][0]["name"] == "main"
    # a second one merges by name beside the first
    ok = api.ok("PATCH", base + "/ephemeralcontainers", {"spec": {
        "$setElementOrder/ephemeralContainers": [{"name": "dbg"}, {"name": "dbg2"}],
        "ephemeralContainers": [{"name": "dbg2", "image": "busybox", "command": ["true"]}]}},
        ctype="application/strategic-merge-patch+json")
    assert [e["name"] for e in ok["spec"]["ephemeralContainers"]] == ["dbg", "dbg2"]
    # removed or changed: refused
    cur = api.ok("GET", base + "/ephemeralcontainers")
    cur["spec"]["ephemeralContainers"] = cur["spec"]["ephemeralContainers"][:1]
    refused(cur, 'existing ephemeral containers "dbg2" may not be removed', method="PUT")
    cur = api.ok("GET", base + "/ephemeralcontainers")
    cur["spec"]["ephemeralContainers"][0]["image"] = "other"
    refused(cur, 'existing ephemeral containers "dbg" may not be changed', method="PUT")
    # through the subresource nothing but the ephemeral containers changes in spec
    cur = api.ok("GET", base + "/ephemeralcontainers")
    cur["spec"]["activeDeadlineSeconds"] = 5
    cur["spec"]["ephemeralContainers"].append({"name": "dbg3", "image": "busybox", "command": ["true"]})
    put = api.ok("PUT", base + "/ephemeralcontainers", cur)
    assert "activeDeadlineSeconds" not in put["spec"] and len(put["spec"]["ephemeralContainers"]) == 3
    # the pod's own writes keep them as they are
    api.ok("PATCH", base, {"spec": {"ephemeralContainers": None}, "metadata": {"labels": {"x": "y"}}},
           ctype="application/strategic-merge-patch+json")
    assert len(api.ok("GET", base)["spec"]["ephemeralContainers"]) == 3
    # none on create
    r = api.post(f"/api/v1/namespaces/{NS}/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "eph-new"},
                                                   "spec": {"containers": [{"name": "a", "image": "busybox"}],
                                                            "ephemeralContainers": [{"name": "d", "image": "busybox"}]}})
    assert r.status == 422 and "spec.ephemeralContainers: Forbidden: cannot be set on create" in r.json()["message"], r.body
    # the agent runs them, once each: the shell on its terminal waits, `true` ends and is not run again

    def states(s):
        return {x["name"]: next(iter(x["state"]), "") for x in s.get("ephemeralContainerStatuses", [])}
    st = wait(lambda: (s := status_of(c, "eph")) and states(s) == {"dbg": "running", "dbg2": "terminated",
                                                                   "dbg3": "terminated"} and s,
              30, "the ephemeral containers ran")
    assert all(x["restartCount"] == 0 and x["ready"] is False for x in st["ephemeralContainerStatuses"])
    assert st["phase"] == "Running" and [x["name"] for x in st["containerStatuses"]] == ["main"]


def test_kubectl_debug_target(box):
    """`kubectl debug -it POD --image=busybox --target=CTR -- sh`: kubectl 1.32 patches
    pods/ephemeralcontainers, waits for the container to run and attaches to its terminal; the
    shell sees the target container's processes (its pid namespace)."""
    c = box
    pod(c, "dbgme", [sh("app", "exec sleep 4343")])
    running(c, "dbgme")
    rc, out = _run_in_pty([KUBECTL, "debug", "-it", "dbgme", "--image=busybox", "--target=app", "--", "sh"],
                          c.kubectl_env(), str(c.workdir), ready=b"command prompt", rows=33, cols=101,
                          send=b"ps -o pid,args; test -t 0 && echo TTY-$((6*7)); stty size; exit 7\r", timeout=60)
    assert "TTY-42" in out, out
    # kubectl watches the pod as protobuf: every field of it decodes (no "unable to decode watch event")
    assert "unable to decode" not in out, out
    # the starting window size is not asserted: kubectl's first resize races the shell's start (as
    # for exec -it, whose test checks a resize of the running terminal)
    assert "sleep 4343" in out, out  # the target's process, seen from the debug container
    pod_obj = c.api().ok("GET", f"/api/v1/namespaces/{NS}/pods/dbgme")
    ec = pod_obj["spec"]["ephemeralContainers"]
    assert len(ec) == 1 and ec[0]["targetContainerName"] == "app" and ec[0]["tty"] and ec[0]["stdin"], ec
    name = ec[0]["name"]
    st = wait(lambda: next((x for x in status_of(c, "dbgme").get("ephemeralContainerStatuses", [])
                            if x["state"].get("terminated")), None), 30, "debug container ended")
    assert st["name"] == name and st["state"]["terminated"]["exitCode"] == 7, st
    assert rc == 0 or rc == 7, (rc, out)
    # its output is in its log, as a container's
    assert "TTY-42" in c.kubectl("logs", "dbgme", "-c", name).stdout


def test_kubectl_debug_node(box, tmp_path):
    """`kubectl debug node/NAME -it --image=busybox`: a pod on that node in the host's pid, ipc and
    network namespaces with the host's root at /host (in a namespace Pod Security lets do so)."""
    c = box
    c.kubectl("create", "namespace", "nodedebug")
    c.kubectl("label", "namespace", "nodedebug", "pod-security.kubernetes.io/enforce=privileged")
    wait(lambda: c.kubectl("get", "serviceaccount", "default", "-n", "nodedebug", check=False).returncode == 0, 20,
         "nodedebug's default ServiceAccount")
    marker = tmp_path / "host-marker"
    marker.write_text("on-the-host\n")
    script = (f"cat /host{marker}; ps -o args | grep -c '[k]ite up' | sed s/^/KITE-PROCS-/; "
              "echo HOSTNAME-$(hostname); exit\r").encode()
    rc, out = _run_in_pty([KUBECTL, "debug", f"node/{c.node}", "-n", "nodedebug", "-it", "--image=busybox"],
                          c.kubectl_env(), str(c.workdir), ready=b"command prompt", send=script, timeout=60)
    assert "on-the-host" in out, out                       # the host's root at /host
    assert "unable to decode" not in out, out
    assert "KITE-PROCS-0" not in out and "KITE-PROCS-" in out, out  # the host's processes (hostPID)
    assert f"HOSTNAME-{os.uname().nodename}" in out, out    # the host's UTS and network (hostNetwork)
    pods = c.api().ok("GET", "/api/v1/namespaces/nodedebug/pods")["items"]
    assert len(pods) == 1 and pods[0]["spec"]["hostPID"] and pods[0]["spec"]["nodeName"] == c.node, pods
    c.kubectl("delete", "namespace", "nodedebug", "--wait=false")


def _ws_try(c, path, protocol):
    """A WebSocket handshake through the API server that may be refused: (status code, the socket
    after a 101 or None, the answer's body when refused)."""
    import base64
    import socket
    s = c.identity.ctx.wrap_socket(socket.create_connection(("127.0.0.1", c.port), timeout=60))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: {protocol}\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        assert chunk, head
        head += chunk
    code = int(head.split(b" ", 2)[1])
    if code == 101:
        return code, s, None
    length = next((int(l.split(b":", 1)[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")), 0)
    body = b""
    while len(body) < length:
        chunk = s.recv(length - len(body))
        if not chunk:
            break
        body += chunk
    s.close()
    return code, None, json.loads(body)


def _ws_drain(s):
    """Reads an exec's WebSocket to its close: (stdout bytes, the channel-3 Status)."""
    out, status = b"", None
    while True:
        op, payload = _ws_recv(s)
        if op == 8:
            return out, status
        if op == 2 and payload[:1] == b"\x01":
            out += payload[1:]
        elif op == 2 and payload[:1] == b"\x03":
            status = json.loads(payload[1:])


@pytest.mark.slow
def test_300_concurrent_exec_sessions_and_the_agent_limit(box):
    """300 exec sessions open at once against one agent (each a `runc exec` waiting on its stdin)
    all get their output and exit code; with them open, port-forward sessions fill the agent to
    KITE_STREAM_MAX_SESSIONS (512) and the next upgrade is answered 429 TooManyRequests (a Status,
    at once), and one session ended makes room again."""
    from concurrent.futures import ThreadPoolExecutor
    c = box
    n_exec, limit = 300, 512
    exec_path = (f"/api/v1/namespaces/{NS}/pods/box/exec?command=sh&command=-c"
                 "&command=echo+ready%3B+read+x%3B+echo+out-%24x%3B+exit+%24((x+%25+7))&stdin=true&stdout=true")

    def open_ready(i):
        """One session, returned once its command runs (it said so): at most 16 start at a time."""
        code, s, body = _ws_try(c, exec_path, "v5.channel.k8s.io")
        if code != 101:
            return code, None, body
        got = b""
        while got != b"ready\n":
            op, payload = _ws_recv(s)
            assert op == 2 and payload[:1] == b"\x01", (op, payload)
            got += payload[1:]
        return code, s, None

    with ThreadPoolExecutor(16) as pool:
        opened = list(pool.map(open_ready, range(n_exec)))
    assert all(code == 101 for code, _, _ in opened), [b.get("message") for code, _, b in opened if code != 101][:3]
    socks = [s for _, s, _ in opened]
    pf_path = f"/api/v1/namespaces/{NS}/pods/box/portforward"
    pfs = []
    try:
        # every exec holds its session: fill the rest of the agent's sessions with port-forwards
        with ThreadPoolExecutor(16) as pool:
            more = list(pool.map(lambda i: _ws_try(c, pf_path, "SPDY/3.1+portforward.k8s.io"), range(limit - n_exec)))
        pfs = [s for code, s, _ in more if code == 101]
        assert len(pfs) == limit - n_exec, [b for code, _, b in more if code != 101][:3]
        t0 = time.monotonic()
        code, s, body = _ws_try(c, pf_path, "SPDY/3.1+portforward.k8s.io")
        assert code == 429 and s is None, (code, body)
        assert body["kind"] == "Status" and body["code"] == 429 and body["reason"] == "TooManyRequests", body
        assert "too many exec and attach sessions on this node (512)" in body["message"], body
        assert time.monotonic() - t0 < 10
        # the execs answer, each its own line and exit code (their stdin on channel 0)
        for i, s in enumerate(socks):
            _ws_send(s, b"\x00" + f"{i}\n".encode())
        results = [_ws_drain(s) for s in socks]
        for i, (out, status) in enumerate(results):
            assert out == f"out-{i}\n".encode(), (i, out)
            if i % 7:
                assert status["status"] == "Failure" and status["reason"] == "NonZeroExitCode", status
                assert status["details"]["causes"] == [{"reason": "ExitCode", "message": str(i % 7)}], status
            else:
                assert status["status"] == "Success", status
        for s in socks:
            s.close()
        socks = []
        # their sessions ended: room again
        code, s, body = wait(lambda: (r := _ws_try(c, pf_path, "SPDY/3.1+portforward.k8s.io"))[0] == 101 and r,
                             20, "a session accepted once others ended")
        s.close()
    finally:
        for s in socks + pfs:
            s.close()
    assert c.kubectl("exec", "box", "--", "echo", "still-fine").stdout == "still-fine\n"
