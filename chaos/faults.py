"""Doing and undoing faults on a local cluster's daemons, one at a time, and recording each in the run's
``events.jsonl`` (node ``chaos``) so the audit can line them up with what the daemons logged.

The process work goes through :func:`cluster.node_control.node_action`, the same code as ``python -m
cluster kill|bounce|restart``, so ``cluster.json`` keeps every new pid. ``node_action`` blocks, so it
runs in a worker thread and the event loop stays free for ZooKeeper reads and the run's timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from kazoo.exceptions import KazooException

from chaos.network import NetworkFaults
from chaos.schedule import ENDING, EXPIRING, NETWORK_FAULTS, ZOOKEEPER_FAULTS, Node, Step
from chaos.zookeeper_faults import ZooKeeperFaults
from cluster import node_control, state_file
from daemon.eventlog import EventLog
from zkstore import cluster_reads
from zkstore.aio import AsyncZooKeeper

log = logging.getLogger("chaos.faults")

BACK_TIMEOUT_S = 60.0
"""How long a healed broker gets to register again before the run goes on without waiting."""


class Injector(Protocol):
    async def inject(self, step: Step) -> bool:
        """Do the fault; False when it could not be done (the target was not running)."""
        ...

    async def heal(self, step: Step) -> None:
        """Undo the fault (start a killed node, resume a paused one); nothing for bounce and restart."""
        ...

    async def settle(self, step: Step) -> None:
        """Wait until the target is back in the cluster, so the next fault takes down a second node
        only once the first is really up."""
        ...


async def stopped_within(stop: asyncio.Event, seconds: float) -> bool:
    """Wait up to ``seconds``; True as soon as ``stop`` is set."""
    if seconds <= 0:
        return stop.is_set()
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        return False
    return True


class Lanes:
    """What the concurrent fault loops of a mixed run hold: the nodes they have taken down, and two
    shared tokens, ``network`` (one cut at a time) and ``zookeeper`` (one ZooKeeper fault at a time,
    so never two quorum-breaking ones). A step finding any of its tokens held is skipped."""

    def __init__(self) -> None:
        self.held: set[str] = set()

    @staticmethod
    def tokens(step: Step) -> set[str]:
        if step.fault in NETWORK_FAULTS:
            return {step.target, "network"}
        if step.fault in ZOOKEEPER_FAULTS:
            return {step.target, "zookeeper"}
        return {step.target}

    def take(self, step: Step) -> bool:
        wanted = self.tokens(step)
        if wanted & self.held:
            return False
        self.held |= wanted
        return True

    def give_back(self, step: Step) -> None:
        self.held -= self.tokens(step)


async def fault_loop(
    schedule: Iterable[Step], injector: Injector, stop: asyncio.Event, lanes: Lanes | None = None
) -> None:
    """Carry out ``schedule`` until ``stop`` is set. ``stop`` ends only the waits between faults: a
    fault in progress runs its course (a shortened pause might not outlast the session timeout) and
    is healed, and its node is back, before the next wait; so one loop never has more than one node
    down. Loops sharing ``lanes`` overlap, but never on one node, one cut or one ZooKeeper fault."""
    for step in schedule:
        if await stopped_within(stop, step.wait_s):
            return
        if lanes is not None and not lanes.take(step):
            continue
        try:
            if not await injector.inject(step):
                continue
            try:
                await asyncio.sleep(step.hold_s)
            finally:  # also when cancelled (Ctrl-C): never leave a node down
                await injector.heal(step)
            await injector.settle(step)
        finally:
            if lanes is not None:
                lanes.give_back(step)


def _stopped(pid: int | None) -> bool:
    """Whether ``pid`` is stopped by a signal (state T in /proc): paused and never resumed."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] == ["T"]


