"""ISR changes this broker's leaders propose, sent to the active controller (Kafka's AlterPartitionManager).

At most one AlterPartition is in flight; what leaders propose meanwhile waits and goes in the next
one, one entry per partition (a partition has at most one proposal pending, see ``Partition``). The
version is the wire's (``inter.broker.protocol.version``): v2, or v3 (KIP-903) from IBP 3.5-IV1, whose
ISR names each member with its broker epoch; as Kafka's brokers in ZooKeeper mode do, every member's
is -1 ("unknown": UpdateMetadata carries no broker epochs), and the controller checks only the
sender's. The request names topics by id: the one the partition's LeaderAndIsr gave (Kafka's v5+), else
read from ``/brokers/topics/T`` and kept until the topic is deleted (StopReplica with delete) or the
controller answers UNKNOWN_TOPIC_ID; it carries this broker's epoch, so a controller can fence a
leader from an earlier registration.

Each partition's answer goes back to the replica manager: NONE commits the ISR the controller
returns; INELIGIBLE_REPLICA (KIP-841) and the other refusals drop the proposal, so the leader goes on
with the last committed ISR and may try again later. A failed request (no controller, connection
lost, NOT_CONTROLLER) is retried after ``retry_backoff_s`` with the proposals still pending.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import NoNodeError

from broker.controller_address import ControllerEndpoint
from daemon.supervision import start_supervised
from network.connection import KafkaConnection
from protocol import ApiKey, ErrorCode
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.znodes import TopicPartition

log = logging.getLogger("broker.alter_partition")

ALTER_PARTITION_VERSION = 2
"""The version sent at the default IBP (``protocol.ibp.control_wire``)."""
FIRST_ISR_EPOCHS_VERSION = 3
UNKNOWN_BROKER_EPOCH = -1


@dataclass(frozen=True)
class Proposal:
    tp: TopicPartition
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int
    topic_id: uuid.UUID | None = None
    """The id the partition's LeaderAndIsr named; None: read it from ZooKeeper."""


@dataclass(frozen=True)
class Outcome:
    proposal: Proposal
    error: ErrorCode
    isr: tuple[int, ...] = ()
    leader_epoch: int = -1
    partition_epoch: int = -1


