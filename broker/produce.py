"""Produce (v3-v8): append producers' record batches on the partition leaders.

Per partition, in Kafka's order: the partition must be hosted here (else NOT_LEADER_OR_FOLLOWER if
the cluster knows it, UNKNOWN_TOPIC_OR_PARTITION if not) and led by this broker; with acks=all the
ISR must be at least ``min.insync.replicas`` (NOT_ENOUGH_REPLICAS, nothing appended); every batch
must be sound (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, nothing of that partition appended); an
idempotent producer's batch must follow its previous one (OUT_OF_ORDER_SEQUENCE_NUMBER,
INVALID_PRODUCER_EPOCH), and one the leader already has is answered with its original offset; a
transactional producer's plain batch inside its open transaction is INVALID_TXN_STATE.

The transaction coordinator's markers (WriteTxnMarkers) are appended here too, as an acks=all append
of the broker's own (:meth:`ProduceApi.append_marker`): a marker from an older coordinator epoch is
TRANSACTION_COORDINATOR_FENCED, one from an older producer epoch INVALID_PRODUCER_EPOCH.

acks=0 gets no response at all; acks=1 is answered once the leader has appended; acks=all waits in
the produce purgatory until the high watermark passes the last appended offset of every partition
(then NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR has meanwhile shrunk below the minimum), or until
the request's timeout: REQUEST_TIMED_OUT, the data stays appended and may still be committed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from broker.log import (
    AppendInfo,
    InvalidProducerEpoch,
    InvalidTxnState,
    Log,
    OutOfOrderSequence,
    RecordTooLarge,
    TransactionCoordinatorFenced,
)
from broker.partition import PartitionError
from broker.purgatory import DelayedOperation
from broker.replica_manager import ReplicaManager
from broker.request_channel import Close, Request
from protocol import CorruptRecordBatch, ErrorCode
from zkstore.znodes import TopicPartition

log = logging.getLogger("broker.produce")

ACKS_ALL = -1

_REFUSAL_CODES: dict[type[Exception], ErrorCode] = {
    RecordTooLarge: ErrorCode.MESSAGE_TOO_LARGE,
    OutOfOrderSequence: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    InvalidProducerEpoch: ErrorCode.INVALID_PRODUCER_EPOCH,
    InvalidTxnState: ErrorCode.INVALID_TXN_STATE,
    TransactionCoordinatorFenced: ErrorCode.TRANSACTION_COORDINATOR_FENCED,
}
"""The log's refusals of well-formed batches (nothing appended), and the error each is answered with."""
_REFUSALS = tuple(_REFUSAL_CODES)

Append = Callable[[Log, int, int], AppendInfo]
"""One partition's append on the leader's log, given the leader epoch and the time in ms."""


def _records(records: bytes | None, *, coordinator: bool = False) -> Append:
    """The append of a producer's record batches, or of a ``coordinator``'s own."""

    def append(leader_log: Log, leader_epoch: int, now_ms: int) -> AppendInfo:
        if not records:
            raise CorruptRecordBatch("no record batches")
        return leader_log.append_as_leader(records, leader_epoch, now_ms=now_ms, coordinator=coordinator)

    return append


@dataclass(eq=False)
class PartitionResult:
    error: ErrorCode
    base_offset: int = -1
    log_start_offset: int = -1
    required_offset: int = -1
    """acks=all: the high watermark that commits this partition's records (last offset + 1)."""
    message: str | None = None


def _response(topics: dict[str, dict[int, PartitionResult]]) -> dict[str, Any]:
    return {
        "responses": [
            {
                "name": name,
                "partition_responses": [
                    {
                        "index": index,
                        "error_code": result.error,
                        "base_offset": result.base_offset,
                        "log_append_time_ms": -1,
                        "log_start_offset": result.log_start_offset,
                        "record_errors": [],
                        "error_message": result.message,
                    }
                    for index, result in partitions.items()
                ],
            }
            for name, partitions in topics.items()
        ],
        "throttle_time_ms": 0,
    }


class DelayedProduce(DelayedOperation):
    """acks=all: done when every appended partition's high watermark reaches its required offset."""

    def __init__(
        self,
        timeout_s: float,
        results: dict[str, dict[int, PartitionResult]],
        rm: ReplicaManager,
    ) -> None:
        super().__init__(timeout_s)
        self.results = results
        self.rm = rm
        self.waiting = {
            TopicPartition(name, index): result
            for name, partitions in results.items()
            for index, result in partitions.items()
            if result.error == ErrorCode.NONE
        }

    def _settled(self, tp: TopicPartition, result: PartitionResult) -> ErrorCode | None:
        """This partition's final error, or None while it still waits."""
        partition = self.rm.partitions.get(tp)
        if partition is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        with partition.lock:
            if not partition.is_leader:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            if partition.high_watermark >= result.required_offset:
                if len(partition.maximal_isr) < self.rm.min_insync_for(tp.topic):
                    return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                return ErrorCode.NONE
        return None

    def ready(self) -> bool:
        return all(self._settled(tp, result) is not None for tp, result in self.waiting.items())

    def reply(self) -> dict[str, Any]:
        for tp, result in self.waiting.items():
            settled = self._settled(tp, result)
            result.error = ErrorCode.REQUEST_TIMED_OUT if settled is None else settled
        return _response(self.results)


