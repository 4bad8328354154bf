"""The int32 size prefix every Kafka frame starts with, and a sans-IO reader that splits a byte stream.

The maximum is checked on the 4-byte prefix alone, so a peer announcing a 2 GB frame costs nothing.
"""

from __future__ import annotations

import struct

from protocol.errors import FrameTooLarge, ProtocolError

DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024
"""Kafka's default ``socket.request.max.bytes``: 100 MiB."""

SIZE_PREFIX = struct.Struct(">i")


def frame_size(prefix: bytes | bytearray | memoryview, max_size: int = DEFAULT_MAX_FRAME_SIZE) -> int:
    """The payload size announced by a 4-byte prefix, rejected if negative or above ``max_size``."""
    (size,) = SIZE_PREFIX.unpack_from(prefix)
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


class FrameReader:
    """Feed it bytes as they arrive; it returns each complete frame, prefix included.

    ``pending_size`` tells a server how much of an announced frame is still missing, which it can use
    to stop reading (back-pressure) without parsing anything.
    """

    def __init__(self, max_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_size = max_size
        self._buffer = bytearray()
        self._expected: int | None = None

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Append ``data``; return the frames it completes. Raises FrameTooLarge on a bad prefix."""
        self._buffer += data
        frames: list[bytes] = []
        while True:
            if self._expected is None:
                if len(self._buffer) < SIZE_PREFIX.size:
                    return frames
                self._expected = SIZE_PREFIX.size + frame_size(self._buffer, self.max_size)
            if len(self._buffer) < self._expected:
                return frames
            frames.append(bytes(self._buffer[: self._expected]))
            del self._buffer[: self._expected]
            self._expected = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return len(self._buffer)
