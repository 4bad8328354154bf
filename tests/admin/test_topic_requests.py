"""The topic admin requests' core against a real ZooKeeper, over a fake view of the cluster that a
stand-in for the controller updates: what is written, the answers with Kafka's codes, and the wait."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Collection, Mapping
from typing import Any

import pytest

from admin.topic_requests import NO_TOPIC_ID, TopicDefaults, TopicRequests
from daemon.eventlog import EventLog
from protocol import ErrorCode
from tests.support.zookeeper import register, topic_replicas
from zkstore import entity_configs, znodes
from zkstore.aio import AsyncZooKeeper

pytestmark = pytest.mark.zookeeper

Body = dict[str, Any]


class FakeView:
    """What a daemon knows: the live brokers and each topic's leaders, set by the test."""

    def __init__(self, brokers: Collection[int], topics: dict[str, dict[int, int]] | None = None) -> None:
        self.brokers = set(brokers)
        self.topics = topics or {}

    def broker_ids(self) -> Collection[int]:
        return self.brokers

    def partition_leaders(self, topic: str) -> Mapping[int, int] | None:
        return self.topics.get(topic)


def requests_over(
    zk: AsyncZooKeeper, view: FakeView, defaults: TopicDefaults | None = None, **kwargs: Any
) -> TopicRequests:
    return TopicRequests(
        lambda: zk, view, EventLog(None, "test"), defaults or TopicDefaults(), poll_s=0.01, **kwargs
    )


def kinds(requests: TopicRequests) -> list[str]:
    return [e["kind"] for e in requests.events.recent]


def new_topic(name: str, partitions: int = -1, factor: int = -1, **fields: Any) -> Body:
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": factor,
        "assignments": fields.get("assignments", []),
        "configs": [{"name": k, "value": v} for k, v in fields.get("configs", {}).items()],
    }


def create_body(*topics: Body, timeout_ms: int = 5000, validate_only: bool = False) -> Body:
    return {"topics": list(topics), "timeout_ms": timeout_ms, "validate_only": validate_only}


async def written(zk: AsyncZooKeeper, topic: str) -> bool:
    return await zk.exists(znodes.topic_path(topic)) is not None


@contextlib.asynccontextmanager
async def stand_in_controller(zk: AsyncZooKeeper, view: FakeView) -> AsyncIterator[None]:
    """What the controller and UpdateMetadata do, as the view sees it: every partition in ZooKeeper
    led by its first replica, and topics marked for deletion gone."""

    async def follow() -> None:
        while True:
            for topic in await zk.get_children(znodes.BROKER_TOPICS):
                view.topics[topic] = {p: r[0] for p, r in (await topic_replicas(zk, topic)).items()}
            if await zk.exists(znodes.DELETE_TOPICS) is not None:
                for topic in await zk.get_children(znodes.DELETE_TOPICS):
                    view.topics.pop(topic, None)
            await asyncio.sleep(0.02)

    await zk.ensure_path(znodes.BROKER_TOPICS)
    task = asyncio.create_task(follow())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# ---------------------------------------------------------------- CreateTopics


async def test_a_created_topic_is_written_and_answered_once_every_partition_has_a_leader(
    zk: AsyncZooKeeper,
) -> None:
    await register(zk, 1, 2, 3)
    view = FakeView({1, 2, 3})
    requests = requests_over(zk, view)
    body = create_body(new_topic("orders", 3, 2, configs={"retention.ms": "3600000"}))
    async with stand_in_controller(zk, view):
        response = await requests.create_topics(body, 7)
    (result,) = response["topics"]
    assert (result["error_code"], result["error_message"]) == (ErrorCode.NONE, None)
    assert (result["num_partitions"], result["replication_factor"]) == (3, 2)
    assert result["topic_id"] != NO_TOPIC_ID
    assert result["configs"][0]["name"] == "retention.ms"
    replicas = await topic_replicas(zk, "orders")
    assert sorted(replicas) == [0, 1, 2] and {len(r) for r in replicas.values()} == {2}
    assert await entity_configs.read_topic_configs(zk, "orders") == {"retention.ms": "3600000"}
    assert kinds(requests) == ["topic_created"]