class BrokerEpochs:
    """A broker hit by a fault that ends its ZooKeeper session is back once it has registered with a
    new epoch (czxid): the epoch before the fault, and the wait for another one."""

    def __init__(self, zk: AsyncZooKeeper) -> None:
        self.zk = zk
        self._before: dict[str, int | None] = {}

    async def remember(self, name: str, broker_id: int) -> None:
        self._before[name] = await self.epoch(broker_id)

    async def wait_new(self, step: Step, broker_id: int) -> None:
        """Until ``step``'s target registers with an epoch other than the one remembered (nothing to
        wait for if none was); after ``BACK_TIMEOUT_S`` the run goes on, with a warning."""
        if step.target not in self._before:
            return
        before = self._before.pop(step.target)
        started = time.monotonic()
        while time.monotonic() - started < BACK_TIMEOUT_S:
            epoch = await self.epoch(broker_id)
            if epoch is not None and epoch != before:
                log.info(
                    "%s is registered again with epoch %d (was %s) after %.1f s",
                    step.target,
                    epoch,
                    before,
                    time.monotonic() - started,
                )
                return
            await asyncio.sleep(0.2)
        log.warning(
            "%s is not registered with a new epoch %.0f s after its %s was healed; going on",
            step.target,
            BACK_TIMEOUT_S,
            step.fault,
        )

    async def epoch(self, broker_id: int) -> int | None:
        """The broker's registration czxid (KIP-380 epoch), None when it is not registered."""
        try:
            brokers = await cluster_reads.broker_list(self.zk)
        except KazooException as exc:  # a ZooKeeper node may be the one down
            log.debug("reading /brokers/ids failed: %r", exc)
            return None
        return next((b.epoch for b in brokers if b.broker_id == broker_id), None)


