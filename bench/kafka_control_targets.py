"""The brokers under test of ``bench.kafka_control_latency``: Apache Kafka 3.9's and ours, alike.

A :class:`Target` starts its broker, says where its listeners are and what its epoch is, reads its
data-plane request queue (our broker's Prometheus gauge; Kafka's ``RequestChannel`` MBean through
``kafka-jmx``), and after the run tells from the broker's own records which probes it handled without
error: our ``control_request_handled`` events, Kafka's state-change log.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Protocol

from bench.control_broker import QUEUE_SIZE, BrokerRun
from bench.control_phases import API_NAMES, attach_broker_times
from bench.control_requests import Sample
from bench.control_settings import BROKER_ID, CONTROLLER_EPOCH, CONTROLLER_ID, Settings
from bench.kafka_peer import AnchorKafkaBroker, JmxSampler
from bench.measure import cpu_seconds, scrape
from protocol import ApiKey
from protocol.ibp import MIXED_CLUSTER_IBP
from zkserver.ports import free_ports
from zkstore.aio import AsyncZooKeeper

__all__ = [
    "IBP",
    "SCRAPE_INTERVAL_S",
    "KafkaTarget",
    "OurTarget",
    "Target",
    "make_target",
    "state_change_acceptance",
]

IBP = MIXED_CLUSTER_IBP
"""Both brokers read control requests in Kafka 3.9's wire."""
JMX_QUEUE = "kafka.network:type=RequestChannel,name=RequestQueueSize"
SCRAPE_INTERVAL_S = 0.25

_KAFKA_LEADER_AND_ISR = re.compile(
    r"Finished LeaderAndIsr request in (?P<ms>\d+)ms correlationId (?P<id>\d+) "
    rf"from controller {CONTROLLER_ID}\b"
)
_KAFKA_UPDATE_METADATA = re.compile(
    rf"in response to UpdateMetadata request sent by controller {CONTROLLER_ID} "
    rf"epoch {CONTROLLER_EPOCH} with correlation id (?P<id>\d+)"
)


class Target(Protocol):
    """One broker under test, of either implementation, in one mode."""

    implementation: str
    mode: str
    control_listener: str
    endpoints: dict[str, tuple[str, int]]
    epoch: int

    @property
    def pid(self) -> int: ...

    async def start(self, zk: AsyncZooKeeper) -> None:
        """Start it and wait until it takes requests; ``zk`` is a session in its chroot."""

    def queue_size(self) -> float | None:
        """The data-plane request queue's size now (blocking: a scrape)."""

    def helper_cpu_seconds(self) -> float:
        """CPU the benchmark's own helpers for this broker used so far (Kafka's JMX reader)."""

    def stop(self) -> int | None:
        """Stop it; its exit code."""

    def acceptance(self, samples: list[Sample]) -> dict[str, Any]:
        """How many probes the broker itself records as handled without error."""

    def attach_times(self, samples: list[Sample]) -> None:
        """Each probe's time inside the broker, as far as the broker records it: ours its queue and
        handle times (its events), Kafka its LeaderAndIsr handling in whole ms (state-change log)."""


class OurTarget:
    """``python -m broker`` as ``bench.control_latency`` runs it, at IBP 3.9 (Kafka's wire)."""

    implementation = "ours"

    def __init__(self, mode: str, workdir: Path, zk_connect: str, settings: Settings) -> None:
        self.mode = mode
        self.run = BrokerRun(mode, workdir / "ours", zk_connect, settings)
        self.run.properties["inter.broker.protocol.version"] = IBP
        self.run.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.run.properties.items()))
        self.control_listener = self.run.control_listener
        self.endpoints: dict[str, tuple[str, int]] = {}
        self.epoch = 0

    @property
    def pid(self) -> int:
        return self.run.pid

    async def start(self, zk: AsyncZooKeeper) -> None:
        self.run.start()
        await self.run.wait_started()
        self.endpoints, self.epoch = self.run.endpoints(), self.run.epoch

    def queue_size(self) -> float | None:
        try:
            return scrape(self.run.metrics_port).get(QUEUE_SIZE)
        except OSError:
            return None

    def helper_cpu_seconds(self) -> float:
        return 0.0

    def stop(self) -> int | None:
        return self.run.stop()

    def attach_times(self, samples: list[Sample]) -> None:
        attach_broker_times([{"samples": samples}], self.run.events())

    def acceptance(self, samples: list[Sample]) -> dict[str, Any]:
        """From its ``control_request_handled`` events, matched by API and correlation id."""
        events = self.run.events()
        handled = {
            (e["api"], e["correlation_id"]): e for e in events if e["kind"] == "control_request_handled"
        }
        recorded = [handled.get((API_NAMES[s.api], s.correlation_id)) for s in samples]
        return {
            "probes": len(samples),
            "recorded_by_broker": sum(e is not None for e in recorded),
            "recorded_without_error": sum(
                e is not None and e["error"] == "NONE" and not e["partition_errors"] for e in recorded
            ),
            "broker_warnings": sum(" WARNING " in line for line in self.run.tail(100_000).splitlines()),
        }


