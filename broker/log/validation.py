"""The checks an append's bytes pass before a log takes them: whole batches, as a leader must see them."""

from __future__ import annotations

from typing import TypeAlias

from broker.log.outcomes import InvalidRecord, RecordTooLarge
from protocol.record_batch import RecordBatchHeader, parse_batches

__all__ = ["Batches", "checked_batches", "leader_batches"]

Batches: TypeAlias = list[tuple[RecordBatchHeader, int, int]]
"""Each batch's header, its position in the bytes and its size."""


def _byte_view(records: bytes | bytearray | memoryview) -> memoryview:
    view = memoryview(records)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def checked_batches(records: bytes | bytearray | memoryview) -> tuple[memoryview, Batches]:
    """The batches of an append: whole, magic 2, CRC-valid, offset ranges not negative."""
    view = _byte_view(records)
    batches = parse_batches(view, allow_partial=False, verify_crc=True)
    for header, position, _ in batches:
        if header.last_offset_delta < 0:
            raise InvalidRecord(
                f"batch at byte {position}: negative last offset delta {header.last_offset_delta}"
            )
    return view, batches


def leader_batches(
    records: bytes | bytearray | memoryview, max_batch_bytes: int
) -> tuple[memoryview, Batches]:
    """:func:`checked_batches`, and more as a leader takes them from clients: at least one, none above
    ``max_batch_bytes`` (RecordTooLarge), each with as many records as offsets and none a control
    batch (InvalidRecord: only the broker writes transaction markers, as in Kafka)."""
    view, batches = checked_batches(records)
    if not batches:
        raise InvalidRecord("an append needs at least one record batch")
    for header, position, size in batches:
        if size > max_batch_bytes:
            raise RecordTooLarge(size, max_batch_bytes)
        if header.is_control:
            raise InvalidRecord(f"batch at byte {position}: clients may not write control batches")
        if header.records_count != header.last_offset_delta + 1:
            raise InvalidRecord(
                f"batch at byte {position}: {header.records_count} records for "
                f"{header.last_offset_delta + 1} offsets"
            )
    return view, batches
