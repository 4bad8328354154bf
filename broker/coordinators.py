"""A broker's two coordinators, the group and the transaction coordinator: built, given their internal
topics (created on first use) and partitions (loaded when led here), and their APIs' handlers.

Both follow LeaderAndIsr: leading ``__consumer_offsets-N`` makes this broker the coordinator of the
groups in it, leading ``__transaction_state-N`` that of the transactional ids in it. Both partition
counts are fixed at start-up from the topics when they exist, as Kafka fixes them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from broker.config import BrokerConfig
from broker.find_coordinator import KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION, CoordinatorKind, FindCoordinatorApi
from broker.group.apis import GroupApis
from broker.group.config import OFFSETS_TOPIC
from broker.group.coordinator import GroupCoordinator
from broker.group.offsets_log import LocalOffsetsLog
from broker.internal_log import InternalTopicLog
from broker.internal_topics import create_internal_topic, offsets_topic, transaction_state_topic
from broker.metadata_cache import MetadataCache
from broker.produce import ProduceApi
from broker.replica_manager import ReplicaManager
from broker.txn.apis import TransactionApis
from broker.txn.config import TRANSACTION_STATE_TOPIC
from broker.txn.coordinator import TransactionCoordinator
from broker.txn.markers import MarkerSender
from broker.txn.write_markers import WriteTxnMarkersApi
from daemon.eventlog import EventLog
from protocol.topic_partition import TopicPartition
from zkstore import cluster_reads
from zkstore.aio import AsyncZooKeeper

__all__ = ["Coordinators"]


class Coordinators:
    def __init__(
        self,
        config: BrokerConfig,
        replicas: ReplicaManager,
        produce: ProduceApi,
        cache: MetadataCache,
        events: EventLog,
        *,
        zk: Callable[[], AsyncZooKeeper],
        next_producer_id: Callable[[], Awaitable[int]],
    ) -> None:
        self.config = config
        self.produce = produce
        self.cache = cache
        self.events = events
        self.zk = zk
        offsets_log = LocalOffsetsLog(
            InternalTopicLog(OFFSETS_TOPIC, replicas, produce, config.group.offsets_commit_timeout_ms)
        )
        self.group = GroupCoordinator(config.broker_id, config.group, offsets_log, events)
        txn = config.transaction
        inter_broker = config.inter_broker_listener_name
        markers = MarkerSender(
            cache,
            broker_id=config.broker_id,
            listener=inter_broker,
            security=config.dialing(config.security_protocols[inter_broker]),
            timeout_s=txn.log_write_timeout_ms / 1000.0,
        )
        txn_log = InternalTopicLog(TRANSACTION_STATE_TOPIC, replicas, produce, txn.log_write_timeout_ms)
        self.txn = TransactionCoordinator(txn, txn_log, markers, next_producer_id, events)

    # ------------------------------------------------------------------ lifecycle

    async def start(self, loop: asyncio.AbstractEventLoop, zk: AsyncZooKeeper) -> None:
        self.group.bind(loop)
        self.txn.bind(loop)
        existing = await cluster_reads.partition_count(zk, OFFSETS_TOPIC)
        if existing is not None:  # a group never changes partition
            self.group.partition_count = existing
        existing = await cluster_reads.partition_count(zk, TRANSACTION_STATE_TOPIC)
        if existing is not None:  # nor does a transactional id
            self.txn.state.partition_count = existing

    async def stop(self) -> None:
        self.group.shutdown()
        self.txn.shutdown()
        await self.txn.markers.close()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.group.loop

    # ------------------------------------------------------------------ partitions (LeaderAndIsr, any thread)

    def elected(self, tp: TopicPartition, leader_epoch: int) -> None:
        if tp.topic == OFFSETS_TOPIC:
            self.group.on_election(tp.partition, leader_epoch)
        elif tp.topic == TRANSACTION_STATE_TOPIC:
            self.txn.on_election(tp.partition, leader_epoch)

    def resigned(self, tp: TopicPartition, leader_epoch: int | None) -> None:
        if tp.topic == OFFSETS_TOPIC:
            self.group.on_resignation(tp.partition, leader_epoch)
        elif tp.topic == TRANSACTION_STATE_TOPIC:
            self.txn.on_resignation(tp.partition, leader_epoch)

    # ------------------------------------------------------------------ internal topics

    async def create_topic(self, topic: str) -> None:
        """Metadata asked for an internal topic: the coordinators' are created their own way."""
        if topic == OFFSETS_TOPIC:
            await self._create_offsets_topic()
        elif topic == TRANSACTION_STATE_TOPIC:
            await self._create_transaction_state_topic()

    async def _create_offsets_topic(self) -> None:
        topic = offsets_topic(self.config.group, self.group.partition_count)
        factor = await create_internal_topic(self.zk(), topic)
        if factor is not None:
            self.events.emit(
                "offsets_topic_created",
                topic=topic.name,
                partitions=topic.partitions,
                replication_factor=factor,
            )

    async def _create_transaction_state_topic(self) -> None:
        topic = transaction_state_topic(self.config.transaction)
        factor = await create_internal_topic(self.zk(), topic)
        if factor is not None:
            self.events.emit(
                "transaction_state_topic_created",
                topic=topic.name,
                partitions=topic.partitions,
                replication_factor=factor,
            )

    # ------------------------------------------------------------------ the APIs' handlers

    def group_apis(self) -> GroupApis:
        return GroupApis(self.group)

    def find_coordinator_api(self) -> FindCoordinatorApi:
        return FindCoordinatorApi(
            self.cache,
            lambda: self.loop,
            {
                KEY_TYPE_GROUP: CoordinatorKind(
                    OFFSETS_TOPIC, self.group.partition_of, self._create_offsets_topic, "group id"
                ),
                KEY_TYPE_TRANSACTION: CoordinatorKind(
                    TRANSACTION_STATE_TOPIC,
                    self.txn.partition_of,
                    self._create_transaction_state_topic,
                    "transactional id",
                ),
            },
        )

    def transaction_apis(self) -> TransactionApis:
        return TransactionApis(
            self.txn, self.cache, lambda group: TopicPartition(OFFSETS_TOPIC, self.group.partition_of(group))
        )

    def write_txn_markers_api(self) -> WriteTxnMarkersApi:
        return WriteTxnMarkersApi(
            self.produce,
            offsets_topic=OFFSETS_TOPIC,
            on_offsets_marker=self.group.on_transaction_marker,
            timeout_s=self.config.transaction.log_write_timeout_ms / 1000.0,
        )
