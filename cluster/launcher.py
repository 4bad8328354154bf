"""Start a local cluster: an embedded ZooKeeper, controller candidates and brokers as child processes.

ZooKeeper is one node or an ensemble of three, on loopback (or in network namespaces with --netns);
what was started is described in ``DIR/cluster.json``.

Every process runs in its own session (``cluster.node_control`` stops them in order), and
``cluster.json`` (``cluster.state_file``) holds what a later command needs to find them again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster import kafka_nodes, monitor, netns
from cluster.netns import Network
from cluster.node_control import down, signal_and_wait
from cluster.processes import BrokerProcess, ControllerProcess, DaemonProcess
from cluster.secure import SecureCluster
from cluster.state_file import (
    STATE_VERSION,
    ClusterError,
    alive,
    load_state,
    network_of,
    save_state,
    state_path,
    zookeeper_session,
)
from zkserver.ensemble import ZooKeeperEnsemble
from zkserver.ports import LOOPBACK, find_free_port
from zkserver.server import ZooKeeperServer
from zkstore import admin_session, cluster_reads, topic_writes, znodes

BROKER_SESSION_TIMEOUT_MS = 6000
"""Short, so that a killed broker is noticed within seconds in hands-on experiments."""
NETNS_PORTS = {"rpc": 9090, "client": 9092, "control": 9093, "internal": 9094, "metrics": 9404}
"""With --netns every node has an address of its own, so every node uses the same fixed ports."""


@dataclass(frozen=True)
class Layout:
    brokers: int = 3
    controllers: int = 2
    zookeeper_nodes: int = 1
    shared_listener: bool = False
    """Control requests on the brokers' client listener (Kafka before KIP-291), for comparison."""
    netns: bool = False
    """Every node in a network namespace of its own, on its own address (root only): see netns."""
    kafka_ports: bool = False
    """ZooKeeper on 2181 and brokers on 9092, 9093, … where those ports are free (``make run``), so
    Kafka's documented commands work as written; otherwise, and for tests, free ports."""
    secure: bool = False
    """Every listener and the ZooKeeper sessions over TLS, SCRAM for clients, ACLs: see cluster.secure."""
    monitor: bool = False
    """A local Prometheus scraping every daemon, with the compose file's alert rules: see cluster.monitor."""
    kafka_brokers: int = 0
    """Apache Kafka 3.9 brokers beside ours (``cluster.kafka_nodes``): every daemon then runs at IBP 3.9,
    and the Kafka brokers' own controllers compete for ``/controller`` with ours."""

    def check(self) -> None:
        """ClusterError for a layout that cannot be started."""
        if self.brokers < 1 or self.controllers < 1:
            raise ClusterError("at least one broker and one controller are needed")
        if self.secure and self.zookeeper_nodes != 1:
            raise ClusterError("--secure serves ZooKeeper over TLS, which needs --zookeeper-nodes 1")
        if self.kafka_brokers and (self.secure or self.shared_listener):
            raise ClusterError("--kafka-brokers runs PLAINTEXT with a control-plane listener")
        if self.secure and self.shared_listener:
            raise ClusterError(
                "--secure keeps the control plane on a listener of its own: drop --shared-listener"
            )

    def node_names(self) -> list[str]:
        return [
            *(f"zookeeper-{i}" for i in range(1, self.zookeeper_nodes + 1)),
            *(f"controller-{i}" for i in controller_ids(self.controllers)),
            *(f"broker-{i}" for i in range(1, self.brokers + 1)),
            *(kafka_nodes.node_name(i) for i in self.kafka_ids),
        ]

    @property
    def kafka_ids(self) -> range:
        first = kafka_nodes.first_id(self.brokers)
        return range(first, first + self.kafka_brokers)

    @property
    def mixed(self) -> dict[str, str]:
        """What every daemon of ours needs in a cluster shared with Kafka brokers."""
        return {"inter_broker_protocol_version": kafka_nodes.MIXED_IBP} if self.kafka_brokers else {}


FIRST_CONTROLLER_ID = 1001
"""Controllers are numbered above ``reserved.broker.max.id`` (1000 by default), which broker ids may
not exceed, so a controller never shares an id with a broker (the daemons refuse such a config)."""


def controller_ids(count: int) -> range:
    """The ids of a local cluster's ``count`` controller candidates: 1001, 1002, ..."""
    return range(FIRST_CONTROLLER_ID, FIRST_CONTROLLER_ID + count)