async def test_minus_one_means_the_daemons_defaults_and_an_assignment_is_taken_as_given(
    zk: AsyncZooKeeper,
) -> None:
    await register(zk, 1, 2, 3)
    view = FakeView({1, 2, 3})
    requests = requests_over(zk, view, TopicDefaults(num_partitions=4, replication_factor=3))
    placed = [{"partition_index": 0, "broker_ids": [3, 1]}, {"partition_index": 1, "broker_ids": [1, 2]}]
    body = create_body(new_topic("defaulted"), new_topic("placed", assignments=placed))
    async with stand_in_controller(zk, view):
        response = await requests.create_topics(body, 7)
    assert [(r["error_code"], r["num_partitions"], r["replication_factor"]) for r in response["topics"]] == [
        (ErrorCode.NONE, 4, 3),
        (ErrorCode.NONE, 2, 2),
    ]
    assert await topic_replicas(zk, "placed") == {0: (3, 1), 1: (1, 2)}


async def test_a_topic_the_view_never_shows_led_times_out_with_the_change_made(zk: AsyncZooKeeper) -> None:
    await register(zk, 1)
    requests = requests_over(zk, FakeView({1}))
    response = await requests.create_topics(create_body(new_topic("slow", 1, 1), timeout_ms=100), 7)
    (result,) = response["topics"]
    assert result["error_code"] == ErrorCode.REQUEST_TIMED_OUT
    assert result["error_message"] == "created; its partitions have no leader yet"
    assert await written(zk, "slow")


