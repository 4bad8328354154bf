"""The int32 size prefix every Kafka frame starts with.

The maximum is checked on the 4-byte prefix alone, so a peer announcing a 2 GB frame costs nothing;
the daemons' sockets read frames through ``daemon/frames.py``, which checks it before the body.
"""

from __future__ import annotations

import struct

from protocol.errors import FrameTooLarge, ProtocolError

DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024
"""Kafka's default ``socket.request.max.bytes``: 100 MiB."""

SIZE_PREFIX = struct.Struct(">i")


def frame_size(prefix: bytes | bytearray | memoryview, max_size: int = DEFAULT_MAX_FRAME_SIZE) -> int:
    """The payload size announced by a 4-byte prefix, rejected if negative or above ``max_size``."""
    size: int = SIZE_PREFIX.unpack_from(prefix)[0]
    if size < 0 or size > max_size:
        raise FrameTooLarge(size, max_size)
    return size


def check_frame(frame: bytes, max_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
    """A whole frame: its prefix must announce exactly the bytes that follow it."""
    if len(frame) < SIZE_PREFIX.size:
        raise ProtocolError(f"frame of {len(frame)} bytes is shorter than its 4-byte size prefix")
    size = frame_size(frame, max_size)
    if size != len(frame) - SIZE_PREFIX.size:
        raise ProtocolError(f"size prefix announces {size} bytes but {len(frame) - SIZE_PREFIX.size} follow")
