"""Cluster administration through ZooKeeper, in Kafka's layout (what ``kafka-topics.sh --zookeeper`` does).

Every operation is a plain async function over an :class:`AsyncZooKeeper` session that returns data
(dataclasses, dicts), so the CLI (``cluster.admin_cli``), the live view and tests share one implementation.
Requests are written where Kafka's ZooKeeper-era tools write them; the controller does the rest. A request
Kafka's tools would refuse raises :class:`AdminError` with the message to show, and writes nothing.
"""

from __future__ import annotations

import enum
import json
import random
import re
from collections.abc import AsyncIterator, Collection, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.batch_read import get_data_many
from zkstore.security import ZkSecurity
from zkstore.znodes import ReplicaMap, TopicPartition

__all__ = [
    "MAX_TOPIC_NAME_LENGTH",
    "AdminError",
    "BrokerInfo",
    "ControllerInfo",
    "PartitionDescription",
    "ReassignmentStatus",
    "TopicSummary",
    "TopicsDescription",
    "add_partitions",
    "assign_replicas",
    "broker_list",
    "change_topic_configs",
    "connect",
    "controller_info",
    "create_internal_topic",
    "create_new_topic",
    "create_topic",
    "delete_topic",
    "describe",
    "describe_topics",
    "generate_reassignment",
    "list_topics",
    "live_broker_ids",
    "parse_reassignment_plan",
    "parse_replica_assignment",
    "partition_count",
    "plan_json",
    "read_topic_configs",
    "request_preferred_election",
    "request_reassignment",
    "validate_topic_name",
    "verify_reassignment",
    "write_topic_configs",
]

MAX_TOPIC_NAME_LENGTH = 249
"""Kafka's limit: 255 minus room for the partition suffix and a ``-delete`` marker in log directory names."""

_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
Plan = dict[TopicPartition, tuple[int, ...]]


class AdminError(Exception):
    """A request refused as Kafka's admin tools refuse it; the message is meant for the user.

    ``kind`` names the Kafka error the Admin API answers it with (``TOPIC_ALREADY_EXISTS``, ...), when
    one fits; the brokers send INVALID_REQUEST otherwise."""

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind


class AlreadyMarkedForDeletion(AdminError):
    """A topic to delete is marked already: the tools say so, the Admin API answers success."""


@asynccontextmanager
async def connect(
    hosts: str, *, timeout_s: float = 10.0, security: ZkSecurity | None = None
) -> AsyncIterator[AsyncZooKeeper]:
    """One short ZooKeeper session for one command; an unreachable server becomes an AdminError.

    ``security`` authenticates the session (and ACLs what it creates) on a cluster that runs with
    ``zookeeper.set.acl``, whose znodes only their creator may change."""
    zk = AsyncZooKeeper(hosts, connect_timeout_s=timeout_s, security=security)
    try:
        await zk.start()
    except KazooTimeoutError:
        raise AdminError(
            f"cannot connect to ZooKeeper at {hosts} (no session within {timeout_s:g} s)"
        ) from None
    try:
        yield zk
    finally:
        await zk.close()


# ----------------------------------------------------------------------------------------------------
# Pure rules: topic names, replica assignment, plans


def validate_topic_name(topic: str) -> None:
    """Kafka's ``Topic.validate``: the name becomes a directory and metric name on every broker."""
    if not topic:
        raise AdminError("Topic name is illegal, it can't be empty", kind="INVALID_TOPIC_EXCEPTION")
    if topic in (".", ".."):
        raise AdminError('Topic name cannot be "." or ".."', kind="INVALID_TOPIC_EXCEPTION")
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise AdminError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, "
            f"topic name: {topic}",
            kind="INVALID_TOPIC_EXCEPTION",
        )
    if not _LEGAL_TOPIC.fullmatch(topic):
        raise AdminError(
            f'Topic name "{topic}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'",
            kind="INVALID_TOPIC_EXCEPTION",
        )


def _collides(a: str, b: str) -> bool:
    """Metric names replace '.' with '_', so Kafka refuses topics that differ only there."""
    return a != b and a.replace(".", "_") == b.replace(".", "_")


