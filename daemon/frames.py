"""Reading Kafka frames off a socket: the one place that reads a size prefix and then its frame.

Every socket loop reads through here: the connection front-end of every listener, the broker's and
the controller's (``network/frontend.py``), the SASL exchange (``network/handshake.py``), and the
client connections (``network/connection.py``), whose fetcher threads use the blocking twin. The
prefix is checked before the body is read (``protocol.frame_size``), so an announced 2 GB frame
costs nothing; the frame comes back whole, prefix included, as the codec expects it.

The end of the stream is an ``asyncio.IncompleteReadError``, told apart as StreamEnded (between
frames: a clean close) or TruncatedFrame (inside one).
"""

from __future__ import annotations

import asyncio
import socket

from protocol import frame_size

__all__ = ["PREFIX_BYTES", "StreamEnded", "TruncatedFrame", "read_frame", "recv_frame"]

PREFIX_BYTES = 4


class StreamEnded(asyncio.IncompleteReadError):
    """The peer closed the connection between two frames."""

    def __init__(self) -> None:
        super().__init__(b"", PREFIX_BYTES)

    def __str__(self) -> str:
        return "connection closed"


class TruncatedFrame(asyncio.IncompleteReadError):
    """The peer closed the connection inside a frame; ``size`` is None when inside its prefix."""

    def __init__(self, partial: bytes, expected: int, size: int | None) -> None:
        super().__init__(partial, expected)
        self.size = size

    def __str__(self) -> str:
        where = "a size prefix" if self.size is None else f"a {self.size}-byte frame"
        return f"connection closed inside {where}"


async def read_frame(reader: asyncio.StreamReader, max_size: int) -> bytes:
    """The next frame. Raises ``protocol.FrameTooLarge`` for a prefix outside 0..``max_size``,
    StreamEnded or TruncatedFrame at the end of the stream."""
    try:
        prefix = await reader.readexactly(PREFIX_BYTES)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            raise StreamEnded() from None
        raise TruncatedFrame(exc.partial, PREFIX_BYTES, None) from None
    size = frame_size(prefix, max_size)
    try:
        return prefix + await reader.readexactly(size)
    except asyncio.IncompleteReadError as exc:
        raise TruncatedFrame(exc.partial, size, size) from None


def recv_frame(sock: socket.socket, max_size: int) -> bytes:
    """``read_frame`` for a thread that owns a blocking socket."""
    prefix = _recv_exactly(sock, PREFIX_BYTES, None)
    size = frame_size(prefix, max_size)
    return prefix + _recv_exactly(sock, size, size)


def _recv_exactly(sock: socket.socket, n: int, size: int | None) -> bytes:
    buffer = bytearray(n)
    view = memoryview(buffer)
    pos = 0
    while pos < n:
        got = sock.recv_into(view[pos:])
        if not got:
            if size is None and pos == 0:
                raise StreamEnded()
            raise TruncatedFrame(bytes(buffer[:pos]), n, size)
        pos += got
    return bytes(buffer)
