"""Fetch v12-v17, what Apache Kafka 3.9's replica fetchers send, served by the v4-v11 handler.

A Kafka follower names its Fetch version from its IBP without asking the leader which it speaks: v17
at IBP 3.9 (v12 for a topic it knows no id of). This module reads such a request into the v11 form
``FetchApi`` serves, answers beforehand what Kafka's leader answers before reading, and writes the
answer back in the request's layout:

* topic ids (v13+) become names as Kafka's leader reads them, through the metadata cache (UpdateMetadata
  v7+), else the ids this broker's partitions hold (LeaderAndIsr v5+); an id known to neither is
  UNKNOWN_TOPIC_ID, and a partition whose log records another id is INCONSISTENT_TOPIC_ID;
* the follower's id comes from ``replica_state`` (v15+);
* ``last_fetched_epoch`` (v12+, truncation on fetch, KIP-595): where the leader's epoch cache shows
  that the follower's log diverges (the largest epoch up to the follower's ends before its fetch
  offset, or is an older epoch), the partition is answered with ``diverging_epoch`` and no records,
  and the follower's position is not taken from it; an epoch the cache cannot place is
  OFFSET_OUT_OF_RANGE. Such an answer is not kept waiting (Kafka answers at once).

Clients are still offered v4-v11 (``ADVERTISED_MAX_VERSIONS`` in ``broker/apis.py``): v13+ name topics by
id, which they learn from Metadata v10+, not served here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from broker.fetch import FetchApi, partition_response
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from broker.request_channel import Request
from protocol import ErrorCode
from protocol.messages.fetch import (
    FIRST_FLEXIBLE_VERSION,
    FIRST_REPLICA_STATE_VERSION,
    FIRST_TOPIC_ID_VERSION,
)
from zkstore.znodes import TopicPartition

__all__ = ["FlexibleFetch"]

UNDEFINED = -1


@dataclass(slots=True)
class _Translation:
    """One v12+ request read into v11's form: what goes to ``FetchApi`` and what is answered here."""

    replica_id: int
    topics: list[dict[str, Any]] = field(default_factory=list)
    """v11's ``topics``, by name."""
    keys: dict[str, Any] = field(default_factory=dict)
    """Topic name -> its key in the answer (the id from v13, else the name)."""
    early: dict[Any, list[dict[str, Any]]] = field(default_factory=dict)
    """Partitions answered here, by topic key."""


