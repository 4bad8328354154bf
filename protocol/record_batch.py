"""Record batch v2 (magic 2): walk, validate and re-stamp the batches inside a ``records`` field.

Sans-IO, like the rest of ``protocol/``. A broker never needs to decode records to store or serve
them: it checks each batch's framing and CRC, assigns ``base_offset`` and ``partition_leader_epoch``
(both outside the CRC, so rewriting them leaves it valid), and hands the bytes on. Decoding records
(:func:`decode_records`) and building batches (:func:`build_batch`) exist for tests, tools and the
batches a broker writes itself (transaction markers, ``protocol.control_records``; the log cleaner's
rewritten batches, :func:`encode_record` and :func:`pack_batch`). :func:`decode_records` opens a
compressed batch with its codec (``protocol.compression``); :func:`build_batch` writes uncompressed ones.

Layout (all big-endian; the CRC is CRC-32C over everything from ``attributes`` to the end)::

    base_offset int64 | batch_length int32 | partition_leader_epoch int32 | magic int8 | crc uint32 |
    attributes int16 | last_offset_delta int32 | base_timestamp int64 | max_timestamp int64 |
    producer_id int64 | producer_epoch int16 | base_sequence int32 | records_count int32 | records...
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import crc32c

from protocol.compression import decompress
from protocol.errors import CorruptRecordBatch

__all__ = [
    "CRC_START",
    "DELETE_HORIZON_MASK",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC",
    "CorruptRecordBatch",
    "Record",
    "RecordBatchHeader",
    "build_batch",
    "check_batch",
    "crc_valid",
    "decode_records",
    "encode_record",
    "pack_batch",
    "parse_batches",
    "parse_header",
    "restamp_in_place",
    "with_base_offset_and_epoch",
]

MAGIC = 2
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size
"""61 bytes, from ``base_offset`` through ``records_count``."""
LOG_OVERHEAD = 12
"""``base_offset`` and ``batch_length``: the bytes not counted by ``batch_length``."""
_MAGIC_OFFSET = 16
_CRC_OFFSET = 17
CRC_START = 21
"""Offset of ``attributes``, where the CRC-covered part of a batch begins."""
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_LENGTH = struct.Struct(">i")
_OFFSET = struct.Struct(">q")
_EPOCH = struct.Struct(">i")

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08
_TRANSACTIONAL_MASK = 0x10
_CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40
"""Attribute bit 6 (KIP-534): ``base_timestamp`` is the batch's delete horizon."""

Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class RecordBatchHeader:
    """The fixed 61-byte header of one v2 batch, field for field."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """The whole batch on the wire: ``batch_length`` plus the 12 bytes before it counts."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def compression(self) -> int:
        """0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & _COMPRESSION_MASK

    @property
    def log_append_time(self) -> bool:
        """True when the timestamps are the broker's append time rather than the producer's."""
        return bool(self.attributes & _TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """KIP-534: when set (attribute bit 6), ``base_timestamp`` holds the time after which the log
        cleaner may drop the batch's tombstones and transaction marker."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_MASK else None

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """The offset the batch after this one starts at."""
        return self.base_offset + self.last_offset_delta + 1


def _check_magic(data: Buffer, pos: int) -> None:
    magic = data[pos + _MAGIC_OFFSET]
    if magic != MAGIC:
        raise CorruptRecordBatch(
            f"batch at byte {pos}: bad magic {magic - 256 if magic > 127 else magic} "
            f"(only record batch v2, magic {MAGIC}, is supported)"
        )


def parse_header(data: Buffer, pos: int = 0) -> RecordBatchHeader:
    """The header of the batch starting at ``pos``; it must be whole (61 bytes at least)."""
    if len(data) - pos < HEADER_SIZE:
        raise CorruptRecordBatch(f"batch at byte {pos}: {len(data) - pos} bytes cannot hold a v2 header")
    _check_magic(data, pos)
    header = RecordBatchHeader(*_HEADER.unpack_from(data, pos))
    if header.batch_length < _MIN_BATCH_LENGTH:
        raise CorruptRecordBatch(
            f"batch at byte {pos}: length {header.batch_length} is below the {_MIN_BATCH_LENGTH} bytes "
            "of a v2 header"
        )
    return header


