"""Followers replicate from leaders: one fetcher thread per leader broker (Kafka's ReplicaFetcherThread).

A partition that becomes a follower is handed to the fetcher of its leader. Before fetching, the
fetcher truncates the local log where it diverges from the leader's (KIP-101/279): it asks the leader
with OffsetForLeaderEpoch where the follower's latest epoch ended there, and cuts the log at that
offset, not blindly at the high watermark; when the leader answers with an epoch the follower never
had, it cuts back to its own previous epoch and asks again (``truncation_point``). Then it fetches
from the log end offset (long polls of ``replica.fetch.wait.max.ms``), appends what comes exactly as
the leader wrote it, and takes the leader's high watermark, capped at its own log end offset.

The fetch offset is also the follower's report to the leader: everything before it is replicated,
which is how the leader moves the high watermark. A partition whose leader answers with an error
(a newer or older leader epoch, not the leader any more) waits here for the next LeaderAndIsr.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.partition import Partition
from network.connection import BlockingConnection
from protocol import ApiKey, CorruptRecordBatch, ErrorCode
from security.config import ClientSecurity
from zkstore.znodes import TopicPartition

log = logging.getLogger("broker.replica_fetcher")

FETCH_VERSION = 11
OFFSET_FOR_LEADER_EPOCH_VERSION = 3


@dataclass(frozen=True)
class FetcherSettings:
    broker_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    """replica.fetch.response.max.bytes"""
    partition_max_bytes: int
    """replica.fetch.max.bytes"""
    backoff_s: float
    socket_timeout_s: float
    security: ClientSecurity | None = None
    """TLS and SASL towards the leaders' inter-broker listener."""

    @classmethod
    def defaults(cls, broker_id: int) -> FetcherSettings:
        """Kafka's defaults (replica.fetch.* and replica.socket.timeout.ms)."""
        return cls(broker_id, 500, 1, 10485760, 1048576, 1.0, 30.0)


RETRIABLE = frozenset(
    {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_LEADER_EPOCH}
)
"""The leader has not taken its LeaderAndIsr yet (a new topic, a leader change in flight): ask again
after ``replica.fetch.backoff.ms``. Other errors (FENCED_LEADER_EPOCH: our epoch is older) wait for
the next LeaderAndIsr."""


@dataclass(frozen=True)
class Truncation:
    offset: int
    """Cut the log here (nothing happens at or past its end)."""
    complete: bool
    """False: the follower never had the leader's epoch; ask the leader again after cutting."""


def truncation_point(
    leader_epoch: int, leader_end: int, local: tuple[int, int], log_end_offset: int
) -> Truncation:
    """Where a follower cuts its log, given the leader's OffsetForLeaderEpoch answer (KIP-279).

    ``local`` is the follower's own answer for ``leader_epoch``: its largest epoch at or below it and
    where that epoch ends in its log. When the follower also has the leader's epoch, the logs agree
    up to the smaller of the two ends of that epoch: the follower's may end before its log end, when
    it led a later epoch itself. When it never had that epoch, it cuts where its own largest epoch
    below ends and asks again about that epoch; each round asks about a smaller epoch, so this ends.
    """
    local_epoch, local_end = local
    if local_end < 0:  # no epoch at or below the leader's here
        return Truncation(min(leader_end, log_end_offset), complete=True)
    if local_epoch == leader_epoch:
        return Truncation(min(leader_end, local_end, log_end_offset), complete=True)
    return Truncation(min(local_end, log_end_offset), complete=False)


@dataclass(eq=False)
class _Fetching:
    partition: Partition
    leader_epoch: int
    truncated: bool = False
    failed: bool = False
    not_before: float = 0.0
    """``time.monotonic()`` before which this partition is not fetched (backing off)."""

    def due(self, now: float) -> bool:
        return not self.failed and self.not_before <= now