class ClusterInjector:
    """Faults on the nodes of the local cluster in ``directory``."""

    def __init__(
        self, directory: Path, events: EventLog, zk: AsyncZooKeeper, nodes: Sequence[Node] = ()
    ) -> None:
        self.directory = directory
        self.events = events
        self.network = NetworkFaults(directory, nodes)
        self.zookeeper = ZooKeeperFaults(directory)
        self.crashed: list[str] = []
        """Nodes found not running that no fault had taken down: look at their logs."""
        self._paused: dict[str, tuple[int, float]] = {}
        self._epochs = BrokerEpochs(zk)
        self._starts: dict[str, int] = {}
        """Controllers taken down: how many ``controller_started`` lines their log had before."""

    def _entry(self, name: str) -> dict[str, Any]:
        return state_file.find(state_file.load_state(self.directory), name)

    async def inject(self, step: Step) -> bool:
        entry = self._entry(step.target)
        pid = entry.get("pid")
        renews = step.fault in ENDING
        if entry["role"] == "broker" and (renews or step.fault in EXPIRING):
            await self._epochs.remember(step.target, entry["id"])
        elif entry["role"] == "controller" and renews:
            self._starts[step.target] = _controller_starts(entry)
        if step.fault in NETWORK_FAULTS or step.fault in ZOOKEEPER_FAULTS:
            return await self._inject_around(step)
        if pid is None or not state_file.alive(pid):
            self._note_crash(step.target, entry["role"], pid)
            await asyncio.to_thread(node_control.node_action, self.directory, step.target, "restart")
            await self.settle(step)
            return False
        detail = {
            "kill": f"SIGKILL pid {pid}; started again after {step.hold_s:g} s",
            "bounce": f"SIGKILL pid {pid} and started again at once",
            "restart": f"SIGTERM pid {pid}, wait for it to exit, start again",
            "pause": f"SIGSTOP pid {pid} for {step.hold_s:g} s",
        }[step.fault]
        log.info("%s %s: %s", step.fault, step.target, detail)
        self.events.emit(
            "fault_injected", fault=step.fault, target=step.target, role=step.role, detail=detail
        )
        if step.fault == "pause":
            with contextlib.suppress(ProcessLookupError):  # exited since the check: healing starts it
                os.kill(pid, signal.SIGSTOP)
            self._paused[step.target] = (pid, time.monotonic())
        else:
            await asyncio.to_thread(node_control.node_action, self.directory, step.target, step.fault)
        return True

    async def _inject_around(self, step: Step) -> bool:
        """A cut between nodes or ZooKeeper trouble: the target process itself is left alone."""
        if step.fault in NETWORK_FAULTS:
            detail = await self.network.inject(step)
        else:
            detail = await self.zookeeper.inject(step)
        log.info("%s %s: %s", step.fault, step.target, detail)
        self.events.emit(
            "fault_injected", fault=step.fault, target=step.target, role=step.role, detail=detail
        )
        return True

    async def heal(self, step: Step) -> None:
        if step.fault in NETWORK_FAULTS or step.fault in ZOOKEEPER_FAULTS:
            await (self.network.heal() if step.fault in NETWORK_FAULTS else self.zookeeper.heal())
            log.info("healed %s of %s", step.fault, step.target)
            self.events.emit("fault_healed", fault=step.fault, target=step.target, role=step.role)
        elif step.fault == "kill":
            entry = await asyncio.to_thread(node_control.node_action, self.directory, step.target, "restart")
            log.info("started %s again (pid %s)", step.target, entry["pid"])
            self.events.emit("fault_healed", fault="kill", target=step.target, role=step.role)
        elif step.target in self._paused:
            pid = self._resume(step.target, step.role)
            if not state_file.alive(pid):  # it exited around the SIGSTOP: start it, as for a crash
                self._note_crash(step.target, step.role, pid)
                await asyncio.to_thread(node_control.node_action, self.directory, step.target, "restart")

    def _resume(self, name: str, role: str) -> int:
        """SIGCONT a paused node; returns its pid."""
        pid, since = self._paused.pop(name)
        detail = f"SIGCONT pid {pid} after {time.monotonic() - since:.1f} s"
        log.info("resume %s: %s", name, detail)
        self.events.emit("fault_injected", fault="resume", target=name, role=role, detail=detail)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
        self.events.emit("fault_healed", fault="pause", target=name, role=role)
        return pid

    async def heal_all(self) -> None:
        """Leave every node running and reachable: heal every cut, start what a ZooKeeper fault took
        down, resume what is still paused, start what is not running."""
        if state_file.network_of(state_file.load_state(self.directory)) is not None:
            await self.network.heal()
        await self.zookeeper.heal()
        for name in list(self._paused):
            self._resume(name, self._entry(name)["role"])
        for entry in state_file.load_state(self.directory)["processes"]:
            pid = entry.get("pid")
            if _stopped(pid):
                log.warning("%s (pid %s) was stopped; sending SIGCONT", entry["name"], pid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            if not state_file.alive(pid):
                self._note_crash(entry["name"], entry["role"], pid)
                await asyncio.to_thread(node_control.node_action, self.directory, entry["name"], "restart")

    def _note_crash(self, name: str, role: str, pid: int | None) -> None:
        """A node down that no fault took down: said in the log and the run's events (the audit's
        timeline must see it), and started again by the caller."""
        log.warning("%s is not running (pid %s exited on its own; see its log): starting it", name, pid)
        self.events.emit("node_crashed", target=name, role=role, pid=pid)
        self.crashed.append(name)

    async def settle(self, step: Step) -> None:
        """A broker is back once registered with a new epoch (every fault here ends its session); a
        restarted controller once its new process logs ``controller_started`` (it competes for
        ``/controller`` from then on); a ZooKeeper server once its process runs, which healing ensured."""
        if step.role == "controller":
            await self._controller_back(step)
            return
        if step.role == "broker":
            await self._epochs.wait_new(step, self._entry(step.target)["id"])

    async def _controller_back(self, step: Step) -> None:
        before = self._starts.pop(step.target, None)
        if before is None:  # paused: the same process goes on
            return
        started = time.monotonic()
        while time.monotonic() - started < BACK_TIMEOUT_S:
            if _controller_starts(self._entry(step.target)) > before:
                log.info("%s is competing again after %.1f s", step.target, time.monotonic() - started)
                return
            await asyncio.sleep(0.2)
        log.warning(
            "%s has not started again %.0f s after its %s; going on", step.target, BACK_TIMEOUT_S, step.fault
        )


def _controller_starts(entry: dict[str, Any]) -> int:
    """How many times the controller's event log says it started (a restart appends to the same log)."""
    path = Path(entry["events"])
    if not path.exists():
        return 0
    with path.open(encoding="utf-8") as f:
        return sum('"kind":"controller_started"' in line for line in f)
