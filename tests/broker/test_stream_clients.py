"""Stream-processing libraries in exactly-once mode, each in its own virtualenv (``.run/pyclients``,
made by ``make clients`` so that their pins do not constrain the project's): quixstreams with
``processing_guarantee="exactly-once"`` and a stateful running total, whose changelog topic asks for
compaction, and faust-streaming with ``processing_guarantee="exactly_once"`` and a table; their
output read back with read_committed.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from tests.support.clients import DEADLINE_S, drained
from tests.support.cluster import Cluster
from zkstore import znodes

pytestmark = pytest.mark.zookeeper

REPO = Path(__file__).resolve().parents[2]
PYTHON = REPO / ".run" / "pyclients" / "bin" / "python"
SETTINGS = {
    "offsets_topic_num_partitions": 6,
    "transaction_state_log_num_partitions": 4,
    "group_initial_rebalance_delay_ms": 0,
}
KEYS = 5
PER_KEY = 12


def require_pyclients() -> None:
    """Missing in CI is a failure (``make test`` installs them first); elsewhere the test says why."""
    if not PYTHON.exists():
        message = "quixstreams is not installed: make clients creates .run/pyclients"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def produce_input(servers: str, topic: str = "quix-in") -> None:
    """Values ``{"n": 1}``, PER_KEY of each key, each key in one partition (librdkafka's key hash)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers})
    for i in range(KEYS * PER_KEY):
        producer.produce(topic, key=f"k{i % KEYS}", value=json.dumps({"n": 1}).encode())  # by key
    assert producer.flush(DEADLINE_S) == 0


def totals(servers: str, topic: str = "quix-out") -> dict[str, int]:
    """The last running total of each key in ``topic``, as read_committed sees it."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": "quix-check",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    found: dict[str, int] = {}
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        for message in drained(consumer):
            found[message.key().decode()] = json.loads(message.value())["total"]
        return found
    finally:
        consumer.close()


async def test_quixstreams_exactly_once_with_a_stateful_operation(cluster: Cluster, tmp_path: Path) -> None:
    require_pyclients()
    await cluster.start((1, 2, 3), overrides=dict.fromkeys((1, 2, 3), SETTINGS))
    await cluster.topic("quix-in", {p: tuple((p + i) % 3 + 1 for i in range(3)) for p in range(3)})
    servers = cluster.bootstrap()
    await asyncio.to_thread(produce_input, servers)
    process = await asyncio.create_subprocess_exec(
        str(PYTHON), str(REPO / "tests" / "pyclients" / "quix_eos.py"), servers, str(tmp_path / "state"),
        str(KEYS * PER_KEY), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    async with asyncio.timeout(DEADLINE_S * 4):
        out, _ = await process.communicate()
    assert process.returncode == 0, out.decode()[-3000:]
    assert await asyncio.to_thread(totals, servers) == {f"k{k}": PER_KEY for k in range(KEYS)}, out.decode()[
        -3000:
    ]
    # its state's changelog topic was created asking for compaction, which the brokers accept
    topics = await cluster.admin.get_children(znodes.BROKER_TOPICS)
    [changelog] = [t for t in topics if t.startswith("changelog__quix-eos")]
    data, _ = await cluster.admin.get(f"/config/topics/{changelog}")
    assert json.loads(data)["config"]["cleanup.policy"] == "compact"


async def test_faust_exactly_once_with_a_table(cluster: Cluster, tmp_path: Path) -> None:
    require_pyclients()
    await cluster.start((1, 2, 3), overrides=dict.fromkeys((1, 2, 3), SETTINGS))
    await cluster.topic("faust-in", {p: tuple((p + i) % 3 + 1 for i in range(3)) for p in range(3)})
    servers = cluster.bootstrap()
    await asyncio.to_thread(produce_input, servers, "faust-in")
    process = await asyncio.create_subprocess_exec(
        str(PYTHON), str(REPO / "tests" / "pyclients" / "faust_eos.py"), servers, str(tmp_path / "faust"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    expected = {f"k{k}": PER_KEY for k in range(KEYS)}
    try:
        async with asyncio.timeout(DEADLINE_S * 4):
            while (found := await asyncio.to_thread(totals, servers, "faust-out")) != expected:
                if process.returncode is not None:
                    out, _ = await process.communicate()
                    pytest.fail(f"faust stopped: {out.decode()[-3000:]}")
    finally:
        if process.returncode is None:
            process.terminate()
        out, _ = await process.communicate()
    assert found == expected, out.decode()[-3000:]
    data, _ = await cluster.admin.get("/config/topics/faust-eos-totals-changelog")
    assert json.loads(data)["config"]["cleanup.policy"] == "compact"
