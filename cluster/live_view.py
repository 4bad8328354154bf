"""The terminal view of a running local cluster (rich), refreshed every second until Ctrl-C.

Everything shown is read the way an operator would read it: the controller, broker epochs (czxids)
and partition states from ZooKeeper, counts and queue sizes from each broker's /metrics, and recent
happenings from the daemons' event logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.request
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from cluster import state_file
from zkstore import cluster_reads
from zkstore.aio import AsyncZooKeeper

REFRESH_S = 1.0
EVENTS_SHOWN = 12
PARTITIONS_SHOWN = 24
INTERESTING = {
    # controller
    "controller_elected",
    "controller_resigned",
    "failover_complete",
    "write_fenced",
    "broker_change",
    "controlled_shutdown_started",
    "controlled_shutdown_handled",
    "rpc_rejected",
    "topics_created",
    "topic_deleted",
    "reassignment_started",
    "reassignment_completed",
    # broker
    "registered",
    "session_expired",
    "isr_changed",
    "isr_change_refused",
    "log_recovery_truncated",
    # consumer groups: coordinator moves and rebalances
    "offsets_topic_created",
    "coordinator_loaded",
    "coordinator_unloaded",
    "group_rebalance_completed",
    "group_member_removed",
}
"""Kinds always shown; leader elections and stale control requests are picked out in :func:`interesting`."""
METRICS = {
    "leaders": "kafka_server_replicamanager_leadercount",
    "partitions": "kafka_server_replicamanager_partitioncount",
    "data queue": "kafka_network_requestchannel_requestqueuesize",
    "control queue": "kafka_network_requestchannel_controlplanerequestqueuesize",
}


def scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1).read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            with contextlib.suppress(ValueError):
                values[name] = float(value)
    return values


class EventTail:
    """New lines of every daemon's event log since the last call; the interesting ones kept."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.paths = [Path(p["events"]) for p in state["processes"] if p.get("events")]
        self.offsets = {path: 0 for path in self.paths}
        self.recent: deque[dict[str, Any]] = deque(maxlen=EVENTS_SHOWN)

    def poll(self) -> None:
        fresh = []
        for path in self.paths:
            with contextlib.suppress(OSError), path.open(encoding="utf-8") as f:
                f.seek(self.offsets[path])
                chunk = f.read()
                whole = chunk[: chunk.rfind("\n") + 1]
                self.offsets[path] += len(whole.encode())
                for line in whole.splitlines():
                    with contextlib.suppress(ValueError):
                        event = json.loads(line)
                        if interesting(event):
                            fresh.append(event)
        self.recent.extend(sorted(fresh, key=lambda e: e.get("ts", "")))


def interesting(event: dict[str, Any]) -> bool:
    """Worth a line in the view: the kinds above, leader elections, and control requests a broker
    refused as stale (STALE_BROKER_EPOCH, STALE_CONTROLLER_EPOCH)."""
    kind = event.get("kind")
    if kind in INTERESTING:
        return True
    if kind == "leader_and_isr_change":
        return "election" in str(event.get("reason", ""))
    if kind == "follower_truncated":  # emitted at every leader change; shown when it cut something
        return event.get("log_end_offset") != event.get("log_end_offset_before")
    return kind == "control_request_handled" and str(event.get("error") or "").startswith("STALE")


def _ids(values: Any) -> str:
    return "[" + ",".join(map(str, values or [])) + "]"


def _partition(event: dict[str, Any]) -> str:
    return f"{event.get('topic')}-{event.get('partition')}"


_SUMMARIES: dict[str, Callable[[dict[str, Any]], str]] = {
    "controller_elected": lambda e: (
        f"epoch {e.get('controller_epoch')}, fencing zkVersion {e.get('epoch_zk_version')}"
    ),
    "broker_change": lambda e: (
        " ".join(f"{label} {_ids(e.get(label))}" for label in ("new", "dead", "bounced") if e.get(label))
        + f"  epochs {e.get('epochs')}"
    ),
    "leader_and_isr_change": lambda e: (
        f"{_partition(e)} leader {e.get('leader')} epoch {e.get('leader_epoch')} "
        f"ISR {_ids(e.get('isr'))} ({e.get('reason')}{', unclean' if e.get('unclean') else ''})"
    ),
    "registered": lambda e: f"epoch {e.get('broker_epoch')} (was {e.get('previous_epoch')})",
    "coordinator_loaded": lambda e: (
        f"__consumer_offsets-{e.get('partition')} (epoch {e.get('leader_epoch')}): "
        f"{e.get('groups')} groups, {e.get('offsets')} offsets in {e.get('load_ms')} ms"
    ),
    "coordinator_unloaded": lambda e: (
        f"__consumer_offsets-{e.get('partition')}: {e.get('groups')} groups moved away"
    ),
    "group_rebalance_completed": lambda e: (
        f"{e.get('group')} generation {e.get('generation')}: {e.get('members')} members, "
        f"{e.get('state')}, protocol {e.get('protocol')}"
    ),
    "group_member_removed": lambda e: f"{e.get('group')}: {e.get('member_id')} {e.get('reason')}",
    "isr_changed": lambda e: f"{_partition(e)} ISR {_ids(e.get('previous_isr'))} -> {_ids(e.get('isr'))}",
    "isr_change_refused": lambda e: f"{_partition(e)} proposed {_ids(e.get('proposed'))}: {e.get('error')}",
    "follower_truncated": lambda e: (
        f"{_partition(e)} log end {e.get('log_end_offset_before')} -> "
        f"{e.get('log_end_offset')} (leader {e.get('leader')}, epoch {e.get('leader_epoch')})"
    ),
    "control_request_handled": lambda e: (
        f"{e.get('api')} v{e.get('api_version')} refused: {e.get('error')} "
        f"(controller epoch {e.get('controller_epoch')}, "
        f"epoch {e.get('broker_epoch', e.get('max_broker_epoch'))} vs {e.get('broker_epoch_now')})"
    ),
}


