"""What the Python benches share (they run as `python3 bench/NAME.py`, so this directory is on
their import path)."""
import random
import socket
import sys


def free_port(who):
    """A free port below 32768 (the ephemeral range collides with TIME_WAIT client sockets)."""
    for _ in range(1000):
        port = random.randint(20000, 32000)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    sys.exit(f"{who}: no free port")
