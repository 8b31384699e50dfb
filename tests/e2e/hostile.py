"""Hostile HTTP clients for the e2e tests and the soak: raw HTTP/1.1 heads over TLS, and HTTP/2
connections (python3-h2 over ssl) that open streams and send bodies as they please."""
import os
import socket
import ssl
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions


def tls_context(data_dir, cert=None, alpn=("http/1.1",)):
    """A client context trusting the cluster's CA; cert: a name in DATA/pki ("admin") or None."""
    pki = os.path.join(str(data_dir), "pki")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(os.path.join(pki, "ca.crt"))
    ctx.check_hostname = False
    ctx.set_alpn_protocols(list(alpn))
    if cert:
        ctx.load_cert_chain(os.path.join(pki, cert + ".crt"), os.path.join(pki, cert + ".key"))
    return ctx


def h1_head_answer(port, ctx, head, timeout):
    """Sends an HTTP/1.1 head (bytes) and nothing more; returns (seconds to the first answer
    line, the answer's bytes up to its end or the timeout). (None, b"") when nothing came."""
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=timeout))
    try:
        t0 = time.monotonic()
        s.sendall(head)
        data, first = b"", None
        s.settimeout(timeout)
        while True:
            try:
                chunk = s.recv(65536)
            except (socket.timeout, TimeoutError):
                break
            except (ConnectionResetError, ssl.SSLError):
                break
            if not chunk:
                break
            if first is None:
                first = time.monotonic() - t0
            data += chunk
            if b"\r\n\r\n" in data and not data.startswith(b"HTTP/1.1 100"):
                head_end = data.index(b"\r\n\r\n") + 4
                cl = [l for l in data[:head_end].split(b"\r\n") if l.lower().startswith(b"content-length:")]
                if cl and len(data) - head_end >= int(cl[0].split(b":")[1]):
                    break
            if time.monotonic() - t0 > timeout:
                break
        return first, data
    finally:
        s.close()


class H2:
    """One HTTP/2 connection. Requests are started with head(); pump() reads what the server
    sends; answers and resets are collected per stream."""

    def __init__(self, port, ctx, timeout=10):
        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock = ctx.wrap_socket(raw)
        assert self.sock.selected_alpn_protocol() == "h2", self.sock.selected_alpn_protocol()
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.status = {}    # stream -> :status
        self.headers = {}   # stream -> {name: value}
        self.bodies = {}    # stream -> bytes
        self.ended = set()  # streams whose answer ended
        self.reset = {}     # stream -> RST_STREAM error code from the server
        self.closed = False
        self.error = None   # why the connection ended, when this side saw it
        self.flush()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def head(self, method, path, length=None, ctype="application/json", end=False, extra=()):
        sid = self.conn.get_next_available_stream_id()
        hdrs = [(":method", method), (":path", path), (":scheme", "https"), (":authority", "127.0.0.1")]
        if ctype:
            hdrs.append(("content-type", ctype))
        if length is not None:
            hdrs.append(("content-length", str(length)))
        hdrs.extend(extra)
        self.conn.send_headers(sid, hdrs, end_stream=end)
        self.flush()
        return sid

    def send_some(self, sid, total_left, chunk=16384):
        """Sends as much of a body as the windows allow now (bytes of 'x'); returns bytes sent, or
        -1 when the stream is gone (answered and reset)."""
        if sid in self.reset or self.closed:
            return -1
        try:
            n = min(total_left, self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size, chunk)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError, KeyError):
            return -1
        if n <= 0:
            return 0
        try:
            self.conn.send_data(sid, b"x" * n)
            self.flush()
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            return -1
        except OSError:
            self.closed = True
            return -1
        return n

    def pump(self, timeout=0.0):
        """Reads and handles what the server sent within timeout seconds (0: only what is there)."""
        self.sock.settimeout(timeout if timeout > 0 else 0.0001)
        data = b""
        try:
            data = self.sock.recv(1 << 20)
            if not data:
                self.closed = True
            self.sock.settimeout(0.0001)
            while data and len(data) < (8 << 20):  # one recv is one TLS record: take what else is there
                more = self.sock.recv(1 << 20)
                if not more:
                    self.closed = True
                    break
                data += more
        except (socket.timeout, TimeoutError, ssl.SSLWantReadError, BlockingIOError):
            pass
        except OSError:
            self.closed = True
        if not data:
            return
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError as e:
            self.error = repr(e)
            self.closed = True
            return
        for e in events:
            if isinstance(e, h2.events.ResponseReceived):
                hd = dict(e.headers)
                self.headers[e.stream_id] = hd
                self.status[e.stream_id] = int(hd[":status"])
            elif isinstance(e, h2.events.DataReceived):
                self.bodies[e.stream_id] = self.bodies.get(e.stream_id, b"") + e.data
                self.conn.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            elif isinstance(e, h2.events.StreamEnded):
                self.ended.add(e.stream_id)
            elif isinstance(e, h2.events.StreamReset):
                self.reset[e.stream_id] = e.error_code
            elif isinstance(e, h2.events.ConnectionTerminated):
                self.error = f"GOAWAY {e.error_code} {e.additional_data!r}"
                self.closed = True
        try:
            self.flush()
        except OSError:
            self.closed = True

    def wait(self, pred, timeout):
        deadline = time.monotonic() + timeout
        while not pred() and not self.closed and time.monotonic() < deadline:
            self.pump(min(0.2, max(0.001, deadline - time.monotonic())))
        return pred()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def sanitized(kite):
    """Whether the kite binary is a sanitizer build (ASan, TSan): slower, and ASan's quarantine
    keeps freed memory resident on purpose."""
    with open(kite, "rb") as f:
        data = f.read()
    return b"__asan_init" in data or b"__tsan_init" in data
