"""What the log cleaner reads of a log, taken at one instant under the log's lock."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from broker.log.segment import Segment

__all__ = ["CleaningView", "LastRecord"]


@dataclass(frozen=True, slots=True)
class LastRecord:
    """A producer with state in the log: the last offset of its last data batch (None if its last
    entry is a marker) and its epoch. Kafka's cleaner keeps that batch, emptied if need be, so the
    producer's sequence and epoch survive a rebuild of its state from the log."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class CleaningView:
    segments: tuple[Segment, ...]
    """The last one is the active segment, never cleaned."""
    log_start_offset: int
    log_end_offset: int
    truncations: int
    """The log's truncation count: a swap is refused if it moved (the log was cut meanwhile)."""
    last_records: Mapping[int, LastRecord]
    """Producer id -> its last record (Kafka's lastRecordsOfActiveProducers)."""

    @property
    def active_base(self) -> int:
        return self.segments[-1].base_offset