class ReplicaFetcher(threading.Thread):
    def __init__(
        self,
        leader_id: int,
        endpoint: tuple[str, int],
        settings: FetcherSettings,
        on_change: Callable[[TopicPartition], None],
        emit: Callable[..., object],
        checkpoint: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__(name=f"ReplicaFetcherThread-0-{leader_id}", daemon=True)
        self.leader_id = leader_id
        self.endpoint = endpoint
        self.settings = settings
        self.on_change = on_change
        self.emit = emit
        self.checkpoint = checkpoint
        """The control plane's give-way point (KIP-291 in one interpreter), called between partitions."""
        self._lock = threading.Condition()
        self._partitions: dict[TopicPartition, _Fetching] = {}
        self._stopped = False
        self._connection: BlockingConnection | None = None

    # -- called by the replica manager

    def add(self, partition: Partition, leader_epoch: int) -> None:
        with self._lock:
            self._partitions[partition.tp] = _Fetching(partition, leader_epoch)
            self._lock.notify()

    def remove(self, tp: TopicPartition) -> None:
        with self._lock:
            self._partitions.pop(tp, None)

    def partition_count(self) -> int:
        with self._lock:
            return len(self._partitions)

    def shutdown(self, *, wait: bool = True) -> None:
        with self._lock:
            self._stopped = True
            self._lock.notify()
        if wait:
            self.join(self.settings.socket_timeout_s + 5)

    # -- the thread

    def run(self) -> None:
        while True:
            with self._lock:
                while not self._stopped:
                    now = time.monotonic()
                    if any(f.due(now) for f in self._partitions.values()):
                        break
                    backing_off = [f.not_before for f in self._partitions.values() if not f.failed]
                    self._lock.wait(max(0.0, min(backing_off) - now) if backing_off else None)
                if self._stopped:
                    break
                now = time.monotonic()
                work = {tp: f for tp, f in self._partitions.items() if f.due(now)}
            try:
                connection = self._connect()
                untruncated = {tp: f for tp, f in work.items() if not f.truncated}
                if untruncated:
                    self._truncate(connection, untruncated)
                ready = {tp: f for tp, f in work.items() if f.truncated and not f.failed}
                if ready:
                    self._fetch(connection, ready)
            except (ConnectionError, TimeoutError, OSError) as exc:
                log.warning("fetcher for leader %d at %s:%d: %s", self.leader_id, *self.endpoint, exc)
                self._disconnect()
                self._pause(self.settings.backoff_s)
            except Exception:
                log.exception("fetcher for leader %d failed; retrying", self.leader_id)
                self._disconnect()
                self._pause(self.settings.backoff_s)
        self._disconnect()

    def _pause(self, seconds: float) -> None:
        with self._lock:
            if not self._stopped:
                self._lock.wait(seconds)

    def _connect(self) -> BlockingConnection:
        if self._connection is None:
            host, port = self.endpoint
            self._connection = BlockingConnection(
                host,
                port,
                client_id=f"broker-{self.settings.broker_id}-fetcher-0",
                timeout=self.settings.socket_timeout_s,
                security=self.settings.security,
            )
        return self._connection

    def _disconnect(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _current(self, tp: TopicPartition, fetching: _Fetching) -> bool:
        """Still ours to fetch: same assignment and the partition still follows this leader and epoch."""
        with self._lock:
            if self._partitions.get(tp) is not fetching:
                return False
        p = fetching.partition
        return p.leader == self.leader_id and p.leader_epoch == fetching.leader_epoch and not p.stopped

    def _fail(self, tp: TopicPartition, fetching: _Fetching, code: int) -> None:
        """Back off and ask again (RETRIABLE), or stop until a LeaderAndIsr hands the partition over."""
        error = ErrorCode.name_of(code)
        if code in RETRIABLE:
            fetching.not_before = time.monotonic() + self.settings.backoff_s
            log.info("%s-%d: leader %d answered %s; retrying", tp.topic, tp.partition, self.leader_id, error)
            return
        fetching.failed = True
        log.info(
            "%s-%d: leader %d answered %s; waiting for LeaderAndIsr",
            tp.topic,
            tp.partition,
            self.leader_id,
            error,
        )
        self.emit(
            "fetch_partition_failed",
            topic=tp.topic,
            partition=tp.partition,
            leader=self.leader_id,
            error=error,
        )

    # -- truncation (KIP-101/279)

    def _truncate(self, connection: BlockingConnection, partitions: dict[TopicPartition, _Fetching]) -> None:
        asked: dict[str, list[dict[str, Any]]] = {}
        latest: dict[TopicPartition, int | None] = {}
        for tp, fetching in partitions.items():
            p = fetching.partition
            with p.lock:
                assert p.log is not None
                latest[tp] = p.log.latest_epoch()
            asked.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": fetching.leader_epoch,
                    "leader_epoch": -1 if latest[tp] is None else latest[tp],
                }
            )
        response = connection.send(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            OFFSET_FOR_LEADER_EPOCH_VERSION,
            {
                "replica_id": self.settings.broker_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in asked.items()],
            },
            timeout=self.settings.socket_timeout_s,
        )
        for topic in response["topics"]:
            for answer in topic["partitions"]:
                tp = TopicPartition(topic["topic"], answer["partition"])
                asking = partitions.get(tp)
                if asking is None or not self._current(tp, asking):
                    continue
                if answer["error_code"] != ErrorCode.NONE:
                    self._fail(tp, asking, answer["error_code"])
                    continue
                self._truncate_one(tp, asking, latest[tp], answer["leader_epoch"], answer["end_offset"])

    def _truncate_one(
        self, tp: TopicPartition, fetching: _Fetching, local_epoch: int | None, epoch: int, end_offset: int
    ) -> None:
        p = fetching.partition
        with p.lock:
            if not self._current(tp, fetching) or p.log is None:
                return
            before = p.log.log_end_offset
            if local_epoch is None or epoch < 0 or end_offset < 0:
                point = Truncation(min(p.high_watermark, before), complete=True)  # Kafka's fallback
            else:
                point = truncation_point(epoch, end_offset, p.log.end_offset_for_epoch(epoch), before)
            after = p.log.truncate_to(point.offset) if point.offset < before else before
            p.high_watermark = min(p.high_watermark, after)
            fetching.truncated = point.complete
        self.emit(
            "follower_truncated",
            topic=tp.topic,
            partition=tp.partition,
            leader=self.leader_id,
            leader_epoch=fetching.leader_epoch,
            local_epoch=local_epoch,
            leader_answer=[epoch, end_offset],
            log_end_offset_before=before,
            log_end_offset=after,
            complete=point.complete,
        )

    # -- fetching

    def _fetch(self, connection: BlockingConnection, partitions: dict[TopicPartition, _Fetching]) -> None:
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, fetching in partitions.items():
            p = fetching.partition
            with p.lock:
                assert p.log is not None
                offset, start = p.log.log_end_offset, p.log.log_start_offset
            topics.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": fetching.leader_epoch,
                    "fetch_offset": offset,
                    "log_start_offset": start,
                    "partition_max_bytes": self.settings.partition_max_bytes,
                }
            )
        s = self.settings
        response = connection.send(
            ApiKey.FETCH,
            FETCH_VERSION,
            {
                "replica_id": s.broker_id,
                "max_wait_ms": s.max_wait_ms,
                "min_bytes": s.min_bytes,
                "max_bytes": s.max_bytes,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
            timeout=s.socket_timeout_s + s.max_wait_ms / 1000.0,
        )
        for topic in response["responses"]:
            for answer in topic["partitions"]:
                tp = TopicPartition(topic["topic"], answer["partition_index"])
                fetched = partitions.get(tp)
                if fetched is not None:
                    self.checkpoint()
                    self._apply(tp, fetched, answer)

    def _apply(self, tp: TopicPartition, fetching: _Fetching, answer: dict[str, Any]) -> None:
        error = answer["error_code"]
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._out_of_range(tp, fetching, answer)
            return
        if error != ErrorCode.NONE:
            self._fail(tp, fetching, error)
            return
        p = fetching.partition
        records = answer["records"] or b""
        with p.lock:
            if not self._current(tp, fetching) or p.log is None:
                return
            try:
                if records:
                    p.log.append_as_follower(records)
            except (CorruptRecordBatch, ValueError) as exc:
                log.error(
                    "%s-%d: refusing what leader %d sent: %s", tp.topic, tp.partition, self.leader_id, exc
                )
                fetching.truncated = False  # compare epochs with the leader again before going on
                return
            p.follower_high_watermark(answer["high_watermark"])
            p.log.on_high_watermark(p.high_watermark)  # ended transactions it passed are forgotten
        self.on_change(tp)

    def _out_of_range(self, tp: TopicPartition, fetching: _Fetching, answer: dict[str, Any]) -> None:
        """Behind the leader's log start (retention): start over there. Otherwise compare epochs again."""
        p = fetching.partition
        leader_start = answer.get("log_start_offset", -1)
        with p.lock:
            if not self._current(tp, fetching) or p.log is None:
                return
            if leader_start >= 0 and p.log.log_end_offset < leader_start:
                p.log.truncate_fully_and_start_at(leader_start)
                p.high_watermark = leader_start
            else:
                fetching.truncated = False
        self.emit(
            "follower_out_of_range",
            topic=tp.topic,
            partition=tp.partition,
            leader_log_start_offset=leader_start,
        )


class ReplicaFetcherManager:
    """The fetcher threads, one per leader broker, created and ended as partitions come and go."""

    def __init__(
        self,
        settings: FetcherSettings,
        on_change: Callable[[TopicPartition], None],
        emit: Callable[..., object],
        checkpoint: Callable[[], None] = lambda: None,
    ) -> None:
        self.settings = settings
        self.on_change = on_change
        self.emit = emit
        self.checkpoint = checkpoint
        self._lock = threading.Lock()
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._owner: dict[TopicPartition, int] = {}

    def follow(
        self, partition: Partition, leader_id: int, endpoint: tuple[str, int], leader_epoch: int
    ) -> None:
        """Fetch ``partition`` from ``leader_id`` at ``endpoint`` (replacing any earlier assignment)."""
        stale: ReplicaFetcher | None = None
        with self._lock:
            self._unassign(partition.tp)
            fetcher = self._fetchers.get(leader_id)
            if fetcher is not None and fetcher.endpoint != endpoint:
                stale, fetcher = fetcher, None
                del self._fetchers[leader_id]
                for tp, owner in list(self._owner.items()):
                    if owner == leader_id:
                        del self._owner[tp]
            if fetcher is None:
                fetcher = ReplicaFetcher(
                    leader_id, endpoint, self.settings, self.on_change, self.emit, self.checkpoint
                )
                self._fetchers[leader_id] = fetcher
                fetcher.start()
            fetcher.add(partition, leader_epoch)
            self._owner[partition.tp] = leader_id
        if stale is not None:
            stale.shutdown(wait=False)  # on the control plane's thread: let it end on its own

    def unfollow(self, tp: TopicPartition) -> None:
        with self._lock:
            self._unassign(tp)

    def _unassign(self, tp: TopicPartition) -> None:
        owner = self._owner.pop(tp, None)
        if owner is not None and owner in self._fetchers:
            self._fetchers[owner].remove(tp)

    def shutdown(self) -> None:
        with self._lock:
            fetchers = list(self._fetchers.values())
            self._fetchers.clear()
            self._owner.clear()
        for fetcher in fetchers:
            fetcher.shutdown()