def parse_batches(
    data: Buffer, *, allow_partial: bool = True, verify_crc: bool = False
) -> list[tuple[RecordBatchHeader, int, int]]:
    """Each whole batch in ``data`` as ``(header, offset, size)``, in order.

    A fetch response may end in the middle of a batch (the broker cuts at ``max_bytes``), so by default
    a trailing fragment ends the walk without error; with ``allow_partial=False`` (a produce request,
    whose batches must all be whole) it raises. A fragment still has its magic checked once it is long
    enough to contain it, as Kafka does. ``verify_crc`` checks each batch's CRC as well.

    Raises CorruptRecordBatch naming the batch's byte offset and what is wrong.
    """
    end = len(data)
    pos = 0
    batches: list[tuple[RecordBatchHeader, int, int]] = []
    while end - pos >= LOG_OVERHEAD:
        if end - pos > _MAGIC_OFFSET:  # enough of a fragment to tell v2 from garbage
            _check_magic(data, pos)
        batch_length = _LENGTH.unpack_from(data, pos + 8)[0]
        if batch_length < _MIN_BATCH_LENGTH:
            raise CorruptRecordBatch(
                f"batch at byte {pos}: length {batch_length} is below the {_MIN_BATCH_LENGTH} bytes "
                "of a v2 header"
            )
        size = LOG_OVERHEAD + batch_length
        if size > end - pos:
            if allow_partial:
                return batches
            raise CorruptRecordBatch(
                f"batch at byte {pos}: length {batch_length} runs beyond the "
                f"{end - pos - LOG_OVERHEAD} bytes left"
            )
        header = RecordBatchHeader(*_HEADER.unpack_from(data, pos))
        if verify_crc:
            _verify_crc(data, pos, size, header.crc)
        batches.append((header, pos, size))
        pos += size
    if pos < end and not allow_partial:
        raise CorruptRecordBatch(f"{end - pos} bytes after the last batch (at byte {pos}) are not a batch")
    return batches


def _crc_of(data: Buffer, pos: int, size: int) -> int:
    return crc32c.crc32c(memoryview(data)[pos + CRC_START : pos + size])


def _verify_crc(data: Buffer, pos: int, size: int, stored: int) -> None:
    computed = _crc_of(data, pos, size)
    if computed != stored:
        raise CorruptRecordBatch(
            f"batch at byte {pos}: CRC mismatch (stored {stored:#010x}, computed {computed:#010x})"
        )


def crc_valid(batch: Buffer) -> bool:
    """Whether the stored CRC matches the CRC-32C of ``attributes`` to the end of ``batch``.

    ``batch`` is exactly one batch; a buffer too short to hold a header is not valid.
    """
    if len(batch) < HEADER_SIZE:
        return False
    (stored,) = struct.unpack_from(">I", batch, _CRC_OFFSET)
    return bool(_crc_of(batch, 0, len(batch)) == stored)


def check_batch(batch: Buffer) -> RecordBatchHeader:
    """The header of ``batch``, which must be exactly one whole, CRC-valid v2 batch."""
    header = parse_header(batch)
    if header.size != len(batch):
        raise CorruptRecordBatch(
            f"batch at byte 0: length {header.batch_length} does not match the {len(batch)} bytes given"
        )
    _verify_crc(batch, 0, len(batch), header.crc)
    return header


def with_base_offset_and_epoch(batch: Buffer, base_offset: int, partition_leader_epoch: int) -> bytes:
    """``batch`` with ``base_offset`` and ``partition_leader_epoch`` replaced and every other byte kept.

    Neither field is covered by the CRC, so the result stays valid without recomputing it: what a
    leader does to each batch it appends. One copy of the batch, however large.
    """
    if len(batch) < HEADER_SIZE:
        raise CorruptRecordBatch(f"batch at byte 0: {len(batch)} bytes cannot hold a v2 header")
    view = memoryview(batch)
    return b"".join((_OFFSET.pack(base_offset), view[8:12], _EPOCH.pack(partition_leader_epoch), view[16:]))


