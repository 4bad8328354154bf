"""Real Apache Kafka 3.9 brokers beside the project's daemons, in the test's ZooKeeper chroot.

The jars must be there: a run whose ``make kafka`` failed fails here, loudly, instead of skipping the
interop suite. Every broker a test started is killed at the end; its ``server.log`` stays in the
test's directory, and a failing test prints its tail.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkapeer.broker import KafkaBroker
from kafkapeer.jars import BROKER, JarsMissing, classpath
from zkserver.ports import free_ports


class KafkaBrokers:
    """Starts Kafka brokers for one test, on free loopback ports, and stops them all afterwards."""

    def __init__(self, zk_connect: str, workdir: Path) -> None:
        self.zk_connect = zk_connect
        self.workdir = workdir
        self.started: dict[int, KafkaBroker] = {}

    def broker(self, broker_id: int, **overrides: object) -> KafkaBroker:
        """A started broker with one PLAINTEXT listener (override ``listeners`` for more)."""
        if "listeners" in overrides:
            listeners = str(overrides.pop("listeners"))
        else:
            (port,) = free_ports(1)
            listeners = f"PLAINTEXT://127.0.0.1:{port}"
        broker = KafkaBroker(broker_id, self.zk_connect, self.workdir, listeners, **overrides)
        self.started[broker_id] = broker
        return broker.start()

    def like_ours(self, broker_id: int, ibp: str, **overrides: object) -> KafkaBroker:
        """A started broker with our brokers' listener names (a CONTROLLER control plane beside
        PLAINTEXT) at ``ibp``; in a cluster without a controller of ours, the first wins ``/controller``."""
        plain, control = free_ports(2)
        settings: dict[str, object] = {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "control.plane.listener.name": "CONTROLLER",
            "inter.broker.protocol.version": ibp,
            "replica.lag.time.max.ms": 5000,
        }
        listeners = f"PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{control}"
        return self.broker(broker_id, listeners=listeners, **{**settings, **overrides})

    def close(self) -> None:
        for broker in self.started.values():
            broker.kill()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """Keep each phase's report on the item, so a fixture's teardown knows whether the test failed."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def kafka_jars() -> str:
    """Kafka 3.9's class path; fails (never skips) when ``make kafka`` has not resolved it."""
    try:
        return classpath(BROKER)
    except JarsMissing as exc:
        pytest.fail(f"Kafka's jars are missing, so the interop suite cannot run: {exc}")


@pytest.fixture
def kafka(
    kafka_jars: str, zk_connect: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[KafkaBrokers]:
    brokers = KafkaBrokers(zk_connect, tmp_path)
    try:
        yield brokers
    finally:
        brokers.close()
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            for broker in brokers.started.values():
                print(f"--- {broker.name} ({broker.log_path}) ---\n{broker.tail()}")
