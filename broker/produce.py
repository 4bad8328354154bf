"""Produce (v3-v8): append producers' record batches on the partition leaders.

Per partition, in Kafka's order: the partition must be hosted here (else NOT_LEADER_OR_FOLLOWER if
the cluster knows it, UNKNOWN_TOPIC_OR_PARTITION if not) and led by this broker; with acks=all the
ISR must be at least ``min.insync.replicas`` (NOT_ENOUGH_REPLICAS, nothing appended); every batch
must be sound (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, nothing of that partition appended); an
idempotent producer's batch must follow its previous one (OUT_OF_ORDER_SEQUENCE_NUMBER,
INVALID_PRODUCER_EPOCH), and one the leader already has is answered with its original offset.

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

from broker.log import AppendInfo, InvalidProducerEpoch, OutOfOrderSequence, RecordTooLarge
from broker.partition import PartitionError
from broker.purgatory import DelayedOperation
from broker.replica_manager import ReplicaManager
from broker.request_channel import Close, Request
from protocol import CorruptRecordBatch, ErrorCode
from zkstore.znodes import TopicPartition

log = logging.getLogger("broker.produce")

ACKS_ALL = -1


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
                p["index"]: self._append(TopicPartition(name, p["index"]), p["records"], acks)
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
        """An append of the broker's own records (the group coordinator's), as a producer with acks=all
        (``replicated``) or acks=1 would make it: the partition's error once the append is settled."""
        result = self._append(tp, records, ACKS_ALL if replicated else 1)
        settled: Future[ErrorCode] = Future()
        if result.error != ErrorCode.NONE or not replicated:
            settled.set_result(result.error)
            return settled
        delayed = DelayedProduce(timeout_s, {tp.topic: {tp.partition: result}}, self.rm)
        waiting = self.rm.produce_purgatory.watch(delayed, list(delayed.waiting))
        waiting.add_done_callback(lambda _: settled.set_result(result.error))
        return settled

    def _append(self, tp: TopicPartition, records: bytes | None, acks: int) -> PartitionResult:
        result = self._append_partition(tp, records, acks)
        if self.on_result is not None:
            self.on_result(tp.topic, result.error)
        return result

    def _append_partition(self, tp: TopicPartition, records: bytes | None, acks: int) -> PartitionResult:
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
                if not records:
                    raise CorruptRecordBatch("no record batches")
                info = leader_log.append_as_leader(
                    records, partition.leader_epoch, now_ms=int(time.time() * 1000)
                )
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
        except RecordTooLarge as exc:
            return PartitionResult(ErrorCode.MESSAGE_TOO_LARGE, message=str(exc))
        except OutOfOrderSequence as exc:
            log.info("produce to %s-%d refused: %s", tp.topic, tp.partition, exc)
            return PartitionResult(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, message=str(exc))
        except InvalidProducerEpoch as exc:
            return PartitionResult(ErrorCode.INVALID_PRODUCER_EPOCH, message=str(exc))
        if info.duplicate:  # an idempotent producer's retry: answered with where the batch already is
            return result
        self.rm.partition_changed(tp)
        if self.on_append is not None:
            self.on_append(tp.topic, info)
        return result
