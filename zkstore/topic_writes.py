"""Topic writes in Kafka's layout: create a topic, mark one for deletion, add partitions to one.

What ``kafka-topics.sh --zookeeper`` and ``AdminZkClient`` write; the controller does the rest. Where
replicas go is ``placement/``'s decision: these read the live brokers and the current assignment, ask
it, and write its answer. A request Kafka's tools would refuse raises :class:`AdminError` with the
message to show, and writes nothing.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from placement.assignment import added_partitions, check_partition_increase, new_topic_assignment
from placement.errors import AdminError
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.cluster_reads import live_broker_ids, read_data, topic_names
from zkstore.entity_configs import write_topic_configs
from zkstore.znodes import ReplicaMap

__all__ = [
    "MAX_TOPIC_NAME_LENGTH",
    "AlreadyMarkedForDeletion",
    "add_partitions",
    "create_internal_topic",
    "create_new_topic",
    "create_topic",
    "delete_topic",
    "validate_topic_name",
]

MAX_TOPIC_NAME_LENGTH = 249
"""Kafka's limit: 255 minus room for the partition suffix and a ``-delete`` marker in log directory names."""

_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


class AlreadyMarkedForDeletion(AdminError):
    """A topic to delete is marked already: the tools say so, the Admin API answers success."""


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
    existing = await topic_names(zk)
    if topic in existing:
        raise AdminError(f"Topic '{topic}' already exists.", kind="TOPIC_ALREADY_EXISTS")
    colliding = next((t for t in existing if _collides(topic, t)), None)
    if colliding is not None:
        raise AdminError(
            f"Topic '{topic}' collides with existing topic: {colliding}", kind="INVALID_TOPIC_EXCEPTION"
        )
    live = await live_broker_ids(zk)
    chosen = new_topic_assignment(live, partitions, replication_factor, assignment, rng=rng)
    created = znodes.TopicAssignment(topic, dict(chosen), topic_id=znodes.new_topic_id())
    try:
        await zk.create(znodes.topic_path(topic), created.encode(), makepath=True)
    except NodeExistsError:
        raise AdminError(f"Topic '{topic}' already exists.", kind="TOPIC_ALREADY_EXISTS") from None
    return created


async def create_internal_topic(
    zk: AsyncZooKeeper, topic: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
) -> znodes.TopicAssignment:
    """What a broker does for ``__consumer_offsets`` on first use: its configs in ``/config/topics/T``
    (Kafka's JSON), then the assignment over the live brokers. AdminError if it exists already or too
    few brokers are alive for the replication factor."""
    await write_topic_configs(zk, topic, configs)
    return await create_new_topic(zk, topic, partitions, replication_factor)


async def delete_topic(zk: AsyncZooKeeper, topic: str) -> None:
    """Mark the topic for deletion (``/admin/delete_topics/T``); the controller deletes it if enabled."""
    if await zk.exists(znodes.topic_path(topic)) is None:
        raise AdminError(f"Topic '{topic}' does not exist", kind="UNKNOWN_TOPIC_OR_PARTITION")
    try:
        await zk.create(znodes.delete_topic_path(topic), makepath=True)
    except NodeExistsError:
        raise AlreadyMarkedForDeletion(f"Topic {topic} is already marked for deletion.") from None


async def _read_assignment(zk: AsyncZooKeeper, topic: str) -> tuple[znodes.TopicAssignment, int]:
    path = znodes.topic_path(topic)
    found = await read_data(zk, path)
    if found is None:
        raise AdminError(f"Topic '{topic}' does not exist", kind="UNKNOWN_TOPIC_OR_PARTITION")
    assignment = znodes.decode_topic_assignment(found[0], path)
    if assignment is None:
        raise AdminError(f"{path} holds no assignment that can be read; refusing to change it")
    return assignment, found[1]


async def add_partitions(
    zk: AsyncZooKeeper, topic: str, partitions: int, *, assignment: ReplicaMap | None = None
) -> ReplicaMap:
    """``kafka-topics --alter --partitions``: assign the new partitions, keep the rest; returns the new ones.

    ``placement.assignment.added_partitions`` chooses the new replicas; the write is
    conditional on the version read, so a concurrent change (a reassignment rewriting the znode) fails
    the command instead of being overwritten.
    """
    current, version = await _read_assignment(zk, topic)
    existing = current.partitions
    check_partition_increase(topic, len(existing), partitions)
    if await zk.exists(znodes.delete_topic_path(topic)) is not None:
        raise AdminError(f"Topic {topic} is marked for deletion", kind="INVALID_TOPIC_EXCEPTION")
    live = await live_broker_ids(zk)
    added = added_partitions(topic, existing, partitions, live, assignment)
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