class AlterPartitionManager:
    def __init__(
        self,
        zk: AsyncZooKeeper,
        broker_id: int,
        broker_epoch: Callable[[], int],
        controller_endpoint: ControllerEndpoint,
        on_outcome: Callable[[Outcome], None],
        *,
        timeout_s: float = 30.0,
        retry_backoff_s: float = 0.1,
        version: int = ALTER_PARTITION_VERSION,
    ) -> None:
        self.zk = zk
        self.version = version
        """The AlterPartition version sent (2 or 3: ``control_wire(ibp).alter_partition``)."""
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.controller_endpoint = controller_endpoint
        self.on_outcome = on_outcome
        self.timeout_s = timeout_s
        self.retry_backoff_s = retry_backoff_s
        self._pending: dict[TopicPartition, Proposal] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._connection: KafkaConnection | None = None
        self._connected_to: tuple[str, int] | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = start_supervised("alter-partition-manager", self._run)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._disconnect()

    def submit(self, proposal: Proposal) -> None:
        """From any thread: queue a proposal (replacing an unsent one for the same partition)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(self._queue, proposal)

    def forget_topic(self, topic: str) -> None:
        """From any thread: the topic was deleted; read its id again if the name comes back."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._topic_ids.pop, topic, None)

    def _queue(self, proposal: Proposal) -> None:
        self._pending[proposal.tp] = proposal
        self._wake.set()

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._pending:
                continue
            batch, self._pending = self._pending, {}
            try:
                await self._send(batch)
            except (ConnectionError, TimeoutError, OSError, _Retry) as exc:
                log.warning("AlterPartition for %d partitions failed (%s); retrying", len(batch), exc)
                await self._disconnect()
                for tp, proposal in batch.items():
                    self._pending.setdefault(tp, proposal)  # a newer proposal, if any, wins
                await asyncio.sleep(self.retry_backoff_s)
                self._wake.set()

    async def _topic_id(self, topic: str) -> uuid.UUID | None:
        known = self._topic_ids.get(topic)
        if known is not None:
            return known
        path = znodes.topic_path(topic)
        with contextlib.suppress(NoNodeError):
            data, _ = await self.zk.get(path)
            assignment = znodes.decode_topic_assignment(data, path)
            if assignment is not None and assignment.topic_id is not None:
                self._topic_ids[topic] = assignment.topic_id
                return assignment.topic_id
        return None

    async def _connect(self) -> KafkaConnection:
        found = await self.controller_endpoint()
        if found is None:
            raise _Retry("no active controller")
        host, port = found.host, found.port
        if self._connection is not None and (self._connection.closed or self._connected_to != (host, port)):
            await self._disconnect()
        if self._connection is None:
            self._connection = await found.connect(f"broker-{self.broker_id}-alter-partition", self.timeout_s)
            self._connected_to = (host, port)
        return self._connection

    async def _disconnect(self) -> None:
        if self._connection is not None:
            await self._connection.close()
            self._connection = None

    async def _send(self, batch: dict[TopicPartition, Proposal]) -> None:
        by_topic: dict[uuid.UUID, list[Proposal]] = {}
        names: dict[uuid.UUID, str] = {}
        for proposal in batch.values():
            topic_id = proposal.topic_id or await self._topic_id(proposal.tp.topic)
            if topic_id is None:  # the controller has not given the topic an id yet
                raise _Retry(f"no topic id for {proposal.tp.topic} yet")
            by_topic.setdefault(topic_id, []).append(proposal)
            names[topic_id] = proposal.tp.topic
        body = {
            "broker_id": self.broker_id,
            "broker_epoch": self.broker_epoch(),
            "topics": [
                {
                    "topic_id": topic_id,
                    "partitions": [self._partition(p) for p in proposals],
                }
                for topic_id, proposals in by_topic.items()
            ],
        }
        connection = await self._connect()
        _, response = await connection.send(
            ApiKey.ALTER_PARTITION, self.version, body, timeout=self.timeout_s
        )
        self._settle(batch, names, response)

    def _partition(self, proposal: Proposal) -> dict[str, Any]:
        """One partition's entry: the ISR as ``new_isr`` (v2) or with each member's epoch (v3, all -1,
        as Kafka's ZooKeeper-mode brokers send); the leader has recovered (KIP-704)."""
        isr: dict[str, Any]
        if self.version >= FIRST_ISR_EPOCHS_VERSION:
            members = [{"broker_id": r, "broker_epoch": UNKNOWN_BROKER_EPOCH} for r in proposal.new_isr]
            isr = {"new_isr_with_epochs": members}
        else:
            isr = {"new_isr": list(proposal.new_isr)}
        return {
            "partition_index": proposal.tp.partition,
            "leader_epoch": proposal.leader_epoch,
            **isr,
            "leader_recovery_state": 0,
            "partition_epoch": proposal.partition_epoch,
        }

    def _settle(
        self, batch: dict[TopicPartition, Proposal], names: dict[uuid.UUID, str], response: dict[str, Any]
    ) -> None:
        """Hand every proposal of ``batch`` its outcome from ``response``; retry on a passing error."""
        top = response["error_code"]
        if top != ErrorCode.NONE:
            if top in (ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT):
                raise _Retry(ErrorCode.name_of(top))
            for proposal in batch.values():  # e.g. STALE_BROKER_EPOCH: every proposal is refused
                self.on_outcome(Outcome(proposal, ErrorCode(top)))
            return
        answered: set[TopicPartition] = set()
        for topic in response["topics"]:
            name = names.get(topic["topic_id"])
            for p in topic["partitions"]:
                tp = TopicPartition(name or "", p["partition_index"])
                answer = batch.get(tp)
                if answer is None:
                    continue
                answered.add(tp)
                if p["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID and name is not None:
                    # Our id is not the controller's (the topic was deleted and created again while
                    # we missed it): read the current one before the next proposal.
                    self._topic_ids.pop(name, None)
                self.on_outcome(
                    Outcome(
                        answer,
                        ErrorCode(p["error_code"]),
                        tuple(p["isr"]),
                        p["leader_epoch"],
                        p["partition_epoch"],
                    )
                )
        for tp, proposal in batch.items():
            if tp not in answered:
                log.warning("AlterPartition response has no entry for %s-%d", tp.topic, tp.partition)
                self.on_outcome(Outcome(proposal, ErrorCode.UNKNOWN_SERVER_ERROR))


class _Retry(Exception):
    """The whole request must be sent again later."""
