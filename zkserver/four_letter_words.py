"""ZooKeeper's four-letter admin words over a socket: one command and its whole reply, ``srvr``'s mode."""

from __future__ import annotations

import socket
import ssl

__all__ = ["four_letter_word", "server_mode"]


def four_letter_word(
    host: str, port: int, word: str, timeout: float = 2.0, tls: ssl.SSLContext | None = None
) -> str:
    """Send a four-letter admin command and return the whole reply (the server closes after it).
    With ``tls``, over the server's TLS port (``secureClientPort`` answers them too).

    Raises ``OSError`` when the server is not listening or does not answer in time (``ssl.SSLError``,
    an ``OSError``, when the handshake fails).
    """
    with socket.create_connection((host, port), timeout=timeout) as raw:
        sock = tls.wrap_socket(raw, server_hostname=host) if tls is not None else raw
        with sock:
            sock.sendall(word.encode("ascii"))
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


def server_mode(host: str, port: int, timeout: float = 2.0) -> str | None:
    """``standalone``/``leader``/``follower``/..., or None while the server is not serving."""
    try:
        reply = four_letter_word(host, port, "srvr", timeout)
    except OSError:
        return None
    for line in reply.splitlines():
        if line.startswith("Mode:"):
            return line.partition(":")[2].strip()
    return None  # e.g. "not currently serving requests" while a quorum peer looks for a leader