def assign_replicas(
    brokers: Sequence[int],
    partitions: int,
    replication_factor: int,
    *,
    start_index: int | None = None,
    start_partition: int = 0,
    rng: random.Random | None = None,
) -> ReplicaMap:
    """Kafka's rack-unaware assignment (``AdminUtils.assignReplicasToBrokersRackUnaware``).

    First replicas go round-robin from a start broker; the followers are shifted by an amount that grows
    every time the partitions wrap around the brokers, so leaders and followers both spread evenly.
    ``start_index`` fixes both the start broker and the first shift (Kafka's ``fixedStartIndex``);
    otherwise both are random, as in Kafka.
    """
    if partitions <= 0:
        raise AdminError("Number of partitions must be larger than 0.", kind="INVALID_PARTITIONS")
    if replication_factor <= 0:
        raise AdminError("Replication factor must be larger than 0.", kind="INVALID_REPLICATION_FACTOR")
    if replication_factor > len(brokers):
        raise AdminError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.",
            kind="INVALID_REPLICATION_FACTOR",
        )
    ordered = sorted(brokers)
    count = len(ordered)
    rng = rng or random.Random()
    first_index = start_index if start_index is not None else rng.randrange(count)
    shift = start_index if start_index is not None else rng.randrange(count)
    assignment: ReplicaMap = {}
    for partition in range(max(0, start_partition), max(0, start_partition) + partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + first_index) % count
        followers = (
            ordered[(first + 1 + (shift + j) % (count - 1)) % count] for j in range(replication_factor - 1)
        )
        assignment[partition] = (ordered[first], *followers)
    return assignment


def parse_replica_assignment(text: str) -> ReplicaMap:
    """kafka-topics' ``--replica-assignment``: partitions separated by ',', their replicas by ':'."""
    assignment: ReplicaMap = {}
    for partition, entry in enumerate(text.split(",")):
        try:
            replicas = tuple(int(r) for r in entry.split(":"))
        except ValueError:
            raise AdminError(
                f"bad replica assignment {text!r}: {entry!r} is not a list of broker ids"
            ) from None
        if any(r < 0 for r in replicas):
            raise AdminError(f"bad replica assignment {text!r}: broker ids cannot be negative")
        assignment[partition] = replicas
    return assignment


def _check_assignment(assignment: Mapping[int, Sequence[int]], live: Collection[int]) -> None:
    """What AdminZkClient checks before writing an explicit assignment, plus that every replica is live."""
    if not assignment:
        raise AdminError("the replica assignment is empty", kind="INVALID_REPLICA_ASSIGNMENT")
    if sorted(assignment) != list(range(len(assignment))):
        raise AdminError(
            "partitions should be a consecutive 0-based integer sequence", kind="INVALID_REPLICA_ASSIGNMENT"
        )
    factors = {len(replicas) for replicas in assignment.values()}
    if 0 in factors:
        raise AdminError("Replication factor must be larger than 0.", kind="INVALID_REPLICATION_FACTOR")
    if len(factors) > 1:
        raise AdminError(
            "All partitions should have the same number of replicas", kind="INVALID_REPLICA_ASSIGNMENT"
        )
    for partition, replicas in sorted(assignment.items()):
        if len(set(replicas)) != len(replicas):
            raise AdminError(
                f"Duplicate replica assignment found: {partition} -> {list(replicas)}",
                kind="INVALID_REPLICA_ASSIGNMENT",
            )
    unknown = sorted({r for replicas in assignment.values() for r in replicas} - set(live))
    if unknown:
        raise AdminError(
            f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}",
            kind="INVALID_REPLICA_ASSIGNMENT",
        )


def _int_field(entry: Mapping[str, object], key: str, where: str) -> int:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AdminError(f"{where}: {key!r} must be a non-negative integer, got {value!r}")
    return value


