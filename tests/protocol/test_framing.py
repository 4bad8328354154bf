"""The size prefix: frames split from a stream, and oversized ones refused from the prefix alone."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import (
    DEFAULT_MAX_FRAME_SIZE,
    FrameReader,
    FrameTooLarge,
    ProtocolError,
    check_frame,
    frame_size,
)


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_default_maximum_is_kafkas_socket_request_max_bytes() -> None:
    assert DEFAULT_MAX_FRAME_SIZE == 104857600


@given(payloads=st.lists(st.binary(max_size=50), max_size=8), data=st.data())
def test_reader_returns_the_frames_fed_in_any_chunking(payloads: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(_frame(p) for p in payloads)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    reader = FrameReader()
    got: list[bytes] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        got += reader.feed(stream[start:end])
    assert got == [_frame(p) for p in payloads]
    assert reader.buffered == 0


def test_oversized_prefix_is_refused_before_the_body_arrives() -> None:
    reader = FrameReader(max_size=1024)
    with pytest.raises(FrameTooLarge) as info:
        reader.feed(struct.pack(">i", 1025))
    assert (info.value.size, info.value.max_size) == (1025, 1024)


def test_negative_prefix_is_refused() -> None:
    with pytest.raises(FrameTooLarge):
        frame_size(struct.pack(">i", -1))


def test_a_frame_at_the_maximum_is_accepted() -> None:
    assert FrameReader(max_size=8).feed(_frame(b"12345678")) == [_frame(b"12345678")]


@pytest.mark.parametrize(
    "frame",
    [b"", b"\x00\x00", struct.pack(">i", 5) + b"1234", struct.pack(">i", 3) + b"1234"],
    ids=["empty", "short-prefix", "body-short", "body-long"],
)
def test_check_frame_rejects_a_prefix_that_does_not_match(frame: bytes) -> None:
    with pytest.raises(ProtocolError):
        check_frame(frame)
