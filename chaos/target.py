"""The cluster a chaos run breaks: what the run needs of it, whatever runs it.

A run asks its target for the nodes it may hit, the cuts it can make, a ZooKeeper session, the
clients' bootstrap list, an injector that does and heals the faults, the replicas' logs and the
daemons' event logs. :class:`LocalCluster` answers for a cluster started by ``python -m cluster up``
(processes, signals, namespaces); :class:`chaos.compose.ComposeCluster` for ``docker compose up``
(containers).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Protocol

from chaos.faults import ClusterInjector, Injector
from chaos.schedule import NETWORK_FAULTS, Node, nodes_of
from cluster import state_file, verify_replicas
from daemon.eventlog import EventLog
from zkstore.aio import AsyncZooKeeper

__all__ = ["LocalCluster", "RunInjector", "Target"]


class RunInjector(Injector, Protocol):
    crashed: list[str]
    """Nodes found down that no fault had taken down."""

    async def heal_all(self) -> None:
        """Leave every node running and reachable, whatever the faults left."""
        ...


class Target(Protocol):
    directory: Path
    """Where the runs are recorded (``DIR/chaos/run-*``) and where the audit finds every log."""

    @property
    def cuts(self) -> frozenset[str]:
        """The network faults this cluster can make."""
        ...

    def nodes(self) -> list[Node]: ...

    def bootstrap_servers(self) -> str: ...

    def zookeeper_session(self) -> AbstractAsyncContextManager[AsyncZooKeeper]: ...

    def injector(self, events: EventLog, zk: AsyncZooKeeper) -> RunInjector: ...

    async def verify_replicas(self, topics: Sequence[str]) -> list[verify_replicas.PartitionReport]:
        """Every replica of ``topics`` against its leader's log, up to the high watermark."""
        ...

    def daemon_events(self) -> list[Path]:
        """The daemons' event logs as they are now, as files the audit can read."""
        ...


class LocalCluster:
    """The running local cluster in ``directory`` (``cluster.json``)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory.resolve()
        self.state = running_state(self.directory)

    @property
    def cuts(self) -> frozenset[str]:
        return frozenset(NETWORK_FAULTS) if state_file.network_of(self.state) is not None else frozenset()

    def nodes(self) -> list[Node]:
        return nodes_of(self.state)

    def bootstrap_servers(self) -> str:
        return state_file.bootstrap_servers(self.state)

    def zookeeper_session(self) -> AbstractAsyncContextManager[AsyncZooKeeper]:
        return state_file.zookeeper_session(self.state)

    def injector(self, events: EventLog, zk: AsyncZooKeeper) -> RunInjector:
        return ClusterInjector(self.directory, events, zk, self.nodes())

    async def verify_replicas(self, topics: Sequence[str]) -> list[verify_replicas.PartitionReport]:
        return await verify_replicas.verify(state_file.load_state(self.directory), topics)

    def daemon_events(self) -> list[Path]:
        processes = state_file.load_state(self.directory)["processes"]
        return [Path(p["events"]) for p in processes if p.get("events")]


def running_state(directory: Path) -> dict[str, Any]:
    """``cluster.json`` of a cluster with a live ZooKeeper and a live broker, else ClusterError."""
    state = state_file.load_state(directory)
    running = {p["role"] for p in state["processes"] if state_file.alive(p.get("pid"))}
    if not {"zookeeper", "broker"} <= running:
        raise state_file.ClusterError(
            f"the cluster in {directory} is not running (no live ZooKeeper or broker); "
            f"start one with `python -m cluster up --dir {directory} --detach`"
        )
    return state
