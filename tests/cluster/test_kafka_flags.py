"""``python -m cluster topics`` in kafka-topics.sh's spelling, through the Admin API or ZooKeeper."""

from __future__ import annotations

import asyncio

import pytest

from cluster.__main__ import main
from cluster.kafka_flags import translate
from tests.support.clients import bootstrap
from tests.support.cluster import Cluster
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
    servers = bootstrap(cluster)

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
