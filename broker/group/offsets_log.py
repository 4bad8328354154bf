"""The metadata manager's reads and writes of its ``__consumer_offsets`` partitions on this broker."""

from __future__ import annotations

from broker.group.loader import LoadedPartition, load_batches
from broker.group.metadata_manager import Records
from broker.internal_log import InternalTopicLog
from protocol import ErrorCode


class LocalOffsetsLog:
    """:class:`broker.group.metadata_manager.OffsetsLog` over the broker's own partitions."""

    def __init__(self, log: InternalTopicLog) -> None:
        self.log = log

    async def append(
        self, partition: int, records: Records, *, replicated: bool, producer: tuple[int, int] | None = None
    ) -> ErrorCode:
        return await self.log.append(partition, records, replicated=replicated, producer=producer)

    async def load(self, partition: int) -> LoadedPartition:
        return await self.log.fold(partition, load_batches, LoadedPartition())
