"""Topic-level configs through the Admin API: stored in Kafka's layout, applied at runtime."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from admin.errors import AdminFailure
from admin.topic_configs import InvalidTopicConfig, check_configs, check_value
from broker.config_apis import BROKER, DELETE, SET, ConfigApis, _incremental
from broker.log import LogConfig
from broker.topic_configs import log_config_for
from protocol import ErrorCode
from tests.support.clients import DEADLINE_S
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until

# ---------------------------------------------------------------- the rules


@pytest.mark.parametrize(
    ("name", "value"),
    [("retention.ms", "soon"), ("retention.ms", "-2"), ("segment.bytes", "13"), ("cleanup.policy", "shred"),
     ("cleanup.policy", ""), ("unclean.leader.election.enable", "maybe")],
)  # fmt: skip
def test_values_kafka_refuses_are_refused(name: str, value: str) -> None:
    with pytest.raises(InvalidTopicConfig, match=name.split(".")[0]):
        check_value(name, value)


@pytest.mark.parametrize("value", ["compact", "delete,compact"])
def test_compaction_is_accepted_through_the_admin_api(value: str) -> None:
    check_value("cleanup.policy", value)  # as Kafka stores __consumer_offsets' config
    check_configs({"cleanup.policy": value, "min.cleanable.dirty.ratio": "0.1", "delete.retention.ms": "0"})


@pytest.mark.parametrize(
    ("configs", "refusal"),
    [
        ({"min.cleanable.dirty.ratio": "1.5"}, "no more than 1"),
        ({"min.cleanable.dirty.ratio": "lots"}, "Not a number"),
        ({"delete.retention.ms": "-1"}, "at least 0"),
        ({"max.compaction.lag.ms": "0"}, "at least 1"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "conflict topic config setting"),
    ],
)
def test_compaction_settings_kafka_refuses_are_refused(configs: dict[str, str], refusal: str) -> None:
    with pytest.raises(AdminFailure, match=refusal) as refused:
        check_configs(configs)
    assert refused.value.code == ErrorCode.INVALID_CONFIG


def test_a_policy_without_delete_turns_retention_off_and_compact_turns_the_cleaner_on() -> None:
    base = LogConfig(retention_ms=1000, retention_bytes=4096)
    kept = log_config_for(base, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.25"})
    assert (kept.delete, kept.compact, kept.min_cleanable_ratio) == (False, True, 0.25)
    deleting = log_config_for(base, {"cleanup.policy": "compact,delete", "delete.retention.ms": "5"})
    assert (deleting.delete, deleting.compact, deleting.delete_retention_ms) == (True, True, 5)
    assert (deleting.retention_ms, deleting.retention_bytes) == (1000, 4096)


def test_overrides_change_only_their_log_settings() -> None:
    base = LogConfig()
    changed = log_config_for(
        base, {"retention.ms": "1000", "segment.bytes": "4096", "min.insync.replicas": "2"}
    )
    assert (changed.retention_ms, changed.segment_bytes) == (1000, 4096)
    assert changed.retention_bytes == base.retention_bytes and log_config_for(base, {}) is base


def test_incremental_operations() -> None:
    current = {"retention.ms": "1", "segment.bytes": "4096"}
    ops = [
        {"name": "retention.ms", "config_operation": 0, "value": "2"},
        {"name": "segment.bytes", "config_operation": 1, "value": None},
        {"name": "cleanup.policy", "config_operation": 2, "value": "delete"},
    ]
    assert _incremental(current, ops) == {"retention.ms": "2", "cleanup.policy": "delete"}
    assert current == {"retention.ms": "1", "segment.bytes": "4096"}  # not changed in place


async def test_broker_configs_are_static_but_deleting_one_never_set_succeeds() -> None:
    """kafka-reassign-partitions --verify clears each broker's replication throttles with DELETEs."""
    unused: Any = None  # no broker resource reaches ZooKeeper or the metadata cache
    apis = ConfigApis(1, None, LogConfig(), zk=lambda: unused, loop=asyncio.get_running_loop, cache=unused)

    def ops(*operations: int) -> list[dict[str, Any]]:
        return [
            {"name": "leader.replication.throttled.rate", "config_operation": op, "value": "1"}
            for op in operations
        ]

    for name in ("1", ""):
        await apis._alter_one(BROKER, name, ops(DELETE, DELETE), _incremental, False)
    refusals = [((BROKER, "1", ops(DELETE, SET)), "static here"), ((BROKER, "2", ops(DELETE)), "expected 1")]
    for (kind, name, configs), why in refusals:
        with pytest.raises(AdminFailure, match=why) as refused:
            await apis._alter_one(kind, name, configs, _incremental, False)
        assert refused.value.code == ErrorCode.INVALID_REQUEST
    with pytest.raises(AdminFailure, match="static here"):  # the legacy AlterConfigs: a whole new set
        await apis._alter_one(
            BROKER, "1", [{"name": "log.cleaner.threads", "value": "2"}], _incremental, False
        )


