"""The size prefix: oversized frames refused from the prefix alone, and whole frames checked against it
(reading frames off a stream is ``daemon/frames.py``, tested in ``tests/daemon/test_frames.py``)."""

from __future__ import annotations

import struct

import pytest

from protocol import (
    DEFAULT_MAX_FRAME_SIZE,
    FrameTooLarge,
    ProtocolError,
    check_frame,
    frame_size,
)


def test_default_maximum_is_kafkas_socket_request_max_bytes() -> None:
    assert DEFAULT_MAX_FRAME_SIZE == 104857600


def test_negative_prefix_is_refused() -> None:
    with pytest.raises(FrameTooLarge):
        frame_size(struct.pack(">i", -1))


@pytest.mark.parametrize(
    "frame",
    [b"", b"\x00\x00", struct.pack(">i", 5) + b"1234", struct.pack(">i", 3) + b"1234"],
    ids=["empty", "short-prefix", "body-short", "body-long"],
)
def test_check_frame_rejects_a_prefix_that_does_not_match(frame: bytes) -> None:
    with pytest.raises(ProtocolError):
        check_frame(frame)
