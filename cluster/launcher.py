"""A local cluster on loopback: an embedded ZooKeeper (one node or an ensemble of three), controller
candidates and brokers as child processes, described in ``DIR/cluster.json``.

Every process runs in its own session, so a terminal's Ctrl-C reaches only the launcher, which then
stops the cluster in order: brokers first (each with a controlled shutdown while a controller is
still there to move its leadership), then controllers, then ZooKeeper. ``cluster.json`` holds what a
later command needs to find the processes again (``status``, ``down``, ``kill``, ``bounce``,
``restart``), including those of a detached cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster import monitor, netns
from cluster.netns import Network
from cluster.processes import REPO, BrokerProcess, ControllerProcess, DaemonProcess
from cluster.secure import SecureCluster
from zkserver.local_server import (
    LOOPBACK,
    ZooKeeperEnsemble,
    ZooKeeperProcess,
    ZooKeeperServer,
    ZooKeeperStartError,
    find_free_port,
    server_mode,
)
from zkstore import admin, znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.client_config import load_zk_security
from zkstore.security import ZkSecurity

STATE_FILE = "cluster.json"
_STATE_LOCK = threading.Lock()
"""Held while ``cluster.json`` is read, changed and written back by a node action."""
STATE_VERSION = 1
STOP_TIMEOUT_S = 60.0
DEFAULT_DIR = Path(".run") / "cluster"
"""Where ``make run`` keeps its cluster; commands use it when given no --dir."""
BROKER_SESSION_TIMEOUT_MS = 6000
"""Short, so that a killed broker is noticed within seconds in hands-on experiments."""
NETNS_PORTS = {"rpc": 9090, "client": 9092, "control": 9093, "internal": 9094, "metrics": 9404}
"""With --netns every node has an address of its own, so every node uses the same fixed ports."""


NODE_ROLES = ("zookeeper", "controller", "broker")
"""The cluster's nodes; a --monitor cluster's Prometheus and ZooKeeper exporter are processes beside them."""


class ClusterError(RuntimeError):
    """A cluster command that cannot be carried out; the message says why."""


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

    def check(self) -> None:
        """ClusterError for a layout that cannot be started."""
        if self.brokers < 1 or self.controllers < 1:
            raise ClusterError("at least one broker and one controller are needed")
        if self.secure and self.zookeeper_nodes != 1:
            raise ClusterError("--secure serves ZooKeeper over TLS, which needs --zookeeper-nodes 1")
        if self.secure and self.shared_listener:
            raise ClusterError(
                "--secure keeps the control plane on a listener of its own: drop --shared-listener"
            )

    def node_names(self) -> list[str]:
        return [
            *(f"zookeeper-{i}" for i in range(1, self.zookeeper_nodes + 1)),
            *(f"controller-{i}" for i in controller_ids(self.controllers)),
            *(f"broker-{i}" for i in range(1, self.brokers + 1)),
        ]


FIRST_CONTROLLER_ID = 1001
"""Controllers are numbered above ``reserved.broker.max.id`` (1000 by default), which broker ids may
not exceed, so a controller never shares an id with a broker (the daemons refuse such a config)."""


def controller_ids(count: int) -> range:
    """The ids of a local cluster's ``count`` controller candidates: 1001, 1002, ..."""
    return range(FIRST_CONTROLLER_ID, FIRST_CONTROLLER_ID + count)


def state_path(directory: Path) -> Path:
    return directory / STATE_FILE


def load_state(directory: Path) -> dict[str, Any]:
    path = state_path(directory)
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        raise ClusterError(
            f"no cluster in {directory}: {path} does not exist (start one with `up`)"
        ) from None
    except ValueError as exc:
        raise ClusterError(f"{path} is not valid JSON: {exc}") from None
    if state.get("version") != STATE_VERSION:
        raise ClusterError(f"{path}: unknown version {state.get('version')!r}")
    return state


def save_state(directory: Path, state: dict[str, Any]) -> None:
    path = state_path(directory)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, path)


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):  # a zombie child of ours counts as gone
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    return True


def find(state: dict[str, Any], name: str) -> dict[str, Any]:
    for process in state["processes"]:
        if process["name"] == name:
            return process
    names = ", ".join(p["name"] for p in state["processes"])
    raise ClusterError(f"no node {name!r} in this cluster (nodes: {names})")


def network_of(state: dict[str, Any]) -> Network | None:
    """The namespaces a --netns cluster runs in, or None for a loopback cluster."""
    data = state.get("network")
    return Network.from_json(data) if data else None


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


CLIENT_LISTENER = "PLAINTEXT"
SECURE_CLIENT_LISTENER = "CLIENT"


