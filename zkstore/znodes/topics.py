"""A topic's znodes: ``/brokers/topics/T`` (replicas per partition, topic id) and each partition's state."""

from __future__ import annotations

import base64
import enum
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from zkstore.znodes.paths import check_topic, is_topic_name, last_segment
from zkstore.znodes.payload import (
    INT32_MAX,
    Invalid,
    Payload,
    decode,
    encode_json,
    read_int,
    read_int_list,
    read_object,
    read_optional_str,
    wrong,
)

__all__ = [
    "NO_LEADER",
    "LeaderIsrState",
    "LeaderRecoveryState",
    "ReplicaMap",
    "TopicAssignment",
    "decode_leader_isr_state",
    "decode_topic_assignment",
    "format_topic_id",
    "new_topic_id",
    "parse_topic_id",
]

# ----------------------------------------------------------------------------------------------------
# /brokers/topics/T

_TOPIC_VERSIONS = range(1, 4)
_TOPIC_VERSION_WRITTEN = 3
_TOPIC_ID_TEXT = re.compile(r"[A-Za-z0-9_\-]{22}(?:==)?")
_ZERO_UUID = uuid.UUID(int=0)

ReplicaMap: TypeAlias = dict[int, tuple[int, ...]]


def format_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's text form of a topic id: URL-safe base64 of the 16 bytes, without padding (22 characters)."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def parse_topic_id(text: str) -> uuid.UUID:
    """The inverse of ``format_topic_id``; padding is accepted. Raises ValueError."""
    if not _TOPIC_ID_TEXT.fullmatch(text):
        raise ValueError(f"not a base64url topic id: {text!r}")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text[:22] + "=="))


def new_topic_id() -> uuid.UUID:
    """A random id that is never Kafka's "no id" (all zeros) and, as Kafka ensures, whose text form does not
    start with ``-`` (it would read as an option on a command line)."""
    while True:
        topic_id = uuid.uuid4()
        if topic_id != _ZERO_UUID and not format_topic_id(topic_id).startswith("-"):
            return topic_id


def _encode_replica_map(replicas: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
    return {str(partition): list(replicas[partition]) for partition in sorted(replicas)}


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """The payload of ``/brokers/topics/T``: replicas per partition and any reassignment in flight.

    The topic name is the znode's name, not part of the JSON. ``None`` stands for "no topic id" (Kafka's
    all-zero id), so the zero UUID itself is refused.
    """

    topic: str
    partitions: ReplicaMap
    adding_replicas: ReplicaMap = field(default_factory=dict)
    removing_replicas: ReplicaMap = field(default_factory=dict)
    topic_id: uuid.UUID | None = None

    def __post_init__(self) -> None:
        check_topic(self.topic)
        if self.topic_id == _ZERO_UUID:
            raise ValueError("the zero UUID means 'no topic id': use None")

    def encode(self) -> bytes:
        payload: dict[str, object] = {
            "version": _TOPIC_VERSION_WRITTEN,
            "partitions": _encode_replica_map(self.partitions),
            "adding_replicas": _encode_replica_map(self.adding_replicas),
            "removing_replicas": _encode_replica_map(self.removing_replicas),
        }
        if self.topic_id is not None:
            payload["topic_id"] = format_topic_id(self.topic_id)
        return encode_json(payload)


def _replica_entry(item: tuple[str, object]) -> tuple[int, tuple[int, ...]]:
    key, replicas = item
    # Kafka writes canonical decimals; like Java's parseInt, leading zeros are read too.
    if not (key.isascii() and key.isdigit()) or int(key) > INT32_MAX:
        raise wrong("partition", "a decimal partition number", key)
    return int(key), read_int_list(replicas, "replicas")


def _read_topic_assignment(p: Payload) -> TopicAssignment:
    topic = last_segment(p.path)
    if not is_topic_name(topic):
        raise Invalid("the path does not end in a topic name")
    p.version(_TOPIC_VERSIONS)
    maps = [read_object(p.required("partitions"), "partitions")]
    maps += [read_object(p.optional(key, {}), key) for key in ("adding_replicas", "removing_replicas")]
    raw_id = read_optional_str(p.optional("topic_id"), "topic_id")
    topic_id = None if raw_id is None else parse_topic_id(raw_id)
    partitions, adding, removing = (dict(p.each(m.items(), _replica_entry)) for m in maps)
    return TopicAssignment(topic, partitions, adding, removing, None if topic_id == _ZERO_UUID else topic_id)


def decode_topic_assignment(data: bytes | None, path: str) -> TopicAssignment | None:
    """Read ``/brokers/topics/T``: v1 has only ``partitions``, v2 adds reassignment maps, v3 the topic id."""
    return decode(data, path, "topic assignment", _read_topic_assignment)


# ----------------------------------------------------------------------------------------------------
# /brokers/topics/T/partitions/P/state

NO_LEADER = -1


class LeaderRecoveryState(enum.IntEnum):
    """KIP-704: RECOVERING marks a leader elected uncleanly that has not yet recovered its log."""

    RECOVERED = 0
    RECOVERING = 1


@dataclass(frozen=True, slots=True)
class LeaderIsrState:
    """The payload of a partition's ``state`` znode.

    The znode's version (Kafka's zkVersion, the partition epoch) is not in the JSON; callers keep it next to
    this value, from the stat they read or wrote it with.
    """

    leader: int
    leader_epoch: int
    controller_epoch: int
    isr: tuple[int, ...]
    leader_recovery_state: int = LeaderRecoveryState.RECOVERED

    def __post_init__(self) -> None:
        LeaderRecoveryState(self.leader_recovery_state)

    def encode(self) -> bytes:
        """Kafka's JSON of the state, written directly: the controller writes one per partition it
        elects, and a template of integers is a fifth of the JSON encoder's cost. The bytes are
        ``encode_json``'s of the same object (a test keeps the two equal)."""
        isr = ",".join([str(int(r)) for r in self.isr])
        text = (
            f'{{"version":1,"leader":{int(self.leader)},"leader_epoch":{int(self.leader_epoch)},'
            f'"controller_epoch":{int(self.controller_epoch)},"isr":[{isr}]'
        )
        if self.leader_recovery_state != LeaderRecoveryState.RECOVERED:
            text += f',"leader_recovery_state":{int(self.leader_recovery_state)}'
        return (text + "}").encode()


def _read_leader_isr_state(p: Payload) -> LeaderIsrState:
    p.version(range(1, 2))
    recovery = read_int(p.optional("leader_recovery_state", 0), "leader_recovery_state", 0, 1)
    return LeaderIsrState(
        leader=read_int(p.required("leader"), "leader"),
        leader_epoch=read_int(p.required("leader_epoch"), "leader_epoch"),
        controller_epoch=read_int(p.required("controller_epoch"), "controller_epoch"),
        isr=read_int_list(p.required("isr"), "isr"),
        leader_recovery_state=LeaderRecoveryState(recovery),
    )


def decode_leader_isr_state(data: bytes | None, path: str) -> LeaderIsrState | None:
    return decode(data, path, "partition state", _read_leader_isr_state)
