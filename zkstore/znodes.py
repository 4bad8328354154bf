"""Apache Kafka's ZooKeeper layout: znode paths and the JSON payloads stored in them.

Pure functions and frozen dataclasses, no I/O, so that the ZooKeeper bridge, the controller, the brokers and
the tools share one definition of each format, and tests can pin the exact bytes Kafka writes.

Decoders never raise. ZooKeeper content comes from other processes (a real Kafka of another version, an old
tool, a half-finished manual edit), and one bad znode must not take a daemon down: a payload that cannot be
used is logged once and read as ``None``; a bad entry inside a usable payload is logged and skipped.
"""

from __future__ import annotations

import base64
import enum
import json
import logging
import re
import reprlib
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TypeAlias, TypeVar

from daemon.endpoint import Endpoint

__all__ = [
    "BROKER_IDS",
    "BROKER_TOPICS",
    "CONTROLLER",
    "CONTROLLER_EPOCH",
    "DELETE_TOPICS",
    "ISR_CHANGE_NOTIFICATION",
    "ISR_CHANGE_NOTIFICATION_PREFIX",
    "NO_LEADER",
    "PERSISTENT_PATHS",
    "PREFERRED_REPLICA_ELECTION",
    "REASSIGN_PARTITIONS",
    "BrokerRegistration",
    "ControllerRegistration",
    "Endpoint",
    "LeaderIsrState",
    "LeaderRecoveryState",
    "ReplicaMap",
    "TopicAssignment",
    "TopicPartition",
    "broker_path",
    "decode_broker_registration",
    "decode_controller_epoch",
    "decode_controller_registration",
    "decode_isr_change_notification",
    "decode_leader_isr_state",
    "decode_preferred_replica_election",
    "decode_reassignment",
    "decode_topic_assignment",
    "delete_topic_path",
    "encode_controller_epoch",
    "encode_isr_change_notification",
    "encode_preferred_replica_election",
    "encode_reassignment",
    "format_topic_id",
    "new_topic_id",
    "parse_partition_state_path",
    "parse_topic_id",
    "partition_path",
    "partition_state_path",
    "partitions_path",
    "topic_path",
]

log = logging.getLogger("zkstore.znodes")


class TopicPartition(NamedTuple):
    """A partition's identity; a plain ``(topic, partition)`` tuple compares equal to it."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


_T = TypeVar("_T")
_E = TypeVar("_E")

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_UNKNOWN_TIMESTAMP = -1  # Kafka never reads the timestamp back, so a payload without one stays usable

# ----------------------------------------------------------------------------------------------------
# Paths

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
# Notifications are PERSISTENT_SEQUENTIAL children; ZooKeeper appends the 10-digit sequence number.
ISR_CHANGE_NOTIFICATION_PREFIX = ISR_CHANGE_NOTIFICATION + "/isr_change_"

# What a Kafka broker makes sure exists at startup (ZkData.PersistentZkPaths), in creation order.
PERSISTENT_PATHS: tuple[str, ...] = (
    "/consumers",
    BROKER_IDS,
    BROKER_TOPICS,
    "/config/changes",
    DELETE_TOPICS,
    "/brokers/seqid",
    ISR_CHANGE_NOTIFICATION,
    "/latest_producer_id_block",
    "/log_dir_event_notification",
    "/config/topics",
    "/config/clients",
    "/config/users",
    "/config/brokers",
    "/config/ips",
)


def _is_topic_name(name: str) -> bool:
    """Refuse only what would address the wrong znode; Kafka's naming rules belong to the admin tools."""
    return bool(name) and "/" not in name and name not in (".", "..")


def _check_topic(topic: str) -> str:
    if not isinstance(topic, str) or not _is_topic_name(topic):
        raise ValueError(f"not a usable topic name: {topic!r}")
    return topic


