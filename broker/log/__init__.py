"""Partition logs on disk in Kafka's formats: segments, offset, time and aborted-transaction indexes,
leader epoch cache, idempotent and transactional producers' state and its snapshots, and the
cleaning of one compacted log (``broker.log.compaction``) with its crash-safe swap (``broker.log.swap``)."""

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
from broker.log.segment import end_offset
from broker.log.transactions import InvalidTxnState, TransactionCoordinatorFenced
from protocol.record_batch import CorruptRecordBatch

__all__ = [
    "AppendInfo",
    "BatchMetadata",
    "CorruptRecordBatch",
    "CorruptSnapshot",
    "InvalidProducerEpoch",
    "InvalidRecord",
    "InvalidTxnState",
    "LeaderEpochCache",
    "Log",
    "LogClosed",
    "LogConfig",
    "OffsetOutOfRange",
    "OutOfOrderSequence",
    "ProducerStateEntry",
    "RecordTooLarge",
    "TransactionCoordinatorFenced",
    "UnexpectedAppendOffset",
    "end_offset",
]
