"""What one batch becomes when the log cleaner copies it (Kafka's RecordFilter and filterTo, per batch).

The cleaner decides, per batch, whether it may be dropped whole and whether it must be kept even if
emptied (the last batch of a producer, the last of the cleaning round); per record, whether to keep it.
This module applies those decisions to the bytes: a batch whose records all stay is copied as it is,
unless it holds a tombstone or is a marker whose transaction has nothing left and has no delete
horizon yet (KIP-534): then it is rebuilt with the horizon ``now + delete.retention.ms`` in its base
timestamp and attribute bit 6, the records' timestamp deltas taken from there. A batch that lost
records is rebuilt with the same header fields (base offset, last offset delta, producer id, epoch
and sequence, attributes, partition leader epoch); one that lost them all is either dropped or kept
as a header without records. A compressed batch is opened with its codec and rebuilt with the same
codec (``protocol.compression``); one that cannot be read (:func:`records_of`) is kept whole, unless
dropped whole, and counted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from protocol.compression import compress
from protocol.errors import ProtocolError
from protocol.record_batch import (
    DELETE_HORIZON_MASK,
    Record,
    RecordBatchHeader,
    decode_records,
    encode_record,
    pack_batch,
)

__all__ = ["Copied", "copy_batch", "empty_batch", "rebuild_batch", "records_of"]

_KEPT_WHEN_EMPTY = 0x38
"""Attribute bits an emptied batch keeps: timestamp type, transactional, control (no codec, no horizon)."""


@dataclass(frozen=True, slots=True)
class Copied:
    """What is written for one batch: its bytes, and what the segment indexes of it."""

    data: bytes | memoryview
    """Empty if the batch goes."""
    max_timestamp: int
    records_read: int
    records_kept: int
    compressed_kept: bool = False


def rebuild_batch(header: RecordBatchHeader, records: list[Record], horizon: int | None) -> tuple[bytes, int]:
    """``header``'s batch with only ``records`` (its own, timestamps relative to its base), with the
    delete horizon ``horizon`` if not None, compressed with its codec; returns the bytes and the new
    max timestamp."""
    stamps = [header.base_timestamp + r.timestamp_delta for r in records]
    base = horizon if horizon is not None else stamps[0]
    body = bytearray()
    for record, stamp in zip(records, stamps, strict=True):
        encode_record(body, record.offset_delta, stamp - base, record.key, record.value, record.headers)
    packed = compress(header.compression, body) if header.compression else body
    attributes = header.attributes & ~DELETE_HORIZON_MASK
    if horizon is not None:
        attributes |= DELETE_HORIZON_MASK
    max_timestamp = header.max_timestamp if header.log_append_time else max(stamps)
    rebuilt = replace(
        header,
        attributes=attributes,
        base_timestamp=base,
        max_timestamp=max_timestamp,
        records_count=len(records),
    )
    return pack_batch(rebuilt, packed), max_timestamp


def empty_batch(header: RecordBatchHeader) -> bytes:
    """Kafka's empty batch header: the batch's offsets, producer fields and epoch, no records."""
    empty = replace(
        header, attributes=header.attributes & _KEPT_WHEN_EMPTY, base_timestamp=-1, records_count=0
    )
    return pack_batch(empty, b"")


def records_of(header: RecordBatchHeader, batch: memoryview) -> list[Record] | None:
    """A batch's records; None for a compressed batch that cannot be read (its codec fails on it, its
    records are damaged, or they would take more than ``MAX_DECOMPRESSED_BYTES``): the broker took it
    without opening it, and the cleaner keeps it whole. A damaged uncompressed batch raises."""
    try:
        return decode_records(batch)
    except ProtocolError:
        if header.compression:
            return None
        raise


def copy_batch(
    header: RecordBatchHeader,
    batch: memoryview,
    *,
    discard_records: bool,
    retain_empty: bool,
    marker_for_empty_txn: bool,
    keep: Callable[[int, Record], bool],
    new_horizon: int,
) -> Copied:
    """The batch as the cleaner writes it (no bytes if it goes). ``discard_records``: none of its records
    stays; ``retain_empty``: kept even with none; ``keep(offset, record)`` decides the others;
    ``new_horizon``: the delete horizon stamped on a batch that needs one (now + delete.retention.ms)."""
    records: list[Record] = []
    if not discard_records:
        readable = records_of(header, batch)
        if readable is None:
            return Copied(batch, header.max_timestamp, header.records_count, header.records_count, True)
        records = readable
    count = header.records_count
    kept = [r for r in records if keep(header.base_offset + r.offset_delta, r)]
    if kept:
        tombstones = any(r.value is None for r in kept)
        needs_horizon = (tombstones or marker_for_empty_txn) and header.delete_horizon_ms is None
        if len(kept) == count and not needs_horizon:
            return Copied(batch, header.max_timestamp, count, count)
        horizon = new_horizon if needs_horizon else header.delete_horizon_ms
        data, max_timestamp = rebuild_batch(header, kept, horizon)
        return Copied(data, max_timestamp, count, len(kept))
    if retain_empty:
        return Copied(empty_batch(header), header.max_timestamp, count, 0)
    return Copied(b"", header.max_timestamp, count, 0)