def _entry(
    process: DaemonProcess, role: str, node_id: int, metrics_port: int, listeners: list[str]
) -> dict[str, Any]:
    assert process.process is not None
    return {
        "name": process.name,
        "role": role,
        "id": node_id,
        "pid": process.process.pid,
        "module": process.module,
        "config": str(process.config),
        "listeners": listeners,
        "metrics_port": metrics_port,
        "events": str(process.events_path),
        "log": str(process.log_path),
    }


def _claim(directory: Path) -> Path:
    """The cluster directory, absolute and created; ClusterError if a cluster there still runs."""
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    if state_path(directory).exists():
        previous = load_state(directory)
        running = [p["name"] for p in previous["processes"] if alive(p.get("pid"))]
        if running:
            raise ClusterError(
                f"a cluster is already running in {directory} ({', '.join(running)}); `down` it first"
            )
        leftover = network_of(previous)
        if leftover is not None:  # a launcher that died before its cluster was down
            netns.destroy(leftover)
    return directory


def _make_network(directory: Path, layout: Layout) -> Network:
    """Plan and create the run's namespaces, recording them first so that ``down`` finds them even
    if this launcher dies half-way."""
    reason = netns.unavailable()
    if reason is not None:
        raise ClusterError(f"--netns: {reason}")
    network = netns.plan(os.urandom(2).hex(), layout.node_names(), netns.host_networks())
    save_state(
        directory,
        {
            "version": STATE_VERSION,
            "directory": str(directory),
            "network": network.as_json(),
            "processes": [],
        },
    )
    try:
        netns.create(network)
    except netns.NetnsError as exc:
        netns.destroy(network)
        raise ClusterError(f"--netns: {exc}") from None
    return network


def _placed(process: DaemonProcess, network: Network | None) -> DaemonProcess:
    if network is not None:
        process.command_prefix = tuple(network.prefix(process.name))
    return process


def _address(network: Network | None, name: str) -> str:
    return network.node(name).address if network is not None else LOOPBACK


def _port(network: Network | None, role: str) -> int:
    return NETNS_PORTS[role] if network is not None else find_free_port()


