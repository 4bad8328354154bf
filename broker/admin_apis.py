"""The Admin API's topic requests on the brokers: CreateTopics, DeleteTopics, CreatePartitions,
DescribeCluster, DescribeLogDirs, and the automatic creation of topics that Metadata asks for.

In ZooKeeper-mode Kafka these are served by the controller broker. Here **every broker serves them**
(Metadata and DescribeCluster name the lowest live broker as ``controller_id``, see
``broker.metadata_api.admin_node``, so clients that send admin requests to "the controller" reach a
broker that answers them). The topic requests are :mod:`admin.topic_requests`, which the controller
daemon serves too: this module gives it the metadata cache as its view and answers from the handler
threads. Those threads return a future at once; the work runs on the broker's event loop and waits
(holding no thread) until the metadata cache shows what the request asked for, or its timeout.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Collection, Coroutine, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from admin.topic_requests import Body, TopicDefaults, TopicRequests
from broker.metadata_api import admin_node
from broker.metadata_cache import MetadataCache
from broker.on_loop import answer_on_loop
from broker.request_channel import Request
from daemon.eventlog import EventLog
from protocol import ErrorCode
from zkstore.aio import AsyncZooKeeper
from zkstore.znodes import TopicPartition

AUTO_CREATE_WAIT_S = 10.0
"""How long a Metadata handler thread waits for a topic's creation before answering LEADER_NOT_AVAILABLE."""


class CachedTopics:
    """The metadata cache as :class:`admin.topic_requests.TopicView`: the brokers and leaders the
    controller last told this broker of."""

    def __init__(self, cache: MetadataCache) -> None:
        self.cache = cache

    def broker_ids(self) -> Collection[int]:
        return self.cache.snapshot.brokers.keys()

    def partition_leaders(self, topic: str) -> Mapping[int, int] | None:
        partitions = self.cache.snapshot.topics.get(topic)
        return None if partitions is None else {p: state.leader for p, state in partitions.items()}


class AdminApis:
    def __init__(
        self,
        zk: Callable[[], AsyncZooKeeper],
        loop: Callable[[], asyncio.AbstractEventLoop],
        cache: MetadataCache,
        events: EventLog,
        defaults: TopicDefaults,
        *,
        broker_id: int,
        cluster_id: Callable[[], str | None],
        create_internal: Callable[[str], Coroutine[Any, Any, None]] | None = None,
        log_dir: Path = Path("."),
        log_sizes: Callable[[], dict[TopicPartition, int]] = dict,
    ) -> None:
        self.loop = loop
        self.cache = cache
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.log_dir = log_dir
        self.log_sizes = log_sizes
        """Each local partition's log size in bytes (the log manager's view)."""
        self.topics = TopicRequests(
            zk, CachedTopics(cache), events, defaults, create_internal=create_internal
        )

    def _run(self, coro: Coroutine[Any, Any, Body]) -> Future[Body]:
        return answer_on_loop(self.loop(), coro, lambda body: body, "an admin request")

    # ------------------------------------------------------------------ the topic requests

    def create_topics(self, request: Request, body: Body) -> Future[Body]:
        return self._run(self.topics.create_topics(body, request.header.api_version))

    def delete_topics(self, request: Request, body: Body) -> Future[Body]:
        return self._run(self.topics.delete_topics(body, request.header.api_version))

    def create_partitions(self, request: Request, body: Body) -> Future[Body]:
        return self._run(self.topics.create_partitions(body, request.header.api_version))

    # ------------------------------------------------------------------ DescribeCluster

    def describe_cluster(self, request: Request, body: Body) -> Body:
        snapshot = self.cache.snapshot
        endpoint_type = body.get("endpoint_type", 1)
        error = ErrorCode.NONE
        message = None
        if endpoint_type != 1:
            error = (
                ErrorCode.MISMATCHED_ENDPOINT_TYPE
                if endpoint_type == 2
                else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
            )
            message = "only brokers are described (endpoint type 1)"
        brokers = [
            {"broker_id": b, "host": e[0], "port": e[1], "rack": broker.rack}
            for b, broker in sorted(snapshot.brokers.items())
            if (e := broker.endpoints.get(request.listener)) is not None
        ]
        return {
            "throttle_time_ms": 0,
            "error_code": error,
            "error_message": message,
            "endpoint_type": 1,
            "cluster_id": self.cluster_id() or "",
            "controller_id": admin_node(snapshot, self.broker_id),
            "brokers": brokers if not error else [],
            "cluster_authorized_operations": -(2**31),
        }

    # ------------------------------------------------------------------ DescribeLogDirs

    def describe_log_dirs(self, request: Request, body: Body) -> Body:
        """The one log directory with the size of each local partition asked for (null: all), as
        Kafka answers: no partition here is being moved between directories, so lags are 0."""
        wanted = body["topics"]
        asked = None if wanted is None else {(t["topic"], p) for t in wanted for p in t["partitions"]}
        by_topic: dict[str, list[Body]] = {}
        for tp, size in sorted(self.log_sizes().items()):
            if asked is None or (tp.topic, tp.partition) in asked:
                by_topic.setdefault(tp.topic, []).append(
                    {
                        "partition_index": tp.partition,
                        "partition_size": size,
                        "offset_lag": 0,
                        "is_future_key": False,
                    }
                )
        usage = shutil.disk_usage(self.log_dir)
        result = {
            "error_code": ErrorCode.NONE,
            "log_dir": str(self.log_dir.resolve()),
            "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
            "total_bytes": usage.total,
            "usable_bytes": usage.free,
        }
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": [result]}

    # ------------------------------------------------------------------ Metadata's auto-creation

    def auto_create(self, topic: str) -> ErrorCode:
        """Kafka's answer for an unknown topic a Metadata request asked for, creating it if allowed
        (called on a handler thread: the ZooKeeper write is waited for, as Kafka writes synchronously)."""
        done = asyncio.run_coroutine_threadsafe(self.topics.auto_create(topic), self.loop())
        try:
            return done.result(timeout=AUTO_CREATE_WAIT_S)
        except TimeoutError:
            return ErrorCode.LEADER_NOT_AVAILABLE
