"""The Admin API's topic requests on the brokers: CreateTopics, DeleteTopics, CreatePartitions,
DescribeCluster, and the automatic creation of topics that Metadata asks for.

In ZooKeeper-mode Kafka these are served by the controller broker. Here the controller is a separate
daemon that speaks no client API, so **every broker serves them**, writing ZooKeeper in Kafka's
layout through :mod:`zkstore.topic_writes`, the code ``python -m cluster topics`` uses; the controller
then does the rest as for any topic. Metadata and DescribeCluster name the lowest live broker as
``controller_id`` (see ``broker.metadata_api.admin_node``), so clients that send admin requests to
"the controller" reach a broker that answers them.

Handlers run on the data-plane threads; the ZooKeeper work runs on the broker's event loop, and a
request waits (holding no thread) until the metadata cache shows what it asked for, or its timeout:
REQUEST_TIMED_OUT then, as Kafka answers, with the change made and still going on.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
import uuid
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from broker.config import TopicDefaults
from broker.metadata_api import admin_node
from broker.metadata_cache import MetadataCache
from broker.on_loop import answer_on_loop
from broker.request_channel import Request
from broker.topic_configs import InvalidTopicConfig, check_value, cleanup_policies
from daemon.eventlog import EventLog
from placement.assignment import assign_replicas
from placement.errors import AdminError
from protocol import ErrorCode
from zkstore import entity_configs, topic_writes, znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.znodes import TopicPartition

log = logging.getLogger("broker.admin")

T = TypeVar("T")
Body = dict[str, Any]
POLL_S = 0.05
"""How often a waiting admin request looks at the metadata cache again."""

KAFKA_TOPIC_CONFIG_NAMES = frozenset(
    {
        "cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
        "flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
        "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
        "max.compaction.lag.ms", "max.message.bytes", "message.downconversion.enable",
        "message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
        "message.timestamp.difference.max.ms",
        "message.timestamp.type", "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas",
        "preallocate", "remote.storage.enable", "retention.bytes", "retention.ms", "segment.bytes",
        "segment.index.bytes", "segment.jitter.ms", "segment.ms", "unclean.leader.election.enable",
    }
)  # fmt: skip
"""Kafka's topic-level config names: anything else is INVALID_CONFIG, as Kafka's LogConfig says."""


class AdminFailure(Exception):
    """A topic's request refused with ``code`` and a message for the client."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def admin_error(exc: AdminError) -> AdminFailure:
    """Kafka's error code for a refusal of the shared admin code (its messages are Kafka's tools')."""
    return AdminFailure(ErrorCode[exc.kind] if exc.kind else ErrorCode.INVALID_REQUEST, str(exc))


