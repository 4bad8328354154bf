"""The broker under test in the control-latency benchmark: its process, event log and metrics.

:class:`BrokerRun` runs ``python -m broker`` with a dedicated control plane (a CONTROLLER listener) or a
shared one, reads its events.jsonl, and :func:`scrape_loop` samples its request-queue size and handler
idleness from its metrics port while a phase runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.control_settings import BROKER_ID, Settings
from bench.measure import scrape
from daemon.runtime import die_with_parent
from zkstore import znodes

__all__ = ["QUEUE_SIZE", "SCRAPE_INTERVAL_S", "BrokerRun", "Scrapes", "scrape_loop", "wait_saturated"]

REPO = Path(__file__).resolve().parents[1]
QUEUE_SIZE = "kafka_network_requestchannel_requestqueuesize"
DATA_IDLE = "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent"
CONTROL_IDLE = "kafka_server_kafkarequesthandlerpool_controlplanerequesthandleravgidlepercent"
SCRAPE_INTERVAL_S = 0.25


class BrokerRun:
    """``python -m broker --config FILE`` in its own directory, observed through its events.jsonl."""

    def __init__(self, mode: str, workdir: Path, zookeeper: str, settings: Settings) -> None:
        self.mode = mode
        self.dir = workdir / f"broker-{mode}"
        self.dir.mkdir(parents=True)
        self.control_listener = "CONTROLLER" if mode == "dedicated" else "PLAINTEXT"
        self.properties: dict[str, Any] = {
            "broker.id": BROKER_ID,
            "zookeeper.connect": zookeeper,
            "log.dirs": self.dir / "data",
            "num.io.threads": settings.io_threads,
            "queued.max.requests": settings.queued_max_requests,
            "controlled.shutdown.enable": "false",
            "metrics.port": 0,
        }
        if mode == "dedicated":
            self.properties |= {
                "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "control.plane.listener.name": "CONTROLLER",
            }
        else:
            self.properties["listeners"] = "PLAINTEXT://127.0.0.1:0"
        self.config_path = self.dir / "broker.properties"
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        self.events_path = self.dir / "data" / "events.jsonl"
        self.log_path = self.dir / "broker.log"
        self.switch_interval_ms = settings.switch_interval_ms
        self.process: subprocess.Popen[bytes] | None = None
        self.started: dict[str, Any] = {}

    def command(self) -> list[str]:
        if self.switch_interval_ms is None:
            return [sys.executable, "-m", "broker", "--config", str(self.config_path)]
        launcher = (
            f"import runpy, sys; sys.setswitchinterval({self.switch_interval_ms / 1000!r}); "
            "runpy.run_module('broker', run_name='__main__', alter_sys=True)"
        )
        return [sys.executable, "-c", launcher, "--config", str(self.config_path)]

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
            )

    def events(self) -> list[dict[str, Any]]:
        if not self.events_path.exists():
            return []
        with self.events_path.open(encoding="utf-8") as f:
            text = f.read()
        return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines() if line]

    async def wait_started(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            found = [e for e in self.events() if e["kind"] == "broker_started"]
            if found:
                self.started = found[-1]
                return
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"broker ({self.mode}) exited: {self.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"broker ({self.mode}) not started after {timeout} s: {self.tail()}")
            await asyncio.sleep(0.05)

    def endpoints(self) -> dict[str, tuple[str, int]]:
        found = {}
        for text in self.started["listeners"]:
            endpoint = znodes.Endpoint.parse(text)
            found[endpoint.listener_name] = (endpoint.host, endpoint.port)
        return found

    @property
    def metrics_port(self) -> int:
        return int(self.started["metrics_port"])

    @property
    def epoch(self) -> int:
        return int(self.started["broker_epoch"])

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text().splitlines()[-lines:])
        return ""

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM and wait; SIGKILL if it does not go."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


@dataclass
class Scrapes:
    """What the scrapes of one phase read: the data-plane queue size and both handler pools' idleness."""

    queue_size: list[float] = field(default_factory=list)
    data_idle: list[float] = field(default_factory=list)
    control_idle: list[float] = field(default_factory=list)


async def scrape_loop(port: int, into: Scrapes) -> None:
    """Scrape the broker's metrics every ``SCRAPE_INTERVAL_S`` into ``into`` until cancelled."""
    while True:
        try:
            values = await asyncio.to_thread(scrape, port)
        except OSError:
            values = {}
        if QUEUE_SIZE in values:
            into.queue_size.append(values[QUEUE_SIZE])
            into.data_idle.append(values.get(DATA_IDLE, math.nan))
            into.control_idle.append(values.get(CONTROL_IDLE, math.nan))
        await asyncio.sleep(SCRAPE_INTERVAL_S)


async def wait_saturated(port: int, capacity: int, timeout: float) -> dict[str, Any]:
    """Until the data-plane queue has read full (or within 5% of it) on five scrapes in a row."""
    began = time.monotonic()
    run = 0
    seen: list[float] = []
    while run < 5:
        if time.monotonic() - began > timeout:
            raise RuntimeError(f"data-plane queue never stayed full within {timeout} s: sizes {seen[-20:]}")
        size = (await asyncio.to_thread(scrape, port)).get(QUEUE_SIZE, 0.0)
        seen.append(size)
        run = run + 1 if size >= 0.95 * capacity else 0
        await asyncio.sleep(0.2)
    return {"seconds_to_saturate": round(time.monotonic() - began, 2), "queue_sizes_seen": seen}