def _plan_entry(entry: object, where: str) -> tuple[TopicPartition, tuple[int, ...]]:
    """One ``{"topic", "partition", "replicas"[, "log_dirs"]}`` entry of a plan, checked strictly."""
    if not isinstance(entry, dict):
        raise AdminError(f"{where} must be an object with 'topic', 'partition' and 'replicas'")
    topic = entry.get("topic")
    if not isinstance(topic, str):
        raise AdminError(f"{where}: 'topic' must be a string")
    tp = TopicPartition(topic, _int_field(entry, "partition", where))
    replicas = entry.get("replicas")
    if not isinstance(replicas, list):
        raise AdminError(f"{where}: 'replicas' must be a list of broker ids")
    target = tuple(_int_field({"replicas": r}, "replicas", where) for r in replicas)
    log_dirs = entry.get("log_dirs")
    if log_dirs is not None and (not isinstance(log_dirs, list) or any(d != "any" for d in log_dirs)):
        raise AdminError(f"{where}: only 'any' log directories are supported")
    return tp, target


def parse_reassignment_plan(text: str) -> Plan:
    """A reassignment plan in Kafka's JSON (``{"version":1,"partitions":[...]}``), checked strictly.

    zkstore's decoder is lenient (it skips bad entries, as a daemon must); a plan typed by a person is
    refused as a whole instead, with the reason, as kafka-reassign-partitions does.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise AdminError(f"the plan is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise AdminError("the plan must be a JSON object with 'version' and 'partitions'")
    if data.get("version", 1) != 1:
        raise AdminError(f"Not supported version field value {data.get('version')!r}")
    entries = data.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise AdminError("Partition reassignment list cannot be empty")
    plan: Plan = {}
    duplicates: list[str] = []
    for number, entry in enumerate(entries):
        tp, target = _plan_entry(entry, f"partitions[{number}]")
        if tp in plan:
            duplicates.append(str(tp))
        plan[tp] = target
    if duplicates:
        raise AdminError(
            f"Partition reassignment contains duplicate topic partitions: {', '.join(duplicates)}"
        )
    return plan


def plan_json(plan: Mapping[TopicPartition, Sequence[int]]) -> dict[str, object]:
    """A plan as the JSON object Kafka's tools print and read, through zkstore's codec."""
    decoded: dict[str, object] = json.loads(znodes.encode_reassignment(plan))
    return decoded


# ----------------------------------------------------------------------------------------------------
# Reads


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker as registered in ``/brokers/ids/N``; ``epoch`` is that znode's czxid (KIP-380)."""

    broker_id: int
    epoch: int
    endpoints: tuple[str, ...]
    rack: str | None


@dataclass(frozen=True, slots=True)
class ControllerInfo:
    """The active controller (``/controller``) and ``/controller_epoch`` with its znode version.

    The epoch's version is what the controller's writes are fenced with (KAFKA-6082).
    """

    controller_id: int | None
    epoch: int | None
    epoch_zk_version: int | None
    rpc_endpoint: str | None


@dataclass(frozen=True, slots=True)
class TopicSummary:
    topic: str
    topic_id: str | None
    partition_count: int
    replication_factor: int
    marked_for_deletion: bool


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    """One partition as ZooKeeper has it.

    ``leader`` is None while the controller has not yet written the state znode, and -1 when the partition
    has no leader (offline). ``partition_epoch`` is the state znode's version (Kafka's zkVersion).
    """

    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int | None
    leader_epoch: int | None
    isr: tuple[int, ...]
    partition_epoch: int | None
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicsDescription:
    topics: list[TopicSummary]
    partitions: list[PartitionDescription]


async def _children(zk: AsyncZooKeeper, path: str) -> list[str]:
    """Children of ``path``; a missing parent means none yet (a cluster no broker has started in)."""
    try:
        return await zk.get_children(path)
    except NoNodeError:
        return []


async def live_broker_ids(zk: AsyncZooKeeper) -> list[int]:
    return sorted(int(child) for child in await _children(zk, znodes.BROKER_IDS) if child.isdigit())


async def broker_list(zk: AsyncZooKeeper) -> list[BrokerInfo]:
    """Every registered broker with its epoch; one read carries both the payload and the czxid."""
    ids = await live_broker_ids(zk)
    paths = [znodes.broker_path(broker_id) for broker_id in ids]
    brokers = []
    for broker_id, path, result in zip(ids, paths, await get_data_many(zk, paths), strict=True):
        if isinstance(result, NoNodeError):
            continue  # deregistered since the listing
        if isinstance(result, Exception):
            raise result
        data, stat = result
        registration = znodes.decode_broker_registration(data, path)
        endpoints = tuple(ep.connection_string for ep in registration.endpoints) if registration else ()
        brokers.append(
            BrokerInfo(broker_id, stat.czxid, endpoints, registration.rack if registration else None)
        )
    return brokers


