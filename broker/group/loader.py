"""Reading a ``__consumer_offsets`` partition back into groups and offsets (Kafka's load on election).

Pure: it folds record batches, oldest first, into the latest value per key (the topic is compacted
in spirit: a later record replaces an earlier one, a null value deletes). Keys or values no Kafka
version writes are counted and skipped, never fatal, so one bad record cannot keep a partition's
groups from loading.
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
from protocol.errors import ProtocolError
from protocol.record_batch import decode_records, parse_header
from zkstore.znodes import TopicPartition

log = logging.getLogger("broker.group")


@dataclass
class LoadedPartition:
    groups: dict[str, GroupMetadataRecord | None] = field(default_factory=dict)
    """Group id -> its latest metadata, or None once deleted (a tombstone)."""
    offsets: dict[str, dict[TopicPartition, OffsetCommitRecord]] = field(default_factory=dict)
    records: int = 0
    skipped: int = 0

    def group_ids(self) -> list[str]:
        """Groups with metadata or offsets: each is loaded (a group with offsets only, as Empty)."""
        with_metadata = {g for g, record in self.groups.items() if record is not None}
        return sorted(with_metadata | {g for g, o in self.offsets.items() if o})

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
        if header.is_control or header.is_transactional:
            loaded.skipped += header.records_count  # transactional commits are not supported
            continue
        try:
            records = decode_records(batch)
        except ProtocolError as exc:
            log.warning("__consumer_offsets: skipping a batch at offset %d: %s", header.base_offset, exc)
            loaded.skipped += max(header.records_count, 0)
            continue
        for record in records:
            loaded.apply(record.key, record.value)
    return loaded
