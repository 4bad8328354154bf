"""Kafka's Admin API served by the brokers, driven by unmodified admin clients at default settings,
and topics created on first use (``auto.create.topics.enable``)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.clients import DEADLINE_S
from tests.support.cluster import Cluster, produce
from tests.support.waiting import wait_until
from tests.support.zookeeper import topic_replicas
from zkstore import znodes

pytestmark = pytest.mark.zookeeper

REPO = Path(__file__).resolve().parents[2]
KAFKAJS = REPO / ".run" / "js" / "node_modules"


async def topic_config(cluster: Cluster, topic: str) -> dict[str, str]:
    data, _ = await cluster.admin.get(f"/config/topics/{topic}")
    config: dict[str, str] = json.loads(data)["config"]
    return config


async def assignment(cluster: Cluster, topic: str) -> dict[int, tuple[int, ...]]:
    return await topic_replicas(cluster.admin, topic)


async def test_confluent_admin_client_creates_grows_describes_and_deletes_topics(cluster: Cluster) -> None:
    await cluster.start((1, 2, 3))
    servers = cluster.bootstrap()

    def admin_calls() -> dict[str, Any]:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

        client = AdminClient({"bootstrap.servers": servers})
        out: dict[str, Any] = {}
        created = client.create_topics(
            [
                NewTopic(
                    "orders", num_partitions=3, replication_factor=2, config={"retention.ms": "3600000"}
                ),
                NewTopic("placed", num_partitions=2, replica_assignment=[[1, 2], [2, 3]]),
            ],
            operation_timeout=30,
        )
        for future in created.values():
            future.result(DEADLINE_S)
        again = client.create_topics([NewTopic("orders", num_partitions=1, replication_factor=1)])
        try:
            again["orders"].result(DEADLINE_S)
        except KafkaException as exc:
            out["again"] = exc.args[0].name()
        too_many = client.create_topics([NewTopic("wide", num_partitions=1, replication_factor=4)])
        try:
            too_many["wide"].result(DEADLINE_S)
        except KafkaException as exc:
            out["too_many"] = exc.args[0].name()
        compact = client.create_topics([NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact"})])
        compact["compacted"].result(DEADLINE_S)
        bad = client.create_topics([NewTopic("bad-ratio", 1, 1, config={"min.cleanable.dirty.ratio": "1.5"})])
        try:
            bad["bad-ratio"].result(DEADLINE_S)
        except KafkaException as exc:
            out["bad_ratio"] = exc.args[0].name()
        client.create_partitions([NewPartitions("orders", 5)], operation_timeout=30)["orders"].result(
            DEADLINE_S
        )
        cluster_info = client.describe_cluster().result(DEADLINE_S)
        out["brokers"] = sorted(n.id for n in cluster_info.nodes)
        out["controller"] = cluster_info.controller.id
        out["listed"] = sorted(t for t in client.list_topics(timeout=10).topics if not t.startswith("__"))
        client.delete_topics(["placed"], operation_timeout=30)["placed"].result(DEADLINE_S)
        return out

    out = await asyncio.to_thread(admin_calls)
    assert out["again"] == "TOPIC_ALREADY_EXISTS"
    assert out["too_many"] == "INVALID_REPLICATION_FACTOR"
    assert out["bad_ratio"] == "INVALID_CONFIG"
    assert out["brokers"] == [1, 2, 3] and out["controller"] == 1
    assert out["listed"] == ["compacted", "orders", "placed"]
    orders = await assignment(cluster, "orders")
    assert sorted(orders) == [0, 1, 2, 3, 4] and {len(r) for r in orders.values()} == {2}
    assert await topic_config(cluster, "orders") == {"retention.ms": "3600000"}

    async def placed_gone() -> bool:
        return await cluster.admin.exists(znodes.topic_path("placed")) is None

    await wait_until(placed_gone, what="placed deleted by the controller", timeout=30)


async def test_kafka_python_admin_client_creates_and_deletes_topics(cluster: Cluster) -> None:
    await cluster.start((1, 2))
    servers = cluster.bootstrap()

    def admin_calls() -> list[str]:
        from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic

        client = KafkaAdminClient(bootstrap_servers=servers)
        try:
            client.create_topics(
                [
                    NewTopic(
                        "events",
                        num_partitions=2,
                        replication_factor=2,
                        topic_configs={"segment.bytes": "1048576"},
                    ),
                    NewTopic(
                        "manual", num_partitions=-1, replication_factor=-1, replica_assignments={0: [2, 1]}
                    ),
                ]
            )
            client.create_partitions({"events": NewPartitions(total_count=4)})
            listed = sorted(t for t in client.list_topics() if not t.startswith("__"))
            client.delete_topics(["manual"])
            return listed
        finally:
            client.close()

    assert await asyncio.to_thread(admin_calls) == ["events", "manual"]
    assert sorted(await assignment(cluster, "events")) == [0, 1, 2, 3]
    assert await topic_config(cluster, "events") == {"segment.bytes": "1048576"}


async def test_producing_to_a_new_topic_creates_it_with_every_client(cluster: Cluster) -> None:
    await cluster.start((1, 2, 3), overrides={b: {"num_partitions": 2} for b in (1, 2, 3)})
    servers = cluster.bootstrap()

    def confluent() -> int:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": servers})
        failures: list[str] = []
        for i in range(10):
            producer.produce(
                "fresh-confluent", value=b"%d" % i, on_delivery=lambda e, _: e and failures.append(str(e))
            )
        assert producer.flush(DEADLINE_S) == 0 and not failures, failures
        return 10

    def kafka_python() -> int:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=servers)
        try:
            for i in range(10):
                producer.send("fresh-kafka-python", value=b"%d" % i).get(timeout=DEADLINE_S)
        finally:
            producer.close(5)
        return 10

    assert await asyncio.to_thread(confluent) == 10
    assert await asyncio.to_thread(kafka_python) == 10
    for topic in ("fresh-confluent", "fresh-kafka-python"):
        assert sorted(await assignment(cluster, topic)) == [0, 1]  # num.partitions
    kcat = shutil.which("kcat")
    if kcat is not None:
        process = await asyncio.create_subprocess_exec(
            kcat, "-b", servers, "-P", "-t", "fresh-kcat", stdin=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with asyncio.timeout(DEADLINE_S):
            _, err = await process.communicate(b"a\nb\n")
        assert process.returncode == 0, err.decode()
        assert sorted(await assignment(cluster, "fresh-kcat")) == [0, 1]


async def test_auto_creation_can_be_turned_off(cluster: Cluster) -> None:
    await cluster.start((1,), overrides={1: {"auto_create_topics_enable": "false"}})
    servers = cluster.bootstrap()

    def metadata() -> Any:
        from confluent_kafka.admin import AdminClient

        return (
            AdminClient({"bootstrap.servers": servers})
            .list_topics("nowhere", timeout=10)
            .topics["nowhere"]
            .error
        )

    error = await asyncio.to_thread(metadata)
    assert error is not None and error.name() == "UNKNOWN_TOPIC_OR_PART"
    assert await cluster.admin.exists(znodes.topic_path("nowhere")) is None


async def test_kafkajs_admin_creates_and_lists_topics(cluster: Cluster) -> None:
    if shutil.which("node") is None or not (KAFKAJS / "kafkajs").is_dir():
        pytest.skip("kafkajs is not installed (make clients installs it from npm into .run/js)")
    await cluster.start((1, 2))
    script = str(REPO / "tests" / "js" / "admin_client.js")
    process = await asyncio.create_subprocess_exec(
        "node", script, cluster.bootstrap(), env={**os.environ, "NODE_PATH": str(KAFKAJS)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(DEADLINE_S):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()[-2000:]
    answer = json.loads(out.decode().strip().splitlines()[-1])
    assert answer["created"] is True and "js-admin" in answer["topics"]
    assert sorted(await assignment(cluster, "js-admin")) == [0, 1, 2]


async def test_kafka_python_describes_the_log_dirs(cluster: Cluster) -> None:
    await cluster.start((1,))
    await cluster.topic("sized", {0: (1,), 1: (1,)})
    servers = cluster.bootstrap()
    assert (await produce(cluster.brokers[1], "sized", 1, 20))["error_code"] == 0

    def describe() -> Any:
        from kafka.admin import KafkaAdminClient

        client = KafkaAdminClient(bootstrap_servers=servers)
        try:
            return client.describe_log_dirs()
        finally:
            client.close()

    (broker,) = await asyncio.to_thread(describe)
    (log_dir,) = broker["log_dirs"]
    assert log_dir["log_dir"] == str((cluster.workdir / "broker-1").resolve())
    assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0
    (topic,) = [t for t in log_dir["topics"] if t["name"] == "sized"]
    sizes = {p["partition_index"]: p["partition_size"] for p in topic["partitions"]}
    assert sizes[0] == 0 and sizes[1] > 0  # twenty records went to partition 1