async def _data(zk: AsyncZooKeeper, path: str) -> tuple[bytes, int] | None:
    try:
        data, stat = await zk.get(path)
    except NoNodeError:
        return None
    return data, stat.version


async def controller_info(zk: AsyncZooKeeper) -> ControllerInfo:
    controller_id = rpc_endpoint = epoch = epoch_version = None
    found = await _data(zk, znodes.CONTROLLER)
    if found is not None:
        registration = znodes.decode_controller_registration(found[0], znodes.CONTROLLER)
        if registration is not None:
            controller_id = registration.broker_id
            if registration.host is not None:
                rpc_endpoint = f"{registration.host}:{registration.port}"
    found = await _data(zk, znodes.CONTROLLER_EPOCH)
    if found is not None:
        epoch, epoch_version = znodes.decode_controller_epoch(found[0], znodes.CONTROLLER_EPOCH), found[1]
    return ControllerInfo(controller_id, epoch, epoch_version, rpc_endpoint)


async def _assignments(zk: AsyncZooKeeper, topics: Sequence[str]) -> dict[str, znodes.TopicAssignment | None]:
    """The assignment of each topic that exists; None for one whose znode cannot be decoded."""
    paths = [znodes.topic_path(topic) for topic in topics]
    found: dict[str, znodes.TopicAssignment | None] = {}
    for topic, path, result in zip(topics, paths, await get_data_many(zk, paths), strict=True):
        if isinstance(result, NoNodeError):
            continue
        if isinstance(result, Exception):
            raise result
        found[topic] = znodes.decode_topic_assignment(result[0], path)
    return found


async def _read_assignment(zk: AsyncZooKeeper, topic: str) -> tuple[znodes.TopicAssignment, int]:
    path = znodes.topic_path(topic)
    found = await _data(zk, path)
    if found is None:
        raise AdminError(f"Topic '{topic}' does not exist", kind="UNKNOWN_TOPIC_OR_PARTITION")
    assignment = znodes.decode_topic_assignment(found[0], path)
    if assignment is None:
        raise AdminError(f"{path} holds no assignment that can be read; refusing to change it")
    return assignment, found[1]


async def _topic_names(zk: AsyncZooKeeper) -> list[str]:
    return sorted(await _children(zk, znodes.BROKER_TOPICS))


async def _summaries(
    zk: AsyncZooKeeper, topics: Sequence[str] | None
) -> tuple[list[TopicSummary], dict[str, znodes.TopicAssignment | None]]:
    names = await _topic_names(zk)
    if topics is not None:
        missing = sorted(set(topics) - set(names))
        if missing:
            raise AdminError(f"Topic '{missing[0]}' does not exist", kind="UNKNOWN_TOPIC_OR_PARTITION")
        names = sorted(set(topics))
    assignments = await _assignments(zk, names)
    deleting = set(await _children(zk, znodes.DELETE_TOPICS))
    summaries = []
    for topic, assignment in sorted(assignments.items()):
        partitions = assignment.partitions if assignment else {}
        first = partitions[min(partitions)] if partitions else ()
        topic_id = znodes.format_topic_id(assignment.topic_id) if assignment and assignment.topic_id else None
        summaries.append(TopicSummary(topic, topic_id, len(partitions), len(first), topic in deleting))
    return summaries, assignments


async def list_topics(zk: AsyncZooKeeper) -> list[TopicSummary]:
    return (await _summaries(zk, None))[0]


