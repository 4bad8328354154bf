"""Kafka's topic admin requests, served alike by either daemon: CreateTopics, DeleteTopics,
CreatePartitions, and the creation of a topic a Metadata request asks for.

Kafka serves these on its controller broker. Here every broker serves them (clients that send them to
the controller id Metadata names reach a broker), and so does the controller daemon (Kafka's
AdminClient sends them to Metadata's controller id, which in a cluster shared with Apache Kafka brokers
is ours). Both run this one core on their event loop, each over a :class:`TopicView` of what it knows:
a request is checked as Kafka checks it, written to ZooKeeper in Kafka's layout through
:mod:`zkstore.topic_writes` (the code ``python -m cluster topics`` uses), and the controller does the
rest as for any topic. The request then waits, holding no thread, until the view shows what it asked
for, or its timeout: REQUEST_TIMED_OUT then, as Kafka answers, with the change made and still going on.

Bodies are the codec's dicts: one layout holds every version's fields, and the codec writes those of
the request's version.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from admin.errors import AdminFailure, admin_error
from admin.topic_configs import check_configs
from daemon.eventlog import EventLog
from placement.assignment import ReplicaMap, assign_replicas
from placement.errors import AdminError
from protocol import ErrorCode
from zkstore import entity_configs, topic_writes, znodes
from zkstore.aio import AsyncZooKeeper

__all__ = ["NO_TOPIC_ID", "POLL_S", "Body", "TopicDefaults", "TopicRequests", "TopicView"]

log = logging.getLogger("admin.topic_requests")

Body = dict[str, Any]
POLL_S = 0.05
"""How often a waiting request looks at the view again."""
NO_TOPIC_ID = uuid.UUID(int=0)
"""Kafka's ``Uuid.ZERO_UUID``: no topic id (a topic not created)."""


class TopicView(Protocol):
    """What the serving daemon knows of the cluster: read to check a request, and polled until the
    change it made shows (a broker's metadata cache, the controller's context)."""

    def broker_ids(self) -> Collection[int]:
        """The live brokers that new replicas may go to."""
        ...

    def partition_leaders(self, topic: str) -> Mapping[int, int] | None:
        """Each partition's leader (-1: none yet), or None for a topic unknown here."""
        ...


@dataclass(frozen=True)
class TopicDefaults:
    """The serving daemon's settings for what a request leaves open (Kafka's broker configs)."""

    auto_create: bool = True
    """``auto.create.topics.enable``: a Metadata request for an unknown topic creates it."""
    num_partitions: int = 1
    """``num.partitions``: for -1 in CreateTopics, and for topics created on first use."""
    replication_factor: int = 1
    """``default.replication.factor``: likewise."""
    delete_topic_enable: bool = True
    """``delete.topic.enable``: without it, DeleteTopics is refused."""


