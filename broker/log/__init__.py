"""Partition logs on disk in Kafka's formats: segments, offset and time indexes, leader epoch cache."""

from broker.log.epoch_cache import LeaderEpochCache
from broker.log.log import (
    AppendInfo,
    InvalidRecord,
    Log,
    LogClosed,
    LogConfig,
    OffsetOutOfRange,
    RecordTooLarge,
    UnexpectedAppendOffset,
)
from protocol.record_batch import CorruptRecordBatch

__all__ = [
    "AppendInfo",
    "CorruptRecordBatch",
    "InvalidRecord",
    "LeaderEpochCache",
    "Log",
    "LogClosed",
    "LogConfig",
    "OffsetOutOfRange",
    "RecordTooLarge",
    "UnexpectedAppendOffset",
]