async def describe(zk: AsyncZooKeeper, topics: Sequence[str] | None = None) -> TopicsDescription:
    """Topics (all, or those named) and each partition's replicas and state, read in batches."""
    summaries, assignments = await _summaries(zk, topics)
    replicas = {
        TopicPartition(topic, p): (r, a.adding_replicas.get(p, ()), a.removing_replicas.get(p, ()))
        for topic, a in assignments.items()
        if a is not None
        for p, r in a.partitions.items()
    }
    tps = sorted(replicas)
    paths = [znodes.partition_state_path(*tp) for tp in tps]
    partitions = []
    for tp, path, result in zip(tps, paths, await get_data_many(zk, paths), strict=True):
        state, version = None, None
        if isinstance(result, Exception) and not isinstance(result, NoNodeError):
            raise result
        if not isinstance(result, Exception):
            state, version = znodes.decode_leader_isr_state(result[0], path), result[1].version
        full, adding, removing = replicas[tp]
        partitions.append(
            PartitionDescription(
                tp.topic,
                tp.partition,
                full,
                state.leader if state else None,
                state.leader_epoch if state else None,
                state.isr if state else (),
                version if state else None,
                adding,
                removing,
            )
        )
    return TopicsDescription(summaries, partitions)


async def describe_topics(
    zk: AsyncZooKeeper, topics: Sequence[str] | None = None
) -> list[PartitionDescription]:
    """Every partition of the topics (all by default), sorted by topic and partition."""
    return (await describe(zk, topics)).partitions


# ----------------------------------------------------------------------------------------------------
# Topics


async def create_topic(zk: AsyncZooKeeper, topic: str, replicas: dict[int, tuple[int, ...]]) -> None:
    """Write the topic's assignment; the controller notices it and does the rest."""
    await zk.create(znodes.topic_path(topic), znodes.TopicAssignment(topic, replicas).encode(), makepath=True)


async def create_new_topic(
    zk: AsyncZooKeeper,
    topic: str,
    partitions: int | None = None,
    replication_factor: int | None = None,
    assignment: ReplicaMap | None = None,
    *,
    rng: random.Random | None = None,
) -> znodes.TopicAssignment:
    """``kafka-topics --create``: validate, assign over the live brokers unless told, write with a topic id.

    With an explicit ``assignment``, ``partitions`` and ``replication_factor`` may be omitted; when given,
    they must agree with it.
    """
    validate_topic_name(topic)
    existing = await _topic_names(zk)
    if topic in existing:
        raise AdminError(f"Topic '{topic}' already exists.", kind="TOPIC_ALREADY_EXISTS")
    colliding = next((t for t in existing if _collides(topic, t)), None)
    if colliding is not None:
        raise AdminError(
            f"Topic '{topic}' collides with existing topic: {colliding}", kind="INVALID_TOPIC_EXCEPTION"
        )
    live = await live_broker_ids(zk)
    if assignment is None:
        if partitions is None or replication_factor is None:
            raise AdminError(
                "the partition count and the replication factor are required without an assignment",
                kind="INVALID_REQUEST",
            )
        assignment = assign_replicas(live, partitions, replication_factor, rng=rng)
    else:
        _check_assignment(assignment, live)
        if partitions is not None and partitions != len(assignment):
            raise AdminError(
                f"{partitions} partitions requested, but the assignment has {len(assignment)}",
                kind="INVALID_REPLICA_ASSIGNMENT",
            )
        factor = len(next(iter(assignment.values())))
        if replication_factor is not None and replication_factor != factor:
            raise AdminError(
                f"replication factor {replication_factor} requested, but the assignment has {factor}",
                kind="INVALID_REPLICA_ASSIGNMENT",
            )
    created = znodes.TopicAssignment(topic, dict(assignment), topic_id=znodes.new_topic_id())
    try:
        await zk.create(znodes.topic_path(topic), created.encode(), makepath=True)
    except NodeExistsError:
        raise AdminError(f"Topic '{topic}' already exists.", kind="TOPIC_ALREADY_EXISTS") from None
    return created


async def partition_count(zk: AsyncZooKeeper, topic: str) -> int | None:
    """How many partitions ``topic`` has, or None if it does not exist (or cannot be read)."""
    found = await _data(zk, znodes.topic_path(topic))
    if found is None:
        return None
    assignment = znodes.decode_topic_assignment(found[0], znodes.topic_path(topic))
    return None if assignment is None else len(assignment.partitions)


