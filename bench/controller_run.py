"""Our controller as a benchmark's child process: started, read through its event log, timed over a takeover.

``ControllerRun`` runs ``python -m controller`` in a work directory and reads its events.jsonl;
``one_failover`` and ``reelect`` wait until the brokers acknowledged a takeover (cold, or warm after
``/controller`` is deleted under it), and ``timeline`` says what its event log tells of it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.measure import cpu_seconds, cpu_stall_us, peak_rss_mib, stall_share
from bench.takeover import QUIET_S, Sent, delete_controller
from daemon.runtime import die_with_parent

REPO = Path(__file__).resolve().parents[1]
CONTROL_APIS = ("LeaderAndIsr", "UpdateMetadata")
Event = dict[str, Any]


def event_time(event: Event) -> float:
    """Seconds since the epoch of an event's ``ts`` (UTC ISO-8601 with a ``Z``)."""
    return datetime.fromisoformat(event["ts"]).timestamp()


class ControllerRun:
    """``python -m controller`` in a work directory, observed through its events.jsonl."""

    def __init__(self, workdir: Path, zookeeper: str, controller_id: int = 1001, **settings: Any) -> None:
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        config = {
            "controller.id": controller_id,
            "zookeeper.connect": zookeeper,
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "control.plane.listener.name": "CONTROLLER",
            "auto.leader.rebalance.enable": "false",
            "log.dir": self.dir,
            **settings,
        }
        self.config_path = self.dir / "controller.properties"
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        self.events_path = self.dir / "events.jsonl"
        self.log_path = self.dir / "controller.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.events: list[Event] = []
        self._offset = 0
        self.last_event_at = time.monotonic()

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "controller", "--config", str(self.config_path)],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
            )

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def poll(self) -> list[Event]:
        """Read the complete lines appended since the last call."""
        if self.events_path.exists():
            with self.events_path.open("rb") as f:
                f.seek(self._offset)
                chunk = f.read()
            complete = chunk[: chunk.rfind(b"\n") + 1]
            if complete:
                self._offset += len(complete)
                self.events += [json.loads(line) for line in complete.splitlines() if line]
                self.last_event_at = time.monotonic()
        return self.events

    async def wait_until(self, done: Callable[[list[Event]], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done(self.poll()):
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"the controller exited while waiting for {what}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what} within {timeout} s; log tail:\n{self.tail()}")
            await asyncio.sleep(0.05)

    def first(self, kind: str, epoch: int | None = None) -> Event | None:
        """The first event of ``kind`` (of controller ``epoch``, when given)."""
        return next(
            (e for e in self.events if e["kind"] == kind and epoch in (None, e.get("controller_epoch"))), None
        )

    def latest_epoch(self) -> int | None:
        """The epoch of its latest ``controller_elected``."""
        elected = [e["controller_epoch"] for e in self.events if e["kind"] == "controller_elected"]
        return elected[-1] if elected else None

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def control_traffic(events: list[Event], epoch: int) -> tuple[list[Event], list[Event]]:
    """The LeaderAndIsr/UpdateMetadata requests sent and answered under controller ``epoch``."""

    def ours(e: Event) -> bool:
        return e.get("api") in CONTROL_APIS and e.get("controller_epoch") == epoch

    sent = [e for e in events if e["kind"] == "request_sent" and ours(e)]
    answered = [e for e in events if e["kind"] == "response_received" and ours(e)]
    return sent, answered


def settled(run: ControllerRun, brokers: int, epoch: int | None = None) -> Callable[[list[Event]], bool]:
    """Failover done, every broker answered at least once, nothing outstanding, and the log quiet; of
    the election of ``epoch`` (default: the first)."""

    def check(events: list[Event]) -> bool:
        elected = run.first("controller_elected", epoch)
        if elected is None or run.first("failover_complete", elected["controller_epoch"]) is None:
            return False
        sent, answered = control_traffic(events, elected["controller_epoch"])
        if len({e["broker"] for e in answered}) < brokers or len(sent) != len(answered):
            return False
        return time.monotonic() - run.last_event_at >= QUIET_S

    return check


def answered_requests(run: ControllerRun, epoch: int) -> Sent:
    """What the controller's event log says brokers answered under ``epoch``: per broker and API, the
    partitions of each request."""
    _, answered = control_traffic(run.events, epoch)
    out: Sent = {}
    for e in answered:
        out.setdefault(e["broker"], {}).setdefault(e["api"], []).append(e.get("partitions", 0))
    return out


async def reelect(run: ControllerRun, connect: str, brokers: int, timeout: float) -> int:
    """Delete ``/controller`` under the running controller, then wait until it has won again and
    ``brokers`` acknowledged that failover; the new epoch."""
    previous = run.latest_epoch()
    assert previous is not None
    await delete_controller(connect)

    def reelected(_: list[Event]) -> bool:
        latest = run.latest_epoch()
        return latest is not None and latest > previous

    await run.wait_until(reelected, timeout, "its re-election")
    epoch = run.latest_epoch()
    assert epoch is not None
    await run.wait_until(settled(run, brokers, epoch), timeout, "acknowledged re-election")
    return epoch


def timeline(run: ControllerRun, epoch: int | None = None) -> dict[str, Any]:
    """The election of ``epoch`` (default: the first) as the controller's event log tells it."""
    elected = run.first("controller_elected", epoch)
    assert elected is not None
    complete = run.first("failover_complete", elected["controller_epoch"])
    started = run.first("controller_started")
    assert complete is not None and started is not None
    _, answered = control_traffic(run.events, elected["controller_epoch"])
    at = event_time(elected)
    last = max(answered, key=event_time)
    by_api: dict[str, int] = {}
    for e in answered:
        by_api[e["api"]] = by_api.get(e["api"], 0) + 1
    return {
        "controller_epoch": elected["controller_epoch"],
        "start_to_elected_s": round(at - event_time(started), 3),
        "failover_complete_ms": complete["duration_ms"],
        "elected_to_failover_complete_s": round(event_time(complete) - at, 3),
        "elected_to_first_response_s": round(min(event_time(e) for e in answered) - at, 3),
        "elected_to_last_response_s": round(event_time(last) - at, 3),
        "last_response": {k: last.get(k) for k in ("api", "broker", "partitions", "latency_ms", "queue_ms")},
        "responses": by_api,
        "max_latency_ms": max(e.get("latency_ms", 0) for e in answered),
        "max_queue_ms": max(e.get("queue_ms", 0) for e in answered),
    }


async def one_failover(
    run: ControllerRun,
    brokers: int,
    timeout: float,
    observe: Callable[[ControllerRun], Awaitable[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """Start a controller and wait until brokers acknowledged its failover: its timeline, peak RSS, CPU
    seconds (in all, and from when its election was seen), the machine's CPU stall share, and what
    ``observe`` adds, called before the controller is stopped (stopping may send requests too)."""
    peak = cpu = at_election = stalled = None
    observed: dict[str, Any] = {}
    stall_before, wall_before = cpu_stall_us(), time.monotonic()
    try:
        run.start()
        await run.wait_until(lambda _: run.first("controller_elected") is not None, timeout, "its election")
        at_election = cpu_seconds(run.pid)
        await run.wait_until(settled(run, brokers), timeout, "acknowledged failover")
        peak, cpu = peak_rss_mib(run.pid), cpu_seconds(run.pid)
        stalled = stall_share(stall_before, cpu_stall_us(), time.monotonic() - wall_before)
        if observe is not None:
            observed = await observe(run)
    finally:
        run.stop()
    return {
        **timeline(run),
        **observed,
        "controller_peak_rss_mib": peak,
        "controller_cpu_s": cpu,
        "controller_cpu_after_election_s": None
        if cpu is None or at_election is None
        else round(cpu - at_election, 2),
        "cpu_stall_share": stalled,
    }
