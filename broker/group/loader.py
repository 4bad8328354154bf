"""Reading a ``__consumer_offsets`` partition back into groups and offsets (Kafka's load on election).

Pure: it folds record batches, oldest first, into the latest value per key (a later record replaces
an earlier one, a null value deletes). Offsets a transaction committed (TxnOffsetCommit's
transactional batches) are held per producer until that producer's marker: COMMIT applies them,
ABORT drops them, and those still open at the end stay pending in their groups. Keys or values no
Kafka version writes are counted and skipped, never fatal, so one bad record cannot keep a
partition's groups from loading.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from protocol.consumer_offsets import (
    GroupMetadataRecord,
    OffsetCommitRecord,
    decode_group_value,
    decode_key,
    decode_offset_value,
)
from protocol.control_records import ControlType, decode_marker
from protocol.errors import ProtocolError
from protocol.record_batch import decode_records, parse_header
from zkstore.znodes import TopicPartition

log = logging.getLogger("broker.group")


@dataclass
class LoadedPartition:
    groups: dict[str, GroupMetadataRecord | None] = field(default_factory=dict)
    """Group id -> its latest metadata, or None once deleted (a tombstone)."""
    offsets: dict[str, dict[TopicPartition, OffsetCommitRecord]] = field(default_factory=dict)
    pending: dict[int, dict[str, dict[TopicPartition, OffsetCommitRecord]]] = field(default_factory=dict)
    """Producer id -> group -> offsets of its transaction not ended yet in the log read so far."""
    records: int = 0
    skipped: int = 0

    def group_ids(self) -> list[str]:
        """Groups with metadata, offsets or pending transactional offsets: each is loaded (a group
        without metadata, as Empty)."""
        with_metadata = {g for g, record in self.groups.items() if record is not None}
        pending = {g for by_group in self.pending.values() for g, o in by_group.items() if o}
        return sorted(with_metadata | pending | {g for g, o in self.offsets.items() if o})

    def pending_offsets(self, group_id: str) -> dict[int, dict[TopicPartition, OffsetCommitRecord]]:
        """The group's offsets of open transactions, by producer id."""
        return {
            pid: dict(by_group[group_id]) for pid, by_group in self.pending.items() if by_group.get(group_id)
        }

    def end_transaction(self, producer_id: int, commit: bool) -> None:
        """A marker of ``producer_id``: its transaction's offsets become committed, or are dropped."""
        ended = self.pending.pop(producer_id, {})
        if commit:
            for group_id, offsets in ended.items():
                self.offsets.setdefault(group_id, {}).update(offsets)

    def apply_transactional(self, producer_id: int, key: bytes | None, value: bytes | None) -> None:
        """One record of a transactional batch: an offset commit held until the producer's marker."""
        self.records += 1
        try:
            decoded = decode_key(key) if key is not None else None
            if decoded is None or decoded.topic is None or decoded.partition is None or value is None:
                raise ProtocolError("a transactional record that is not an offset commit")
            tp = TopicPartition(decoded.topic, decoded.partition)
            by_group = self.pending.setdefault(producer_id, {})
            by_group.setdefault(decoded.group, {})[tp] = decode_offset_value(value)
        except ProtocolError as exc:
            self.skipped += 1
            log.warning("__consumer_offsets: skipping a transactional record: %s", exc)

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """One record, in log order."""
        self.records += 1
        if key is None:
            self.skipped += 1
            return
        try:
            decoded = decode_key(key)
            if decoded.topic is not None and decoded.partition is not None:
                tp = TopicPartition(decoded.topic, decoded.partition)
                offsets = self.offsets.setdefault(decoded.group, {})
                if value is None:
                    offsets.pop(tp, None)
                else:
                    offsets[tp] = decode_offset_value(value)
            else:
                self.groups[decoded.group] = None if value is None else decode_group_value(value)
        except ProtocolError as exc:
            self.skipped += 1
            log.warning("__consumer_offsets: skipping a record: %s", exc)


def load_batches(batches: Iterable[bytes]) -> LoadedPartition:
    """Fold whole record batches (as read from the log) into a :class:`LoadedPartition`."""
    loaded = LoadedPartition()
    for batch in batches:
        header = parse_header(batch)
        try:
            if header.is_control:
                control, _ = decode_marker(batch)
                loaded.end_transaction(header.producer_id, control is ControlType.COMMIT)
                continue
            records = decode_records(batch)
        except ProtocolError as exc:
            log.warning("__consumer_offsets: skipping a batch at offset %d: %s", header.base_offset, exc)
            loaded.skipped += max(header.records_count, 0)
            continue
        for record in records:
            if header.is_transactional:
                loaded.apply_transactional(header.producer_id, record.key, record.value)
            else:
                loaded.apply(record.key, record.value)
    return loaded