async def create_internal_topic(
    zk: AsyncZooKeeper, topic: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
) -> znodes.TopicAssignment:
    """What a broker does for ``__consumer_offsets`` on first use: its configs in ``/config/topics/T``
    (Kafka's JSON), then the assignment over the live brokers. AdminError if it exists already or too
    few brokers are alive for the replication factor."""
    await write_topic_configs(zk, topic, configs)
    return await create_new_topic(zk, topic, partitions, replication_factor)


async def write_topic_configs(zk: AsyncZooKeeper, topic: str, configs: Mapping[str, str]) -> None:
    """``/config/topics/T`` as Kafka writes it before a new topic: always, ``{}`` without overrides,
    and without a ``/config/changes`` notification (nothing reads the topic's config before it exists)."""
    data = json.dumps({"version": 1, "config": dict(configs)}).encode()
    try:
        await zk.create(f"/config/topics/{topic}", data, makepath=True)
    except NodeExistsError:  # left by a topic of that name deleted before: the new one's replaces it
        await zk.set(f"/config/topics/{topic}", data)


CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"


def topic_config_path(topic: str) -> str:
    return f"/config/topics/{topic}"


def decode_entity_config(data: bytes | None, path: str) -> dict[str, str]:
    """``{"version":1,"config":{...}}``; AdminError naming the path if it is not that."""
    raw = data or b"{}"
    try:
        config = json.loads(raw).get("config", {})
    except (ValueError, AttributeError):
        raise AdminError(f"{path} does not hold Kafka's config JSON: {raw[:80]!r}") from None
    if not isinstance(config, dict) or not all(isinstance(v, str) for v in config.values()):
        raise AdminError(f"{path} does not hold Kafka's config JSON: {raw[:80]!r}")
    return dict(config)


async def read_topic_configs(zk: AsyncZooKeeper, topic: str) -> dict[str, str]:
    """A topic's overrides in ``/config/topics/T`` ({} when none are stored)."""
    found = await _data(zk, topic_config_path(topic))
    return {} if found is None else decode_entity_config(found[0], topic_config_path(topic))


async def change_topic_configs(zk: AsyncZooKeeper, topic: str, configs: Mapping[str, str]) -> None:
    """Replace a topic's overrides and tell the brokers, as Kafka's AdminZkClient does: the entity
    znode, then a sequential ``/config/changes/config_change_`` naming it (``topics/T``)."""
    data = json.dumps({"version": 1, "config": dict(configs)}).encode()
    try:
        await zk.set(topic_config_path(topic), data)
    except NoNodeError:
        await zk.create(topic_config_path(topic), data, makepath=True)
    await notify_config_change(zk, f"topics/{topic}")


async def notify_config_change(zk: AsyncZooKeeper, entity_path: str) -> None:
    """Tell every broker an entity's config changed: a sequential ``/config/changes/config_change_``
    naming it (``topics/T``, ``users/<sanitized user>``); brokers then re-read the entity's znode."""
    notification = json.dumps({"version": 2, "entity_path": entity_path}).encode()
    await zk.create(f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}", notification, sequence=True, makepath=True)


async def delete_topic(zk: AsyncZooKeeper, topic: str) -> None:
    """Mark the topic for deletion (``/admin/delete_topics/T``); the controller deletes it if enabled."""
    if await zk.exists(znodes.topic_path(topic)) is None:
        raise AdminError(f"Topic '{topic}' does not exist", kind="UNKNOWN_TOPIC_OR_PARTITION")
    try:
        await zk.create(znodes.delete_topic_path(topic), makepath=True)
    except NodeExistsError:
        raise AlreadyMarkedForDeletion(f"Topic {topic} is already marked for deletion.") from None


