"""Fetch (v4-v11): consumers read committed records from leaders; followers replicate from them.

A consumer (``replica_id`` -1) reads up to the high watermark, or with ``isolation_level`` 1
(read_committed) up to the last stable offset, and then also gets the aborted transactions of the
range it was sent (the others get null, as from Kafka); a follower (its broker id) reads up to the
log end offset, and its fetch offset tells the leader how far it has replicated, which may move the
high watermark and complete acks=all produces. Every answer carries the partition's last stable
offset. ``current_leader_epoch`` (v9+) is checked (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH); an
offset outside the log is OFFSET_OUT_OF_RANGE.

With fewer than ``min_bytes`` available and ``max_wait_ms`` > 0 the request waits in the fetch
purgatory until enough has arrived, a partition's state changes, or the wait is over; then every
partition is read again. Fetch sessions (KIP-227) are not kept: every response is a full one with
session id 0, which clients accept as "no session".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.log import Log, OffsetOutOfRange, end_offset
from broker.partition import PartitionError
from broker.purgatory import DelayedOperation
from broker.replica_manager import ReplicaManager
from broker.request_channel import Request
from protocol import ErrorCode
from zkstore.znodes import TopicPartition

CONSUMER = -1
READ_COMMITTED = 1


@dataclass(frozen=True, slots=True)
class Wanted:
    tp: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int


def partition_response(index: int, error: ErrorCode, **fields: Any) -> dict[str, Any]:
    """One partition of a Fetch answer; ``diverging_epoch`` (v12+, for a follower) only when given.
    ``aborted_transactions`` is null unless given (a read_committed consumer's read)."""
    return {
        "partition_index": index,
        "error_code": error,
        "high_watermark": fields.get("high_watermark", -1),
        "last_stable_offset": fields.get("last_stable_offset", -1),
        "log_start_offset": fields.get("log_start_offset", -1),
        "aborted_transactions": fields.get("aborted_transactions"),
        "preferred_read_replica": -1,
        "records": fields.get("records", b""),
        **({"diverging_epoch": fields["diverging_epoch"]} if "diverging_epoch" in fields else {}),
    }


class FetchApi:
    def __init__(
        self, rm: ReplicaManager, *, on_read: Callable[[dict[str, Any], bool], None] | None = None
    ) -> None:
        self.rm = rm
        self.on_read = on_read
        """Called with each answered fetch's response and whether a follower sent it (metrics)."""

    def handle(self, request: Request, body: dict[str, Any]) -> Any:
        replica_id = body["replica_id"]
        wanted = [
            Wanted(
                TopicPartition(topic["topic"], p["partition"]),
                p["fetch_offset"],
                p["partition_max_bytes"],
                p.get("current_leader_epoch", -1),
            )
            for topic in body["topics"]
            for p in topic["partitions"]
        ]
        committed = replica_id < 0 and body.get("isolation_level", 0) == READ_COMMITTED
        response, available, failed = self.read_all(replica_id, wanted, body["max_bytes"], committed)
        if body["max_wait_ms"] <= 0 or available >= body["min_bytes"] or failed or not wanted:
            self.count(response, replica_id)
            return response
        delayed = DelayedFetch(body["max_wait_ms"] / 1000.0, self, replica_id, wanted, body, committed)
        return self.rm.fetch_purgatory.watch(delayed, [w.tp for w in wanted])

    def count(self, response: dict[str, Any], replica_id: int) -> None:
        if self.on_read is not None:
            self.on_read(response, replica_id >= 0)

    def read_all(
        self, replica_id: int, wanted: list[Wanted], max_bytes: int, committed: bool = False
    ) -> tuple[dict[str, Any], int, bool]:
        """The response, the record bytes in it, and whether some partition failed; ``committed``
        for a read_committed consumer."""
        topics: dict[str, list[dict[str, Any]]] = {}
        total = 0
        failed = False
        now_ms = int(time.time() * 1000)
        for w in wanted:
            budget = min(w.max_bytes, max(0, max_bytes - total))
            entry = self._read(replica_id, w, budget, committed, first=total == 0, now_ms=now_ms)
            total += len(entry["records"] or b"")
            failed = failed or entry["error_code"] != ErrorCode.NONE
            topics.setdefault(w.tp.topic, []).append(entry)
        response = {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NONE,
            "session_id": 0,
            "responses": [{"topic": name, "partitions": parts} for name, parts in topics.items()],
        }
        return response, total, failed

    def _read(
        self, replica_id: int, w: Wanted, budget: int, committed: bool, *, first: bool, now_ms: int
    ) -> dict[str, Any]:
        index = w.tp.partition
        moved = False
        try:
            partition = self.rm.hosted(w.tp)
            with partition.lock:
                leader_log = partition.require_leader()
                partition.check_leader_epoch(w.current_leader_epoch)
                if replica_id >= 0:
                    if replica_id not in partition.replicas:
                        raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                    start, end = leader_log.log_start_offset, leader_log.log_end_offset
                    if not start <= w.fetch_offset <= end:  # validated before it counts as a position
                        raise OffsetOutOfRange(w.fetch_offset, start, end)
                    moved = partition.record_follower_fetch(replica_id, w.fetch_offset, now_ms)
                    self.rm.maybe_expand_isr(partition, replica_id)
                hw = partition.high_watermark
                lso = leader_log.last_stable_offset(hw)
                upper = leader_log.log_end_offset if replica_id >= 0 else (lso if committed else hw)
                start = leader_log.log_start_offset
            records = leader_log.read(w.fetch_offset, budget, upper_bound=upper, min_one_batch=first)
            aborted = _aborted(leader_log, w.fetch_offset, records) if committed else None
        except PartitionError as exc:
            return partition_response(index, exc.code)
        except OffsetOutOfRange as exc:  # the log start tells a follower behind it where to start over
            return partition_response(
                index, ErrorCode.OFFSET_OUT_OF_RANGE, log_start_offset=exc.log_start_offset
            )
        finally:
            if moved:
                self.rm.partition_changed(w.tp)
        return partition_response(
            index,
            ErrorCode.NONE,
            high_watermark=hw,
            last_stable_offset=lso,
            log_start_offset=start,
            records=records,
            aborted_transactions=aborted,
        )

    def available(self, replica_id: int, w: Wanted, committed: bool = False) -> bool:
        """Whether a fetch at ``w`` would now get records, or an error (either completes the wait)."""
        try:
            partition = self.rm.hosted(w.tp)
            with partition.lock:
                leader_log = partition.require_leader()
                partition.check_leader_epoch(w.current_leader_epoch)
                if replica_id >= 0:
                    upper = leader_log.log_end_offset
                elif committed:
                    upper = leader_log.last_stable_offset(partition.high_watermark)
                else:
                    upper = partition.high_watermark
                return upper > w.fetch_offset or w.fetch_offset < leader_log.log_start_offset
        except PartitionError:
            return True


def _aborted(leader_log: Log, fetch_offset: int, records: bytes) -> list[dict[str, int]]:
    """The aborted transactions a read_committed consumer needs for ``records``, read from
    ``fetch_offset``: those overlapping it up to the offset after its last batch."""
    end = end_offset(records)
    if end is None:
        return []
    return [
        {"producer_id": producer_id, "first_offset": first_offset}
        for producer_id, first_offset in leader_log.aborted_transactions(fetch_offset, end)
    ]


class DelayedFetch(DelayedOperation):
    def __init__(
        self,
        timeout_s: float,
        api: FetchApi,
        replica_id: int,
        wanted: list[Wanted],
        body: dict[str, Any],
        committed: bool = False,
    ) -> None:
        super().__init__(timeout_s)
        self.api = api
        self.replica_id = replica_id
        self.wanted = wanted
        self.committed = committed
        """A read_committed consumer's: ready once the last stable offset, not the high watermark, moves."""
        self.min_bytes = body["min_bytes"]
        self.max_bytes = body["max_bytes"]
        self._read: tuple[dict[str, Any], int] | None = None
        """The read that proved the operation ready, answered as it is rather than read again."""

    def ready(self) -> bool:
        hits = [w for w in self.wanted if self.api.available(self.replica_id, w, self.committed)]
        if not hits:
            return False
        if self.min_bytes <= 1:
            return True
        response, total, failed = self.api.read_all(
            self.replica_id, self.wanted, self.max_bytes, self.committed
        )
        if failed or total >= self.min_bytes:
            self._read = (response, total)
            return True
        return False

    def reply(self) -> dict[str, Any]:
        if self._read is not None:
            response, _ = self._read
        else:
            response, _, _ = self.api.read_all(self.replica_id, self.wanted, self.max_bytes, self.committed)
        self.api.count(response, self.replica_id)
        return response