class KafkaTarget:
    """Apache Kafka 3.9's broker (``bench.kafka_peer``), with JMX for its request queue."""

    implementation = "kafka"

    def __init__(self, mode: str, workdir: Path, zk_connect: str, settings: Settings) -> None:
        self.mode = mode
        plain, control, jmx = free_ports(3)
        overrides: dict[str, object] = {
            "num.io.threads": settings.io_threads,
            "queued.max.requests": settings.queued_max_requests,
            "controlled.shutdown.enable": "false",
            "inter.broker.protocol.version": IBP,
        }
        listeners = f"PLAINTEXT://127.0.0.1:{plain}"
        if mode == "dedicated":
            listeners += f",CONTROLLER://127.0.0.1:{control}"
            overrides |= {
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "control.plane.listener.name": "CONTROLLER",
            }
        self.control_listener = "CONTROLLER" if mode == "dedicated" else "PLAINTEXT"
        self.broker = AnchorKafkaBroker(
            BROKER_ID, zk_connect, workdir / f"kafka-{mode}", listeners, jmx_port=jmx, **overrides
        )
        self.jmx = JmxSampler(jmx, [JMX_QUEUE], self.broker.dir, interval_ms=int(SCRAPE_INTERVAL_S * 1000))
        self.endpoints = {name: self.broker.endpoint(name) for name in ("PLAINTEXT", self.control_listener)}
        self.epoch = 0

    @property
    def pid(self) -> int:
        return self.broker.pid

    async def start(self, zk: AsyncZooKeeper) -> None:
        self.broker.start()
        self.epoch = await self.broker.wait_ready(zk)
        self.jmx.start()

    def queue_size(self) -> float | None:
        return self.jmx.latest(f"{JMX_QUEUE}:Value")

    def helper_cpu_seconds(self) -> float:
        pid = self.jmx.pid()
        return (cpu_seconds(pid) or 0.0) if pid is not None else 0.0

    def stop(self) -> int | None:
        self.jmx.stop()
        return self.broker.stop(timeout=120)

    def attach_times(self, samples: list[Sample]) -> None:
        finished = leader_and_isr_finished(self.broker.log_text("state-change.log"))
        for sample in samples:
            if sample.api == ApiKey.LEADER_AND_ISR.name and sample.correlation_id in finished:
                sample.handle_ms = float(finished[sample.correlation_id])

    def acceptance(self, samples: list[Sample]) -> dict[str, Any]:
        server_log = self.broker.log_text().splitlines()
        return {
            **state_change_acceptance(self.broker.log_text("state-change.log"), samples),
            "server_log_errors": sum(" ERROR " in line for line in server_log),
        }


def leader_and_isr_finished(text: str) -> dict[int, int]:
    """Correlation id -> the ms Kafka's ReplicaManager logs it took (``Finished LeaderAndIsr request in
    N ms``), for the benchmark's controller."""
    return {int(m["id"]): int(m["ms"]) for m in _KAFKA_LEADER_AND_ISR.finditer(text)}


def state_change_acceptance(text: str, samples: list[Sample]) -> dict[str, Any]:
    """Which probes a Kafka broker's state-change log records as handled: each LeaderAndIsr finished
    and each UpdateMetadata cached, by correlation id, under the benchmark's controller id; and the
    WARN or ERROR lines of the state-change logger (a stale epoch is logged there)."""
    finished = leader_and_isr_finished(text)
    cached = {int(m["id"]) for m in _KAFKA_UPDATE_METADATA.finditer(text)}
    logged = [
        s.correlation_id in (finished if s.api == ApiKey.LEADER_AND_ISR.name else cached) for s in samples
    ]
    return {
        "probes": len(samples),
        "recorded_by_broker": sum(logged),
        "recorded_without_error": sum(logged),
        "state_change_warnings": sum(" WARN " in line or " ERROR " in line for line in text.splitlines()),
    }


def make_target(implementation: str, mode: str, workdir: Path, zk_connect: str, settings: Settings) -> Target:
    kind = KafkaTarget if implementation == "kafka" else OurTarget
    return kind(mode, workdir, zk_connect, settings)
