"""``python -m cluster topics`` in kafka-topics.sh's spelling, through the Admin API or ZooKeeper."""

from __future__ import annotations

import asyncio
import json

import pytest

from cluster.__main__ import main
from cluster.kafka_flags import translate
from tests.support.cluster import Cluster, produce
from tests.support.waiting import wait_until
from zkstore import znodes


@pytest.mark.parametrize(
    ("kafka", "ours"),
    [
        (["topics", "--bootstrap-server", "b:9092", "--create", "--topic", "t", "--partitions", "3"],
         ["topics", "create", "t", "--bootstrap-server", "b:9092", "--partitions", "3"]),
        (["topics", "--list", "--zookeeper", "z:2181"], ["topics", "list", "--zookeeper", "z:2181"]),
        (["topics", "--describe", "--under-replicated-partitions"],
         ["topics", "describe", "--under-replicated-partitions"]),
        (["topics", "create", "t"], ["topics", "create", "t"]),  # this CLI's own spelling is left alone
        (["topics", "--create", "--delete"], ["topics", "--create", "--delete"]),
        (["brokers", "--create"], ["brokers", "--create"]),
    ],
)  # fmt: skip
def test_kafka_spellings_become_this_clis(kafka: list[str], ours: list[str]) -> None:
    assert translate(kafka) == ours


@pytest.mark.zookeeper
async def test_kafka_topics_commands_work_through_the_admin_api_and_zookeeper(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    await cluster.start((1, 2))
    servers = cluster.bootstrap()

    def run(*argv: str) -> int:
        return main(["topics", *argv])

    create = ("--create", "--topic", "orders", "--partitions", "3", "--replication-factor", "2")
    assert (
        await asyncio.to_thread(run, "--bootstrap-server", servers, *create, "--config", "retention.ms=60000")
        == 0
    )
    assert "Created topic orders." in capsys.readouterr().out
    data, _ = await cluster.admin.get("/config/topics/orders")
    assert b'"retention.ms": "60000"' in data
    assert await asyncio.to_thread(run, "--bootstrap-server", servers, "--list") == 0
    assert "orders" in capsys.readouterr().out.split()
    assert (
        await asyncio.to_thread(
            run, "--bootstrap-server", servers, "--alter", "--topic", "orders", "--partitions", "4"
        )
        == 0
    )
    assert await asyncio.to_thread(run, "--bootstrap-server", servers, "--describe", "--topic", "orders") == 0
    described = capsys.readouterr().out
    assert described.count("orders") >= 4
    again = await asyncio.to_thread(run, "--bootstrap-server", servers, *create)
    assert again == 1 and "TOPIC_ALREADY_EXISTS" in capsys.readouterr().err

    # the ZooKeeper path, spelled as kafka-topics.sh --zookeeper spelled it
    zookeeper = ("--zookeeper", cluster.zk_connect)
    assert (
        await asyncio.to_thread(
            run, *zookeeper, "--create", "--topic", "z1", "--partitions", "1", "--replication-factor", "1"
        )
        == 0
    )
    assert await asyncio.to_thread(run, *zookeeper, "--describe", "--unavailable-partitions") == 0
    assert await asyncio.to_thread(run, "--bootstrap-server", servers, "--delete", "--topic", "orders") == 0

    async def gone() -> bool:
        return await cluster.admin.exists(znodes.topic_path("orders")) is None

    await wait_until(gone, what="orders deleted", timeout=30)


@pytest.mark.zookeeper
async def test_kafka_configs_leader_election_and_consumer_groups_commands(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    await cluster.start((1, 2))
    servers = cluster.bootstrap()
    await cluster.topic("orders", {0: (1, 2), 1: (2, 1)})

    async def cli(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        status = await asyncio.to_thread(main, list(argv))
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    # kafka-configs.sh: through the Admin API and through ZooKeeper
    brokers, zookeeper = ("--bootstrap-server", servers), ("--zookeeper", cluster.zk_connect)
    entity = ("--entity-type", "topics", "--entity-name", "orders")
    added = await cli(
        "configs", *brokers, *entity, "--alter", "--add-config", "retention.ms=60000,segment.bytes=1048576"
    )
    assert added == (0, "Completed updating config for topic orders.\n", "")
    assert (
        await cli("configs", *zookeeper, "--topic", "orders", "--alter", "--delete-config", "segment.bytes")
    )[0] == 0
    status, out, _ = await cli("configs", *brokers, "--topic", "orders", "--describe", "--json")
    assert status == 0
    assert [(c["name"], c["value"], c["source"]) for c in json.loads(out)] == [
        ("retention.ms", "60000", "DYNAMIC_TOPIC_CONFIG")
    ]
    for change in ("--add-config", "cleanup.policy=compact"), ("--delete-config", "cleanup.policy"):
        assert (await cli("configs", *brokers, "--topic", "orders", "--alter", *change))[0] == 0
    status, _, err = await cli(
        "configs", *brokers, "--topic", "orders", "--alter", "--add-config", "min.cleanable.dirty.ratio=2"
    )
    assert status == 1 and "INVALID_CONFIG" in err
    status, out, _ = await cli("configs", *brokers, "--broker", "1", "--describe", "--all")
    assert status == 0 and "log.retention.hours" in out

    # kafka-leader-election.sh: nothing to do while the preferred replicas lead
    status, out, _ = await cli("elect-leaders", *brokers, "--election-type", "preferred", "--topic", "orders")
    assert status == 0 and "Valid replica already elected for partitions orders-0, orders-1" in out
    assert (await cli("elect-leaders", "--election-type", "UNCLEAN", *zookeeper))[0] == 2

    # kafka-consumer-groups.sh: a group that committed, its lag, a reset, its deletion
    await produce(cluster.brokers[1], "orders", 0, 6)
    await produce(cluster.brokers[2], "orders", 1, 4)

    def commit_some() -> None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {"bootstrap.servers": servers, "group.id": "billing", "enable.auto.commit": False}
        )
        try:
            committed = [TopicPartition("orders", 0, 2), TopicPartition("orders", 1, 1)]
            consumer.commit(offsets=committed, asynchronous=False)
        finally:
            consumer.close()

    await asyncio.to_thread(commit_some)
    groups = ("consumer-groups", *brokers)
    status, out, _ = await cli(*groups, "--list")
    assert status == 0 and "billing" in out.split()

    async def lags() -> dict[int, tuple[int, int, int]]:
        status, out, _ = await cli(*groups, "--describe", "--group", "billing", "--json")
        assert status == 0
        partitions = json.loads(out)["partitions"]
        return {p["partition"]: (p["current_offset"], p["log_end_offset"], p["lag"]) for p in partitions}

    assert await lags() == {0: (2, 6, 4), 1: (1, 4, 3)}
    reset = ("--reset-offsets", "--group", "billing", "--topic", "orders", "--to-latest", "--execute")
    assert (await cli(*groups, *reset))[0] == 0
    assert await lags() == {0: (6, 6, 0), 1: (4, 4, 0)}
    assert (await cli(*groups, "--delete", "--group", "billing"))[0] == 0
    status, out, _ = await cli(*groups, "--list")
    assert status == 0 and "billing" not in out.split()
