"""Ports for local servers: free ones below the kernel's ephemeral range, none handed out twice.

A port is free only until the daemon told to use it binds it, so this process remembers the ports it
handed out lately and never draws them again.
"""

from __future__ import annotations

import collections
import contextlib
import random
import socket
import threading
from pathlib import Path

__all__ = ["LISTEN_PORTS", "LOOPBACK", "find_free_port", "free_ports"]

LOOPBACK = "127.0.0.1"

LISTEN_PORTS = (10000, 32768)
"""Where servers started here listen: below Linux's default ephemeral range (32768-60999), from which
the kernel picks the source port of every outgoing connection. A port taken from that range with
``bind(0)`` can be handed to some client's ``connect`` before the daemon that was told to use it
binds it ("address already in use"); below it, only another listener can take it."""

HANDED_OUT_MEMORY = 2048
"""How many ports this process remembers handing out: a port is free until the daemon told to use it
binds it, so without memory a second call (the next daemon of the same cluster) could draw it again."""
_handed_out: collections.deque[int] = collections.deque(maxlen=HANDED_OUT_MEMORY)
_handed_out_lock = threading.Lock()


def _ephemeral_floor() -> int:
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return LISTEN_PORTS[1]
    return low


def find_free_port(host: str = LOOPBACK) -> int:
    """A port free right now, below the kernel's ephemeral range (see :func:`free_ports`)."""
    return free_ports(1, host)[0]


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """Distinct free ports, drawn at random below the ephemeral range and none handed out lately by
    this process; every socket stays bound until all are picked. Falls back to ``bind(0)`` where that
    range leaves too little room."""
    low, high = LISTEN_PORTS[0], min(LISTEN_PORTS[1], _ephemeral_floor())
    rng = random.SystemRandom()
    with _handed_out_lock, contextlib.ExitStack() as stack:
        recent = set(_handed_out)
        ports: list[int] = []
        attempts = 0
        while len(ports) < count:
            attempts += 1
            port = rng.randrange(low, high) if high - low > 1000 and attempts < 200 else 0
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError:
                continue
            # SO_REUSEADDR lets two sockets that do not listen bind one port: distinct by bookkeeping.
            chosen = sock.getsockname()[1]
            if chosen in recent:
                continue
            recent.add(chosen)
            ports.append(chosen)
        _handed_out.extend(ports)
        return ports