def client_endpoints(listeners: Iterable[str], name: str = CLIENT_LISTENER) -> list[str]:
    """``host:port`` of each listener called ``name``: what a client's bootstrap list holds."""
    endpoints = []
    for text in listeners:
        try:
            endpoint = znodes.Endpoint.parse(text)
        except ValueError:
            continue
        if endpoint.listener_name == name:
            host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
            endpoints.append(f"{host}:{endpoint.port}")
    return endpoints


def client_listener(state: Mapping[str, Any]) -> str:
    """The name of the listener clients use: CLIENT (SASL_SSL) in a secure cluster, else PLAINTEXT."""
    return SECURE_CLIENT_LISTENER if "security" in state else CLIENT_LISTENER


def bootstrap_servers(state: dict[str, Any]) -> str:
    """The cluster's bootstrap list for clients: every broker's client listener."""
    listeners = [ln for p in state["processes"] if p["role"] == "broker" for ln in p.get("listeners") or []]
    servers = client_endpoints(listeners, client_listener(state))
    if not servers:
        raise ClusterError(f"no broker in cluster.json has a {client_listener(state)} listener")
    return ",".join(servers)


def zk_config(state: Mapping[str, Any]) -> Path | None:
    """The ``--zk-config`` file of a secure cluster (its ZooKeeper identity and TLS), else None."""
    security = state.get("security")
    return Path(security["zk_config"]) if security else None


def client_config(state: Mapping[str, Any]) -> Path | None:
    """The client properties file of a secure cluster (SASL_SSL as its super user ``admin``), else None."""
    security = state.get("security")
    return Path(security["client_config"]) if security else None


def zk_security(state: Mapping[str, Any]) -> ZkSecurity | None:
    """What a ZooKeeper session needs to reach this cluster's ZooKeeper and change its znodes."""
    path = zk_config(state)
    return load_zk_security(path) if path is not None else None


def zookeeper_session(state: Mapping[str, Any]) -> contextlib.AbstractAsyncContextManager[AsyncZooKeeper]:
    """One short session on the cluster's ZooKeeper, with its identity when the cluster is secure."""
    return admin.connect(state["zookeeper_connect"], security=zk_security(state))


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
    async with admin.connect(connect, security=secure.zk_security) as zk:
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
    try:
        controllers = []
        for cid in controller_ids(layout.controllers):
            rpc, metrics = _port(network, "rpc"), _port(network, "metrics")
            host = _address(network, f"controller-{cid}")
            settings: dict[str, Any] = {"listeners": f"PLAINTEXT://{host}:{rpc}"}
            if secure is not None:
                settings = secure.controller(cid, host=host, port=rpc)
            listener = settings["listeners"]
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
            broker, entry = _broker(directory, connect, bid, layout.shared_listener, network, client, secure)
            started.append(_placed(broker, network).start(own_session=True))
            brokers.append(broker)
            processes.append({**entry, "pid": broker.process.pid if broker.process else None})
        for broker in brokers:
            await broker.wait_kind("broker_started", timeout=60)
        await _any_failover(controllers)
    except BaseException:
        for process in started:
            process.kill()
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


# -- later commands, from cluster.json


