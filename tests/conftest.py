"""Shared fixtures: one real ZooKeeper per test session, a private chroot per test.

Starting a JVM costs about a second, so the server is shared; the per-test chroot
keeps tests from seeing each other's znodes. Session-scoped fixtures are lazy: a run
that uses none of these fixtures never starts Java.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl_credential

from cluster import node_control, state_file
from tests.support.cluster import SECURITY_MODES, cluster
from tests.support.zookeeper import session
from zkserver.process import DEFAULT_JVM_OPTS
from zkserver.server import ZooKeeperServer
from zkstore.aio import AsyncZooKeeper

__all__ = ["cluster"]  # the shared process-test fixture, offered to every test package

log = logging.getLogger(__name__)

ZK_FIXTURES = frozenset({"zk_server", "zk_connect", "zk_client"})
CLIENT_START_TIMEOUT_S = 15.0
SUPER_USER = "super:test-cleanup"
"""ZooKeeper's super user on the test server, which may delete any znode whatever its ACL."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run the tests of a ``secure_variant`` module on both layouts of the ``cluster`` fixture."""
    if "cluster" in metafunc.fixturenames and metafunc.definition.get_closest_marker("secure_variant"):
        metafunc.parametrize("cluster", SECURITY_MODES, indirect=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tag every test that reaches ZooKeeper through these fixtures, so ``-m "not zookeeper"`` works."""
    for item in items:
        if ZK_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.zookeeper)


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One standalone ZooKeeper for the whole session; its data dir and log live under pytest's tmp dir."""
    super_digest = make_digest_acl_credential(*SUPER_USER.split(":"))
    server = ZooKeeperServer(
        data_dir=tmp_path_factory.mktemp("zookeeper"),
        jvm_opts=(*DEFAULT_JVM_OPTS, f"-Dzookeeper.DigestAuthenticationProvider.superDigest={super_digest}"),
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _chroot_name(node_name: str) -> str:
    """A znode-safe, recognisable and unique name: ``test-<test name>-<8 hex>``."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", node_name).strip("_.")[:60]
    return f"test-{readable}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def zk_connect(zk_server: ZooKeeperServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """``127.0.0.1:PORT/test-...``: a connect string whose chroot exists and is removed afterwards."""
    chroot = "/" + _chroot_name(request.node.name)
    admin = KazooClient(hosts=zk_server.connect_string)
    admin.start(timeout=CLIENT_START_TIMEOUT_S)
    try:
        admin.create(chroot)
    finally:
        admin.stop()
        admin.close()
    try:
        yield zk_server.connect_string + chroot
    finally:
        admin = KazooClient(hosts=zk_server.connect_string)
        try:
            admin.start(timeout=CLIENT_START_TIMEOUT_S)
            admin.add_auth("digest", SUPER_USER)  # a secured test's znodes are its cluster's alone
            admin.delete(chroot, recursive=True)
        except Exception:  # cleanup must never turn a passing test into an error
            log.warning("could not delete chroot %s", chroot, exc_info=True)
        finally:
            admin.stop()
            admin.close()


@pytest.fixture
def zk_client(zk_connect: str) -> Iterator[KazooClient]:
    """A connected kazoo client confined to this test's chroot."""
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=CLIENT_START_TIMEOUT_S)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
async def zk(zk_connect: str) -> AsyncIterator[AsyncZooKeeper]:
    """An AsyncZooKeeper session confined to this test's chroot."""
    client = await session(zk_connect)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def directory(tmp_path: Path) -> Iterator[Path]:
    """Where a test's local cluster (``cluster.launcher.up``) lives; whatever the test started there
    is stopped afterwards."""
    yield tmp_path / "cluster"
    if state_file.state_path(tmp_path / "cluster").exists():
        node_control.down(tmp_path / "cluster")