def summary(event: dict[str, Any]) -> str:
    """One short line of what happened: a summary for the common kinds, else the non-null fields."""
    kind = str(event.get("kind"))
    if kind in _SUMMARIES:
        with contextlib.suppress(Exception):
            return _SUMMARIES[kind](event)
    return " ".join(f"{k}={v}" for k, v in event.items() if k not in ("ts", "node", "kind") and v is not None)


def _event_text(event: dict[str, Any]) -> str:
    return (
        f"{event.get('ts', '')[11:23]} {event.get('node', '')} [bold]{event.get('kind')}[/] {summary(event)}"
    )


async def render(
    zk: AsyncZooKeeper, state: dict[str, Any], events: EventTail, footer: str = "Ctrl-C stops the cluster"
) -> Group:
    loop = asyncio.get_running_loop()
    controller = await cluster_reads.controller_info(zk)
    brokers = {b.broker_id: b for b in await cluster_reads.broker_list(zk)}
    partitions = await cluster_reads.describe_topics(zk)
    events.poll()

    head = Table.grid(padding=(0, 2))
    active = "-" if controller.controller_id is None else controller.controller_id
    epoch = "-" if controller.epoch is None else controller.epoch
    head.add_row(
        f"ZooKeeper [bold]{state['zookeeper_connect']}[/]",
        f"active controller [bold]{active}[/]",
        f"controller epoch [bold]{epoch}[/]",
    )
    broker_table = Table(title="brokers")
    for column in ("id", "epoch (czxid)", "listeners", *METRICS):
        broker_table.add_column(column)
    for entry in (p for p in state["processes"] if p["role"] == "broker"):
        registered = brokers.get(entry["id"])
        try:
            values = await loop.run_in_executor(None, scrape, entry["metrics_port"])
            numbers = [str(int(values.get(name, 0))) for name in METRICS.values()]
        except OSError:
            numbers = ["-"] * len(METRICS)
        broker_table.add_row(
            str(entry["id"]),
            str(registered.epoch) if registered else "[red]not registered[/]",
            ", ".join(entry["listeners"]),
            *numbers,
        )
    partition_table = Table(title="partitions")
    for column in ("partition", "leader", "leader epoch", "ISR", "replicas"):
        partition_table.add_column(column)
    for p in partitions[:PARTITIONS_SHOWN]:
        partition_table.add_row(
            f"{p.topic}-{p.partition}",
            str(p.leader) if p.leader is not None and p.leader >= 0 else "[red]none[/]",
            str(p.leader_epoch),
            ",".join(map(str, p.isr)),
            ",".join(map(str, p.replicas)),
        )
    if len(partitions) > PARTITIONS_SHOWN:
        partition_table.caption = f"{len(partitions) - PARTITIONS_SHOWN} more"
    recent = Table(title="recent events", show_header=False, expand=True)
    recent.add_column("event", no_wrap=True, overflow="ellipsis")
    for event in events.recent:
        recent.add_row(_event_text(event))
    return Group(head, broker_table, recent, partition_table, f"[dim]{footer}[/]")


async def watch(
    state: dict[str, Any], console: Console, stop: asyncio.Event, footer: str = "Ctrl-C stops the cluster"
) -> None:
    """Redraw the view every REFRESH_S until ``stop`` is set (or Ctrl-C)."""
    zk = AsyncZooKeeper(state["zookeeper_connect"], security=state_file.zk_security(state))
    await zk.start()
    events = EventTail(state)
    try:
        with Live(console=console, refresh_per_second=4, screen=False) as live:
            while not stop.is_set():
                with contextlib.suppress(Exception):
                    live.update(await render(zk, state, events, footer))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), REFRESH_S)
    finally:
        await zk.close()


async def snapshot(state: dict[str, Any], console: Console) -> None:
    """Print the view once: for scripts, logs and terminals without live redrawing."""
    zk = AsyncZooKeeper(state["zookeeper_connect"], security=state_file.zk_security(state))
    await zk.start()
    try:
        console.print(await render(zk, state, EventTail(state), footer=f"cluster in {state['directory']}"))
    finally:
        await zk.close()