def check_configs(configs: dict[str, str | None]) -> None:
    for name, value in configs.items():
        if value is None:
            raise AdminFailure(
                ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {name}"
            )
        if name not in KAFKA_TOPIC_CONFIG_NAMES:
            raise AdminFailure(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        try:
            check_value(name, value)
        except InvalidTopicConfig as exc:
            raise AdminFailure(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if name == "cleanup.policy" and "compact" in cleanup_policies(value):
            raise AdminFailure(
                ErrorCode.INVALID_CONFIG,
                "cleanup.policy=compact is not supported by this cluster (logs are never compacted)",
            )


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
        self.zk = zk
        self.loop = loop
        self.cache = cache
        self.events = events
        self.defaults = defaults
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.create_internal = create_internal
        self.log_dir = log_dir
        self.log_sizes = log_sizes
        """Each local partition's log size in bytes (the log manager's view)."""
        self._creating: set[str] = set()

    def _run(self, coro: Coroutine[Any, Any, T], answer: Callable[[T], Body]) -> Future[Body]:
        return answer_on_loop(self.loop(), coro, answer, "an admin request")

    async def _until(self, condition: Callable[[], bool], timeout_ms: int) -> bool:
        """Whether the metadata cache came to satisfy ``condition`` within ``timeout_ms``."""
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000.0
        while not condition():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(POLL_S)
        return True

    def _gone(self, topic: str) -> bool:
        return topic not in self.cache.snapshot.topics

    def _led(self, topic: str, partitions: int) -> bool:
        known = self.cache.snapshot.topics.get(topic, {})
        return len(known) >= partitions and all(p.leader >= 0 for p in known.values())

    # ------------------------------------------------------------------ CreateTopics

    def create_topics(self, request: Request, body: Body) -> Future[Body]:
        validate_only = bool(body.get("validate_only", False))
        names = [t["name"] for t in body["topics"]]
        duplicated = {n for n in names if names.count(n) > 1}

        async def create_all() -> list[Body]:
            results = [await self._create_one(t, validate_only, duplicated) for t in body["topics"]]
            created = [r for r in results if r["error_code"] == ErrorCode.NONE and not validate_only]
            timeout_ms = body["timeout_ms"]
            for result in created:
                if not await self._until(
                    partial(self._led, result["name"], result["num_partitions"]), timeout_ms
                ):
                    result["error_code"] = ErrorCode.REQUEST_TIMED_OUT
                    result["error_message"] = "created; its partitions have no leader yet"
            return results

        # one layout holds every version's fields: the codec writes those of the request's version
        return self._run(create_all(), lambda results: {"throttle_time_ms": 0, "topics": results})

    async def _create_one(self, topic: Body, validate_only: bool, duplicated: set[str]) -> Body:
        name = topic["name"]
        result: Body = {"name": name, "num_partitions": -1, "replication_factor": -1, "configs": None}
        try:
            if name in duplicated:
                raise AdminFailure(
                    ErrorCode.INVALID_REQUEST,
                    "Create topics request from client contains multiple entries for the same topic",
                )
            # Kafka's order: an existing topic first, then its configs, then the assignment
            if name in self.cache.snapshot.topics:
                raise AdminFailure(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            configs = {c["name"]: c["value"] for c in topic["configs"]}
            check_configs(configs)
            assignment = await self._assignment(topic)
            created = await self._write_topic(name, assignment, configs, validate_only=validate_only)
        except AdminFailure as exc:
            return {**result, "error_code": exc.code, "error_message": str(exc), "topic_id": _NO_ID}
        factor = len(next(iter(assignment.values())))
        result.update(
            error_code=ErrorCode.NONE,
            error_message=None,
            num_partitions=len(assignment),
            replication_factor=factor,
            topic_id=created.topic_id if created is not None and created.topic_id else _NO_ID,
            configs=[
                {"name": k, "value": v, "read_only": False, "config_source": 1, "is_sensitive": False}
                for k, v in configs.items()
            ],
        )
        return result

    async def _assignment(self, topic: Body) -> dict[int, tuple[int, ...]]:
        """The request's replica assignment, or one over the live brokers (Kafka's, with -1 meaning the
        broker's default partitions and replication factor)."""
        given = topic["assignments"]
        partitions, factor = topic["num_partitions"], topic["replication_factor"]
        if given:
            if partitions != -1 or factor != -1:
                raise AdminFailure(
                    ErrorCode.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
            return {a["partition_index"]: tuple(a["broker_ids"]) for a in given}
        partitions = self.defaults.num_partitions if partitions == -1 else partitions
        factor = self.defaults.replication_factor if factor == -1 else factor
        try:
            return assign_replicas(sorted(self.cache.snapshot.brokers), partitions, factor)
        except AdminError as exc:
            raise admin_error(exc) from None

    async def _write_topic(
        self,
        name: str,
        assignment: dict[int, tuple[int, ...]],
        configs: dict[str, str | None],
        *,
        validate_only: bool,
    ) -> znodes.TopicAssignment | None:
        zk = self.zk()
        try:
            topic_writes.validate_topic_name(name)
            if validate_only:
                return None
            await entity_configs.write_topic_configs(
                zk, name, {k: v for k, v in configs.items() if v is not None}
            )
            created = await topic_writes.create_new_topic(zk, name, assignment=assignment)
        except AdminError as exc:
            raise admin_error(exc) from None
        self.events.emit(
            "topic_created",
            topic=name,
            partitions=len(assignment),
            replication_factor=len(next(iter(assignment.values()))),
            configs=sorted(configs),
            by="admin",
        )
        return created

    # ------------------------------------------------------------------ DeleteTopics

    def delete_topics(self, request: Request, body: Body) -> Future[Body]:
        version = request.header.api_version
        disabled = (
            ErrorCode.TOPIC_DELETION_DISABLED if version >= 3 else ErrorCode.INVALID_REQUEST
        )  # Kafka's rule

        async def delete_all() -> list[Body]:
            results: list[Body] = []
            for name in body["topic_names"]:
                if not self.defaults.delete_topic_enable:
                    results.append(_result(name, disabled, "Topic deletion is disabled."))
                elif name not in self.cache.snapshot.topics:
                    results.append(
                        _result(
                            name,
                            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            "This server does not host this topic-partition.",
                        )
                    )
                else:
                    try:
                        await topic_writes.delete_topic(self.zk(), name)
                    except topic_writes.AlreadyMarkedForDeletion:
                        pass  # deleting it again succeeds
                    except AdminError as exc:
                        results.append(_result(name, admin_error(exc).code, str(exc)))
                        continue
                    self.events.emit("topic_deletion_requested", topic=name, by="admin")
                    results.append(_result(name, ErrorCode.NONE, None))
            for result in results:
                name = result["name"]
                if result["error_code"] == ErrorCode.NONE and not await self._until(
                    partial(self._gone, name), body["timeout_ms"]
                ):
                    result["error_code"] = ErrorCode.REQUEST_TIMED_OUT
                    result["error_message"] = "marked for deletion; not deleted yet"
            return results

        return self._run(delete_all(), lambda results: {"throttle_time_ms": 0, "responses": results})

    # ------------------------------------------------------------------ CreatePartitions

    def create_partitions(self, request: Request, body: Body) -> Future[Body]:
        names = [t["name"] for t in body["topics"]]

        async def grow_all() -> list[Body]:
            results: list[Body] = []
            grown: list[tuple[str, int]] = []
            for topic in body["topics"]:
                name = topic["name"]
                try:
                    if names.count(name) > 1:
                        raise AdminFailure(
                            ErrorCode.INVALID_REQUEST, f"Duplicate topic {name} in the request"
                        )
                    await self._grow(topic, validate_only=body["validate_only"])
                except AdminFailure as exc:
                    results.append(_result(name, exc.code, str(exc)))
                    continue
                results.append(_result(name, ErrorCode.NONE, None))
                grown.append((name, topic["count"]))
            if not body["validate_only"]:
                for result, (name, count) in zip(
                    [r for r in results if r["error_code"] == 0], grown, strict=True
                ):
                    if not await self._until(partial(self._led, name, count), body["timeout_ms"]):
                        result["error_code"] = ErrorCode.REQUEST_TIMED_OUT
                        result["error_message"] = "partitions added; not all have a leader yet"
            return results

        return self._run(grow_all(), lambda results: {"throttle_time_ms": 0, "results": results})

    async def _grow(self, topic: Body, *, validate_only: bool) -> None:
        name, count = topic["name"], topic["count"]
        current = self.cache.snapshot.topics.get(name)
        if current is None:
            raise AdminFailure(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        if count < len(current):
            raise AdminFailure(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {len(current)} partitions, which is higher than the requested {count}.",
            )
        if count == len(current):
            raise AdminFailure(ErrorCode.INVALID_PARTITIONS, f"Topic already has {count} partitions.")
        assignments = topic["assignments"]
        if assignments is not None and len(assignments) != count - len(current):
            raise AdminFailure(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Increasing the number of partitions by {count - len(current)} but {len(assignments)} "
                "assignments provided.",
            )
        if validate_only:
            return
        manual = (
            None
            if assignments is None
            else {len(current) + i: tuple(a["broker_ids"]) for i, a in enumerate(assignments)}
        )
        try:
            added = await topic_writes.add_partitions(self.zk(), name, count, assignment=manual)
        except AdminError as exc:
            raise admin_error(exc) from None
        self.events.emit("partitions_created", topic=name, partitions=sorted(added), by="admin")

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
        if not self.defaults.auto_create:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        try:
            topic_writes.validate_topic_name(topic)
        except AdminError:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        if topic in self._creating:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # another request on this broker is creating it
        self._creating.add(topic)
        try:
            done = asyncio.run_coroutine_threadsafe(self._auto_create(topic), self.loop())
            return done.result(timeout=10)
        except TimeoutError:
            return ErrorCode.LEADER_NOT_AVAILABLE
        finally:
            self._creating.discard(topic)

    async def _auto_create(self, topic: str) -> ErrorCode:
        if self.create_internal is not None and topic.startswith("__"):
            await self.create_internal(topic)
            return ErrorCode.LEADER_NOT_AVAILABLE
        try:
            assignment = assign_replicas(
                sorted(self.cache.snapshot.brokers),
                self.defaults.num_partitions,
                self.defaults.replication_factor,
            )
            await self._write_topic(topic, assignment, {}, validate_only=False)
        except AdminError as exc:
            failure = admin_error(exc)
            return (
                ErrorCode.LEADER_NOT_AVAILABLE
                if failure.code == ErrorCode.TOPIC_ALREADY_EXISTS
                else failure.code
            )
        except AdminFailure as exc:
            return ErrorCode.LEADER_NOT_AVAILABLE if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS else exc.code
        log.info("topic %s created on first use (auto.create.topics.enable)", topic)
        return ErrorCode.LEADER_NOT_AVAILABLE


_NO_ID = uuid.UUID(int=0)
"""Kafka's ``Uuid.ZERO_UUID``: no topic id (a topic not created)."""


def _result(name: str, code: ErrorCode, message: str | None) -> Body:
    return {"name": name, "error_code": code, "error_message": message}
