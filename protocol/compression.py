"""The record-batch codecs (attributes bits 0-2): a batch's records, compressed and decompressed.

The broker stores and serves compressed batches as producers wrote them; only the log cleaner opens
them, to keep the latest record of each key. It writes what stays back with the batch's own codec,
in the framing Kafka's Java producer writes, which every client reads:

* 1, gzip: a gzip stream;
* 2, snappy: snappy-java's stream framing (a magic header, then blocks of a length and a raw snappy
  block). A raw snappy block, which librdkafka writes, is read too;
* 3, lz4: an LZ4 frame with independent blocks and no content checksum (Kafka's Java reader
  decompresses each block on its own);
* 4, zstd: a zstd frame.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam

from protocol.errors import ProtocolError

__all__ = ["GZIP", "LZ4", "SNAPPY", "ZSTD", "UnknownCodec", "compress", "decompress"]

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
SNAPPY_JAVA_MAGIC = b"\x82SNAPPY\x00"
_SNAPPY_JAVA_HEADER = struct.Struct(">8sii")
_SNAPPY_BLOCK = 32 * 1024
"""snappy-java's default block size."""
_LENGTH = struct.Struct(">i")


class UnknownCodec(ProtocolError):
    """A codec number no Kafka defines, or data its codec cannot read."""


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """The records ``data`` holds, compressed with ``codec``; UnknownCodec if they cannot be read."""
    try:
        if codec == GZIP:
            return gzip.decompress(data)
        if codec == SNAPPY:
            return _snappy_decompress(bytes(data))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except (OSError, EOFError, zlib.error, cramjam.DecompressionError, struct.error) as exc:
        raise UnknownCodec(f"codec {codec}: {exc}") from exc
    raise UnknownCodec(f"no codec {codec}")


def compress(codec: int, data: bytes | bytearray) -> bytes:
    """``data`` compressed with ``codec``, framed as Kafka's Java producer frames it."""
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


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(SNAPPY_JAVA_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    pos = _SNAPPY_JAVA_HEADER.size
    while pos < len(data):
        (length,) = _LENGTH.unpack_from(data, pos)
        pos += _LENGTH.size
        if length < 0 or pos + length > len(data):
            raise UnknownCodec(f"codec {SNAPPY}: a block of {length} bytes runs past the data")
        out += cramjam.snappy.decompress_raw(data[pos : pos + length])
        pos += length
    return bytes(out)


def _snappy_compress(data: bytes) -> bytes:
    out = bytearray(_SNAPPY_JAVA_HEADER.pack(SNAPPY_JAVA_MAGIC, 1, 1))
    for start in range(0, len(data), _SNAPPY_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _SNAPPY_BLOCK]))
        out += _LENGTH.pack(len(block)) + block
    return bytes(out)
