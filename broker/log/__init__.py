"""Partition logs on disk in Kafka's formats: segments, offset and time indexes, leader epoch cache,
idempotent producers' state and its snapshots."""

from broker.log.config import LogConfig
from broker.log.epoch_cache import LeaderEpochCache
from broker.log.log import Log
from broker.log.outcomes import (
    AppendInfo,
    InvalidRecord,
    LogClosed,
    OffsetOutOfRange,
    RecordTooLarge,
    UnexpectedAppendOffset,
)
from broker.log.producer_state import (
    BatchMetadata,
    CorruptSnapshot,
    InvalidProducerEpoch,
    OutOfOrderSequence,
    ProducerStateEntry,
)
from protocol.record_batch import CorruptRecordBatch

__all__ = [
    "AppendInfo",
    "BatchMetadata",
    "CorruptRecordBatch",
    "CorruptSnapshot",
    "InvalidProducerEpoch",
    "InvalidRecord",
    "LeaderEpochCache",
    "Log",
    "LogClosed",
    "LogConfig",
    "OffsetOutOfRange",
    "OutOfOrderSequence",
    "ProducerStateEntry",
    "RecordTooLarge",
    "UnexpectedAppendOffset",
]
