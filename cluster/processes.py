"""Controller and broker daemons as child processes, observed through their JSON-lines event logs.

Each daemon gets a directory holding its properties file, its stdout/stderr log and its event log;
waiting for something to happen means waiting for an event, never for a fixed time. Used by the
local cluster launcher, the benchmarks and the process tests.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from network.connection import KafkaConnection
from protocol import ApiKey
from security.config import ClientSecurity
from zkstore import znodes

REPO = Path(__file__).resolve().parents[1]

Event = dict[str, Any]


class DaemonError(AssertionError):
    """A daemon exited, or an awaited event did not come in time (an assertion failure in tests)."""


class DaemonProcess:
    """``python -m <module> --config FILE`` with its settings, log and event log under one directory."""

    module = ""

    def __init__(self, name: str, workdir: Path, settings: dict[str, Any]) -> None:
        self.name = name
        self.dir = workdir / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = self.dir / f"{self.module}.properties"
        self.config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        self.events_path = self.dir / "events.jsonl"
        self.log_path = self.dir / f"{self.module}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.command_prefix: tuple[str, ...] = ()
        """Put before the command, e.g. ``ip netns exec NS`` for a daemon in a network namespace."""
        self._read = 0
        self.events: list[Event] = []
        self.client_security: ClientSecurity | None = None
        """How :meth:`BrokerProcess.request` and :meth:`ControllerProcess.rpc` dial this daemon's
        listeners (None: PLAINTEXT), e.g. with a super user's certificate in a secured cluster."""

    @staticmethod
    def settings(defaults: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
        """``defaults`` with keyword overrides, ``session_timeout_ms`` standing for ``session.timeout.ms``."""
        return {**defaults, **{k.replace("_", "."): v for k, v in overrides.items()}}

    def start(self, *, own_session: bool = False) -> Self:
        """Start the daemon; ``own_session`` keeps a terminal's Ctrl-C from reaching it (a launcher that
        shuts its cluster down in order, or leaves it running detached)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [*self.command_prefix, sys.executable, "-m", self.module, "--config", str(self.config)],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=own_session,
            )
        return self

    def relaunch(self, generation: int) -> Self:
        """The same daemon (config, ports, directory) as a fresh, unstarted object; this one's event log
        moves aside to ``events.<generation>.jsonl``, so the new object reads only its own events."""
        if self.events_path.exists():
            self.events_path.rename(self.events_path.with_suffix(f".{generation}.jsonl"))
        fresh = copy.copy(self)
        fresh.__dict__.update(process=None, _read=0, events=[])  # as __init__ leaves them
        return fresh

    def poll_events(self) -> list[Event]:
        if self.events_path.exists():
            with self.events_path.open(encoding="utf-8") as f:
                f.seek(self._read)
                chunk = f.read()
            complete = chunk[: chunk.rfind("\n") + 1]
            self._read += len(complete.encode())
            self.events += [json.loads(line) for line in complete.splitlines() if line]
        return self.events

    async def wait_event(
        self, predicate: Callable[[Event], bool], timeout: float = 20.0, what: str = ""
    ) -> Event:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        checked = 0
        while True:
            events = self.poll_events()
            for event in events[checked:]:
                if predicate(event):
                    return event
            checked = len(events)
            if self.process is not None and self.process.poll() is not None:
                raise DaemonError(f"{self.name} exited: {self.tail()}")
            if loop.time() > deadline:
                kinds = [e["kind"] for e in events[-15:]]
                raise DaemonError(f"timed out waiting for {what or 'an event'}; last events {kinds}")
            await asyncio.sleep(0.05)

    async def wait_kind(self, kind: str, timeout: float = 20.0, **fields: Any) -> Event:
        return await self.wait_event(
            lambda e: e["kind"] == kind and all(e.get(k) == v for k, v in fields.items()),
            timeout,
            what=f"{kind} {fields}",
        )

    def of_kind(self, kind: str) -> list[Event]:
        return [e for e in self.poll_events() if e["kind"] == kind]

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text().splitlines()[-lines:])
        except OSError:
            return ""

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM and wait: the daemon resigns and exits 0."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGCONT)
        self.process.terminate()
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise DaemonError(f"{self.name} did not stop on SIGTERM") from None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class ControllerProcess(DaemonProcess):
    module = "controller"

    def __init__(self, controller_id: int, zk_connect: str, workdir: Path, **overrides: Any) -> None:
        self.controller_id = controller_id
        defaults = {
            "controller.id": controller_id,
            "zookeeper.connect": zk_connect,
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "control.plane.listener.name": "CONTROLLER",
            "log.dir": workdir / f"controller-{controller_id}",
            "zookeeper.session.timeout.ms": 6000,
            "auto.leader.rebalance.enable": "false",
        }
        super().__init__(f"controller-{controller_id}", workdir, self.settings(defaults, overrides))

    def rpc_address(self) -> tuple[str, int]:
        started = next(e for e in self.poll_events() if e["kind"] == "controller_started")
        endpoint = znodes.Endpoint.parse(started["rpc_endpoint"])
        return endpoint.host, endpoint.port

    async def rpc(self, api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        host, port = self.rpc_address()
        conn = await KafkaConnection.open(
            host, port, client_id="test-broker", connect_timeout=5, security=self.client_security
        )
        try:
            _, response = await conn.send(api_key, version, body, timeout=15)
            return response
        finally:
            await conn.close()


class BrokerProcess(DaemonProcess):
    """A broker with a CONTROLLER control-plane listener and a PLAINTEXT listener, both on free ports."""

    module = "broker"

    def __init__(self, broker_id: int, zk_connect: str, workdir: Path, **overrides: Any) -> None:
        self.broker_id = broker_id
        defaults = {
            "broker.id": broker_id,
            "zookeeper.connect": zk_connect,
            "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "control.plane.listener.name": "CONTROLLER",
            "log.dirs": workdir / f"broker-{broker_id}",
            "zookeeper.session.timeout.ms": 6000,
            "controlled.shutdown.retry.backoff.ms": 200,
        }
        super().__init__(f"broker-{broker_id}", workdir, self.settings(defaults, overrides))
        self.client_listener = "PLAINTEXT"
        """The listener a test's client uses (a secured cluster has no PLAINTEXT one)."""

    def endpoint(self, listener: str) -> tuple[str, int]:
        started = next(e for e in reversed(self.poll_events()) if e["kind"] == "broker_started")
        for text in started["listeners"]:
            endpoint = znodes.Endpoint.parse(text)
            if endpoint.listener_name == listener:
                return endpoint.host, endpoint.port
        raise DaemonError(f"{self.name} has no {listener} listener")

    async def request(
        self, listener: str, api_key: ApiKey, version: int, body: dict[str, Any]
    ) -> dict[str, Any]:
        host, port = self.endpoint(listener)
        conn = await KafkaConnection.open(
            host, port, client_id="test", connect_timeout=5, security=self.client_security
        )
        try:
            _, response = await conn.send(api_key, version, body, timeout=15)
            return response
        finally:
            await conn.close()
