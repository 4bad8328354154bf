"""Kafka's Java clients, 3.9 and 4.4, at their defaults against a PLAINTEXT cluster of our daemons.

Per version, one cluster takes two programs side by side: ``programs/ClientsProbe.java`` (an idempotent
producer, then two members of a consumer group, ``round_trip.py``) and ``programs/AdminProbe.java``,
which makes every AdminClient call in turn and prints each outcome; the cluster's own state (ZooKeeper)
is read right after. The tests below each assert on one part of that run (``Shared``), so the cluster
and the JVMs are paid for once per version. A call the cluster does not serve is a strict xfail naming
the gap, listed in docs/broker.md and docs/interop.md.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.interop.java import VERSION_IDS, JavaSide, Shared
from tests.interop.round_trip import ORDERS, check, round_trip
from tests.support.cluster import Cluster
from tests.support.zookeeper import partition_state, topic_replicas
from zkstore import znodes

pytestmark = pytest.mark.zookeeper

BROKERS = (1, 2, 3)
SETTINGS = {"offsets_topic_num_partitions": 6, "group_initial_rebalance_delay_ms": 0}
RUNS = Shared[dict[str, Any]]()


async def clients_run(cluster: Cluster, tmp_path: Path, version: str) -> dict[str, Any]:
    """``round trip``, ``admin`` (the probe's run: its outcomes by step) and ``zookeeper`` (what the
    cluster wrote, read afterwards)."""

    async def scenario() -> dict[str, Any]:
        await cluster.start(BROKERS, overrides=dict.fromkeys(BROKERS, SETTINGS))
        await cluster.topic("orders", ORDERS)
        java = JavaSide(version, cluster, tmp_path)
        trip, admin = await asyncio.gather(
            round_trip(java), java.program("AdminProbe", str(java.config), "admin")
        )
        data, _ = await cluster.admin.get("/config/topics/admin-a")
        zookeeper = {
            "topics": sorted(await cluster.admin.get_children(znodes.BROKER_TOPICS)),
            "admin-a": await topic_replicas(cluster.admin, "admin-a"),
            "admin-b": await topic_replicas(cluster.admin, "admin-b"),
            "admin-a configs": json.loads(data)["config"],
            "admin-b-1 leader": (await partition_state(cluster.admin, "admin-b", 1))[0].leader,
        }
        return {"round trip": trip, "admin": admin, "zookeeper": zookeeper}

    return await RUNS.get(version, scenario)


async def admin_run(cluster: Cluster, tmp_path: Path, version: str) -> dict[str, Any]:
    """The AdminClient probe's outcomes by step, with ``zookeeper``."""
    runs = await clients_run(cluster, tmp_path, version)
    return {**runs["admin"].ok().result(), "zookeeper": runs["zookeeper"]}


@pytest.mark.parametrize("version", VERSION_IDS)
async def test_an_idempotent_producer_and_a_consumer_group_round_trip(
    cluster: Cluster, tmp_path: Path, version: str
) -> None:
    check((await clients_run(cluster, tmp_path, version))["round trip"])


def value(results: dict[str, Any], step: str) -> Any:
    """What a step that must succeed returned."""
    outcome = results[step]
    assert outcome["ok"], f"{step} failed: {outcome['error']}"
    return outcome["value"]


def refusal(results: dict[str, Any], step: str) -> str:
    """The exception a step that must fail raised: ``Class: message``."""
    outcome = results[step]
    assert not outcome["ok"], f"{step} succeeded: {outcome['value']}"
    error: str = outcome["error"]
    return error


@pytest.mark.parametrize("version", VERSION_IDS)
async def test_topics_are_created_described_grown_and_deleted(
    cluster: Cluster, tmp_path: Path, version: str
) -> None:
    results = await admin_run(cluster, tmp_path, version)
    described = value(results, "cluster")
    assert described["nodes"] == [1, 2, 3] and described["controller"] == 1 and described["cluster_id"]
    assert {"admin-a", "admin-b", "admin-c"} <= set(value(results, "create"))
    assert refusal(results, "create_again") == "TopicExistsException: Topic 'admin-a' already exists."
    topics = value(results, "describe")
    assert {p: d["replicas"] for p, d in topics["admin-b"].items()} == {"0": [1, 2], "1": [2, 3]}
    assert len(topics["admin-a"]) == 3
    assert all(
        len(d["replicas"]) == 2 and d["leader"] == d["replicas"][0] for d in topics["admin-a"].values()
    )
    assert value(results, "partitions") == 5
    assert (
        refusal(results, "partitions_again") == "InvalidPartitionsException: Topic already has 5 partitions."
    )
    assert "admin-c" not in value(results, "delete")
    zookeeper = results["zookeeper"]
    assert "admin-c" not in zookeeper["topics"]
    assert sorted(zookeeper["admin-a"]) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("version", VERSION_IDS)