def restamp_in_place(
    buffer: bytearray | memoryview, pos: int, base_offset: int, partition_leader_epoch: int
) -> None:
    """Set ``base_offset`` and ``partition_leader_epoch`` of the batch at ``pos`` of a writable buffer.

    The in-place form of :func:`with_base_offset_and_epoch`, for a leader that stamps every batch of
    an append inside the one buffer it then writes: no copy per batch, and the CRC stays valid.
    """
    if len(buffer) - pos < HEADER_SIZE:
        raise CorruptRecordBatch(f"batch at byte {pos}: {len(buffer) - pos} bytes cannot hold a v2 header")
    _OFFSET.pack_into(buffer, pos, base_offset)
    _EPOCH.pack_into(buffer, pos + LOG_OVERHEAD, partition_leader_epoch)


# ---------------------------------------------------------------- records (uncompressed)

Header = tuple[str, bytes | None]
RecordInput = tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, Sequence[Header]]
"""What build_batch takes per record: ``(key, value)`` or ``(key, value, headers)``."""


@dataclass(frozen=True, slots=True)
class Record:
    """One record of an uncompressed batch; offsets and timestamps are deltas from the batch's base."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    attributes: int = 0


def _zigzag_bytes(value: int, out: bytearray) -> None:
    """Append ``value`` as a zig-zag varint (Protobuf's sint64 encoding, as Kafka's records use)."""
    n = (value << 1) ^ (value >> 63)
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _read_zigzag(data: Buffer, pos: int, end: int, max_bytes: int, what: str) -> tuple[int, int]:
    n = 0
    for i in range(max_bytes):
        if pos >= end:
            raise CorruptRecordBatch(f"{what}: varint runs past the end of its record")
        byte = data[pos]
        pos += 1
        n |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return (n >> 1) ^ -(n & 1), pos
    raise CorruptRecordBatch(f"{what}: varint longer than {max_bytes} bytes")


def _read_blob(data: Buffer, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, pos = _read_zigzag(data, pos, end, 5, what)
    if length < 0:
        return None, pos
    if length > end - pos:
        raise CorruptRecordBatch(f"{what}: length {length} runs past the end of its record")
    return bytes(data[pos : pos + length]), pos + length


def decode_records(batch: Buffer) -> list[Record]:
    """The records of one whole batch, decompressed with its codec if it has one (its CRC is not
    checked here: see check_batch); UnknownCodec (a ProtocolError) if its codec cannot read them."""
    header = parse_header(batch)
    if header.size > len(batch):
        raise CorruptRecordBatch(f"batch at byte 0: length {header.batch_length} runs beyond the data")
    if header.records_count < 0:
        raise CorruptRecordBatch(f"batch at byte 0: negative record count {header.records_count}")
    body: Buffer = memoryview(batch)[HEADER_SIZE : header.size]
    if header.compression:
        body = decompress(header.compression, body)
    end = len(body)
    pos = 0
    records = []
    for i in range(header.records_count):
        record, pos = _decode_record(body, pos, end, f"record {i}")
        records.append(record)
    if pos != end:
        raise CorruptRecordBatch(f"batch at byte 0: {end - pos} bytes after its last record")
    return records


def _decode_record(batch: Buffer, pos: int, end: int, what: str) -> tuple[Record, int]:
    """The record at ``pos`` (its varint length first) and the position after it."""
    length, pos = _read_zigzag(batch, pos, end, 5, what)
    record_end = pos + length
    if length < 1 or record_end > end:
        raise CorruptRecordBatch(f"{what}: length {length} does not fit the batch")
    attributes = batch[pos]
    timestamp_delta, pos = _read_zigzag(batch, pos + 1, record_end, 10, what)
    offset_delta, pos = _read_zigzag(batch, pos, record_end, 5, what)
    key, pos = _read_blob(batch, pos, record_end, f"{what} key")
    value, pos = _read_blob(batch, pos, record_end, f"{what} value")
    count, pos = _read_zigzag(batch, pos, record_end, 5, f"{what} headers")
    if count < 0 or count > record_end - pos:
        raise CorruptRecordBatch(f"{what}: invalid header count {count}")
    headers = []
    for j in range(count):
        header, pos = _decode_header(batch, pos, record_end, f"{what} header {j}")
        headers.append(header)
    if pos != record_end:
        raise CorruptRecordBatch(f"{what}: {record_end - pos} bytes left over inside the record")
    return Record(offset_delta, timestamp_delta, key, value, tuple(headers), attributes), pos


def _decode_header(batch: Buffer, pos: int, end: int, what: str) -> tuple[tuple[str, bytes | None], int]:
    raw_key, pos = _read_blob(batch, pos, end, f"{what} key")
    if raw_key is None:
        raise CorruptRecordBatch(f"{what}: null key")
    try:
        key = raw_key.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptRecordBatch(f"{what}: key is not UTF-8") from None
    value, pos = _read_blob(batch, pos, end, f"{what} value")
    return (key, value), pos


def _encode_blob(blob: bytes | None, out: bytearray) -> None:
    if blob is None:
        _zigzag_bytes(-1, out)
    else:
        _zigzag_bytes(len(blob), out)
        out += blob


def encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] = (),
) -> None:
    """Append one record (its varint length first) to ``out``: what a batch's body is made of."""
    body = bytearray()
    body.append(0)  # record attributes: unused in v2
    _zigzag_bytes(timestamp_delta, body)
    _zigzag_bytes(offset_delta, body)
    _encode_blob(key, body)
    _encode_blob(value, body)
    _zigzag_bytes(len(headers), body)
    for header_key, header_value in headers:
        _encode_blob(header_key.encode("utf-8"), body)
        _encode_blob(header_value, body)
    _zigzag_bytes(len(body), out)
    out += body


