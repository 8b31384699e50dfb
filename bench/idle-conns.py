#!/usr/bin/env python3
"""Server memory per idle keep-alive TLS connection (a node agent's connection between renewals).

usage: idle-conns.py PORT COUNT PATH PID[,PID...] [TOKEN]
Opens COUNT TLS connections to 127.0.0.1:PORT, sends one GET PATH on each (keep-alive) and reads
the answer, waits 2.5 s (the server's once-a-second sweep), and prints the growth of the summed
VmRSS of PIDs divided by COUNT, in bytes. The connections are closed on exit."""
import socket
import ssl
import sys
import time

port, count, path, pids = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4].split(",")
token = sys.argv[5] if len(sys.argv) > 5 else None


def rss_kb():
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/status") as f:
            total += int(next(l for l in f if l.startswith("VmRSS:")).split()[1])
    return total


ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
req = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n" + (f"Authorization: Bearer {token}\r\n" if token else "") + "\r\n"
before = rss_kb()
conns = []
for _ in range(count):
    t = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10))
    t.sendall(req.encode())
    if not t.recv(65536).startswith(b"HTTP/1.1 200"):
        sys.exit("idle-conns: a request failed")
    conns.append(t)
time.sleep(2.5)
after = rss_kb()
print(round((after - before) * 1024 / count))