class FlexibleFetch:
    """The Fetch handler of every version: v4-v11 go straight to ``FetchApi``."""

    def __init__(self, fetch: FetchApi, rm: ReplicaManager, cache: MetadataCache) -> None:
        self.fetch = fetch
        self.rm = rm
        self.cache = cache

    def handle(self, request: Request, body: dict[str, Any]) -> Any:
        version = request.header.api_version
        if version < FIRST_FLEXIBLE_VERSION:
            return self.fetch.handle(request, body)
        read = self._translate(version, body)
        legacy = {**body, "replica_id": read.replica_id, "topics": read.topics}
        if read.early:
            legacy["max_wait_ms"] = 0
        reply = self.fetch.handle(request, legacy)
        return _then(reply, lambda response: _answer(response, read, version))

    def _translate(self, version: int, body: dict[str, Any]) -> _Translation:
        replica_id = (
            body["replica_state"]["replica_id"]
            if version >= FIRST_REPLICA_STATE_VERSION
            else body["replica_id"]
        )
        read = _Translation(replica_id)
        for topic in body["topics"]:
            key = topic["topic_id"] if version >= FIRST_TOPIC_ID_VERSION else topic["topic"]
            name = self._name(key) if version >= FIRST_TOPIC_ID_VERSION else key
            if name is None:
                read.early.setdefault(key, []).extend(
                    partition_response(p["partition"], ErrorCode.UNKNOWN_TOPIC_ID)
                    for p in topic["partitions"]
                )
                continue
            read.keys[name] = key
            kept = []
            for p in topic["partitions"]:
                topic_id = key if version >= FIRST_TOPIC_ID_VERSION else None
                early = self._before_reading(TopicPartition(name, p["partition"]), p, topic_id)
                if early is None:
                    kept.append(p)
                else:
                    read.early.setdefault(key, []).append(early)
            if kept:
                read.topics.append({"topic": name, "partitions": kept})
        return read

    def _name(self, topic_id: uuid.UUID) -> str | None:
        """The topic a v13+ request names by ``topic_id``, as this broker knows it."""
        name = self.cache.snapshot.topic_names.get(topic_id)
        return name if name is not None else self.rm.topic_name(topic_id)

    def _before_reading(
        self, tp: TopicPartition, wanted: dict[str, Any], topic_id: uuid.UUID | None
    ) -> dict[str, Any] | None:
        """Kafka's checks before a read: the partition's topic id, then ``last_fetched_epoch`` on a
        leader. The partition's answer when the id is not its log's, the follower's log diverges or
        its epoch cannot be placed; None to read it as usual (errors such as NOT_LEADER_OR_FOLLOWER and
        FENCED_LEADER_EPOCH are the read's)."""
        partition = self.rm.partitions.get(tp)
        if partition is None:
            return None
        if topic_id is not None and partition.topic_id not in (None, topic_id):
            return partition_response(tp.partition, ErrorCode.INCONSISTENT_TOPIC_ID)
        last_fetched = wanted.get("last_fetched_epoch", UNDEFINED)
        if last_fetched < 0:
            return None
        with partition.lock:
            current = wanted.get("current_leader_epoch", UNDEFINED)
            if (
                not partition.is_leader
                or partition.log is None
                or current not in (UNDEFINED, partition.leader_epoch)
            ):
                return None
            leader_log = partition.log
            epoch, end_offset = leader_log.end_offset_for_epoch(last_fetched)
            start, hw = leader_log.log_start_offset, partition.high_watermark
            lso = leader_log.last_stable_offset(hw)
        offset = wanted["fetch_offset"]
        if epoch == UNDEFINED or end_offset == UNDEFINED:
            return partition_response(tp.partition, ErrorCode.OFFSET_OUT_OF_RANGE, log_start_offset=start)
        if offset < start or (epoch >= last_fetched and end_offset >= offset):
            return None  # the read answers an offset below the log start, or reads on
        diverging = {"epoch": epoch, "end_offset": end_offset}
        return partition_response(
            tp.partition,
            ErrorCode.NONE,
            high_watermark=hw,
            last_stable_offset=lso,
            log_start_offset=start,
            diverging_epoch=diverging,
        )


def _answer(response: dict[str, Any], read: _Translation, version: int) -> dict[str, Any]:
    """``FetchApi``'s v11 answer in the request's layout, with the partitions answered beforehand."""
    key_field = "topic_id" if version >= FIRST_TOPIC_ID_VERSION else "topic"
    topics: dict[Any, list[dict[str, Any]]] = {}
    for topic in response["responses"]:
        topics.setdefault(read.keys[topic["topic"]], []).extend(topic["partitions"])
    for key, partitions in read.early.items():
        topics.setdefault(key, []).extend(partitions)
    return {
        **{k: v for k, v in response.items() if k != "responses"},
        "responses": [{key_field: key, "partitions": partitions} for key, partitions in topics.items()],
    }


def _then(reply: Any, finish: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """``finish`` applied to a reply now, or once a waiting one (a Future) completes."""
    if isinstance(reply, dict):
        return finish(reply)
    if not isinstance(reply, Future):
        return reply
    out: Future[dict[str, Any]] = Future()

    def done(waited: Future[dict[str, Any]]) -> None:
        try:
            out.set_result(finish(waited.result()))
        except Exception as exc:  # surfaces as the request's failure, never a lost answer
            out.set_exception(exc)

    reply.add_done_callback(done)
    return out
