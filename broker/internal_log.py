"""The coordinators' own partitions on this broker (``__consumer_offsets``, ``__transaction_state``):
their records appended as leader, and their logs read back whole when leadership arrives."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from broker.log import Log
from broker.produce import ProduceApi
from broker.replica_manager import ReplicaManager
from protocol import ErrorCode
from protocol.record_batch import build_batch, parse_batches
from protocol.topic_partition import TopicPartition

__all__ = ["LOAD_BUFFER_BYTES", "InternalTopicLog", "Records"]

T = TypeVar("T")
Records = list[tuple[bytes, bytes | None]]
"""(key, value) records; a None value is a tombstone."""

LOAD_BUFFER_BYTES = 5 * 1024 * 1024
"""offsets.load.buffer.size / transaction.state.log.load.buffer.size: what one read takes while loading."""


class InternalTopicLog:
    """One internal topic's partitions hosted here, as its coordinator writes and loads them."""

    def __init__(self, topic: str, replicas: ReplicaManager, produce: ProduceApi, timeout_ms: int) -> None:
        self.topic = topic
        self.replicas = replicas
        self.produce = produce
        self.timeout_s = timeout_ms / 1000.0

    async def append(
        self,
        partition: int,
        records: Records,
        *,
        replicated: bool,
        producer: tuple[int, int] | None = None,
    ) -> ErrorCode:
        """One uncompressed batch stamped now, appended on the calling (event-loop) thread so appends
        keep the order the coordinator decided them in; only the wait for the ISR is asynchronous.
        With ``producer`` (id, epoch) the batch is transactional, as a TxnOffsetCommit's is."""
        now = int(time.time() * 1000)
        pid, epoch = producer if producer is not None else (-1, -1)
        batch = build_batch(
            records,
            timestamps=[now] * len(records),
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=0 if producer is not None else -1,
            transactional=producer is not None,
        )
        settled = self.produce.append_internal(
            TopicPartition(self.topic, partition), batch, replicated=replicated, timeout_s=self.timeout_s
        )
        return await asyncio.wrap_future(settled)

    async def fold(self, partition: int, fold: Callable[[Iterator[bytes]], T], empty: T) -> T:
        """``fold`` over every batch of the partition, from its start to its end as the load begins
        (Kafka reads to the log end, not the high watermark), off the loop; ``empty`` if not hosted."""
        log = self.replicas.log_manager.get(TopicPartition(self.topic, partition))
        if log is None:
            return empty
        return await asyncio.get_running_loop().run_in_executor(None, lambda: fold(_batches(log)))


def _batches(log: Log) -> Iterator[bytes]:
    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end:
        data = log.read(offset, LOAD_BUFFER_BYTES, upper_bound=end)
        batches = parse_batches(data)
        if not batches:
            return
        view = memoryview(data)
        for header, position, size in batches:
            if header.last_offset >= offset:
                yield bytes(view[position : position + size])
            offset = max(offset, header.next_offset)
