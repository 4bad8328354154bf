"""The authorizer against a real ZooKeeper: its settings, what it loads at start, the changes another
client makes (seen through the change notifications), reconnects, and old notifications purged."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from kazoo.client import KazooClient

from authorizer.acl_authorizer import AUTHORIZER_KEYS, AclAuthorizer, AuthorizerSettings
from daemon.config import ConfigError, load_config
from security.acl import AclEntry, AclOperation, AclPermissionType, PatternType, ResourcePattern, ResourceType
from tests.support.waiting import wait_until
from tests.support.zookeeper import ConnectionCutter, session
from zkstore import acls
from zkstore.aio import AsyncZooKeeper

TOPIC = ResourceType.TOPIC
READ, WRITE = AclOperation.READ, AclOperation.WRITE
ALICE, HOST = "User:alice", "10.0.0.1"
ORDERS = ResourcePattern(TOPIC, "orders")
ENABLED = AuthorizerSettings(enabled=True)


def allow(op: AclOperation, principal: str = ALICE) -> AclEntry:
    return AclEntry(principal, AclPermissionType.ALLOW, op)


def adding(*entries: AclEntry) -> acls.AclChange:
    return lambda current: current | set(entries)


def removing(*entries: AclEntry) -> acls.AclChange:
    return lambda current: current - set(entries)


# -- settings


def settings(**environ: str) -> AuthorizerSettings:
    env = {f"KAFKA_{k.upper()}": v for k, v in environ.items()}
    return AuthorizerSettings.from_loaded(load_config(AUTHORIZER_KEYS, None, environ=env))


def test_no_authorizer_by_default() -> None:
    assert settings() == AuthorizerSettings(enabled=False, super_users=frozenset())


@pytest.mark.parametrize(
    "name", ["kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer", "acl"]
)
def test_accepted_authorizer_names(name: str) -> None:
    assert settings(AUTHORIZER_CLASS_NAME=name).enabled


def test_unknown_authorizer_is_a_config_error_listing_the_choices() -> None:
    with pytest.raises(
        ConfigError, match=r"authorizer\.class\.name.*kafka\.security\.authorizer\.AclAuthorizer"
    ):
        settings(AUTHORIZER_CLASS_NAME="com.example.Custom")


def test_super_users_are_semicolon_separated() -> None:
    loaded = settings(
        AUTHORIZER_CLASS_NAME="acl",
        SUPER_USERS=" User:admin ; User:CN=broker-1,O=x;",
        ALLOW_EVERYONE_IF_NO_ACL_FOUND="true",
    )
    assert loaded.super_users == {"User:admin", "User:CN=broker-1,O=x"}
    assert loaded.allow_everyone_if_no_acl_found
    with pytest.raises(ConfigError, match=r"super\.users"):
        settings(SUPER_USERS="admin")


async def test_without_an_authorizer_everything_is_allowed_and_zookeeper_untouched() -> None:
    authorizer = AclAuthorizer(AsyncZooKeeper("127.0.0.1:1"), AuthorizerSettings())
    await authorizer.start()
    assert authorizer.authorize(ALICE, HOST, AclOperation.DELETE, TOPIC, "orders")
    assert authorizer.authorize_any(ALICE, HOST, WRITE, TOPIC)
    await authorizer.stop()


# -- with ZooKeeper


Start = Callable[..., Awaitable[AclAuthorizer]]
"""Starts an authorizer on its own session: ``start(settings=ENABLED, connect=..., **kwargs)``."""


@pytest.fixture
def writer(zk: AsyncZooKeeper) -> AsyncZooKeeper:
    """The test's own session (the shared ``zk`` fixture), changing ACLs beside the authorizers'."""
    return zk


@pytest.fixture
async def running(zk_connect: str) -> AsyncIterator[Start]:
    """Start authorizers on their own sessions; all are stopped and closed afterwards."""
    started: list[tuple[AclAuthorizer, AsyncZooKeeper]] = []

    async def start(
        settings: AuthorizerSettings = ENABLED, connect: str = zk_connect, **kwargs: object
    ) -> AclAuthorizer:
        zk = await session(connect)
        authorizer = AclAuthorizer(zk, settings, **kwargs)  # type: ignore[arg-type]
        started.append((authorizer, zk))
        await authorizer.start()
        return authorizer

    yield start
    for authorizer, zk in started:
        await authorizer.stop()
        await zk.close()


async def test_start_creates_the_paths_and_loads_what_is_there(
    writer: AsyncZooKeeper, running: Start, zk_client: KazooClient
) -> None:
    await acls.update_resource_acls(writer, ORDERS, adding(allow(READ)))
    authorizer = await running()
    assert zk_client.exists("/kafka-acl/TransactionalId") and zk_client.exists(
        "/kafka-acl-extended/prefixed/User"
    )
    assert authorizer.authorize(ALICE, HOST, READ, TOPIC, "orders")
    assert not authorizer.authorize(ALICE, HOST, WRITE, TOPIC, "orders")
    assert not authorizer.authorize("User:bob", HOST, READ, TOPIC, "orders")


async def test_an_acl_added_elsewhere_is_seen(writer: AsyncZooKeeper, running: Start) -> None:
    authorizer = await running()
    assert not authorizer.authorize(ALICE, HOST, WRITE, TOPIC, "orders")
    await acls.update_resource_acls(writer, ORDERS, adding(allow(WRITE)))
    await wait_until(
        lambda: authorizer.authorize(ALICE, HOST, WRITE, TOPIC, "orders"), "the new ACL in force"
    )

    prefix = ResourcePattern(TOPIC, "pay", PatternType.PREFIXED)
    await acls.update_resource_acls(writer, prefix, adding(allow(READ)))
    await wait_until(lambda: authorizer.authorize(ALICE, HOST, READ, TOPIC, "payments"), "the prefixed ACL")

    await acls.update_resource_acls(writer, ORDERS, removing(allow(WRITE)))
    await wait_until(lambda: not authorizer.authorize(ALICE, HOST, WRITE, TOPIC, "orders"), "the ACL removed")
    assert authorizer.reloads == 1  # each change re-read its own resource only


async def test_a_bad_znode_or_notification_does_not_stop_the_following(
    writer: AsyncZooKeeper, running: Start, zk_client: KazooClient
) -> None:
    authorizer = await running()
    zk_client.create("/kafka-acl-changes/acl_changes_", b"garbage", sequence=True)
    zk_client.create("/kafka-acl/Topic/broken", b"{half", makepath=True)
    zk_client.create("/kafka-acl-changes/acl_changes_", b"TOPIC:broken", sequence=True)
    await acls.update_resource_acls(writer, ORDERS, adding(allow(READ)))
    await wait_until(lambda: authorizer.authorize(ALICE, HOST, READ, TOPIC, "orders"), "the good change seen")
    assert ResourcePattern(TOPIC, "broken") not in authorizer.snapshot


async def test_denials_are_reported(running: Start) -> None:
    denied: list[tuple[object, ...]] = []
    authorizer = await running(on_denied=lambda *args: denied.append(args))
    assert not authorizer.authorize(ALICE, HOST, READ, TOPIC, "orders")
    assert not authorizer.authorize_any(ALICE, HOST, WRITE, TOPIC)
    assert denied == [(ALICE, HOST, READ, TOPIC, "orders"), (ALICE, HOST, WRITE, TOPIC, None)]


async def test_super_users_and_allow_everyone(writer: AsyncZooKeeper, running: Start) -> None:
    await acls.update_resource_acls(writer, ORDERS, adding(allow(READ, "User:bob")))
    authorizer = await running(
        AuthorizerSettings(
            enabled=True, super_users=frozenset({"User:admin"}), allow_everyone_if_no_acl_found=True
        )
    )
    assert authorizer.authorize("User:admin", HOST, AclOperation.ALTER, TOPIC, "orders")
    assert not authorizer.authorize(ALICE, HOST, READ, TOPIC, "orders")
    assert authorizer.authorize(ALICE, HOST, READ, TOPIC, "unprotected")


async def test_after_a_reconnect_everything_is_read_again(
    zk_connect: str, writer: AsyncZooKeeper, running: Start
) -> None:
    server, _, chroot = zk_connect.partition("/")
    cutter = ConnectionCutter(server)
    port = await cutter.start()
    try:
        authorizer = await running(connect=f"127.0.0.1:{port}/{chroot}")
        cutter.cut(hold=True)
        await wait_until(lambda: not authorizer.zk.connected, "the authorizer's connection dropped")
        await acls.update_resource_acls(writer, ORDERS, adding(allow(READ)))
        cutter.release()
        await wait_until(lambda: authorizer.authorize(ALICE, HOST, READ, TOPIC, "orders"), "the ACL seen")
        await wait_until(lambda: authorizer.reloads >= 2, "a full reload after the reconnect")
    finally:
        await cutter.close()


async def test_old_notifications_are_purged(
    writer: AsyncZooKeeper, running: Start, zk_client: KazooClient
) -> None:
    authorizer = await running(change_expiration_s=0.0)
    await acls.update_resource_acls(writer, ORDERS, adding(allow(READ)))
    await wait_until(lambda: authorizer.authorize(ALICE, HOST, READ, TOPIC, "orders"), "the ACL seen")
    await acls.update_resource_acls(writer, ORDERS, adding(allow(WRITE)))  # the next pass purges
    await wait_until(lambda: authorizer.authorize(ALICE, HOST, WRITE, TOPIC, "orders"), "the second ACL seen")
    await wait_until(
        lambda: not zk_client.get_children("/kafka-acl-changes"), "every notification acted on deleted"
    )


async def test_decisions_from_threads_while_the_acls_change(writer: AsyncZooKeeper, running: Start) -> None:
    """Handler threads read whole snapshots: never an error, never a half-applied change."""
    authorizer = await running()
    stop = threading.Event()
    errors: list[BaseException] = []

    def ask() -> None:
        while not stop.is_set():
            try:
                authorizer.authorize(ALICE, HOST, READ, TOPIC, "orders")
                authorizer.authorize_any(ALICE, HOST, READ, TOPIC)
            except BaseException as exc:  # any failure is the finding
                errors.append(exc)
                return

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        for i in range(10):
            entry = allow(READ, f"User:u{i}")
            await acls.update_resource_acls(writer, ORDERS, adding(entry))
        await wait_until(lambda: len(authorizer.snapshot.get(ORDERS, ())) == 10, "every ACL seen")
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert errors == []
