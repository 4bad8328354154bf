"""The znodes that list partitions: reassignment and preferred-election requests, ISR change notices.

``/admin/reassign_partitions``, ``/admin/preferred_replica_election`` and
``/isr_change_notification/isr_change_N`` are all ``{"version":1,"partitions":[...]}`` with one object
per partition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from zkstore.znodes.paths import TopicPartition, is_topic_name
from zkstore.znodes.payload import (
    Payload,
    decode,
    encode_json,
    read_int,
    read_int_list,
    read_list,
    read_object,
    read_str,
    required_key,
    wrong,
)

__all__ = [
    "decode_isr_change_notification",
    "decode_preferred_replica_election",
    "decode_reassignment",
    "encode_isr_change_notification",
    "encode_preferred_replica_election",
    "encode_reassignment",
]


def _topic_partition(obj: Mapping[str, object]) -> TopicPartition:
    topic = read_str(required_key(obj, "topic"), "topic")
    if not is_topic_name(topic):
        raise wrong("topic", "a topic name", topic)
    return TopicPartition(topic, read_int(required_key(obj, "partition"), "partition", 0))


def _reassignment_entry(entry: object) -> tuple[TopicPartition, tuple[int, ...]]:
    obj = read_object(entry, "entry")
    return _topic_partition(obj), read_int_list(required_key(obj, "replicas"), "replicas")


def _partition_entry(entry: object) -> TopicPartition:
    return _topic_partition(read_object(entry, "entry"))


def _partition_entries(p: Payload) -> list[object]:
    p.version(range(1, 2))
    return read_list(p.required("partitions"), "partitions")


def _encode_partition_list(entries: Iterable[dict[str, object]]) -> bytes:
    return encode_json({"version": 1, "partitions": list(entries)})


def _read_reassignment(p: Payload) -> dict[TopicPartition, tuple[int, ...]]:
    return dict(p.each(_partition_entries(p), _reassignment_entry))


def encode_reassignment(reassignment: Mapping[TopicPartition, Sequence[int]]) -> bytes:
    return _encode_partition_list(
        {
            "topic": topic,
            "partition": partition,
            "replicas": list(reassignment[TopicPartition(topic, partition)]),
        }
        for topic, partition in sorted(reassignment)
    )


def decode_reassignment(data: bytes | None, path: str) -> dict[TopicPartition, tuple[int, ...]] | None:
    """Read the legacy reassignment request; for a partition listed twice, the last entry wins."""
    return decode(data, path, "reassignment", _read_reassignment)


def _encode_partition_set(partitions: Iterable[TopicPartition]) -> bytes:
    return _encode_partition_list({"topic": t, "partition": p} for t, p in sorted(set(partitions)))


def _decode_partition_set(data: bytes | None, path: str, what: str) -> set[TopicPartition] | None:
    return decode(data, path, what, lambda p: set(p.each(_partition_entries(p), _partition_entry)))


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    return _encode_partition_set(partitions)


def decode_preferred_replica_election(data: bytes | None, path: str) -> set[TopicPartition] | None:
    return _decode_partition_set(data, path, "preferred replica election")


def encode_isr_change_notification(partitions: Iterable[TopicPartition]) -> bytes:
    return _encode_partition_set(partitions)


def decode_isr_change_notification(data: bytes | None, path: str) -> set[TopicPartition] | None:
    return _decode_partition_set(data, path, "ISR change notification")
