"""One short ZooKeeper session for one admin command; an unreachable server becomes an AdminError.

The admin modules (``cluster_reads``, ``topic_writes``, ``entity_configs``, ``controller_requests``) are
plain async functions over an :class:`AsyncZooKeeper`; this opens the session the CLI, the launcher,
chaos runs and tests give them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from kazoo.handlers.threading import KazooTimeoutError

from placement.errors import AdminError
from zkstore.aio import AsyncZooKeeper
from zkstore.security import ZkSecurity

__all__ = ["connect"]


@asynccontextmanager
async def connect(
    hosts: str, *, timeout_s: float = 10.0, security: ZkSecurity | None = None
) -> AsyncIterator[AsyncZooKeeper]:
    """One short ZooKeeper session for one command; an unreachable server becomes an AdminError.

    ``security`` authenticates the session (and ACLs what it creates) on a cluster that runs with
    ``zookeeper.set.acl``, whose znodes only their creator may change."""
    zk = AsyncZooKeeper(hosts, connect_timeout_s=timeout_s, security=security)
    try:
        await zk.start()
    except KazooTimeoutError:
        raise AdminError(
            f"cannot connect to ZooKeeper at {hosts} (no session within {timeout_s:g} s)"
        ) from None
    try:
        yield zk
    finally:
        await zk.close()
