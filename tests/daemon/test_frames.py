"""The one frame reader of every socket loop: frames come off a stream whole in any chunking, an
oversized prefix is refused before its body arrives, and the end of the stream says where it fell."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.frames import StreamEnded, TruncatedFrame, read_frame, recv_frame
from protocol import FrameTooLarge
from tests.support.raw_client import raw_frame


async def _read_all(chunks: list[bytes], max_size: int = 1 << 20) -> list[bytes]:
    reader = asyncio.StreamReader()
    for chunk in chunks:
        reader.feed_data(chunk)
    reader.feed_eof()
    frames = []
    with pytest.raises(StreamEnded):
        while True:
            frames.append(await read_frame(reader, max_size))
    return frames


@given(payloads=st.lists(st.binary(max_size=50), max_size=8), data=st.data())
def test_frames_come_off_the_stream_whole_in_any_chunking(payloads: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(raw_frame(p) for p in payloads)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    chunks = [stream[start:end] for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    assert asyncio.run(_read_all(chunks)) == [raw_frame(p) for p in payloads]


async def test_an_oversized_prefix_is_refused_before_the_body_arrives() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(struct.pack(">i", 1025))  # and no body: the reader must not wait for it
    with pytest.raises(FrameTooLarge) as info:
        await asyncio.wait_for(read_frame(reader, 1024), 5)
    assert (info.value.size, info.value.max_size) == (1025, 1024)


async def test_a_frame_at_the_maximum_is_accepted() -> None:
    assert await _read_all([raw_frame(b"12345678")], max_size=8) == [raw_frame(b"12345678")]


@pytest.mark.parametrize(
    ("data", "size", "message"),
    [
        (b"\x00\x00", None, "connection closed inside a size prefix"),
        (raw_frame(b"12345")[:-2], 5, "connection closed inside a 5-byte frame"),
    ],
    ids=["in-prefix", "in-body"],
)
async def test_an_end_inside_a_frame_says_where(data: bytes, size: int | None, message: str) -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    with pytest.raises(TruncatedFrame) as info:
        await read_frame(reader, 1024)
    assert info.value.size == size and str(info.value) == message
    assert isinstance(info.value, asyncio.IncompleteReadError)


def test_the_blocking_twin_reads_the_same_frames_and_ends() -> None:
    left, right = socket.socketpair()
    with left, right:
        right.sendall(raw_frame(b"abc") + raw_frame(b"") + raw_frame(b"12345")[:-1])
        right.shutdown(socket.SHUT_WR)
        assert recv_frame(left, 1024) == raw_frame(b"abc")
        assert recv_frame(left, 1024) == raw_frame(b"")
        with pytest.raises(TruncatedFrame, match="5-byte frame"):
            recv_frame(left, 1024)
    left, right = socket.socketpair()
    with left, right:
        right.sendall(struct.pack(">i", 2048))
        with pytest.raises(FrameTooLarge):
            recv_frame(left, 1024)
        right.shutdown(socket.SHUT_WR)
    left, right = socket.socketpair()
    with left, right:
        right.shutdown(socket.SHUT_WR)
        with pytest.raises(StreamEnded):
            recv_frame(left, 1024)
