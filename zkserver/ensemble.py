"""A ZooKeeper quorum of several JVMs, on loopback or one per network namespace, for failover tests."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Self

from zkserver.config import CLIENT_PORT, ELECTION_PORT, QUORUM_PORT, base_config, make_data_dir
from zkserver.errors import ZooKeeperStartError
from zkserver.java import find_java
from zkserver.ports import LOOPBACK, free_ports
from zkserver.process import DEFAULT_JVM_OPTS, POLL_INTERVAL_S, QUORUM_MAIN, START_TIMEOUT_S, ZooKeeperProcess
from zkserver.zookeeper_jars import resolve_classpath

__all__ = ["ZooKeeperEnsemble"]


class ZooKeeperEnsemble:
    """A ZooKeeper quorum of ``size`` JVMs on loopback, for leader-failover tests.

    Nodes are addressed by 0-based index ``i``; node ``i`` has server id (``myid``) ``i + 1``.
    """

    def __init__(
        self,
        size: int = 3,
        *,
        data_dir: str | os.PathLike[str] | None = None,
        jvm_opts: Sequence[str] = DEFAULT_JVM_OPTS,
        extra_config: Mapping[str, str] | None = None,
        start_timeout: float = START_TIMEOUT_S,
        hosts: Sequence[str] | None = None,
        command_prefixes: Sequence[Sequence[str]] | None = None,
    ) -> None:
        """``hosts`` (one address per node) and ``command_prefixes`` place each node elsewhere than
        loopback, e.g. in a network namespace of its own; each then uses Kafka's usual ports."""
        if size < 2:
            raise ValueError("an ensemble needs at least 2 servers; use ZooKeeperServer for one")
        classpath = resolve_classpath()
        java = find_java()
        root = make_data_dir(data_dir, "zkstore-ensemble-")
        addresses = list(hosts) if hosts is not None else [LOOPBACK] * size
        if hosts is None:
            ports = free_ports(3 * size)
            client_ports, peer_ports = ports[:size], ports[size:]
        else:
            client_ports, peer_ports = [CLIENT_PORT] * size, [QUORUM_PORT, ELECTION_PORT] * size
        servers = {
            f"server.{i + 1}": f"{addresses[i]}:{peer_ports[2 * i]}:{peer_ports[2 * i + 1]}"
            for i in range(size)
        }
        self.start_timeout = start_timeout
        self.data_dir = root
        self.nodes: list[ZooKeeperProcess] = []
        for i in range(size):
            node_dir = root / f"node{i + 1}"
            node_dir.mkdir(parents=True, exist_ok=True)
            (node_dir / "myid").write_text(f"{i + 1}\n", encoding="ascii")
            settings = (
                base_config(node_dir, client_ports[i], addresses[i])
                # Generous limits in ticks: startup on a busy 2-core box can be slow.
                | {"initLimit": "20", "syncLimit": "10"}
                | servers
                | dict(extra_config or {})
            )
            self.nodes.append(
                ZooKeeperProcess(
                    data_dir=node_dir,
                    client_port=client_ports[i],
                    settings=settings,
                    classpath=classpath,
                    java=java,
                    jvm_opts=jvm_opts,
                    main_class=QUORUM_MAIN,
                    name=f"zookeeper-{i + 1}:{client_ports[i]}",
                    command_prefix=command_prefixes[i] if command_prefixes is not None else (),
                )
            )

    @property
    def connect_string(self) -> str:
        """All nodes, running or not: clients fail over between them."""
        return ",".join(node.connect_string for node in self.nodes)

    def start(self) -> Self:
        """Start every node at once (so the election sees all peers) and wait for a quorum."""
        for node in self.nodes:
            node.start()
        try:
            self.wait_for_quorum()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def detach(self) -> None:
        """Keep every node running after this Python process exits."""
        for node in self.nodes:
            node.detach()

    def stop_node(self, i: int) -> None:
        self.nodes[i].stop()

    def kill_node(self, i: int) -> None:
        self.nodes[i].kill()

    def start_node(self, i: int) -> None:
        """(Re)start one node and wait until it has joined the quorum as leader or follower."""
        node = self.nodes[i]
        node.start()
        node.wait_until_serving(self.start_timeout, modes=("leader", "follower"))

    def modes(self) -> list[str | None]:
        """Each node's ``srvr`` mode (None for stopped or not-serving nodes)."""
        return [node.mode() for node in self.nodes]

    def leader(self) -> int | None:
        """Index of the current leader, if exactly one node claims to lead."""
        leaders = [i for i, mode in enumerate(self.modes()) if mode == "leader"]
        return leaders[0] if len(leaders) == 1 else None

    def wait_for_quorum(self, timeout: float | None = None) -> int:
        """Wait until every running node is leader or follower with exactly one leader; return its index.

        Needs a majority of nodes running, otherwise it times out.
        """
        limit = self.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while True:
            running = [i for i, node in enumerate(self.nodes) if node.running]
            modes = {i: self.nodes[i].mode() for i in running}
            leaders = [i for i, mode in modes.items() if mode == "leader"]
            if (
                len(running) > len(self.nodes) // 2
                and len(leaders) == 1
                and all(mode in ("leader", "follower") for mode in modes.values())
            ):
                return leaders[0]
            out_of_time = time.monotonic() >= deadline
            if out_of_time or len(running) <= len(self.nodes) // 2:  # no majority: it cannot happen
                tails = "\n".join(self.nodes[i].log_tail(15) for i in range(len(self.nodes)))
                raise ZooKeeperStartError(
                    f"ensemble has no quorum after {limit:.0f} s: modes {modes}, running {running}\n{tails}"
                )
            time.sleep(POLL_INTERVAL_S)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<ZooKeeperEnsemble {self.nodes!r}>"