def spawn(entry: dict[str, Any]) -> int:
    """Start a daemon again from its entry (same config, ports and directories); returns the new pid."""
    with open(entry["log"], "ab") as log:
        child = subprocess.Popen(
            [
                *netns.exec_in(entry.get("netns")),
                sys.executable,
                "-m",
                entry["module"],
                "--config",
                entry["config"],
            ],
            cwd=REPO,
            env={k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return child.pid


def signal_and_wait(pid: int | None, sig: signal.Signals, timeout: float = STOP_TIMEOUT_S) -> bool:
    """Send ``sig`` and wait for the process to go; True if it did within ``timeout``."""
    if not alive(pid):
        return True
    assert pid is not None
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def _resume(pid: int | None) -> None:
    if pid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGCONT)


def stop_node(entry: dict[str, Any], *, timeout: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM (a broker runs its controlled shutdown), SIGKILL if it outstays ``timeout``. A node
    paused with SIGSTOP (a chaos run that died mid-pause) is resumed first, so it can shut down."""
    _resume(entry.get("pid"))
    if not signal_and_wait(entry.get("pid"), signal.SIGTERM, timeout):
        signal_and_wait(entry.get("pid"), signal.SIGKILL, 10)


def down(directory: Path) -> list[str]:
    """Stop the cluster in order; returns the names of the processes stopped."""
    state = load_state(directory)
    stopped = []
    for role in ("prometheus", "zookeeper-exporter", "broker", "controller", "zookeeper"):
        entries = [p for p in state["processes"] if p["role"] == role and alive(p.get("pid"))]
        for entry in entries:  # SIGTERM all of a role at once, then wait for each
            _resume(entry.get("pid"))
            with contextlib.suppress(ProcessLookupError):
                os.kill(entry["pid"], signal.SIGTERM)
        for entry in entries:
            stop_node(entry)
            stopped.append(entry["name"])
    network = network_of(state)
    if network is not None:
        netns.destroy(network)
    return stopped


def node_action(directory: Path, name: str, action: str) -> dict[str, Any]:
    """``kill`` (SIGKILL), ``restart`` (stop cleanly, start again) or ``bounce`` (SIGKILL and start at
    once: a broker comes back before its ZooKeeper session expires, KIP-380's fast bounce)."""
    state = load_state(directory)
    entry = find(state, name)
    if entry["role"] not in NODE_ROLES:
        raise ClusterError(f"{name} is not a node of the cluster: `down` stops it with the rest")
    if entry["role"] == "zookeeper":
        return _zookeeper_action(directory, entry, action)
    if action == "kill":
        signal_and_wait(entry.get("pid"), signal.SIGKILL, 10)
    elif action == "restart":
        stop_node(entry)
        entry["pid"] = spawn(entry)
    elif action == "bounce":
        signal_and_wait(entry.get("pid"), signal.SIGKILL, 10)
        entry["pid"] = spawn(entry)
    else:
        raise ClusterError(f"unknown action {action!r}")
    record_pids(directory, {name: entry["pid"]})
    return entry


def record_pids(directory: Path, pids: dict[str, int | None]) -> None:
    """Write nodes' new pids into ``cluster.json``, reading it afresh under a lock: faults running
    at once (a mixed chaos run) each change their own node, and none may undo another's change, or
    ``down`` would not find a process to stop."""
    with _STATE_LOCK:
        state = load_state(directory)
        for entry in state["processes"]:
            if entry["name"] in pids:
                entry["pid"] = pids[entry["name"]]
        save_state(directory, state)


def _zookeeper_action(directory: Path, entry: dict[str, Any], action: str) -> dict[str, Any]:
    if action not in ("kill", "bounce", "restart"):
        raise ClusterError(f"unknown action {action!r}")
    if action == "restart":
        stop_node(entry, timeout=15)
    else:
        signal_and_wait(entry.get("pid"), signal.SIGKILL, 10)
    if action != "kill":
        start_zookeeper(directory, [entry["name"]])
    return find(load_state(directory), entry["name"])


def start_zookeeper(directory: Path, names: list[str]) -> None:
    """Start the ZooKeeper servers ``names`` (all before waiting for any: two of three are needed for
    either to serve) and wait until each serves; ClusterError naming the one that does not."""
    state = load_state(directory)
    started = []
    for name in names:
        entry = find(state, name)
        prefix = netns.exec_in(entry.get("netns"))
        node = ZooKeeperProcess.from_config(Path(entry["config"]), name=name, command_prefix=prefix)
        node.start()
        node.detach()
        started.append((name, node))
    record_pids(directory, {name: node.pid for name, node in started})
    for name, node in started:
        try:
            node.wait_until_serving(modes=("leader", "follower", "standalone"))
        except ZooKeeperStartError as exc:
            node.kill()
            raise ClusterError(f"{name} did not come back: {exc}") from None


def zookeeper_leader(state: dict[str, Any]) -> str | None:
    """The ZooKeeper server that says it leads (or serves standalone), or None."""
    for entry in state["processes"]:
        if entry["role"] == "zookeeper" and alive(entry.get("pid")):
            mode = server_mode(entry.get("address", LOOPBACK), entry["port"], timeout=2.0)
            if mode in ("leader", "standalone"):
                return str(entry["name"])
    return None


async def create_demo_topic(state: dict[str, Any], topic: str, partitions: int = 6) -> None:
    """A topic to look at and produce to: replication factor 3 (or fewer brokers), Kafka's assignment.
    Waits until every partition has a leader."""
    brokers = [p for p in state["processes"] if p["role"] == "broker"]
    async with zookeeper_session(state) as zk:
        if topic not in {t.topic for t in await admin.list_topics(zk)}:
            await admin.create_new_topic(zk, topic, partitions, min(3, len(brokers)))
        deadline = time.monotonic() + 60
        while True:
            described = await admin.describe_topics(zk, [topic])
            led = [p for p in described if p.leader is not None and p.leader >= 0]
            if len(described) == partitions and len(led) == partitions:
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"topic {topic} has partitions without a leader after 60 s")
            await asyncio.sleep(0.1)
