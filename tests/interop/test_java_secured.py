"""Kafka's Java side, 3.9 and 4.4, on the secured layout: TLS on every listener, ACLs enforced.

The test's client is the super user ``admin`` by its certificate, which Java reads from PEM key and
trust stores (``ssl.keystore.type=PEM``). Per version, one secured cluster takes three JVMs side by
side: the producer-and-group round trip over TLS (``round_trip.py``), AdminProbe's ACL calls for
``User:alice`` (createAcls, describeAcls, deleteAcls), and a batch of Kafka's tools given the same
settings as a file (``--command-config``, ``--producer.config``, ``--consumer.config``): ``kafka-acls``
for ``User:bob`` and the console producer and consumer. What ZooKeeper holds afterwards is what Kafka's
own authorizer would read.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from security.acl import AclEntry, AclOperation, AclPermissionType, PatternType, ResourcePattern, ResourceType
from tests.interop.java import VERSION_IDS, JavaSide, Shared, ToolRun
from tests.interop.round_trip import ORDERS, check, round_trip
from tests.support.cluster import Cluster
from zkstore.acls import read_all_acls

pytestmark = pytest.mark.zookeeper

BROKERS = (1, 2, 3)
SETTINGS = {"offsets_topic_num_partitions": 6, "group_initial_rebalance_delay_ms": 0}
LINES = [f"line {i}" for i in range(10)]
RUNS = Shared[dict[str, Any]]()


def tool_runs(java: JavaSide) -> list[ToolRun]:
    server = f"--bootstrap-server {java.bootstrap}"
    acls = f"{server} --command-config {java.config}"
    bob = "--allow-principal User:bob --operation Read --operation Describe"
    # 4.x took --command-config for the console tools' --producer.config and --consumer.config
    producer, consumer = (
        ("--producer.config", "--consumer.config") if java.before_4 else ("--command-config",) * 2
    )
    return [
        ToolRun.of("acls_add", "kafka-acls", f"{acls} --add {bob} --topic payments --group auditors"),
        ToolRun.of("acls_list", "kafka-acls", f"{acls} --list --topic payments"),
        ToolRun.of("acls_remove", "kafka-acls", f"{acls} --remove --force {bob} --topic payments"),
        # the broker asked may learn of the removal through its ZooKeeper watch: list until it shows
        ToolRun.of(
            "acls_left",
            "kafka-acls",
            f"{acls} --list",
            until=r"\A(?![\s\S]*name=payments)[\s\S]*name=auditors",
        ),
        ToolRun.of(
            "console_produce",
            "kafka-console-producer",
            f"{server} {producer} {java.config} --topic secure-lines",
            stdin="".join(f"{line}\n" for line in LINES),
        ),
        ToolRun.of(
            "console_consume",
            "kafka-console-consumer",
            f"{server} {consumer} {java.config} --topic secure-lines --from-beginning "
            f"--max-messages {len(LINES)} --timeout-ms 30000",
        ),
    ]


async def secured_run(cluster: Cluster, tmp_path: Path, version: str) -> dict[str, Any]:
    """``round trip``, ``admin`` (AdminProbe's run), ``tools`` (by name) and ``acls`` (from ZooKeeper)."""

    async def scenario() -> dict[str, Any]:
        await cluster.start(BROKERS, overrides=dict.fromkeys(BROKERS, SETTINGS))
        await cluster.topic("orders", ORDERS)
        await cluster.topic("secure-lines", {0: (1, 2), 1: (2, 3)})
        java = JavaSide(version, cluster, tmp_path)
        trip, admin, tools = await asyncio.gather(
            round_trip(java),
            java.program("AdminProbe", str(java.config), "acls"),
            java.tools(tool_runs(java)),
        )
        acls = await read_all_acls(cluster.admin)
        return {"round trip": trip, "admin": admin, "tools": tools, "acls": acls}

    return await RUNS.get(version, scenario)


@pytest.mark.parametrize("cluster", ["ssl"], indirect=True)
@pytest.mark.parametrize("version", VERSION_IDS)
async def test_an_idempotent_producer_and_a_consumer_group_round_trip_over_tls(
    cluster: Cluster, tmp_path: Path, version: str
) -> None:
    check((await secured_run(cluster, tmp_path, version))["round trip"])


@pytest.mark.parametrize("cluster", ["ssl"], indirect=True)
@pytest.mark.parametrize("version", VERSION_IDS)
async def test_the_admin_client_creates_describes_and_deletes_acls(
    cluster: Cluster, tmp_path: Path, version: str
) -> None:
    runs = await secured_run(cluster, tmp_path, version)
    results: dict[str, Any] = runs["admin"].ok().result()
    outcomes = {step: (r["value"] if r["ok"] else r["error"]) for step, r in results.items()}
    assert all(r["ok"] for r in results.values()), outcomes
    topic = "TOPIC orders LITERAL User:alice READ ALLOW"
    group = "GROUP readers- PREFIXED User:alice READ ALLOW"
    assert outcomes["cluster"] == list(BROKERS)
    assert outcomes["acls_created"] == [group, topic]
    assert outcomes["acls_on_topic"] == [topic]
    assert outcomes["acls_deleted"] == {"deleted": [topic], "left": [group]}


@pytest.mark.parametrize("cluster", ["ssl"], indirect=True)
@pytest.mark.parametrize("version", VERSION_IDS)
async def test_kafka_acls(cluster: Cluster, tmp_path: Path, version: str) -> None:
    runs = (await secured_run(cluster, tmp_path, version))["tools"]
    added = runs["acls_add"].succeeded()
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=payments" in added
    listed = runs["acls_list"].succeeded()
    for operation in ("READ", "DESCRIBE"):
        assert f"(principal=User:bob, host=*, operation={operation}, permissionType=ALLOW)" in listed
    runs["acls_remove"].succeeded()
    left = runs["acls_left"].succeeded()
    assert "name=payments" not in left and "resourceType=GROUP, name=auditors, patternType=LITERAL" in left


@pytest.mark.parametrize("cluster", ["ssl"], indirect=True)
@pytest.mark.parametrize("version", VERSION_IDS)
async def test_zookeeper_holds_what_kafkas_authorizer_would_read(
    cluster: Cluster, tmp_path: Path, version: str
) -> None:
    acls = (await secured_run(cluster, tmp_path, version))["acls"]

    def allow(principal: str, *operations: AclOperation) -> frozenset[AclEntry]:
        return frozenset(AclEntry(principal, AclPermissionType.ALLOW, op) for op in operations)

    assert acls == {
        ResourcePattern(ResourceType.GROUP, "readers-", PatternType.PREFIXED): allow(
            "User:alice", AclOperation.READ
        ),
        ResourcePattern(ResourceType.GROUP, "auditors"): allow(
            "User:bob", AclOperation.READ, AclOperation.DESCRIBE
        ),
    }


@pytest.mark.parametrize("cluster", ["ssl"], indirect=True)
@pytest.mark.parametrize("version", VERSION_IDS)
async def test_the_console_producer_and_consumer_over_tls(
    cluster: Cluster, tmp_path: Path, version: str
) -> None:
    runs = (await secured_run(cluster, tmp_path, version))["tools"]
    runs["console_produce"].succeeded()
    assert sorted(runs["console_consume"].succeeded().splitlines()) == sorted(LINES)
