"""WriteTxnMarkers from the transaction coordinator to the partitions' leaders, retried until each
partition of a transaction has its COMMIT or ABORT marker (Kafka's TransactionMarkerChannelManager).

Leaders come from this broker's metadata cache, looked up again at every round, so a marker follows
its partition across leader changes. Per partition, the leader's answer decides:

* NONE: written;
* a partition of a topic no longer in the metadata: nothing left to mark (the topic was deleted);
* INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED: a newer coordinator or producer epoch
  has written there, so this coordinator stops: the transaction is no longer its to finish;
* anything else (no leader, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, a timeout, a broker that
  does not answer): asked again after ``RETRY_BACKOFF_S``.

Markers go over the inter-broker listener, to this broker itself too, as Kafka's do. One request per
transaction and leader; Kafka also batches markers of several transactions into one request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from broker.metadata_cache import MetadataCache, Snapshot
from network.connection import KafkaConnection
from protocol import ApiKey, ErrorCode
from protocol.topic_partition import TopicPartition
from security.config import ClientSecurity

__all__ = ["MarkerRequest", "MarkerSender"]

log = logging.getLogger("broker.txn")

RETRY_BACKOFF_S = 0.1
"""Pause between rounds while some partition still lacks its marker (Kafka's retry.backoff.ms)."""
WRITE_TXN_MARKERS_VERSION = 1
FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})


@dataclass(frozen=True, slots=True)
class MarkerRequest:
    """The markers one transaction needs."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


class MarkerSender:
    """One per broker, used on the event loop; keeps a connection per leader it has written to."""

    def __init__(
        self,
        cache: MetadataCache,
        *,
        broker_id: int,
        listener: str,
        security: ClientSecurity | None,
        timeout_s: float,
    ) -> None:
        self.cache = cache
        self.broker_id = broker_id
        self.listener = listener
        self.security = security
        self.timeout_s = timeout_s
        self._connections: dict[int, KafkaConnection] = {}
        self._dialing = asyncio.Lock()
        """One connection attempt at a time, so two transactions never open two to one leader."""

    async def write(self, request: MarkerRequest, still_owner: Callable[[], bool]) -> bool:
        """True once every partition has its marker; False if fenced or ``still_owner()`` turns False
        (this broker no longer leads the transaction's state partition at that coordinator epoch)."""
        pending = set(request.partitions)
        rounds = 0
        while pending:
            if not still_owner():
                return False
            snapshot = self.cache.snapshot
            pending = {tp for tp in pending if tp.topic in snapshot.topics}  # deleted topics: nothing to mark
            leaders = _by_leader(snapshot, pending)
            answers = await asyncio.gather(
                *(self._send(leader, request, tps) for leader, tps in leaders.items())
            )
            for errors in answers:
                for tp, error in errors.items():
                    if error == ErrorCode.NONE:
                        pending.discard(tp)
                    elif error in FENCED:
                        log.info(
                            "transaction %s: the marker for %s was refused with %s: no longer this "
                            "coordinator's to finish",
                            request.transactional_id, tp, error.name,
                        )  # fmt: skip
                        return False
            rounds += 1
            if pending:
                if rounds % 50 == 0:
                    log.warning(
                        "transaction %s: %d partitions still without their marker after %d rounds: %s",
                        request.transactional_id, len(pending), rounds, sorted(pending)[:5],
                    )  # fmt: skip
                await asyncio.sleep(RETRY_BACKOFF_S)
        return True

    async def _send(
        self, leader: int, request: MarkerRequest, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        topics: dict[str, list[int]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        body = {
            "markers": [
                {
                    "producer_id": request.producer_id,
                    "producer_epoch": request.producer_epoch,
                    "transaction_result": request.commit,
                    "topics": [{"name": t, "partition_indexes": ids} for t, ids in topics.items()],
                    "coordinator_epoch": request.coordinator_epoch,
                }
            ]
        }
        try:
            connection = await self._connection(leader)
            _, response = await connection.send(
                ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body, timeout=self.timeout_s
            )
        except (OSError, TimeoutError, ConnectionError, LookupError) as exc:
            log.info("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            await self._drop(leader)
            return {}
        return {
            TopicPartition(topic["name"], p["partition_index"]): ErrorCode(p["error_code"])
            for marker in response["markers"]
            for topic in marker["topics"]
            for p in topic["partitions"]
        }

    async def _connection(self, broker: int) -> KafkaConnection:
        async with self._dialing:
            return await self._dial(broker)

    async def _dial(self, broker: int) -> KafkaConnection:
        connection = self._connections.get(broker)
        if connection is not None and not connection.closed:
            return connection
        found = self.cache.snapshot.brokers.get(broker)
        if found is None or self.listener not in found.endpoints:
            raise LookupError(f"broker {broker} has no {self.listener} endpoint in the metadata")
        host, port = found.endpoints[self.listener]
        connection = await KafkaConnection.open(
            host,
            port,
            client_id=f"broker-{self.broker_id}-txn-markers",
            connect_timeout=self.timeout_s,
            security=self.security,
        )
        self._connections[broker] = connection
        return connection

    async def _drop(self, broker: int) -> None:
        connection = self._connections.pop(broker, None)
        if connection is not None:
            await connection.close()

    async def close(self) -> None:
        for broker in list(self._connections):
            await self._drop(broker)


def _by_leader(snapshot: Snapshot, partitions: set[TopicPartition]) -> dict[int, list[TopicPartition]]:
    """The partitions grouped by their current leader; leaderless ones wait for the next round."""
    leaders: dict[int, list[TopicPartition]] = {}
    for tp in sorted(partitions):
        state = snapshot.partition(tp)
        if state is not None and state.leader >= 0:
            leaders.setdefault(state.leader, []).append(tp)
    return leaders