async def test_topic_configs_are_described_and_altered_and_broker_configs_described(
    cluster: Cluster, tmp_path: Path, version: str
) -> None:
    results = await admin_run(cluster, tmp_path, version)
    assert value(results, "configs_described") == {
        "retention.ms": ["3600000", "DYNAMIC_TOPIC_CONFIG"],
        "max.message.bytes": ["1048588", "DEFAULT_CONFIG"],
    }
    assert value(results, "configs_altered") == {
        "retention.ms": [str(7 * 24 * 3600 * 1000), "DEFAULT_CONFIG"],
        "max.message.bytes": ["200000", "DYNAMIC_TOPIC_CONFIG"],
    }
    assert results["zookeeper"]["admin-a configs"] == {"max.message.bytes": "200000"}
    broker = value(results, "broker_configs")
    assert broker["broker.id"] == "1" and broker["count"] > 10
    # deleting a dynamic broker config (none is ever set here) succeeds: kafka-reassign-partitions
    # --verify does it to clear replication throttles
    assert value(results, "broker_throttle_cleared") == "DELETE"


@pytest.mark.parametrize("version", VERSION_IDS)
async def test_offsets_are_listed_and_log_dirs_described(
    cluster: Cluster, tmp_path: Path, version: str
) -> None:
    results = await admin_run(cluster, tmp_path, version)
    assert value(results, "produced") == 5
    assert value(results, "offsets") == {"earliest": 0, "latest": 5}
    replicas = results["zookeeper"]["admin-a"][0]
    sizes = value(results, "log_dirs")
    assert sorted(sizes) == sorted(str(b) for b in replicas)
    assert len(set(sizes.values())) == 1 and next(iter(sizes.values())) > 0  # the same bytes on each replica


@pytest.mark.parametrize("version", VERSION_IDS)
async def test_reassignments_and_preferred_elections_go_through_the_controller(
    cluster: Cluster, tmp_path: Path, version: str
) -> None:
    results = await admin_run(cluster, tmp_path, version)
    assert value(results, "reassigned") is True  # listed as done, and described with the new replicas
    assert results["zookeeper"]["admin-b"] == {0: (2, 3), 1: (3, 2)}
    assert refusal(results, "cancel_nothing").startswith("NoReassignmentInProgressException")
    assert value(results, "elected") == {"error": "null", "leader": 3}
    assert results["zookeeper"]["admin-b-1 leader"] == 3
    assert refusal(results, "elected_again").startswith("ElectionNotNeededException")


@pytest.mark.parametrize("version", VERSION_IDS)
async def test_consumer_groups_offsets_are_altered_listed_described_and_groups_deleted(
    cluster: Cluster, tmp_path: Path, version: str
) -> None:
    results = await admin_run(cluster, tmp_path, version)
    assert value(results, "group_offsets_altered") is None
    assert "admin-group" in value(results, "groups_listed")
    described = value(results, "group_described")
    assert (described["state"], described["members"]) == ("EMPTY", 0) and described["coordinator"] in BROKERS
    assert value(results, "group_offsets") == {"offset": 3, "metadata": "probe"}
    assert "admin-group" not in value(results, "group_deleted")
    assert refusal(results, "acls_without_authorizer").startswith("SecurityDisabledException")
    assert value(results, "features") == []  # none finalized, as in a ZooKeeper-mode Kafka cluster


UNSUPPORTED = "UnsupportedVersionException: The node does not support "
GAPS = {
    "group_offsets_deleted": ("OffsetDelete (API 47) is not served", f"{UNSUPPORTED}OFFSET_DELETE"),
    "broker_config_set": (
        "dynamic broker configs are not implemented",
        "InvalidRequestException: broker configs are static here: set them in the broker's properties file "
        "or environment",
    ),
    "records_deleted": ("DeleteRecords (API 21) is not served", f"{UNSUPPORTED}DELETE_RECORDS"),
    "scram_users": (
        "DescribeUserScramCredentials (API 50) is not served",
        f"{UNSUPPORTED}DESCRIBE_USER_SCRAM_CREDENTIALS",
    ),
    "client_quotas": ("DescribeClientQuotas (API 48) is not served", f"{UNSUPPORTED}DESCRIBE_CLIENT_QUOTAS"),
}
"""Each call the cluster does not serve: the gap, and the exception the Java client raises for it."""


@pytest.mark.parametrize("version", VERSION_IDS)
@pytest.mark.parametrize(
    "step",
    [
        pytest.param(step, marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=f"gap: {gap}"))
        for step, (gap, _) in GAPS.items()
    ],
)
async def test_gap(cluster: Cluster, tmp_path: Path, version: str, step: str) -> None:
    """An xfail while the call fails with exactly the listed error; any other failure fails the test, and
    so does success (strict): the gap is then closed, and the call belongs with the tests above."""
    results = await admin_run(cluster, tmp_path, version)
    outcome = results[step]
    if not outcome["ok"] and outcome["error"] != GAPS[step][1]:
        pytest.fail(f"{step} fails otherwise than the listed gap: {outcome['error']}")
    assert outcome["ok"], outcome["error"]
