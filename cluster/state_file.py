"""``DIR/cluster.json``: the record of a local cluster's processes, and what clients find in it.

It is read and written here, and gives clients and tools their bootstrap servers, a secure cluster's
config files and a ZooKeeper session.

``cluster.launcher`` writes it when it starts a cluster; ``cluster.node_control`` and every later
command (``status``, ``down``, ``kill``, the admin CLI with ``--dir``, chaos runs) read it to find
the processes again, including those of a detached cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cluster.netns import Network
from zkstore import admin_session, znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.client_config import load_zk_security
from zkstore.security import ZkSecurity

STATE_FILE = "cluster.json"
_STATE_LOCK = threading.Lock()
"""Held while ``cluster.json`` is read, changed and written back by a node action."""
STATE_VERSION = 1
DEFAULT_DIR = Path(".run") / "cluster"
"""Where ``make run`` keeps its cluster; commands use it when given no --dir."""


class ClusterError(RuntimeError):
    """A cluster command that cannot be carried out; the message says why."""


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
    return admin_session.connect(state["zookeeper_connect"], security=zk_security(state))