def pack_batch(header: RecordBatchHeader, body: Buffer) -> bytes:
    """A whole batch: ``header``'s fields (its length and CRC recomputed) followed by ``body``, the
    records already encoded (uncompressed, or compressed with the header's codec)."""
    out = bytearray(HEADER_SIZE)
    out += body
    _HEADER.pack_into(
        out,
        0,
        header.base_offset,
        len(out) - LOG_OVERHEAD,
        header.partition_leader_epoch,
        MAGIC,
        0,
        header.attributes,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.records_count,
    )
    struct.pack_into(">I", out, _CRC_OFFSET, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def build_batch(
    records: Sequence[RecordInput],
    base_offset: int = 0,
    *,
    timestamps: Sequence[int] | None = None,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    """One uncompressed v2 batch of ``(key, value)`` or ``(key, value, headers)`` records, CRC included.

    Record ``i`` gets offset delta ``i`` and timestamp ``timestamps[i]`` (0 when not given); the batch's
    base timestamp is the first record's and its max timestamp the largest, as Kafka's producer writes
    them. The defaults (-1 epoch, no producer id) are those of a non-idempotent producer. ``control``
    sets the control-batch attribute bit (a transaction marker: see ``protocol.control_records``).
    """
    if timestamps is None:
        timestamps = [0] * len(records)
    if len(timestamps) != len(records):
        raise ValueError(f"{len(timestamps)} timestamps for {len(records)} records")
    base_timestamp = timestamps[0] if records else 0
    body = bytearray()
    for delta, (record, timestamp) in enumerate(zip(records, timestamps, strict=True)):
        key, value, *rest = record
        encode_record(body, delta, timestamp - base_timestamp, key, value, rest[0] if rest else ())
    header = RecordBatchHeader(
        base_offset,
        0,
        partition_leader_epoch,
        MAGIC,
        0,
        (_TRANSACTIONAL_MASK if transactional else 0) | (_CONTROL_MASK if control else 0),
        max(len(records) - 1, 0),
        base_timestamp,
        max(timestamps, default=0),
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    return pack_batch(header, body)
