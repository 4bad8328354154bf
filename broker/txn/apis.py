"""The transaction coordinator's APIs on the wire: InitProducerId (with a transactional id),
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions.

Handlers run on the data-plane threads, hand the work to the coordinator on the event loop and answer
with a future. AddPartitionsToTxn refuses partitions of topics this broker's metadata does not know
(UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED), as Kafka's KafkaApis does before
the coordinator sees the request.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from broker.metadata_cache import MetadataCache
from broker.on_loop import answer_on_loop
from broker.request_channel import Request
from broker.txn.coordinator import InitResult, TransactionCoordinator
from broker.txn.state import TxnMetadata, TxnState
from protocol import ErrorCode
from protocol.topic_partition import TopicPartition

__all__ = ["TransactionApis"]

T = TypeVar("T")
Body = dict[str, Any]


def init_answer(result: InitResult) -> Body:
    return {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "producer_id": result.producer_id,
        "producer_epoch": result.producer_epoch,
    }


class TransactionApis:
    def __init__(
        self,
        coordinator: TransactionCoordinator,
        cache: MetadataCache,
        offsets_partition: Callable[[str], TopicPartition],
    ) -> None:
        self.coordinator = coordinator
        self.cache = cache
        self.offsets_partition = offsets_partition
        """A group's ``__consumer_offsets`` partition: what AddOffsetsToTxn adds to the transaction."""

    def _run(self, coro: Coroutine[Any, Any, T], answer: Callable[[T], Body], what: str) -> Future[Body]:
        return answer_on_loop(self.coordinator.loop, coro, answer, what)

    def init_producer_id(self, request: Request, body: Body) -> Future[Body]:
        """InitProducerId whose ``transactional_id`` is set (an empty one is INVALID_REQUEST)."""
        pid, epoch = body.get("producer_id", -1), body.get("producer_epoch", -1)
        expected = (pid, epoch) if pid != -1 else None
        work = self.coordinator.init_producer_id(
            body["transactional_id"], body["transaction_timeout_ms"], expected
        )
        return self._run(work, init_answer, "InitProducerId")

    def add_partitions_to_txn(self, request: Request, body: Body) -> Body | Future[Body]:
        wanted = [TopicPartition(t["name"], p) for t in body["topics"] for p in t["partitions"]]
        topics = self.cache.snapshot.topics
        unknown = {tp for tp in wanted if tp.partition not in topics.get(tp.topic, {})}
        if unknown:
            return _partition_answer(
                {
                    tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    if tp in unknown
                    else ErrorCode.OPERATION_NOT_ATTEMPTED
                    for tp in wanted
                }
            )
        work = self.coordinator.add_partitions(
            body["transactional_id"], body["producer_id"], body["producer_epoch"], frozenset(wanted)
        )
        return self._run(
            work, lambda error: _partition_answer(dict.fromkeys(wanted, error)), "AddPartitionsToTxn"
        )

    def add_offsets_to_txn(self, request: Request, body: Body) -> Future[Body]:
        partition = self.offsets_partition(body["group_id"])
        work = self.coordinator.add_partitions(
            body["transactional_id"], body["producer_id"], body["producer_epoch"], frozenset({partition})
        )
        return self._run(work, _error_answer, "AddOffsetsToTxn")

    def end_txn(self, request: Request, body: Body) -> Future[Body]:
        work = self.coordinator.end_transaction(
            body["transactional_id"], body["producer_id"], body["producer_epoch"], body["committed"]
        )
        return self._run(work, _error_answer, "EndTxn")

    def describe_transactions(self, request: Request, body: Body) -> Future[Body]:
        async def describe() -> Body:
            return {
                "throttle_time_ms": 0,
                "transaction_states": [self._describe(t) for t in body["transactional_ids"]],
            }

        return self._run(describe(), lambda answer: answer, "DescribeTransactions")

    def _describe(self, transactional_id: str) -> Body:
        state = self.coordinator.state
        error = state.status_error(transactional_id)
        metadata = state.transactions.get(transactional_id) if not error else None
        if not error and metadata is None:
            error = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        if metadata is None:
            return {
                "error_code": error,
                "transactional_id": transactional_id,
                "transaction_state": "",
                "transaction_timeout_ms": 0,
                "transaction_start_time_ms": -1,
                "producer_id": -1,
                "producer_epoch": -1,
                "topics": [],
            }
        return {
            "error_code": ErrorCode.NONE,
            "transactional_id": transactional_id,
            "transaction_state": metadata.state.wire_name,
            "transaction_timeout_ms": metadata.timeout_ms,
            "transaction_start_time_ms": metadata.start_ms,
            "producer_id": metadata.producer_id,
            "producer_epoch": metadata.producer_epoch,
            "topics": _topics(metadata),
        }

    def list_transactions(self, request: Request, body: Body) -> Future[Body]:
        async def listing() -> Body:
            return list_answer(
                self.coordinator.state.owned_transactions(),
                bool(self.coordinator.state.loading),
                body["state_filters"],
                body["producer_id_filters"],
                body.get("duration_filter", -1),
            )

        return self._run(listing(), lambda answer: answer, "ListTransactions")


def list_answer(
    transactions: Any, loading: bool, states: list[str], producer_ids: list[int], duration_ms: int
) -> Body:
    """ListTransactions' answer over the ids of the partitions led here (KIP-664): filtered by state
    name, producer id and (v1) how long the transaction has run; unknown state names are echoed."""
    known = {s for s in states if TxnState.from_wire_name(s) is not None}
    now = int(time.time() * 1000)
    chosen: list[TxnMetadata] = [
        m
        for m in transactions
        if (not states or m.state.wire_name in known)
        and (not producer_ids or m.producer_id in producer_ids)
        and (duration_ms < 0 or (m.start_ms >= 0 and now - m.start_ms >= duration_ms))
    ]
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loading else ErrorCode.NONE,
        "unknown_state_filters": [s for s in states if s not in known],
        "transaction_states": [
            {
                "transactional_id": m.transactional_id,
                "producer_id": m.producer_id,
                "transaction_state": m.state.wire_name,
            }
            for m in sorted(chosen, key=lambda m: m.transactional_id)
        ],
    }


def _topics(metadata: TxnMetadata) -> list[Body]:
    topics: dict[str, list[int]] = {}
    for tp in sorted(metadata.partitions):
        topics.setdefault(tp.topic, []).append(tp.partition)
    return [{"topic": t, "partitions": ids} for t, ids in topics.items()]


def _partition_answer(errors: dict[TopicPartition, ErrorCode]) -> Body:
    topics: dict[str, list[Body]] = {}
    for tp, error in errors.items():
        topics.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "partition_error_code": error}
        )
    return {
        "throttle_time_ms": 0,
        "results_by_topic": [{"name": t, "results_by_partition": parts} for t, parts in topics.items()],
    }


def _error_answer(error: ErrorCode) -> Body:
    return {"throttle_time_ms": 0, "error_code": error}
