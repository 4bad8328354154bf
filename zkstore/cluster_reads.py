"""Reads of the cluster as ZooKeeper has it, in Kafka's layout: brokers, the controller, topics.

Plain async functions over an :class:`AsyncZooKeeper` session that return dataclasses, so the CLI
(``cluster.topics_cli``, ``cluster.brokers_cli``), the live view, chaos runs and tests share one
implementation; partitions and topics are read in batches (``zkstore.batch_read``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kazoo.exceptions import NoNodeError

from placement.errors import AdminError
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.batch_read import get_data_many
from zkstore.znodes import TopicPartition

__all__ = [
    "BrokerInfo",
    "ControllerInfo",
    "PartitionDescription",
    "TopicSummary",
    "TopicsDescription",
    "broker_list",
    "children",
    "controller_info",
    "describe",
    "describe_topics",
    "list_topics",
    "live_broker_ids",
    "partition_count",
    "read_data",
    "topic_assignments",
    "topic_names",
]


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


async def children(zk: AsyncZooKeeper, path: str) -> list[str]:
    """Children of ``path``; a missing parent means none yet (a cluster no broker has started in)."""
    try:
        return await zk.get_children(path)
    except NoNodeError:
        return []


async def read_data(zk: AsyncZooKeeper, path: str) -> tuple[bytes, int] | None:
    """A znode's data and version, or None if it does not exist."""
    try:
        data, stat = await zk.get(path)
    except NoNodeError:
        return None
    return data, stat.version


async def live_broker_ids(zk: AsyncZooKeeper) -> list[int]:
    return sorted(int(child) for child in await children(zk, znodes.BROKER_IDS) if child.isdigit())


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


async def controller_info(zk: AsyncZooKeeper) -> ControllerInfo:
    controller_id = rpc_endpoint = epoch = epoch_version = None
    found = await read_data(zk, znodes.CONTROLLER)
    if found is not None:
        registration = znodes.decode_controller_registration(found[0], znodes.CONTROLLER)
        if registration is not None:
            controller_id = registration.broker_id
            if registration.host is not None:
                rpc_endpoint = f"{registration.host}:{registration.port}"
    found = await read_data(zk, znodes.CONTROLLER_EPOCH)
    if found is not None:
        epoch, epoch_version = znodes.decode_controller_epoch(found[0], znodes.CONTROLLER_EPOCH), found[1]
    return ControllerInfo(controller_id, epoch, epoch_version, rpc_endpoint)


async def topic_assignments(
    zk: AsyncZooKeeper, topics: Sequence[str]
) -> dict[str, znodes.TopicAssignment | None]:
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


async def topic_names(zk: AsyncZooKeeper) -> list[str]:
    return sorted(await children(zk, znodes.BROKER_TOPICS))


async def _summaries(
    zk: AsyncZooKeeper, topics: Sequence[str] | None
) -> tuple[list[TopicSummary], dict[str, znodes.TopicAssignment | None]]:
    names = await topic_names(zk)
    if topics is not None:
        missing = sorted(set(topics) - set(names))
        if missing:
            raise AdminError(f"Topic '{missing[0]}' does not exist", kind="UNKNOWN_TOPIC_OR_PARTITION")
        names = sorted(set(topics))
    assignments = await topic_assignments(zk, names)
    deleting = set(await children(zk, znodes.DELETE_TOPICS))
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


async def partition_count(zk: AsyncZooKeeper, topic: str) -> int | None:
    """How many partitions ``topic`` has, or None if it does not exist (or cannot be read)."""
    found = await read_data(zk, znodes.topic_path(topic))
    if found is None:
        return None
    assignment = znodes.decode_topic_assignment(found[0], znodes.topic_path(topic))
    return None if assignment is None else len(assignment.partitions)
