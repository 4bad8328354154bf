"""What a log answers: ``AppendInfo`` for an append, and the errors its appends and reads raise."""

from __future__ import annotations

from dataclasses import dataclass

from broker.log.producer_state import BatchMetadata
from protocol.record_batch import CorruptRecordBatch

__all__ = [
    "AppendInfo",
    "InvalidRecord",
    "LogClosed",
    "OffsetOutOfRange",
    "RecordTooLarge",
    "UnexpectedAppendOffset",
]


class OffsetOutOfRange(Exception):
    """A read outside [log_start_offset, log_end_offset] (OFFSET_OUT_OF_RANGE)."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is outside the log [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordTooLarge(Exception):
    """A batch above ``max_batch_bytes`` (MESSAGE_TOO_LARGE)."""

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"a batch of {size} bytes is above message.max.bytes ({max_size})")
        self.size = size
        self.max_size = max_size


class InvalidRecord(CorruptRecordBatch):
    """Well-framed batches a leader still refuses: none at all, or a record count that does not match
    the offset range (Kafka answers INVALID_RECORD; as a CorruptRecordBatch it is CORRUPT_MESSAGE)."""


class UnexpectedAppendOffset(ValueError):
    """A follower's append that does not start at the log end offset."""

    def __init__(self, expected: int, first_offset: int) -> None:
        super().__init__(f"follower append starts at offset {first_offset}, the log ends at {expected}")
        self.expected = expected
        self.first_offset = first_offset


class LogClosed(ValueError):
    """An operation on a log that was closed or deleted."""


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    """The last offset of the batch holding ``max_timestamp`` (-1 if no batch has a timestamp)."""
    batches: int
    records: int
    bytes: int
    duplicate: bool = False
    """A retry of a batch already stored: nothing was appended, the offsets and max timestamp are the
    stored batch's (``batches``, ``records`` and ``bytes`` are 0)."""

    @classmethod
    def of_duplicate(cls, stored: BatchMetadata) -> AppendInfo:
        last = stored.last_offset
        return cls(stored.first_offset, last, stored.max_timestamp, last, 0, 0, 0, duplicate=True)