class ProduceApi:
    def __init__(
        self,
        rm: ReplicaManager,
        *,
        on_append: Callable[[str, AppendInfo], None] | None = None,
        on_result: Callable[[str, ErrorCode], None] | None = None,
    ) -> None:
        self.rm = rm
        self.on_append = on_append
        """Called with the topic and what was appended after each successful append (metrics)."""
        self.on_result = on_result
        """Called with the topic and the outcome of each partition append asked for (metrics)."""

    def handle(self, request: Request, body: dict[str, Any]) -> Any:
        acks = body["acks"]
        if acks not in (0, 1, ACKS_ALL):
            error = PartitionResult(ErrorCode.INVALID_REQUIRED_ACKS)
            return _response(
                {t["name"]: {p["index"]: error for p in t["partition_data"]} for t in body["topic_data"]}
            )
        results: dict[str, dict[int, PartitionResult]] = {}
        for topic in body["topic_data"]:
            name = topic["name"]
            results[name] = {
                p["index"]: self._append(TopicPartition(name, p["index"]), _records(p["records"]), acks)
                for p in topic["partition_data"]
            }
        if acks == 0:
            failed = [
                f"{name}-{index}: {r.error.name}"
                for name, parts in results.items()
                for index, r in parts.items()
                if r.error != ErrorCode.NONE
            ]
            # No response to carry the error: Kafka closes the connection so the producer notices.
            return Close(f"acks=0 produce failed for {', '.join(failed)}") if failed else None
        appended = any(r.error == ErrorCode.NONE for parts in results.values() for r in parts.values())
        if acks != ACKS_ALL or not appended:
            return _response(results)
        delayed = DelayedProduce(body["timeout_ms"] / 1000.0, results, self.rm)
        return self.rm.produce_purgatory.watch(delayed, list(delayed.waiting))

    def append_internal(
        self, tp: TopicPartition, records: bytes, *, replicated: bool, timeout_s: float
    ) -> Future[ErrorCode]:
        """An append of the broker's own records (a coordinator's), as a producer with acks=all
        (``replicated``) or acks=1 would make it: the partition's error once the append is settled.
        A transactional batch written for a producer (TxnOffsetCommit) has only its epoch checked."""
        result = self._append(tp, _records(records, coordinator=True), ACKS_ALL if replicated else 1)
        return self._settled(tp, result, timeout_s if replicated else None)

    def append_marker(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        *,
        timeout_s: float,
    ) -> Future[ErrorCode]:
        """The transaction coordinator's marker (WriteTxnMarkers) ending ``producer_id``'s transaction in
        ``tp``, appended as acks=all: the partition's error once the high watermark passes the marker
        (REQUEST_TIMED_OUT after ``timeout_s``), or at once if it could not be appended."""

        def append(leader_log: Log, leader_epoch: int, now_ms: int) -> AppendInfo:
            return leader_log.append_marker(
                producer_id, producer_epoch, coordinator_epoch, commit, leader_epoch, now_ms=now_ms
            )

        return self._settled(tp, self._append(tp, append, ACKS_ALL), timeout_s)

    def _settled(
        self, tp: TopicPartition, result: PartitionResult, timeout_s: float | None
    ) -> Future[ErrorCode]:
        """``result``'s error once settled: now if it failed or needs no replication (no timeout),
        else when its acks=all wait in the produce purgatory ends."""
        settled: Future[ErrorCode] = Future()
        if result.error != ErrorCode.NONE or timeout_s is None:
            settled.set_result(result.error)
            return settled
        delayed = DelayedProduce(timeout_s, {tp.topic: {tp.partition: result}}, self.rm)
        waiting = self.rm.produce_purgatory.watch(delayed, list(delayed.waiting))
        waiting.add_done_callback(lambda _: settled.set_result(result.error))
        return settled

    def _append(self, tp: TopicPartition, append: Append, acks: int) -> PartitionResult:
        result = self._append_partition(tp, append, acks)
        if self.on_result is not None:
            self.on_result(tp.topic, result.error)
        return result

    def _append_partition(self, tp: TopicPartition, append: Append, acks: int) -> PartitionResult:
        try:
            partition = self.rm.hosted(tp)
            with partition.lock:
                leader_log = partition.require_leader()
                min_isr = self.rm.min_insync_for(tp.topic)
                if acks == ACKS_ALL and len(partition.isr) < min_isr:
                    raise PartitionError(
                        ErrorCode.NOT_ENOUGH_REPLICAS,
                        f"ISR {list(partition.isr)} is smaller than min.insync.replicas {min_isr}",
                    )
                info = append(leader_log, partition.leader_epoch, int(time.time() * 1000))
                partition.maybe_advance_high_watermark()
                result = PartitionResult(
                    ErrorCode.NONE, info.first_offset, leader_log.log_start_offset, info.last_offset + 1
                )
        except PartitionError as exc:
            return PartitionResult(
                exc.code, message=str(exc) if exc.code != ErrorCode.NOT_LEADER_OR_FOLLOWER else None
            )
        except CorruptRecordBatch as exc:
            log.warning("produce to %s-%d refused: %s", tp.topic, tp.partition, exc)
            return PartitionResult(ErrorCode.CORRUPT_MESSAGE, message=str(exc))
        except _REFUSALS as exc:
            if not isinstance(exc, RecordTooLarge):
                log.info("append to %s-%d refused: %s", tp.topic, tp.partition, exc)
            return PartitionResult(_REFUSAL_CODES[type(exc)], message=str(exc))
        if info.duplicate:  # an idempotent producer's retry: answered with where the batch already is
            return result
        self.rm.partition_changed(tp)
        if self.on_append is not None:
            self.on_append(tp.topic, info)
        return result
