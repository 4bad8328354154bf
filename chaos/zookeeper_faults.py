"""ZooKeeper trouble: a server restarted, the ensemble's leader killed, the quorum lost for a while.

The servers are stopped and started through ``cluster.node_control`` (``cluster.json`` keeps their new
pids); healing starts every server the fault took down before waiting for any, since two of three
are needed before either serves.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Sequence
from pathlib import Path

from chaos.schedule import Step
from cluster import node_control, state_file


def victims(step: Step, servers: Sequence[str], leader: str | None) -> list[str]:
    """The servers ``step`` takes down: the ensemble's ``leader`` (the target when none is known),
    the target and another server for a quorum loss, else the target."""
    if step.fault == "zookeeper-leader-kill":
        return [leader or step.target]
    if step.fault == "quorum-loss":
        return [step.target, next(n for n in servers if n != step.target)]
    return [step.target]


def describe(step: Step, down: Sequence[str]) -> str:
    """What a ZooKeeper fault did, for the run's events."""
    how = "stopped (SIGTERM)" if step.fault == "zookeeper-restart" else "killed (SIGKILL)"
    return f"{how} {', '.join(down)}; started again after {step.hold_s:g} s"


class ZooKeeperFaults:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.down: list[str] = []

    async def inject(self, step: Step) -> str:
        """Take the servers down; returns what was done, for the run's events."""
        state = state_file.load_state(self.directory)
        servers = [p["name"] for p in state["processes"] if p["role"] == "zookeeper"]
        leader = node_control.zookeeper_leader(state) if step.fault == "zookeeper-leader-kill" else None
        self.down = victims(step, servers, leader)
        for name in self.down:
            entry = state_file.find(state, name)
            if step.fault == "zookeeper-restart":
                await asyncio.to_thread(node_control.stop_node, entry, timeout=15)
            else:
                await asyncio.to_thread(node_control.signal_and_wait, entry.get("pid"), signal.SIGKILL, 10)
        return describe(step, self.down)

    async def heal(self) -> None:
        down, self.down = self.down, []
        if down:
            await asyncio.to_thread(node_control.start_zookeeper, self.directory, down)
