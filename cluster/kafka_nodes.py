"""Apache Kafka 3.9 brokers as nodes of a local cluster (``up --kafka-brokers N``): a mixed cluster.

Each runs ``kafka.Kafka server.properties`` (``kafkapeer.broker``) with our brokers' listener names (clients
and inter-broker traffic on PLAINTEXT, control requests on CONTROLLER) at IBP 3.9, like every daemon of
such a cluster, so whichever implementation holds ``/controller`` drives every broker. Its entry in
``cluster.json`` carries the whole command line (``command``), so ``cluster.node_control`` starts it
again like any node, and its ``server.properties`` as ``config``, where the replica check finds its
log directory and a chaos run its session timeout. A Kafka broker refuses to start while its previous
registration stands, so a start after a SIGKILL first waits for that session to expire.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kazoo.exceptions import NoNodeError

from cluster import state_file
from kafkapeer.broker import KafkaBroker
from zkstore import admin_session, znodes

log = logging.getLogger("cluster.kafka_nodes")

MIXED_IBP = "3.9"
"""Every daemon of a mixed cluster speaks Kafka 3.9's control-plane wire."""
SETTINGS: dict[str, Any] = {
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "control.plane.listener.name": "CONTROLLER",
    "inter.broker.protocol.version": MIXED_IBP,
    "offsets.topic.replication.factor": 3,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "default.replication.factor": 3,
    "controlled.shutdown.retry.backoff.ms": 1000,
}
"""Our brokers' listener names and internal-topic settings; the session timeout stays kafkapeer's 6 s,
our brokers' in a local cluster."""
START_TIMEOUT_S = 90.0
"""A cold JVM's start and registration on a busy machine."""


def first_id(our_brokers: int) -> int:
    """Kafka brokers are numbered after ours: 4 and 5 beside brokers 1 to 3."""
    return our_brokers + 1


def node_name(broker_id: int) -> str:
    return f"kafka-{broker_id}"


def plan(broker_id: int, zk_connect: str, directory: Path, host: str, ports: tuple[int, int]) -> KafkaBroker:
    """The broker's directory and ``server.properties``, not started."""
    client, control = ports
    listeners = f"PLAINTEXT://{host}:{client},CONTROLLER://{host}:{control}"
    return KafkaBroker(broker_id, zk_connect, directory, listeners, **SETTINGS)


def start(broker: KafkaBroker, prefix: Sequence[str] = ()) -> dict[str, Any]:
    """Start ``broker`` (under ``prefix``: a network namespace) and return its ``cluster.json`` entry."""
    command = [*prefix, *broker.command()]
    entry = {
        "name": node_name(broker.broker_id),
        "role": "broker",
        "kind": "kafka",
        "id": broker.broker_id,
        "command": command,
        "config": str(broker.config),
        "listeners": broker.listeners.split(","),
        "log": str(broker.stdout_path),
        "server_log": str(broker.log_path),
    }
    entry["pid"] = spawn(entry)
    return entry


def spawn(entry: dict[str, Any]) -> int:
    """Run the entry's command in a session of its own; returns the pid."""
    with open(entry["log"], "ab") as out:
        child = subprocess.Popen(
            entry["command"], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return child.pid


async def registered(zk_connect: str, broker_ids: Sequence[int], timeout_s: float = START_TIMEOUT_S) -> None:
    """Wait until every one of ``broker_ids`` is in ``/brokers/ids``."""
    async with admin_session.connect(zk_connect) as zk:
        deadline = time.monotonic() + timeout_s
        for broker_id in broker_ids:
            while await zk.exists(f"{znodes.BROKER_IDS}/{broker_id}") is None:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"Kafka broker {broker_id} did not register in {timeout_s:g} s")
                await asyncio.sleep(0.2)


async def _gone(state: dict[str, Any], broker_id: int, timeout_s: float) -> bool:
    async with state_file.zookeeper_session(state) as zk:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(NoNodeError):
                if await zk.exists(f"{znodes.BROKER_IDS}/{broker_id}") is None:
                    return True
            await asyncio.sleep(0.2)
    return False


def wait_until_unregistered(state: dict[str, Any], entry: dict[str, Any], timeout_s: float = 30.0) -> None:
    """Block until the broker's last registration is gone (its session expired), so that it can start;
    a registration that outlives ``timeout_s`` is logged and the start tried anyway."""
    if not asyncio.run(_gone(state, entry["id"], timeout_s)):
        log.warning("%s's registration outlived %.0f s; starting it anyway", entry["name"], timeout_s)