async def add_partitions(
    zk: AsyncZooKeeper, topic: str, partitions: int, *, assignment: ReplicaMap | None = None
) -> ReplicaMap:
    """``kafka-topics --alter --partitions``: assign the new partitions, keep the rest; returns the new ones.

    As in ``AdminZkClient.addPartitions``, the new partitions start from the broker that leads partition 0
    and take its replication factor; the write is conditional on the version read, so a concurrent change
    (a reassignment rewriting the znode) fails the command instead of being overwritten.
    """
    current, version = await _read_assignment(zk, topic)
    existing = current.partitions
    if partitions <= len(existing):
        raise AdminError(
            f"The number of partitions for a topic can only be increased. Topic {topic} currently has "
            f"{len(existing)} partitions, {partitions} would not be an increase.",
            kind="INVALID_PARTITIONS",
        )
    if await zk.exists(znodes.delete_topic_path(topic)) is not None:
        raise AdminError(f"Topic {topic} is marked for deletion", kind="INVALID_TOPIC_EXCEPTION")
    first = existing.get(0)
    if not first:
        raise AdminError(
            f"the replica assignment of partition 0 of {topic} is missing or empty",
            kind="INVALID_REPLICA_ASSIGNMENT",
        )
    live = await live_broker_ids(zk)
    if assignment is not None:
        added = dict(assignment)
        _check_assignment({**existing, **added}, live)
    else:
        start = max(0, next((i for i, b in enumerate(live) if b >= first[0]), -1))
        added = assign_replicas(
            live, partitions - len(existing), len(first), start_index=start, start_partition=len(existing)
        )
    updated = znodes.TopicAssignment(
        topic, {**existing, **added}, current.adding_replicas, current.removing_replicas, current.topic_id
    )
    try:
        await zk.set(znodes.topic_path(topic), updated.encode(), version)
    except (BadVersionError, NoNodeError):
        raise AdminError(
            f"{topic} changed while partitions were being added; nothing written, retry"
        ) from None
    return added


# ----------------------------------------------------------------------------------------------------
# Elections and reassignments


async def _all_partitions(zk: AsyncZooKeeper, topics: Iterable[str]) -> list[TopicPartition]:
    assignments = await _assignments(zk, sorted(topics))
    return sorted(TopicPartition(t, p) for t, a in assignments.items() if a for p in a.partitions)


async def request_preferred_election(
    zk: AsyncZooKeeper, topic: str | None = None, partition: int | None = None
) -> list[TopicPartition]:
    """Write ``/admin/preferred_replica_election`` for one partition, a topic, or every partition.

    Like Kafka's ZooKeeper-mode tool, refuse while a previous request is still there: the controller
    deletes the znode once it has handled it, and overwriting it would lose that request.
    """
    if partition is not None and topic is None:
        raise AdminError("a partition needs its topic")
    if topic is None:
        partitions = await _all_partitions(zk, await _topic_names(zk))
    else:
        partitions = await _all_partitions(zk, [topic])
        if not partitions:
            raise AdminError(f"Topic '{topic}' does not exist", kind="UNKNOWN_TOPIC_OR_PARTITION")
        if partition is not None:
            if TopicPartition(topic, partition) not in partitions:
                raise AdminError(
                    f"Partition {topic}-{partition} does not exist", kind="UNKNOWN_TOPIC_OR_PARTITION"
                )
            partitions = [TopicPartition(topic, partition)]
    if not partitions:
        raise AdminError("there are no partitions to elect leaders for")
    try:
        await zk.create(
            znodes.PREFERRED_REPLICA_ELECTION,
            znodes.encode_preferred_replica_election(partitions),
            makepath=True,
        )
    except NodeExistsError:
        raise AdminError(
            f"Preferred replica leader election currently in progress ({znodes.PREFERRED_REPLICA_ELECTION} "
            "exists); retry once the controller has removed it"
        ) from None
    return partitions


async def _current_replicas(zk: AsyncZooKeeper, topics: Iterable[str]) -> dict[str, ReplicaMap]:
    return {t: dict(a.partitions) for t, a in (await _assignments(zk, sorted(set(topics)))).items() if a}


