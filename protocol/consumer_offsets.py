"""The records of ``__consumer_offsets`` in Kafka's formats, and which partition holds a group.

Every key and value is an int16 version followed by that version's struct, so Kafka's own tools
(``kafka-console-consumer --formatter OffsetsMessageFormatter``, ``kafka-consumer-groups``) read what
the group coordinator here writes, and the other way round. The key version says what the record is:

* key v0/v1 (``group``, ``topic``, ``partition``): a committed offset; value ``OffsetCommitValue``
  v0-v4 (v1 alone has ``expire_timestamp``; v3 adds ``leader_epoch``; v4 is flexible);
* key v2 (``group``): a group's metadata; value ``GroupMetadataValue`` v0-v4 (v1 adds rebalance
  timeouts, v2 the state timestamp, v3 static members' instance ids, v4 is flexible).

A null value is a tombstone: the offset or the group is gone. Kafka's ZooKeeper-era coordinator
writes key v1 with value v3 (v1 when the commit carries an explicit expiry) and group values v3;
that is what :func:`offset_commit_record` and :func:`group_metadata_record` produce.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass, field
from typing import Any

from construct import Construct, ConstructError

from protocol.errors import ProtocolError
from protocol.types import Int32, Int64, Layout, only

__all__ = [
    "GroupMember",
    "GroupMetadataRecord",
    "OffsetCommitRecord",
    "OffsetsKey",
    "decode_group_value",
    "decode_key",
    "decode_offset_value",
    "group_key",
    "group_metadata_record",
    "java_string_hash",
    "offset_commit_record",
    "offset_key",
    "partition_for",
]

_VERSION = struct.Struct(">h")
OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: 31-based over UTF-16 code units, in wrapping signed 32-bit arithmetic."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % partitions`` (``abs`` of Int.MinValue is 0 there)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# -- schemas


@functools.cache
def _key_schema(version: int) -> Construct:
    k = Layout(flexible=False)
    if version == GROUP_KEY_VERSION:
        return k.struct("group" / k.string())
    return k.struct("group" / k.string(), "topic" / k.string(), "partition" / Int32)


@functools.cache
def _offset_value_schema(version: int) -> Construct:
    k = Layout(flexible=version >= 4)
    return k.struct(
        "offset" / Int64,
        *only(version >= 3, "leader_epoch" / Int32),
        "metadata" / k.string(),
        "commit_timestamp" / Int64,
        *only(version == 1, "expire_timestamp" / Int64),
    )


@functools.cache
def _group_value_schema(version: int) -> Construct:
    k = Layout(flexible=version >= 4)
    member = k.struct(
        "member_id" / k.string(),
        *only(version >= 3, "group_instance_id" / k.string(nullable=True)),
        "client_id" / k.string(),
        "client_host" / k.string(),
        *only(version >= 1, "rebalance_timeout" / Int32),
        "session_timeout" / Int32,
        "subscription" / k.bytes(),
        "assignment" / k.bytes(),
    )
    return k.struct(
        "protocol_type" / k.string(),
        "generation" / Int32,
        "protocol" / k.string(nullable=True),
        "leader" / k.string(nullable=True),
        *only(version >= 2, "current_state_timestamp" / Int64),
        "members" / k.array(member),
    )


def _encode(version: int, schema: Construct, body: dict[str, Any]) -> bytes:
    built: bytes = schema.build(body)
    return _VERSION.pack(version) + built


def _decode(data: bytes, what: str, schema_for: Any, versions: range) -> tuple[int, dict[str, Any]]:
    if len(data) < 2:
        raise ProtocolError(f"{what}: {len(data)} bytes, too short for a version")
    (version,) = _VERSION.unpack_from(data)
    if version not in versions:
        raise ProtocolError(f"{what}: unknown version {version}")
    try:
        body: dict[str, Any] = schema_for(version).parse(data[2:])
    except ConstructError as exc:
        raise ProtocolError(f"{what} v{version}: {exc}") from None
    return version, body


# -- records


@dataclass(frozen=True, slots=True)
class OffsetsKey:
    """A decoded key: ``topic``/``partition`` are set for offset records, None for group records."""

    group: str
    topic: str | None = None
    partition: int | None = None


@dataclass(frozen=True, slots=True)
class OffsetCommitRecord:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1
    """-1: none given (the group's retention rules apply)."""


@dataclass(frozen=True, slots=True)
class GroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataRecord:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[GroupMember, ...] = field(default=())


def decode_key(data: bytes) -> OffsetsKey:
    """ProtocolError for a key of a version no Kafka writes (the caller logs and skips the record)."""
    version, body = _decode(data, "__consumer_offsets key", _key_schema, range(3))
    if version == GROUP_KEY_VERSION:
        return OffsetsKey(body["group"])
    return OffsetsKey(body["group"], body["topic"], body["partition"])


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return _encode(
        OFFSET_KEY_VERSION,
        _key_schema(OFFSET_KEY_VERSION),
        {"group": group, "topic": topic, "partition": partition},
    )


def group_key(group: str) -> bytes:
    return _encode(GROUP_KEY_VERSION, _key_schema(GROUP_KEY_VERSION), {"group": group})


def offset_commit_record(
    group: str, topic: str, partition: int, value: OffsetCommitRecord
) -> tuple[bytes, bytes]:
    """(key, value) of a commit: value v3, or v1 when the commit carries an explicit expiry."""
    version = OFFSET_VALUE_VERSION_WITH_EXPIRY if value.expire_timestamp >= 0 else OFFSET_VALUE_VERSION
    body = {
        "offset": value.offset,
        "leader_epoch": value.leader_epoch,
        "metadata": value.metadata,
        "commit_timestamp": value.commit_timestamp,
        "expire_timestamp": value.expire_timestamp,
    }
    return offset_key(group, topic, partition), _encode(version, _offset_value_schema(version), body)


def decode_offset_value(data: bytes) -> OffsetCommitRecord:
    _, body = _decode(data, "OffsetCommitValue", _offset_value_schema, range(5))
    return OffsetCommitRecord(
        offset=body["offset"],
        metadata=body["metadata"],
        commit_timestamp=body["commit_timestamp"],
        leader_epoch=body.get("leader_epoch", -1),
        expire_timestamp=body.get("expire_timestamp", -1),
    )


def group_metadata_record(group: str, value: GroupMetadataRecord) -> tuple[bytes, bytes]:
    """(key, value v3) of a group's metadata."""
    body = {
        "protocol_type": value.protocol_type,
        "generation": value.generation,
        "protocol": value.protocol,
        "leader": value.leader,
        "current_state_timestamp": value.current_state_timestamp,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rebalance_timeout": m.rebalance_timeout,
                "session_timeout": m.session_timeout,
                "subscription": m.subscription,
                "assignment": m.assignment,
            }
            for m in value.members
        ],
    }
    return group_key(group), _encode(GROUP_VALUE_VERSION, _group_value_schema(GROUP_VALUE_VERSION), body)


def decode_group_value(data: bytes) -> GroupMetadataRecord:
    """A group's metadata; v0 values have no rebalance timeout, which Kafka reads as the session timeout."""
    _, body = _decode(data, "GroupMetadataValue", _group_value_schema, range(5))
    members = tuple(
        GroupMember(
            member_id=m["member_id"],
            group_instance_id=m.get("group_instance_id"),
            client_id=m["client_id"],
            client_host=m["client_host"],
            rebalance_timeout=m.get("rebalance_timeout", m["session_timeout"]),
            session_timeout=m["session_timeout"],
            subscription=m["subscription"],
            assignment=m["assignment"],
        )
        for m in body["members"]
    )
    return GroupMetadataRecord(
        protocol_type=body["protocol_type"],
        generation=body["generation"],
        protocol=body["protocol"],
        leader=body["leader"],
        current_state_timestamp=body.get("current_state_timestamp", -1),
        members=members,
    )