# ---------------------------------------------------------------- real brokers and clients


@pytest.mark.zookeeper
async def test_retention_changed_through_the_admin_api_deletes_old_segments_without_a_restart(
    cluster: Cluster,
) -> None:
    fast = {"log_retention_check_interval_ms": 200}
    await cluster.start((1, 2), overrides={1: fast, 2: fast})
    servers = cluster.bootstrap()

    def admin_calls(step: str) -> Any:
        from confluent_kafka import Producer, TopicPartition
        from confluent_kafka.admin import (
            AdminClient,
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            ConfigSource,
            NewTopic,
        )

        client = AdminClient({"bootstrap.servers": servers})
        topic = ConfigResource(ConfigResource.Type.TOPIC, "aging")
        if step == "create":
            created = client.create_topics([NewTopic("aging", 1, 2, config={"segment.bytes": "2048"})])
            created["aging"].result(DEADLINE_S)
            producer = Producer({"bootstrap.servers": servers, "linger.ms": 0})
            for _ in range(200):
                producer.produce("aging", value=b"x" * 200, partition=0)
                producer.flush(DEADLINE_S)  # one batch each, so segments roll
            described = client.describe_configs([topic])[topic].result(DEADLINE_S)
            return {
                name: (entry.value, entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
                for name, entry in described.items()
                if name in ("segment.bytes", "retention.ms")
            }
        if step == "alter":
            entry = ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)
            topic.set_config("retention.ms", "1")
            client.incremental_alter_configs(
                [ConfigResource(ConfigResource.Type.TOPIC, "aging", incremental_configs=[entry])]
            )[ConfigResource(ConfigResource.Type.TOPIC, "aging")].result(DEADLINE_S)
            return None
        consumer_low = __import__("confluent_kafka").Consumer(
            {"bootstrap.servers": servers, "group.id": "probe"}
        )
        try:
            return consumer_low.get_watermark_offsets(TopicPartition("aging", 0), timeout=10, cached=False)[0]
        finally:
            consumer_low.close()

    described = await asyncio.to_thread(admin_calls, "create")
    assert described["segment.bytes"] == ("2048", True)
    assert described["retention.ms"] == (str(7 * 24 * 3600 * 1000), False)
    assert await asyncio.to_thread(admin_calls, "low") == 0
    await asyncio.to_thread(admin_calls, "alter")
    data, _ = await cluster.admin.get("/config/topics/aging")
    assert json.loads(data)["config"] == {"segment.bytes": "2048", "retention.ms": "1"}
    changes = await cluster.admin.get_children("/config/changes")
    assert any(c.startswith("config_change_") for c in changes)

    async def old_segments_deleted() -> bool:
        return await asyncio.to_thread(admin_calls, "low") > 0

    await wait_until(
        old_segments_deleted, what="the log start offset to move past deleted segments", timeout=30
    )
    for broker in cluster.brokers.values():
        await broker.wait_event(
            lambda e: (
                e["kind"] == "topic_config_applied"
                and e["topic"] == "aging"
                and "retention.ms" in e["configs"]
            ),
            what="the change applied",
        )


@pytest.mark.zookeeper
async def test_kafka_python_alter_configs_sets_compaction_and_refuses_a_bad_ratio(cluster: Cluster) -> None:
    await cluster.start((1,))
    await cluster.topic("settings", {0: (1,)})
    servers = cluster.bootstrap()

    def calls() -> Any:
        from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

        client = KafkaAdminClient(bootstrap_servers=servers)
        try:
            ok = client.alter_configs(
                [ConfigResource(ConfigResourceType.TOPIC, "settings", configs={"cleanup.policy": "compact"})]
            )
            bad = client.alter_configs(
                [
                    ConfigResource(
                        ConfigResourceType.TOPIC, "settings", configs={"min.cleanable.dirty.ratio": "2"}
                    )
                ]
            )
            return ok, bad
        finally:
            client.close()

    ok, bad = await asyncio.to_thread(calls)
    # kafka-python 3 answers per resource: "OK" or the error
    assert ok == {"topic": {"settings": "OK"}}
    refused = bad["topic"]["settings"]
    assert refused.startswith("[Error 40]") and "min.cleanable.dirty.ratio" in refused
    data, _ = await cluster.admin.get("/config/topics/settings")
    assert json.loads(data)["config"] == {"cleanup.policy": "compact"}