def _check_id(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _INT32_MAX:
        raise ValueError(f"{what} must be a non-negative 32-bit integer, got {value!r}")
    return value


def _parse_id(text: str) -> int | None:
    """An id as Kafka writes it in a path (canonical decimal), so that it maps back to the same path."""
    if not (text.isascii() and text.isdigit()) or str(int(text)) != text or int(text) > _INT32_MAX:
        return None
    return int(text)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{_check_id(broker_id, 'broker id')}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{_check_topic(topic)}"


def partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{partitions_path(topic)}/{_check_id(partition, 'partition')}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{_check_topic(topic)}"


def parse_partition_state_path(path: str) -> TopicPartition | None:
    """The inverse of ``partition_state_path`` (for watch events and multi-op results); ``None`` otherwise."""
    match path.split("/"):
        case ["", "brokers", "topics", topic, "partitions", partition_text, "state"] if _is_topic_name(topic):
            partition = _parse_id(partition_text)
            return None if partition is None else TopicPartition(topic, partition)
    return None


# ----------------------------------------------------------------------------------------------------
# Reading untrusted JSON: every failure is a ValueError carrying the reason; _decode logs it once.


class _Invalid(ValueError):
    """The payload (or one entry of it) cannot be used; the message says why."""


def _field(obj: Mapping[str, object], key: str) -> object:
    try:
        return obj[key]
    except KeyError:
        raise _Invalid(f"missing key {key!r}") from None


def _wrong(what: str, expected: str, value: object) -> _Invalid:
    return _Invalid(f"{what} must be {expected}, got {reprlib.repr(value)}")


def _int(value: object, what: str, low: int = _INT32_MIN, high: int = _INT32_MAX) -> int:
    """Kafka's JSON ints are Java ints (or longs); ``True`` is not one, although Python thinks so."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _wrong(what, f"an integer in [{low}, {high}]", value)
    return value


def _str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise _wrong(what, "a string", value)
    return value


def _optional_str(value: object, what: str) -> str | None:
    return None if value is None else _str(value, what)


def _object(value: object, what: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise _wrong(what, "a JSON object", value)
    return value


def _list(value: object, what: str) -> list[object]:
    if not isinstance(value, list):
        raise _wrong(what, "a JSON array", value)
    return value


def _int_list(value: object, what: str) -> tuple[int, ...]:
    return tuple(_int(item, f"{what} item") for item in _list(value, what))


def _timestamp(value: object) -> int:
    """Kafka writes milliseconds as a decimal string; a plain number is accepted too."""
    if value is None:
        return _UNKNOWN_TIMESTAMP
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,19}", value):
        value = int(value)
    return _int(value, "timestamp", _INT64_MIN, _INT64_MAX)


def _port(value: object, what: str = "port") -> int:
    return _int(value, what, 0, 65535)


def _partition(value: object) -> int:
    return _int(value, "partition", 0)


class _Payload:
    """A JSON object read from one znode, plus the entries skipped on the way.

    Skipped entries are only reported once the whole payload has been accepted, so a payload that fails
    as a whole is logged exactly once.
    """

    __slots__ = ("obj", "path", "skipped")

    def __init__(self, data: bytes | None, path: str) -> None:
        self.path = path
        self.skipped: list[tuple[object, str]] = []
        try:
            text = (data or b"").decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Invalid(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
        if not text:
            raise _Invalid("empty payload")
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _Invalid(f"not JSON ({exc.msg} at char {exc.pos})") from None
        self.obj = _object(obj, "the top level")

    def version(self, supported: range) -> int:
        version = _int(_field(self.obj, "version"), "version")
        if version not in supported:
            raise _Invalid(f"unsupported version {version} (reads {supported.start}..{supported.stop - 1})")
        return version

    def required(self, key: str) -> object:
        return _field(self.obj, key)

    def optional(self, key: str, default: object = None) -> object:
        value = self.obj.get(key)
        return default if value is None else value

    def each(self, entries: Iterable[_E], read: Callable[[_E], _T]) -> list[_T]:
        """``read`` every entry, keeping the good ones and noting the bad ones."""
        kept = []
        for entry in entries:
            try:
                kept.append(read(entry))
            except ValueError as exc:
                self.skipped.append((entry, str(exc)))
        return kept


def _warn_ignored(path: str, what: str, reason: object) -> None:
    log.warning("%s: ignoring %s: %s", path, what, reason)


def _decode(data: bytes | None, path: str, what: str, read: Callable[[_Payload], _T]) -> _T | None:
    try:
        payload = _Payload(data, path)
        value = read(payload)
    except (ValueError, TypeError, RecursionError) as exc:  # RecursionError: absurdly nested JSON
        _warn_ignored(path, what, exc)
        return None
    for entry, reason in payload.skipped:
        log.warning("%s: skipping %s entry %s: %s", path, what, reprlib.repr(entry), reason)
    return value


def _encode_json(obj: object) -> bytes:
    """Compact UTF-8 JSON, as Kafka's Jackson writer produces it."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _last_segment(path: str) -> str:
    return path.rpartition("/")[2]


# ----------------------------------------------------------------------------------------------------
# /brokers/ids/N

_BROKER_VERSIONS = range(4, 6)
_BROKER_VERSION_WRITTEN = 5
_PLAINTEXT = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """The payload of ``/brokers/ids/N``; the id comes from the path, the broker epoch is its czxid."""

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    listener_security_protocol_map: dict[str, str]
    timestamp: int
    rack: str | None = None
    jmx_port: int = -1
    features: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_id(self.broker_id, "broker id")

    def endpoint(self, listener_name: str) -> Endpoint | None:
        return next((ep for ep in self.endpoints if ep.listener_name == listener_name), None)

    def security_protocol(self, endpoint: Endpoint) -> str:
        """Without a mapping, Kafka takes the listener name to be the protocol's name (pre-v4 behaviour)."""
        return self.listener_security_protocol_map.get(endpoint.listener_name, endpoint.listener_name)

    def encode(self) -> bytes:
        # The top-level host/port exist for clients that predate listeners: the first PLAINTEXT endpoint.
        plain = next((ep for ep in self.endpoints if self.security_protocol(ep) == _PLAINTEXT), None)
        payload: dict[str, object] = {
            "version": _BROKER_VERSION_WRITTEN,
            "host": plain.host if plain else None,
            "port": plain.port if plain else -1,
            "endpoints": [ep.connection_string for ep in self.endpoints],
            "jmx_port": self.jmx_port,
            "timestamp": str(self.timestamp),
        }
        if self.rack is not None:
            payload["rack"] = self.rack
        payload["listener_security_protocol_map"] = self.listener_security_protocol_map
        payload["features"] = self.features
        return _encode_json(payload)


def _endpoint(entry: object) -> Endpoint:
    return Endpoint.parse(_str(entry, "endpoint"))


def _protocol_mapping(item: tuple[str, object]) -> tuple[str, str]:
    return item[0], _str(item[1], "security protocol")


def _read_broker_registration(p: _Payload) -> BrokerRegistration:
    broker_id = _parse_id(_last_segment(p.path))
    if broker_id is None:
        raise _Invalid("the path does not end in a broker id")
    p.version(_BROKER_VERSIONS)
    jmx_port = _int(p.optional("jmx_port", -1), "jmx_port")
    timestamp = _timestamp(p.optional("timestamp"))
    rack = _optional_str(p.optional("rack"), "rack")
    features = _object(p.optional("features", {}), "features")
    protocols = _object(p.optional("listener_security_protocol_map", {}), "listener_security_protocol_map")
    endpoints = _list(p.required("endpoints"), "endpoints")
    return BrokerRegistration(
        broker_id=broker_id,
        endpoints=tuple(p.each(endpoints, _endpoint)),
        listener_security_protocol_map=dict(p.each(protocols.items(), _protocol_mapping)),
        timestamp=timestamp,
        rack=rack,
        jmx_port=jmx_port,
        features=features,
    )


def decode_broker_registration(data: bytes | None, path: str) -> BrokerRegistration | None:
    """Read ``/brokers/ids/N`` (v4 or v5); the top-level host/port are derived, so they are not read."""
    return _decode(data, path, "broker registration", _read_broker_registration)


# ----------------------------------------------------------------------------------------------------
# /controller and /controller_epoch

_CONTROLLER_VERSIONS = range(1, 3)


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    """The payload of ``/controller``.

    ``host``/``port`` are this project's additive keys: the active controller's RPC listener, so that a broker
    can find it from ZooKeeper. Kafka ignores unknown keys, and we accept Kafka's payloads without them.
    """

    broker_id: int
    timestamp: int
    host: str | None = None
    port: int | None = None
    security_protocol: str | None = None
    """Also additive: how to connect to that listener (PLAINTEXT when absent)."""

    def __post_init__(self) -> None:
        _check_id(self.broker_id, "controller id")
        if (self.host is None) != (self.port is None):
            raise ValueError("host and port come together or not at all")
        if self.port is not None:
            _port(self.port)

    def encode(self) -> bytes:
        payload: dict[str, object] = {
            "version": 1,
            "brokerid": self.broker_id,
            "timestamp": str(self.timestamp),
        }
        if self.host is not None:
            payload["host"] = self.host
            payload["port"] = self.port
        if self.security_protocol is not None:
            payload["security_protocol"] = self.security_protocol
        return _encode_json(payload)


def _read_controller_registration(p: _Payload) -> ControllerRegistration:
    # v2 (Kafka 3.4+) adds kraftControllerEpoch, which stays -1 while ZooKeeper elects the controller.
    p.version(_CONTROLLER_VERSIONS)
    broker_id = _int(p.required("brokerid"), "brokerid", 0)
    timestamp = _timestamp(p.optional("timestamp"))
    host = _optional_str(p.optional("host"), "host")
    raw_port = p.optional("port")
    port = None if raw_port is None else _port(raw_port)
    if (host is None) != (port is None):
        p.skipped.append(({"host": host, "port": port}, "host and port come together; endpoint unknown"))
        host = port = None
    protocol = _optional_str(p.optional("security_protocol"), "security_protocol")
    return ControllerRegistration(broker_id, timestamp, host, port, protocol)


def decode_controller_registration(data: bytes | None, path: str) -> ControllerRegistration | None:
    return _decode(data, path, "controller registration", _read_controller_registration)


def encode_controller_epoch(epoch: int) -> bytes:
    """``/controller_epoch`` holds the epoch as bare decimal text, not JSON."""
    return str(_int(epoch, "controller epoch")).encode("ascii")


def decode_controller_epoch(data: bytes | None, path: str) -> int | None:
    text = (data or b"").strip()
    if not re.fullmatch(rb"-?[0-9]{1,10}", text) or not _INT32_MIN <= int(text) <= _INT32_MAX:
        _warn_ignored(path, "controller epoch", f"not a 32-bit decimal integer: {reprlib.repr(data)}")
        return None
    return int(text)


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
        _check_topic(self.topic)
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
        return _encode_json(payload)


def _replica_entry(item: tuple[str, object]) -> tuple[int, tuple[int, ...]]:
    key, replicas = item
    # Kafka writes canonical decimals; like Java's parseInt, leading zeros are read too.
    if not (key.isascii() and key.isdigit()) or int(key) > _INT32_MAX:
        raise _wrong("partition", "a decimal partition number", key)
    return int(key), _int_list(replicas, "replicas")


def _read_topic_assignment(p: _Payload) -> TopicAssignment:
    topic = _last_segment(p.path)
    if not _is_topic_name(topic):
        raise _Invalid("the path does not end in a topic name")
    p.version(_TOPIC_VERSIONS)
    maps = [_object(p.required("partitions"), "partitions")]
    maps += [_object(p.optional(key, {}), key) for key in ("adding_replicas", "removing_replicas")]
    raw_id = _optional_str(p.optional("topic_id"), "topic_id")
    topic_id = None if raw_id is None else parse_topic_id(raw_id)
    partitions, adding, removing = (dict(p.each(m.items(), _replica_entry)) for m in maps)
    return TopicAssignment(topic, partitions, adding, removing, None if topic_id == _ZERO_UUID else topic_id)


def decode_topic_assignment(data: bytes | None, path: str) -> TopicAssignment | None:
    """Read ``/brokers/topics/T``: v1 has only ``partitions``, v2 adds reassignment maps, v3 the topic id."""
    return _decode(data, path, "topic assignment", _read_topic_assignment)


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
        payload: dict[str, object] = {
            "version": 1,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "controller_epoch": self.controller_epoch,
            "isr": list(self.isr),
        }
        if self.leader_recovery_state != LeaderRecoveryState.RECOVERED:
            payload["leader_recovery_state"] = int(self.leader_recovery_state)
        return _encode_json(payload)


def _read_leader_isr_state(p: _Payload) -> LeaderIsrState:
    p.version(range(1, 2))
    recovery = _int(p.optional("leader_recovery_state", 0), "leader_recovery_state", 0, 1)
    return LeaderIsrState(
        leader=_int(p.required("leader"), "leader"),
        leader_epoch=_int(p.required("leader_epoch"), "leader_epoch"),
        controller_epoch=_int(p.required("controller_epoch"), "controller_epoch"),
        isr=_int_list(p.required("isr"), "isr"),
        leader_recovery_state=LeaderRecoveryState(recovery),
    )


def decode_leader_isr_state(data: bytes | None, path: str) -> LeaderIsrState | None:
    return _decode(data, path, "partition state", _read_leader_isr_state)


# ----------------------------------------------------------------------------------------------------
# /admin/reassign_partitions, /admin/preferred_replica_election, /isr_change_notification/isr_change_N
# All three are {"version":1,"partitions":[...]} with one object per partition.


def _topic_partition(obj: Mapping[str, object]) -> TopicPartition:
    topic = _str(_field(obj, "topic"), "topic")
    if not _is_topic_name(topic):
        raise _wrong("topic", "a topic name", topic)
    return TopicPartition(topic, _partition(_field(obj, "partition")))


def _reassignment_entry(entry: object) -> tuple[TopicPartition, tuple[int, ...]]:
    obj = _object(entry, "entry")
    return _topic_partition(obj), _int_list(_field(obj, "replicas"), "replicas")


def _partition_entry(entry: object) -> TopicPartition:
    return _topic_partition(_object(entry, "entry"))


def _partition_entries(p: _Payload) -> list[object]:
    p.version(range(1, 2))
    return _list(p.required("partitions"), "partitions")


def _encode_partition_list(entries: Iterable[dict[str, object]]) -> bytes:
    return _encode_json({"version": 1, "partitions": list(entries)})


def _read_reassignment(p: _Payload) -> dict[TopicPartition, tuple[int, ...]]:
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
    return _decode(data, path, "reassignment", _read_reassignment)


def _encode_partition_set(partitions: Iterable[TopicPartition]) -> bytes:
    return _encode_partition_list({"topic": t, "partition": p} for t, p in sorted(set(partitions)))


def _decode_partition_set(data: bytes | None, path: str, what: str) -> set[TopicPartition] | None:
    return _decode(data, path, what, lambda p: set(p.each(_partition_entries(p), _partition_entry)))


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    return _encode_partition_set(partitions)


def decode_preferred_replica_election(data: bytes | None, path: str) -> set[TopicPartition] | None:
    return _decode_partition_set(data, path, "preferred replica election")


def encode_isr_change_notification(partitions: Iterable[TopicPartition]) -> bytes:
    return _encode_partition_set(partitions)


def decode_isr_change_notification(data: bytes | None, path: str) -> set[TopicPartition] | None:
    return _decode_partition_set(data, path, "ISR change notification")
