"""The metadata manager's reads and writes of its ``__consumer_offsets`` partitions on this broker."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

from broker.group.config import OFFSETS_TOPIC
from broker.group.loader import LoadedPartition, load_batches
from broker.group.metadata_manager import Records
from broker.log import Log
from broker.produce import ProduceApi
from broker.replica_manager import ReplicaManager
from protocol import ErrorCode
from protocol.record_batch import build_batch, parse_batches
from zkstore.znodes import TopicPartition

LOAD_BUFFER_BYTES = 5 * 1024 * 1024
"""offsets.load.buffer.size: how much of the log one read takes while loading."""


class LocalOffsetsLog:
    def __init__(self, replicas: ReplicaManager, produce: ProduceApi, commit_timeout_ms: int) -> None:
        self.replicas = replicas
        self.produce = produce
        self.commit_timeout_s = commit_timeout_ms / 1000.0

    async def append(self, partition: int, records: Records, *, replicated: bool) -> ErrorCode:
        """One uncompressed batch stamped now, appended on the calling (event-loop) thread so appends
        keep the order the coordinator decided them in; only the wait for the ISR is asynchronous."""
        now = int(time.time() * 1000)
        batch = build_batch(records, timestamps=[now] * len(records))
        settled = self.produce.append_internal(
            TopicPartition(OFFSETS_TOPIC, partition),
            batch,
            replicated=replicated,
            timeout_s=self.commit_timeout_s,
        )
        return await asyncio.wrap_future(settled)

    async def load(self, partition: int) -> LoadedPartition:
        tp = TopicPartition(OFFSETS_TOPIC, partition)
        log = self.replicas.log_manager.get(tp)
        if log is None:
            return LoadedPartition()
        return await asyncio.get_running_loop().run_in_executor(None, lambda: load_batches(_batches(log)))


def _batches(log: Log) -> Iterator[bytes]:
    """Every batch from the log start to the log end as it is when the load starts (Kafka reads to
    the log end, not the high watermark)."""
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