@pytest.mark.parametrize(
    ("topics", "code", "message"),
    [
        ([new_topic("known", 1, 1)], ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 'known' already exists."),
        ([new_topic("twice", 1, 1), new_topic("twice", 2, 1)], ErrorCode.INVALID_REQUEST, "multiple entries"),
        ([new_topic("odd", 1, 1, configs={"colour": "red"})], ErrorCode.INVALID_CONFIG,
         "Unknown topic config"),
        ([new_topic("odd", 1, 1, configs={"retention.ms": None})], ErrorCode.INVALID_CONFIG, "Null value"),
        ([new_topic("odd", 1, 1, configs={"cleanup.policy": "shred"})], ErrorCode.INVALID_CONFIG,
         "Invalid value shred for configuration cleanup.policy"),
        ([new_topic("wide", 1, 4)], ErrorCode.INVALID_REPLICATION_FACTOR, "larger than available brokers: 3"),
        ([new_topic("none", 0, 1)], ErrorCode.INVALID_PARTITIONS, "must be larger than 0"),
        ([new_topic("both", 1, -1, assignments=[{"partition_index": 0, "broker_ids": [1]}])],
         ErrorCode.INVALID_REQUEST, "Both cannot be used at the same time."),
        ([new_topic("gone", assignments=[{"partition_index": 0, "broker_ids": [9]}])],
         ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Unknown broker(s) in replica assignment: 9"),
        ([new_topic("a/b", 1, 1)], ErrorCode.INVALID_TOPIC_EXCEPTION, "illegal"),
    ],
)  # fmt: skip
async def test_create_refusals_carry_kafkas_codes_and_write_nothing(
    zk: AsyncZooKeeper, topics: list[Body], code: ErrorCode, message: str
) -> None:
    await register(zk, 1, 2, 3)
    requests = requests_over(zk, FakeView({1, 2, 3}, {"known": {0: 1}}))  # known here, not in ZooKeeper
    response = await requests.create_topics(create_body(*topics), 7)
    for result in response["topics"]:
        assert result["error_code"] == code and message in result["error_message"]
        assert (result["num_partitions"], result["topic_id"]) == (-1, NO_TOPIC_ID)
    assert await zk.exists(znodes.BROKER_TOPICS) is None and kinds(requests) == []


async def test_validate_only_checks_and_writes_nothing(zk: AsyncZooKeeper) -> None:
    await register(zk, 1, 2)
    requests = requests_over(zk, FakeView({1, 2}))
    body = create_body(new_topic("tried", 2, 2), new_topic("wide", 1, 3), validate_only=True, timeout_ms=0)
    response = await requests.create_topics(body, 7)
    assert [r["error_code"] for r in response["topics"]] == [
        ErrorCode.NONE,
        ErrorCode.INVALID_REPLICATION_FACTOR,
    ]
    assert response["topics"][0]["num_partitions"] == 2
    assert not await written(zk, "tried") and kinds(requests) == []


# ---------------------------------------------------------------- DeleteTopics


async def test_a_deleted_topic_is_marked_and_answered_once_the_view_drops_it(zk: AsyncZooKeeper) -> None:
    await register(zk, 1)
    view = FakeView({1})
    requests = requests_over(zk, view)
    async with stand_in_controller(zk, view):
        await requests.create_topics(create_body(new_topic("doomed", 1, 1)), 7)
        body = {"topic_names": ["doomed", "missing"], "timeout_ms": 5000}
        response = await requests.delete_topics(body, 5)
    assert [(r["name"], r["error_code"]) for r in response["responses"]] == [
        ("doomed", ErrorCode.NONE),
        ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert await zk.get_children(znodes.DELETE_TOPICS) == ["doomed"]
    assert kinds(requests) == ["topic_created", "topic_deletion_requested"]


async def test_a_deletion_the_view_never_shows_times_out_and_asking_again_succeeds(
    zk: AsyncZooKeeper,
) -> None:
    await register(zk, 1)
    view = FakeView({1})
    requests = requests_over(zk, view)
    async with stand_in_controller(zk, view):
        await requests.create_topics(create_body(new_topic("stuck", 1, 1)), 7)
    body = {"topic_names": ["stuck"], "timeout_ms": 100}
    for _ in range(2):  # already marked: deleting it again is no error
        (result,) = (await requests.delete_topics(body, 5))["responses"]
        assert (result["error_code"], result["error_message"]) == (
            ErrorCode.REQUEST_TIMED_OUT,
            "marked for deletion; not deleted yet",
        )


@pytest.mark.parametrize(
    ("version", "code"), [(2, ErrorCode.INVALID_REQUEST), (3, ErrorCode.TOPIC_DELETION_DISABLED)]
)
async def test_deletion_disabled_is_refused_with_the_code_of_the_version(
    zk: AsyncZooKeeper, version: int, code: ErrorCode
) -> None:
    requests = requests_over(zk, FakeView({1}, {"kept": {0: 1}}), TopicDefaults(delete_topic_enable=False))
    response = await requests.delete_topics({"topic_names": ["kept"], "timeout_ms": 1000}, version)
    assert response["responses"] == [
        {"name": "kept", "error_code": code, "error_message": "Topic deletion is disabled."}
    ]
    assert await zk.exists(znodes.DELETE_TOPICS) is None


# ---------------------------------------------------------------- CreatePartitions


def grow_body(*topics: tuple[str, int, list[list[int]] | None], validate_only: bool = False) -> Body:
    return {
        "topics": [
            {"name": n, "count": c, "assignments": None if a is None else [{"broker_ids": r} for r in a]}
            for n, c, a in topics
        ],
        "timeout_ms": 5000,
        "validate_only": validate_only,
    }


async def test_partitions_are_added_and_answered_once_they_have_leaders(zk: AsyncZooKeeper) -> None:
    await register(zk, 1, 2)
    view = FakeView({1, 2})
    requests = requests_over(zk, view)
    async with stand_in_controller(zk, view):
        await requests.create_topics(create_body(new_topic("growing", 2, 2)), 7)
        response = await requests.create_partitions(grow_body(("growing", 4, [[2, 1], [1, 2]])), 3)
    assert response["results"] == [{"name": "growing", "error_code": ErrorCode.NONE, "error_message": None}]
    replicas = await topic_replicas(zk, "growing")
    assert sorted(replicas) == [0, 1, 2, 3] and (replicas[2], replicas[3]) == ((2, 1), (1, 2))
    assert kinds(requests) == ["topic_created", "partitions_created"]
    assert requests.events.recent[-1]["partitions"] == [2, 3]


@pytest.mark.parametrize(
    ("topics", "code", "message"),
    [
        ([("missing", 2, None)], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'missing' does not exist."),
        ([("two", 1, None)], ErrorCode.INVALID_PARTITIONS, "which is higher than the requested 1"),
        ([("two", 2, None)], ErrorCode.INVALID_PARTITIONS, "Topic already has 2 partitions."),
        ([("two", 4, [[1]])], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "by 2 but 1 assignments provided"),
        ([("two", 3, None), ("two", 4, None)], ErrorCode.INVALID_REQUEST, "Duplicate topic two"),
    ],
)
async def test_create_partitions_refusals_carry_kafkas_codes_and_write_nothing(
    zk: AsyncZooKeeper, topics: list[tuple[str, int, list[list[int]] | None]], code: ErrorCode, message: str
) -> None:
    await register(zk, 1)
    requests = requests_over(zk, FakeView({1}, {"two": {0: 1, 1: 1}}))
    response = await requests.create_partitions(grow_body(*topics), 3)
    assert all(r["error_code"] == code and message in r["error_message"] for r in response["results"])
    assert kinds(requests) == []


async def test_validate_only_grows_nothing(zk: AsyncZooKeeper) -> None:
    await register(zk, 1)
    view = FakeView({1})
    requests = requests_over(zk, view)
    async with stand_in_controller(zk, view):
        await requests.create_topics(create_body(new_topic("still", 1, 1)), 7)
    response = await requests.create_partitions(grow_body(("still", 3, None), validate_only=True), 3)
    assert response["results"][0]["error_code"] == ErrorCode.NONE
    assert sorted(await topic_replicas(zk, "still")) == [0]


# ---------------------------------------------------------------- Metadata's auto-creation


async def test_auto_creation_writes_the_defaults_and_answers_leader_not_available(zk: AsyncZooKeeper) -> None:
    await register(zk, 1, 2)
    requests = requests_over(zk, FakeView({1, 2}), TopicDefaults(num_partitions=3, replication_factor=2))
    assert await requests.auto_create("fresh") == ErrorCode.LEADER_NOT_AVAILABLE
    replicas = await topic_replicas(zk, "fresh")
    assert sorted(replicas) == [0, 1, 2] and {len(r) for r in replicas.values()} == {2}
    # created meanwhile by someone else (the view does not show it yet): still no leader, as Kafka says
    assert await requests.auto_create("fresh") == ErrorCode.LEADER_NOT_AVAILABLE
    assert kinds(requests) == ["topic_created"]


@pytest.mark.parametrize(
    ("defaults", "topic", "code"),
    [
        (TopicDefaults(auto_create=False), "fresh", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (TopicDefaults(), "a b", ErrorCode.INVALID_TOPIC_EXCEPTION),
        (TopicDefaults(replication_factor=3), "fresh", ErrorCode.INVALID_REPLICATION_FACTOR),
    ],
)
async def test_auto_creation_refusals_write_nothing(
    zk: AsyncZooKeeper, defaults: TopicDefaults, topic: str, code: ErrorCode
) -> None:
    await register(zk, 1)
    requests = requests_over(zk, FakeView({1}), defaults)
    assert await requests.auto_create(topic) == code
    assert await zk.exists(znodes.BROKER_TOPICS) is None or not await zk.get_children(znodes.BROKER_TOPICS)


async def test_internal_topics_go_to_their_owner_and_one_creation_at_a_time(zk: AsyncZooKeeper) -> None:
    asked: list[str] = []
    started, release = asyncio.Event(), asyncio.Event()

    async def create_internal(topic: str) -> None:
        asked.append(topic)
        started.set()
        await release.wait()

    requests = requests_over(zk, FakeView({1}), create_internal=create_internal)
    first = asyncio.create_task(requests.auto_create("__consumer_offsets"))
    await started.wait()
    assert await requests.auto_create("__consumer_offsets") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    release.set()
    assert await first == ErrorCode.LEADER_NOT_AVAILABLE
    assert asked == ["__consumer_offsets"] and kinds(requests) == []
