"""ACLs in a real ZooKeeper: Kafka's paths and JSON, change notifications, tolerance of bad znodes,
and compare-and-set updates that lose nothing when writers race."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from kazoo.client import KazooClient

from security.acl import AclEntry, AclOperation, AclPermissionType, PatternType, ResourcePattern, ResourceType
from tests.support.zookeeper import session
from zkstore import acls
from zkstore.aio import AsyncZooKeeper

ORDERS = ResourcePattern(ResourceType.TOPIC, "orders")
ORD_PREFIX = ResourcePattern(ResourceType.TOPIC, "ord", PatternType.PREFIXED)
READ = AclEntry("User:alice", AclPermissionType.ALLOW, AclOperation.READ)
DENY_WRITE = AclEntry("User:bob", AclPermissionType.DENY, AclOperation.WRITE, "10.0.0.1")


def notifications(zk_client: KazooClient, root: str) -> list[bytes]:
    return [zk_client.get(f"{root}/{name}")[0] for name in sorted(zk_client.get_children(root))]


# -- pure parts


def test_paths_and_notification_payloads_are_kafkas() -> None:
    assert acls.resource_path(ORDERS) == "/kafka-acl/Topic/orders"
    assert acls.resource_path(ORD_PREFIX) == "/kafka-acl-extended/prefixed/Topic/ord"
    txn = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "t1")
    assert acls.resource_path(txn) == "/kafka-acl/TransactionalId/t1"
    assert acls.encode_change(txn) == b"TRANSACTIONAL_ID:t1"
    assert json.loads(acls.encode_change(ORD_PREFIX)) == {
        "version": 1,
        "resourceType": "TOPIC",
        "name": "ord",
        "patternType": "PREFIXED",
    }
    for pattern in (ORDERS, ORD_PREFIX, txn):
        root = acls.change_root(pattern.pattern_type)
        assert acls.decode_change(root, acls.encode_change(pattern)) == pattern


def test_notifications_that_name_nothing_raise() -> None:
    with pytest.raises(ValueError):
        acls.decode_change(acls.LITERAL_ACL_CHANGES, b"orders")
    with pytest.raises(ValueError):
        acls.decode_change(acls.EXTENDED_ACL_CHANGES, b'{"version":2}')
    assert acls.change_sequence("acl_changes_0000000012") == 12
    assert acls.change_sequence("config_change_0000000012") is None


# -- with ZooKeeper


async def test_paths_are_created_as_kafka_does(zk: AsyncZooKeeper, zk_client: KazooClient) -> None:
    await acls.create_acl_paths(zk)
    types = ["Cluster", "DelegationToken", "Group", "Topic", "TransactionalId", "User"]
    assert sorted(zk_client.get_children("/kafka-acl")) == types
    assert sorted(zk_client.get_children("/kafka-acl-extended/prefixed")) == types
    assert zk_client.exists("/kafka-acl-changes") and zk_client.exists("/kafka-acl-extended-changes")


async def test_round_trip_in_kafkas_layout(zk: AsyncZooKeeper, zk_client: KazooClient) -> None:
    await acls.create_acl_paths(zk)
    update = await acls.update_resource_acls(zk, ORDERS, acls.adding({READ, DENY_WRITE}))
    assert update.changed and update.added == {READ, DENY_WRITE}
    await acls.update_resource_acls(zk, ORD_PREFIX, acls.adding({READ}))

    data, _ = zk_client.get("/kafka-acl/Topic/orders")
    assert json.loads(data)["acls"] == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:bob", "permissionType": "Deny", "operation": "Write", "host": "10.0.0.1"},
    ]
    assert zk_client.exists("/kafka-acl-extended/prefixed/Topic/ord")
    assert await acls.read_all_acls(zk) == {ORDERS: {READ, DENY_WRITE}, ORD_PREFIX: {READ}}
    assert (await acls.read_resource_acls(zk, ORDERS)).version == 0


async def test_acls_written_by_kafka_are_read(zk: AsyncZooKeeper, zk_client: KazooClient) -> None:
    kafka_json = (
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
        b'"operation":"Read","host":"*"}]}'
    )
    zk_client.create("/kafka-acl/Group/g1", kafka_json, makepath=True)
    assert await acls.read_all_acls(zk) == {ResourcePattern(ResourceType.GROUP, "g1"): {READ}}


async def test_every_change_is_announced_and_no_op_is_not(zk: AsyncZooKeeper, zk_client: KazooClient) -> None:
    await acls.update_resource_acls(zk, ORDERS, acls.adding({READ}))
    await acls.update_resource_acls(zk, ORDERS, acls.adding({READ}))  # nothing new
    await acls.update_resource_acls(zk, ORD_PREFIX, acls.adding({READ}))
    assert zk_client.get_children("/kafka-acl-changes") == ["acl_changes_0000000000"]
    assert notifications(zk_client, "/kafka-acl-changes") == [b"TOPIC:orders"]
    assert notifications(zk_client, "/kafka-acl-extended-changes") == [
        b'{"version":1,"resourceType":"TOPIC","name":"ord","patternType":"PREFIXED"}'
    ]


async def test_last_entry_removed_deletes_the_znode(zk: AsyncZooKeeper, zk_client: KazooClient) -> None:
    await acls.update_resource_acls(zk, ORDERS, acls.adding({READ}))
    update = await acls.update_resource_acls(zk, ORDERS, lambda current: current - {READ})
    assert update.removed == {READ} and not update.after
    assert not zk_client.exists("/kafka-acl/Topic/orders")
    assert notifications(zk_client, "/kafka-acl-changes") == [b"TOPIC:orders", b"TOPIC:orders"]
    assert await acls.read_resource_acls(zk, ORDERS) == acls.VersionedAcls(frozenset(), None)


async def test_corrupt_znode_is_skipped_and_not_overwritten(
    zk: AsyncZooKeeper, zk_client: KazooClient, caplog: pytest.LogCaptureFixture
) -> None:
    await acls.update_resource_acls(zk, ORDERS, acls.adding({READ}))
    zk_client.create("/kafka-acl/Topic/broken", b"{half an edit", makepath=True)
    zk_client.create("/kafka-acl/Nonsense/x", b"", makepath=True)
    with caplog.at_level(logging.WARNING, logger="zkstore.acls"):
        assert await acls.read_all_acls(zk) == {ORDERS: {READ}}
    assert "/kafka-acl/Topic/broken" in caplog.text and "not JSON" in caplog.text
    assert "/kafka-acl/Nonsense" in caplog.text
    broken = ResourcePattern(ResourceType.TOPIC, "broken")
    with pytest.raises(ValueError, match="not JSON"):
        await acls.update_resource_acls(zk, broken, acls.adding({READ}))
    assert zk_client.get("/kafka-acl/Topic/broken")[0] == b"{half an edit"


async def test_racing_writers_lose_no_entry(zk: AsyncZooKeeper, zk_connect: str) -> None:
    other = await session(zk_connect)
    try:
        wanted = [AclEntry(f"User:u{i}", AclPermissionType.ALLOW, AclOperation.READ) for i in range(12)]
        await asyncio.gather(
            *(
                acls.update_resource_acls((zk, other)[i % 2], ORDERS, acls.adding({e}))
                for i, e in enumerate(wanted)
            )
        )
        assert (await acls.read_resource_acls(zk, ORDERS)).entries == set(wanted)
    finally:
        await other.close()


async def test_gives_up_after_the_retries(zk: AsyncZooKeeper, zk_client: KazooClient) -> None:
    """Another writer bumps the version between every read and write: the update fails, cleanly."""
    await acls.update_resource_acls(zk, ORDERS, acls.adding({READ}))
    attempts = 0

    def meddling(current: frozenset[AclEntry]) -> frozenset[AclEntry]:
        nonlocal attempts
        attempts += 1
        data, _ = zk_client.get("/kafka-acl/Topic/orders")
        zk_client.set("/kafka-acl/Topic/orders", data)
        return current | {DENY_WRITE}

    with pytest.raises(acls.AclUpdateFailed, match="3 times"):
        await acls.update_resource_acls(zk, ORDERS, meddling, max_retries=2)
    assert attempts == 3
    assert (await acls.read_resource_acls(zk, ORDERS)).entries == {READ}
