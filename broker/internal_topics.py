"""The coordinators' internal topics, created through ZooKeeper on first use: ``__consumer_offsets``
and ``__transaction_state``, compacted, their replication factor capped at the live brokers (and the
transaction log's ``min.insync.replicas`` at that factor), with a warning, so a small cluster still
gets them."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from broker.group.config import OFFSETS_TOPIC, GroupConfig
from broker.txn.config import TRANSACTION_STATE_TOPIC, TransactionConfig
from placement.errors import AdminError
from zkstore import cluster_reads, topic_writes
from zkstore.aio import AsyncZooKeeper

__all__ = ["InternalTopic", "create_internal_topic", "offsets_topic", "transaction_state_topic"]

log = logging.getLogger("broker")


@dataclass(frozen=True)
class InternalTopic:
    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str]
    min_insync_replicas: int | None = None
    """Written to the topic's configs, capped at the replication factor it gets."""


def offsets_topic(config: GroupConfig, partitions: int) -> InternalTopic:
    return InternalTopic(
        OFFSETS_TOPIC,
        partitions,
        config.offsets_topic_replication_factor,
        {
            "cleanup.policy": "compact",
            "segment.bytes": str(config.offsets_topic_segment_bytes),
            "compression.type": "producer",
        },
    )


def transaction_state_topic(config: TransactionConfig) -> InternalTopic:
    return InternalTopic(
        TRANSACTION_STATE_TOPIC,
        config.transaction_state_log_num_partitions,
        config.transaction_state_log_replication_factor,
        {
            "cleanup.policy": "compact",
            "segment.bytes": str(config.transaction_state_log_segment_bytes),
            "compression.type": "uncompressed",
            "unclean.leader.election.enable": "false",
        },
        min_insync_replicas=config.transaction_state_log_min_isr,
    )


async def create_internal_topic(zk: AsyncZooKeeper, topic: InternalTopic) -> int | None:
    """Create ``topic`` over the live brokers and return its replication factor; None, logged, not
    raised, if it exists already (another broker was first) or no broker is alive."""
    live = await cluster_reads.live_broker_ids(zk)
    factor = min(topic.replication_factor, len(live))
    if factor < topic.replication_factor:
        log.warning(
            "creating %s with replication factor %d: %d is configured but only %d brokers are alive",
            topic.name, factor, topic.replication_factor, len(live),
        )  # fmt: skip
    if factor < 1:
        return None
    configs = dict(topic.configs)
    if topic.min_insync_replicas is not None:
        min_isr = min(topic.min_insync_replicas, factor)
        if min_isr < topic.min_insync_replicas:
            log.warning(
                "creating %s with min.insync.replicas %d: %d is above its replication factor",
                topic.name, min_isr, topic.min_insync_replicas,
            )  # fmt: skip
        configs["min.insync.replicas"] = str(min_isr)
    try:
        await topic_writes.create_internal_topic(zk, topic.name, topic.partitions, factor, configs)
    except AdminError as exc:
        log.info("%s not created: %s", topic.name, exc)
        return None
    return factor
