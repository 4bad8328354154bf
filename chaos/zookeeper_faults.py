"""ZooKeeper trouble: a server restarted, the ensemble's leader killed, the quorum lost for a while.

The servers are stopped and started through ``cluster.launcher`` (``cluster.json`` keeps their new
pids); healing starts every server the fault took down before waiting for any, since two of three
are needed before either serves.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from chaos.schedule import Step
from cluster import launcher


class ZooKeeperFaults:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.down: list[str] = []

    def _victims(self, step: Step) -> list[str]:
        state = launcher.load_state(self.directory)
        servers = [p["name"] for p in state["processes"] if p["role"] == "zookeeper"]
        if step.fault == "zookeeper-leader-kill":
            return [launcher.zookeeper_leader(state) or step.target]
        if step.fault == "quorum-loss":
            return [step.target, next(n for n in servers if n != step.target)]
        return [step.target]

    async def inject(self, step: Step) -> str:
        """Take the servers down; returns what was done, for the run's events."""
        self.down = self._victims(step)
        state = launcher.load_state(self.directory)
        for name in self.down:
            entry = launcher.find(state, name)
            if step.fault == "zookeeper-restart":
                await asyncio.to_thread(launcher.stop_node, entry, timeout=15)
            else:
                await asyncio.to_thread(launcher.signal_and_wait, entry.get("pid"), signal.SIGKILL, 10)
        how = "stopped (SIGTERM)" if step.fault == "zookeeper-restart" else "killed (SIGKILL)"
        return f"{how} {', '.join(self.down)}; started again after {step.hold_s:g} s"

    async def heal(self) -> None:
        down, self.down = self.down, []
        if down:
            await asyncio.to_thread(launcher.start_zookeeper, self.directory, down)
