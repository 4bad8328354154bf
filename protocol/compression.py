"""The record-batch codecs (attributes bits 0-2): a batch's records, compressed and decompressed.

The broker stores and serves compressed batches as producers wrote them. The log cleaner opens them,
to keep the latest record of each key, and writes what stays back with the batch's own codec, in
framings Kafka's Java clients read as well as librdkafka; the loaders of ``__consumer_offsets`` and
``__transaction_state`` open them too (a peer may compress those):

* 1, gzip: a gzip stream;
* 2, snappy: snappy-java's stream framing (a magic header, then blocks of a length and a raw snappy
  block). A raw snappy block, which librdkafka writes, is read too;
* 3, lz4: an LZ4 frame of independent blocks, with block checksums and no content checksum (Kafka's
  Java reader decompresses each block on its own, and checks block checksums);
* 4, zstd: a zstd frame.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from typing import Any

import cramjam

from protocol.errors import ProtocolError

__all__ = [
    "GZIP",
    "LZ4",
    "MAX_DECOMPRESSED_BYTES",
    "SNAPPY",
    "ZSTD",
    "UnknownCodec",
    "compress",
    "decompress",
]

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
SNAPPY_JAVA_MAGIC = b"\x82SNAPPY\x00"
_SNAPPY_JAVA_HEADER = struct.Struct(">8sii")
_SNAPPY_BLOCK = 32 * 1024
"""snappy-java's default block size."""
_LENGTH = struct.Struct(">i")
MAX_DECOMPRESSED_BYTES = 128 * 1024 * 1024
"""The most a batch's records may take decompressed. The broker takes a compressed batch without
opening it, so nothing else bounds what the cleaner would hold: a batch past this is left as it is."""
_FIRST_GUESS = 64 * 1024


class UnknownCodec(ProtocolError):
    """A codec number no Kafka defines, or data its codec cannot read."""


def decompress(codec: int, data: bytes | memoryview, limit: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """The records ``data`` holds, compressed with ``codec``; UnknownCodec if they cannot be read or
    would take more than ``limit`` bytes."""
    try:
        if codec == GZIP:
            return _gzip_decompress(bytes(data), limit)
        if codec == SNAPPY:
            return _snappy_decompress(bytes(data), limit)
        if codec in (LZ4, ZSTD):
            return _bounded(cramjam.lz4 if codec == LZ4 else cramjam.zstd, bytes(data), limit)
    except (OSError, EOFError, zlib.error, cramjam.DecompressionError, struct.error) as exc:
        raise UnknownCodec(f"codec {codec}: {exc}") from exc
    raise UnknownCodec(f"no codec {codec}")


def _too_large(limit: int) -> UnknownCodec:
    return UnknownCodec(f"the records take more than {limit} bytes decompressed")


def _gzip_decompress(data: bytes, limit: int) -> bytes:
    out = bytearray()
    while data:  # one gzip member after another, as gzip.decompress reads them
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out += member.decompress(data, limit + 1 - len(out))
        if len(out) > limit:
            raise _too_large(limit)
        if not member.eof:
            raise UnknownCodec(f"codec {GZIP}: the stream ends early")
        data = member.unused_data
    return bytes(out)


def _bounded(codec: Any, data: bytes, limit: int) -> bytes:
    """LZ4 and zstd frames into a buffer that grows to at most ``limit``: they need not say how long
    their content is, and a small frame can hold gigabytes of zeros."""
    size = min(limit, max(_FIRST_GUESS, 8 * len(data)))
    while True:
        out = bytearray(size)
        try:
            written = codec.decompress_into(data, out)
        except cramjam.DecompressionError as exc:
            if "whole buffer" not in str(exc):
                raise
            if size >= limit:
                raise _too_large(limit) from None
            size = min(limit, 4 * size)
            continue
        return bytes(out[:written])


def compress(codec: int, data: bytes | bytearray) -> bytes:
    """``data`` compressed with ``codec``, in the framing described above."""
    if codec == GZIP:
        return gzip.compress(bytes(data), mtime=0)
    if codec == SNAPPY:
        return _snappy_compress(bytes(data))
    if codec == LZ4:
        compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        compressor.compress(bytes(data))
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(bytes(data)))
    raise UnknownCodec(f"no codec {codec}")


def _snappy_block(block: bytes, room: int, limit: int) -> bytes:
    """One raw snappy block, whose header says its length: refused before decompressing if it would
    take more than ``room`` of the ``limit``."""
    if cramjam.snappy.decompress_raw_len(block) > room:
        raise _too_large(limit)
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decompress(data: bytes, limit: int) -> bytes:
    if not data.startswith(SNAPPY_JAVA_MAGIC):
        return _snappy_block(data, limit, limit)
    if len(data) < _SNAPPY_JAVA_HEADER.size:
        raise UnknownCodec(f"codec {SNAPPY}: {len(data)} bytes cannot hold snappy-java's header")
    out = bytearray()
    pos = _SNAPPY_JAVA_HEADER.size
    while pos < len(data):
        (length,) = _LENGTH.unpack_from(data, pos)
        pos += _LENGTH.size
        if length < 0 or pos + length > len(data):
            raise UnknownCodec(f"codec {SNAPPY}: a block of {length} bytes runs past the data")
        out += _snappy_block(data[pos : pos + length], limit - len(out), limit)
        pos += length
    return bytes(out)


def _snappy_compress(data: bytes) -> bytes:
    out = bytearray(_SNAPPY_JAVA_HEADER.pack(SNAPPY_JAVA_MAGIC, 1, 1))
    for start in range(0, len(data), _SNAPPY_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _SNAPPY_BLOCK]))
        out += _LENGTH.pack(len(block)) + block
    return bytes(out)