async def request_reassignment(zk: AsyncZooKeeper, plan: Mapping[TopicPartition, Sequence[int]]) -> Plan:
    """Validate ``plan``, write ``/admin/reassign_partitions``; returns the current replicas, for rollback."""
    if not plan:
        raise AdminError("Partition reassignment list cannot be empty")
    current = await _current_replicas(zk, (tp.topic for tp in plan))
    missing = [str(tp) for tp in sorted(plan) if tp.partition not in current.get(tp.topic, {})]
    if missing:
        raise AdminError(f"The proposed assignment contains non-existent partitions: {', '.join(missing)}")
    for tp, replicas in sorted(plan.items()):
        if not replicas:
            raise AdminError(
                f"Partition replica list cannot be empty: {tp} (the replication factor must be > 0)"
            )
        repeated = sorted({r for r in replicas if list(replicas).count(r) > 1})
        if repeated:
            raise AdminError(
                f"Partition replica lists may not contain duplicate entries: {tp} contains "
                f"{', '.join(map(str, repeated))}"
            )
    live = set(await live_broker_ids(zk))
    unknown = sorted({r for replicas in plan.values() for r in replicas} - live)
    if unknown:
        raise AdminError(
            f"The proposed assignment contains non-existent brokerIDs: {', '.join(map(str, unknown))}"
        )
    try:
        await zk.create(znodes.REASSIGN_PARTITIONS, znodes.encode_reassignment(plan), makepath=True)
    except NodeExistsError:
        raise AdminError("There is an existing assignment running.") from None
    return {tp: current[tp.topic][tp.partition] for tp in sorted(plan)}


async def generate_reassignment(
    zk: AsyncZooKeeper, topics: Sequence[str], brokers: Sequence[int], *, rng: random.Random | None = None
) -> tuple[Plan, Plan]:
    """``kafka-reassign-partitions --generate``: (current, proposed) spreading the topics over ``brokers``.

    Each topic keeps its partition count and its replication factor (that of partition 0); nothing is written.
    """
    for what, values in (("Topic", topics), ("Broker", brokers)):
        if not values:
            raise AdminError(f"{what} list cannot be empty")
        repeated = sorted({str(v) for v in values if list(values).count(v) > 1})
        if repeated:
            raise AdminError(f"{what} list contains duplicate entries: {', '.join(repeated)}")
    unavailable = sorted(set(brokers) - set(await live_broker_ids(zk)))
    if unavailable:
        raise AdminError(f"Some brokers are not available: {', '.join(map(str, unavailable))}")
    current_by_topic = await _current_replicas(zk, topics)
    missing = sorted(set(topics) - set(current_by_topic))
    if missing:
        raise AdminError(f"Topic '{missing[0]}' does not exist", kind="UNKNOWN_TOPIC_OR_PARTITION")
    current: Plan = {}
    proposed: Plan = {}
    for topic in sorted(set(topics)):
        partitions = current_by_topic[topic]
        factor = len(partitions.get(0) or next(iter(partitions.values()), ()))
        for p, replicas in assign_replicas(brokers, len(partitions), factor, rng=rng).items():
            proposed[TopicPartition(topic, p)] = replicas
        current.update({TopicPartition(topic, p): r for p, r in partitions.items()})
    return dict(sorted(current.items())), proposed


class ReassignmentStatus(enum.StrEnum):
    COMPLETED = "completed"
    IN_PROGRESS = "in progress"
    FAILED = "failed"


async def verify_reassignment(
    zk: AsyncZooKeeper, plan: Mapping[TopicPartition, Sequence[int]]
) -> dict[TopicPartition, tuple[ReassignmentStatus, tuple[int, ...]]]:
    """Per partition of ``plan``: its status and current replicas, as Kafka's ZooKeeper-mode ``--verify``.

    In progress while the controller still lists it in ``/admin/reassign_partitions`` or the topic znode
    still carries adding/removing replicas for it; completed when the replicas equal the target.
    """
    found = await _data(zk, znodes.REASSIGN_PARTITIONS)
    pending = (znodes.decode_reassignment(found[0], znodes.REASSIGN_PARTITIONS) if found else None) or {}
    assignments = await _assignments(zk, sorted({tp.topic for tp in plan}))
    statuses = {}
    for tp, target in sorted(plan.items()):
        assignment = assignments.get(tp.topic)
        replicas = assignment.partitions.get(tp.partition, ()) if assignment else ()
        moving = assignment is not None and (
            tp.partition in assignment.adding_replicas or tp.partition in assignment.removing_replicas
        )
        if tp in pending or moving:
            status = ReassignmentStatus.IN_PROGRESS
        elif replicas == tuple(target):
            status = ReassignmentStatus.COMPLETED
        else:
            status = ReassignmentStatus.FAILED
        statuses[tp] = (status, replicas)
    return statuses
