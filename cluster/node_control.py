"""Later commands on a local cluster's nodes, found through ``cluster.json``: kill, bounce, restart, down.

``kill``, ``bounce`` and ``restart`` act on one node; ``down`` stops them all in order.

Every process runs in its own session, so a terminal's Ctrl-C reaches only the launcher, which then
stops the cluster in order: brokers first (each with a controlled shutdown while a controller is
still there to move its leadership), then controllers, then ZooKeeper.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cluster import kafka_nodes, netns
from cluster.processes import REPO
from cluster.state_file import ClusterError, alive, find, load_state, network_of, record_pids
from zkserver.errors import ZooKeeperStartError
from zkserver.four_letter_words import server_mode
from zkserver.ports import LOOPBACK
from zkserver.process import ZooKeeperProcess

STOP_TIMEOUT_S = 60.0
NODE_ROLES = ("zookeeper", "controller", "broker")
"""The cluster's nodes; a --monitor cluster's Prometheus and ZooKeeper exporter are processes beside them."""


def spawn(entry: dict[str, Any], state: dict[str, Any] | None = None) -> int:
    """Start a daemon again from its entry (same config, ports and directories); returns the new pid.
    A Kafka broker (``kind`` kafka) first waits, with ``state``, for its last session to expire."""
    if entry.get("kind") == "kafka":
        if state is not None:
            kafka_nodes.wait_until_unregistered(state, entry)
        return kafka_nodes.spawn(entry)
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
    once: a broker comes back before its ZooKeeper session expires, KIP-380's fast bounce; a Kafka
    broker, which cannot, once that session has expired)."""
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
        entry["pid"] = spawn(entry, state)
    elif action == "bounce":
        signal_and_wait(entry.get("pid"), signal.SIGKILL, 10)
        entry["pid"] = spawn(entry, state)
    else:
        raise ClusterError(f"unknown action {action!r}")
    record_pids(directory, {name: entry["pid"]})
    return entry


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
