"""WriteTxnMarkers on a partition leader: each marker appended as a control batch, answered once the
partition's ISR has it (Kafka appends markers with acks=all).

A marker the log refuses says why: INVALID_PRODUCER_EPOCH (an older producer epoch than the partition
has seen) or TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch) tell the coordinator that
the transaction is no longer its to finish. A marker written to a ``__consumer_offsets`` partition
also settles the transaction's offset commits in the group coordinator: applied on COMMIT, dropped on
ABORT.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from broker.produce import ProduceApi
from broker.request_channel import Request
from protocol import ErrorCode
from protocol.topic_partition import TopicPartition

__all__ = ["WriteTxnMarkersApi"]

Body = dict[str, Any]


class WriteTxnMarkersApi:
    def __init__(
        self,
        produce: ProduceApi,
        *,
        offsets_topic: str,
        on_offsets_marker: Callable[[int, int, bool], None],
        timeout_s: float,
    ) -> None:
        self.produce = produce
        self.offsets_topic = offsets_topic
        self.on_offsets_marker = on_offsets_marker
        """(offsets partition, producer id, committed) once such a marker is written (any thread)."""
        self.timeout_s = timeout_s

    def handle(self, request: Request, body: Body) -> Future[Body]:
        settled: list[tuple[int, int, bool, TopicPartition, Future[ErrorCode]]] = []
        for index, marker in enumerate(body["markers"]):
            pid, epoch, commit = marker["producer_id"], marker["producer_epoch"], marker["transaction_result"]
            for topic in marker["topics"]:
                for partition in topic["partition_indexes"]:
                    tp = TopicPartition(topic["name"], partition)
                    written = self.produce.append_marker(
                        tp, pid, epoch, marker["coordinator_epoch"], commit, timeout_s=self.timeout_s
                    )
                    settled.append((index, pid, commit, tp, written))
        out: Future[Body] = Future()
        remaining = [len(settled)]
        lock = threading.Lock()

        def one_done(_: Future[ErrorCode]) -> None:  # futures settle on whichever thread settles them
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                out.set_result(self._answer(body, settled))

        if not settled:
            out.set_result(self._answer(body, settled))
        for *_, written in settled:
            written.add_done_callback(one_done)
        return out

    def _answer(
        self, body: Body, settled: list[tuple[int, int, bool, TopicPartition, Future[ErrorCode]]]
    ) -> Body:
        errors: list[dict[str, list[Body]]] = [{} for _ in body["markers"]]
        for index, pid, commit, tp, written in settled:
            error = written.result()
            if error == ErrorCode.NONE and tp.topic == self.offsets_topic:
                self.on_offsets_marker(tp.partition, pid, commit)
            errors[index].setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "error_code": error}
            )
        return {
            "markers": [
                {
                    "producer_id": marker["producer_id"],
                    "topics": [{"name": t, "partitions": parts} for t, parts in errors[index].items()],
                }
                for index, marker in enumerate(body["markers"])
            ]
        }