class TopicRequests:
    """The requests' logic over one ZooKeeper session (``zk()``: the current one) and one view; every
    method runs on the daemon's event loop, the only place this object is used from.

    ``create_internal`` creates an internal topic (``__consumer_offsets``) a Metadata request asks for,
    with the configs its owner gives it; without it, such a topic is created like any other."""

    def __init__(
        self,
        zk: Callable[[], AsyncZooKeeper],
        view: TopicView,
        events: EventLog,
        defaults: TopicDefaults,
        *,
        create_internal: Callable[[str], Awaitable[None]] | None = None,
        poll_s: float = POLL_S,
    ) -> None:
        self.zk = zk
        self.view = view
        self.events = events
        self.defaults = defaults
        self.create_internal = create_internal
        self.poll_s = poll_s
        self._creating: set[str] = set()
        """Topics a Metadata request is creating now: another asking meanwhile is told it is unknown."""

    # ------------------------------------------------------------------ CreateTopics

    async def create_topics(self, body: Body, version: int) -> Body:
        """CreateTopics' response: each topic checked and written in turn, then waited for until every
        partition of those created has a leader."""
        validate_only = bool(body.get("validate_only", False))
        counts = Counter(t["name"] for t in body["topics"])
        results = [await self._create_one(t, validate_only, counts[t["name"]] > 1) for t in body["topics"]]
        if not validate_only:
            await self._wait_for(
                [r for r in results if r["error_code"] == ErrorCode.NONE],
                lambda r: self._led(r["name"], r["num_partitions"]),
                body["timeout_ms"],
                "created; its partitions have no leader yet",
            )
        return {"throttle_time_ms": 0, "topics": results}

    async def _create_one(self, topic: Body, validate_only: bool, duplicated: bool) -> Body:
        name = topic["name"]
        result: Body = {"name": name, "num_partitions": -1, "replication_factor": -1, "configs": None}
        try:
            if duplicated:
                raise AdminFailure(
                    ErrorCode.INVALID_REQUEST,
                    "Create topics request from client contains multiple entries for the same topic",
                )
            # Kafka's order: an existing topic first, then its configs, then the assignment
            if self.view.partition_leaders(name) is not None:
                raise AdminFailure(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            configs = {c["name"]: c["value"] for c in topic["configs"]}
            check_configs(configs)
            assignment = self._assignment(topic)
            created = await self._write_topic(name, assignment, configs, validate_only=validate_only)
        except AdminFailure as exc:
            return {**result, "error_code": exc.code, "error_message": str(exc), "topic_id": NO_TOPIC_ID}
        result.update(
            error_code=ErrorCode.NONE,
            error_message=None,
            num_partitions=len(assignment),
            replication_factor=len(next(iter(assignment.values()))),
            topic_id=created.topic_id if created is not None and created.topic_id else NO_TOPIC_ID,
            configs=[
                {"name": k, "value": v, "read_only": False, "config_source": 1, "is_sensitive": False}
                for k, v in configs.items()
            ],
        )
        return result

    def _assignment(self, topic: Body) -> ReplicaMap:
        """The request's replica assignment, or Kafka's over the live brokers (-1 meaning the default
        partitions and replication factor)."""
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
            return assign_replicas(sorted(self.view.broker_ids()), partitions, factor)
        except AdminError as exc:
            raise admin_error(exc) from None

    async def _write_topic(
        self, name: str, assignment: ReplicaMap, configs: Mapping[str, str | None], *, validate_only: bool
    ) -> znodes.TopicAssignment | None:
        """The topic's configs, then its assignment (Kafka's order: brokers see the configs first);
        None when only validating."""
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

    async def delete_topics(self, body: Body, version: int) -> Body:
        """DeleteTopics' response: each topic marked for deletion, then waited for until the view no
        longer shows it (the controller deletes it)."""
        # Kafka's rule: the dedicated error code from v3 on
        disabled = ErrorCode.TOPIC_DELETION_DISABLED if version >= 3 else ErrorCode.INVALID_REQUEST
        results = [await self._delete_one(name, disabled) for name in body["topic_names"]]
        await self._wait_for(
            [r for r in results if r["error_code"] == ErrorCode.NONE],
            lambda r: self.view.partition_leaders(r["name"]) is None,
            body["timeout_ms"],
            "marked for deletion; not deleted yet",
        )
        return {"throttle_time_ms": 0, "responses": results}

    async def _delete_one(self, name: str, disabled: ErrorCode) -> Body:
        if not self.defaults.delete_topic_enable:
            return _result(name, disabled, "Topic deletion is disabled.")
        if self.view.partition_leaders(name) is None:
            return _result(
                name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
            )
        try:
            await topic_writes.delete_topic(self.zk(), name)
        except topic_writes.AlreadyMarkedForDeletion:
            pass  # deleting it again succeeds
        except AdminError as exc:
            return _result(name, admin_error(exc).code, str(exc))
        self.events.emit("topic_deletion_requested", topic=name, by="admin")
        return _result(name, ErrorCode.NONE, None)

    # ------------------------------------------------------------------ CreatePartitions

    async def create_partitions(self, body: Body, version: int) -> Body:
        """CreatePartitions' response: each topic grown in turn, then waited for until every partition
        of those grown has a leader."""
        validate_only = bool(body["validate_only"])
        counts = Counter(t["name"] for t in body["topics"])
        results: list[Body] = []
        for topic in body["topics"]:
            name = topic["name"]
            try:
                if counts[name] > 1:
                    raise AdminFailure(ErrorCode.INVALID_REQUEST, f"Duplicate topic {name} in the request")
                await self._grow(topic, validate_only=validate_only)
            except AdminFailure as exc:
                results.append(_result(name, exc.code, str(exc)))
            else:
                results.append(_result(name, ErrorCode.NONE, None))
        if not validate_only:
            wanted = {t["name"]: t["count"] for t in body["topics"]}
            await self._wait_for(
                [r for r in results if r["error_code"] == ErrorCode.NONE],
                lambda r: self._led(r["name"], wanted[r["name"]]),
                body["timeout_ms"],
                "partitions added; not all have a leader yet",
            )
        return {"throttle_time_ms": 0, "results": results}

    async def _grow(self, topic: Body, *, validate_only: bool) -> None:
        name, count = topic["name"], topic["count"]
        current = self.view.partition_leaders(name)
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

    # ------------------------------------------------------------------ Metadata's auto-creation

    async def auto_create(self, topic: str) -> ErrorCode:
        """Kafka's answer for an unknown topic a Metadata request asked for, creating it if allowed:
        LEADER_NOT_AVAILABLE once it is created (or was, by someone else), until it has a leader."""
        if not self.defaults.auto_create:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        try:
            topic_writes.validate_topic_name(topic)
        except AdminError:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        if topic in self._creating:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # another request here is creating it
        self._creating.add(topic)
        try:
            return await self._auto_create(topic)
        finally:
            self._creating.discard(topic)

    async def _auto_create(self, topic: str) -> ErrorCode:
        if self.create_internal is not None and topic.startswith("__"):
            await self.create_internal(topic)
            return ErrorCode.LEADER_NOT_AVAILABLE
        try:
            assignment = assign_replicas(
                sorted(self.view.broker_ids()), self.defaults.num_partitions, self.defaults.replication_factor
            )
            await self._write_topic(topic, assignment, {}, validate_only=False)
        except AdminError as exc:
            return _auto_create_answer(admin_error(exc).code)
        except AdminFailure as exc:
            return _auto_create_answer(exc.code)
        log.info("topic %s created on first use (auto.create.topics.enable)", topic)
        return ErrorCode.LEADER_NOT_AVAILABLE

    # ------------------------------------------------------------------ waiting for the view

    def _led(self, topic: str, partitions: int) -> bool:
        leaders = self.view.partition_leaders(topic) or {}
        return len(leaders) >= partitions and all(leader >= 0 for leader in leaders.values())

    async def _wait_for(
        self, results: list[Body], shown: Callable[[Body], bool], timeout_ms: int, pending: str
    ) -> None:
        """Answer REQUEST_TIMED_OUT, with ``pending`` as the message, for each result the view does not
        come to show before the request's timeout (one deadline for the whole request, as in Kafka)."""
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000.0
        for result in results:
            while not shown(result):
                if time.monotonic() >= deadline:
                    result["error_code"] = ErrorCode.REQUEST_TIMED_OUT
                    result["error_message"] = pending
                    break
                await asyncio.sleep(self.poll_s)


def _auto_create_answer(code: ErrorCode) -> ErrorCode:
    """A topic someone else created meanwhile is one that has no leader yet, as far as Metadata says."""
    return ErrorCode.LEADER_NOT_AVAILABLE if code == ErrorCode.TOPIC_ALREADY_EXISTS else code


def _result(name: str, code: ErrorCode, message: str | None) -> Body:
    return {"name": name, "error_code": code, "error_message": message}
