"""Ports for the servers and process groups that tests start.

A port from ``bind(port 0)`` lies in the kernel's ephemeral range, the range it also hands
to outgoing connections: between the test choosing it and a rank binding it, a client
socket of another test (or of the job itself: ranks connecting to the store) may take it,
and the rank fails with EADDRINUSE. So the ports come from below that range, checked free,
``count`` consecutive ones (the multi-process client's store is MASTER_PORT + 1)."""

from __future__ import annotations

import random
import socket


def _ephemeral_start() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(count: int = 1) -> int:
    """The first of ``count`` consecutive free ports outside the ephemeral range."""
    high = min(_ephemeral_start(), 65536) - count
    low = 20000 if high > 21000 else 1024
    for _ in range(200):
        port = random.randrange(low, high)
        if all(_is_free(port + i) for i in range(count)):
            return port
    raise RuntimeError(f"no {count} consecutive free ports in [{low}, {high + count})")