KAFKA_ZOOKEEPER_PORT = 2181
KAFKA_PROMETHEUS_PORT = 9090
KAFKA_FIRST_BROKER_PORT = 9092


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    """Whether a server could listen on ``port``: bound with SO_REUSEADDR as the daemons and ZooKeeper
    bind, so the TIME_WAIT leftovers of a cluster just stopped do not count, a listener does."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def usual_port(port: int, what: str, notices: list[str]) -> int:
    """``port`` if it is free, else a free one, with a one-line notice saying so."""
    if port_is_free(port):
        return port
    chosen = find_free_port()
    notices.append(f"port {port} is taken: {what} listens on {chosen} instead")
    return chosen


async def up(directory: Path, layout: Layout) -> dict[str, Any]:
    """Start everything, wait until the brokers serve and a controller has finished failover."""
    layout.check()
    directory = await asyncio.to_thread(_claim, directory)
    network = _make_network(directory, layout) if layout.netns else None
    notices: list[str] = []
    usual = layout.kafka_ports and network is None
    secure = SecureCluster.create(directory / "secrets", zookeeper_tls=True) if layout.secure else None
    security: dict[str, str] = {}
    try:
        zk_port = usual_port(KAFKA_ZOOKEEPER_PORT, "ZooKeeper", notices) if usual else None
        zookeeper, zk_entries = _start_zookeeper(directory, layout.zookeeper_nodes, network, zk_port, secure)
        connect = zookeeper.connect_string
        try:
            if secure is not None:
                assert isinstance(zookeeper, ZooKeeperServer)
                connect = zookeeper.secure_connect_string
                security = await _secure_zookeeper(secure, connect)
            daemons = await _start_daemons(
                directory, layout, connect, network, notices if usual else None, secure
            )
        except BaseException:
            zookeeper.stop()
            raise
    except BaseException:
        if network is not None:
            netns.destroy(network)
        raise
    processes = [*zk_entries, *daemons]
    zookeeper.detach()
    if network is not None:
        for entry in processes:
            node = network.node(entry["name"])
            entry |= {"netns": node.namespace, "address": node.address}
    state: dict[str, Any] = {
        "version": STATE_VERSION,
        "directory": str(directory),
        "zookeeper_connect": connect,
        "layout": {
            "brokers": layout.brokers,
            "controllers": layout.controllers,
            "zookeeper_nodes": layout.zookeeper_nodes,
            "shared_listener": layout.shared_listener,
            "netns": layout.netns,
            "secure": layout.secure,
            "kafka_brokers": layout.kafka_brokers,
        },
        "started_at": time.time(),
        "processes": processes,
        "notices": notices,
        **({"network": network.as_json()} if network is not None else {}),
        **({"security": security} if security else {}),
    }
    save_state(directory, state)
    if layout.monitor:
        port = usual_port(KAFKA_PROMETHEUS_PORT, "Prometheus", notices) if usual else find_free_port()
        watched = directory / "prometheus"
        watched.mkdir(parents=True, exist_ok=True)
        processes.append(monitor.start_exporter(watched, state, find_free_port()))
        save_state(directory, state)  # so that down stops the exporter if Prometheus cannot start
        try:
            processes.append(monitor.start(watched, monitor.configure(watched, state), port))
        except monitor.MonitorError as exc:
            down(directory)
            raise ClusterError(f"--monitor: {exc}") from None
        save_state(directory, state)
    return state


async def _secure_zookeeper(secure: SecureCluster, connect: str) -> dict[str, str]:
    """Close the root to all but the cluster (as a chroot would be), store the SCRAM credential of the
    super user ``admin``, and write the files clients and tools need; returns their paths."""
    async with admin_session.connect(connect, security=secure.zk_security) as zk:
        await zk.set_acls("/", zk.acls_for(znodes.CONTROLLER))
        password = secure.password("admin")
        await secure.add_user(zk, "admin", password)
    return {
        "secrets": str(secure.directory),
        "zk_config": str(secure.write_zk_config(secure.directory / "zookeeper.properties")),
        "client_config": str(
            secure.write_client_config(secure.directory / "client.properties", "admin", password)
        ),
        "ca": str(secure.ca.certificate),
    }


async def _start_daemons(
    directory: Path,
    layout: Layout,
    connect: str,
    network: Network | None,
    notices: list[str] | None,
    secure: SecureCluster | None = None,
) -> list[dict[str, Any]]:
    """Controllers, then brokers; returns their entries once the brokers serve and a controller has
    finished failover (every one started is killed if that does not happen). With ``notices``, the
    brokers' client listeners take Kafka's usual ports where free (and say when not)."""
    processes: list[dict[str, Any]] = []
    started: list[DaemonProcess] = []
    kafkas: list[int] = []
    try:
        controllers = []
        for cid in controller_ids(layout.controllers):
            rpc, metrics = _port(network, "rpc"), _port(network, "metrics")
            host = _address(network, f"controller-{cid}")
            settings: dict[str, Any] = {"listeners": f"PLAINTEXT://{host}:{rpc}"}
            if secure is not None:
                settings = secure.controller(cid, host=host, port=rpc)
            listener = settings["listeners"]
            settings |= layout.mixed
            controller = ControllerProcess(cid, connect, directory, metrics_port=metrics, **settings)
            _placed(controller, network).start(own_session=True)
            started.append(controller)
            controllers.append(controller)
            processes.append(_entry(controller, "controller", cid, metrics, [listener]))
        brokers = []
        for bid in range(1, layout.brokers + 1):
            client = (
                None
                if notices is None
                else usual_port(KAFKA_FIRST_BROKER_PORT + bid - 1, f"broker-{bid}", notices)
            )
            broker, entry = _broker(
                directory, connect, bid, layout.shared_listener, network, client, secure, layout.mixed
            )
            started.append(_placed(broker, network).start(own_session=True))
            brokers.append(broker)
            processes.append({**entry, "pid": broker.process.pid if broker.process else None})
        for kid in layout.kafka_ids:
            name = kafka_nodes.node_name(kid)
            host, ports = _address(network, name), (_port(network, "client"), _port(network, "control"))
            kafka = kafka_nodes.plan(kid, connect, directory, host, ports)
            entry = kafka_nodes.start(kafka, network.prefix(name) if network is not None else ())
            kafkas.append(entry["pid"])
            processes.append(entry)
        for broker in brokers:
            await broker.wait_kind("broker_started", timeout=60)
        if layout.kafka_brokers:
            await kafka_nodes.registered(connect, list(layout.kafka_ids))
        await _any_failover(controllers)
    except BaseException:
        for process in started:
            process.kill()
        for pid in kafkas:
            signal_and_wait(pid, signal.SIGKILL, 10)
        raise
    return processes


def _start_zookeeper(
    directory: Path,
    nodes: int,
    network: Network | None,
    port: int | None = None,
    secure: SecureCluster | None = None,
) -> tuple[ZooKeeperServer | ZooKeeperEnsemble, list[dict[str, Any]]]:
    names = [f"zookeeper-{i}" for i in range(1, nodes + 1)]
    if nodes == 1:
        placement: dict[str, Any] = {} if port is None else {"port": port}
        if network is not None:
            placement = {"host": network.node(names[0]).address, "command_prefix": network.prefix(names[0])}
        if secure is not None:
            placement["tls"] = secure.zookeeper_server(placement.get("host", LOOPBACK))
        server = ZooKeeperServer(data_dir=directory / "zookeeper", **placement).start()
        return server, [_zk_entry(1, server.pid, server.port, server.process.config_path, server.log_path)]
    if nodes != 3:
        raise ClusterError("--zookeeper-nodes must be 1 or 3")
    spread: dict[str, Any] = {}
    if network is not None:
        spread = {
            "hosts": [network.node(n).address for n in names],
            "command_prefixes": [network.prefix(n) for n in names],
        }
    ensemble = ZooKeeperEnsemble(size=3, data_dir=directory / "zookeeper", **spread).start()
    entries = [
        _zk_entry(i + 1, node.pid, node.port, node.config_path, node.log_path)
        for i, node in enumerate(ensemble.nodes)
    ]
    return ensemble, entries


def _zk_entry(node_id: int, pid: int | None, port: int, config: Path, log: Path) -> dict[str, Any]:
    return {
        "name": f"zookeeper-{node_id}",
        "role": "zookeeper",
        "id": node_id,
        "pid": pid,
        "port": port,
        "config": str(config),
        "data_dir": str(config.parent),
        "log": str(log),
    }


def _broker(
    directory: Path,
    connect: str,
    bid: int,
    shared: bool,
    network: Network | None = None,
    client_port: int | None = None,
    secure: SecureCluster | None = None,
    mixed: dict[str, str] | None = None,
) -> tuple[BrokerProcess, dict[str, Any]]:
    host = _address(network, f"broker-{bid}")
    client = client_port if client_port is not None else _port(network, "client")
    metrics = _port(network, "metrics")
    listeners = [f"PLAINTEXT://{host}:{client}"]
    settings: dict[str, Any] = {
        "metrics_port": metrics,
        "zookeeper_session_timeout_ms": BROKER_SESSION_TIMEOUT_MS,
        "controlled_shutdown_retry_backoff_ms": 1000,
    }
    if secure is not None:
        # With --netns every node has its own address, so the INTERNAL port may repeat the client one.
        internal = _port(network, "internal")
        settings |= secure.broker(bid, host=host, ports=(client, internal, _port(network, "control")))
        listeners = settings.pop("listeners").split(",")
    elif shared:
        settings |= {
            "control_plane_listener_name": "",
            "listener_security_protocol_map": "PLAINTEXT:PLAINTEXT",
        }
    else:
        listeners.append(f"CONTROLLER://{host}:{_port(network, 'control')}")
    settings |= mixed or {}
    broker = BrokerProcess(bid, connect, directory, listeners=",".join(listeners), **settings)
    return broker, _entry_unstarted(broker, bid, metrics, listeners)


def _entry_unstarted(broker: BrokerProcess, bid: int, metrics: int, listeners: list[str]) -> dict[str, Any]:
    return {
        "name": broker.name,
        "role": "broker",
        "id": bid,
        "pid": None,
        "module": broker.module,
        "config": str(broker.config),
        "listeners": listeners,
        "metrics_port": metrics,
        "events": str(broker.events_path),
        "log": str(broker.log_path),
    }


async def _any_failover(controllers: list[ControllerProcess], timeout: float = 60.0) -> None:
    waits = [asyncio.create_task(c.wait_kind("failover_complete", timeout=timeout)) for c in controllers]
    try:
        done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        next(iter(done)).result()
    finally:
        for w in waits:
            w.cancel()


async def create_demo_topic(state: dict[str, Any], topic: str, partitions: int = 6) -> None:
    """A topic to look at and produce to: replication factor 3 (or fewer brokers), Kafka's assignment.
    Waits until every partition has a leader."""
    brokers = [p for p in state["processes"] if p["role"] == "broker"]
    async with zookeeper_session(state) as zk:
        if topic not in {t.topic for t in await cluster_reads.list_topics(zk)}:
            await topic_writes.create_new_topic(zk, topic, partitions, min(3, len(brokers)))
        deadline = time.monotonic() + 60
        while True:
            described = await cluster_reads.describe_topics(zk, [topic])
            led = [p for p in described if p.leader is not None and p.leader >= 0]
            if len(described) == partitions and len(led) == partitions:
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"topic {topic} has partitions without a leader after 60 s")
            await asyncio.sleep(0.1)
