"""Apache Kafka 3.9's controller under test: a stock Kafka broker, and what its logs and ZooKeeper say it did.

``KafkaController`` runs a Kafka 3.9 broker with its stock JVM options and log levels whose
KafkaController is the one measured; ``state_change_requests`` reads the requests it sent from its
state-change log; ``wait_elected``, ``wait_idle`` and ``controller_endpoint`` ask ZooKeeper about it.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kazoo.exceptions import NoNodeError

from bench.takeover import Sent
from kafkapeer.broker import JVM_OPTS, KafkaBroker, KafkaBrokerError
from protocol.ibp import MIXED_CLUSTER_IBP
from zkserver.ports import free_ports
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper

IBP = MIXED_CLUSTER_IBP
"""Both controllers and the simulated brokers speak Kafka 3.9's wire."""
INTER_BROKER_LISTENER = "PLAINTEXT"
"""Kafka's broker's inter-broker listener (its default, by the security protocol's name)."""
KAFKA_BROKER_ID = 0
"""Kafka's controller broker: below the simulated brokers' ids (1..N), hosting no partition."""
KAFKA_PERFORMANCE_OPTS = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
)
"""``KAFKA_JVM_PERFORMANCE_OPTS`` of Kafka 3.9's ``bin/kafka-run-class.sh``."""
LOG4J = """\
log4j.rootLogger=INFO, kafkaAppender
log4j.appender.kafkaAppender=org.apache.log4j.FileAppender
log4j.appender.kafkaAppender.File={dir}/server.log
log4j.appender.kafkaAppender.layout=org.apache.log4j.PatternLayout
log4j.appender.kafkaAppender.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.controllerAppender=org.apache.log4j.FileAppender
log4j.appender.controllerAppender.File={dir}/controller.log
log4j.appender.controllerAppender.layout=org.apache.log4j.PatternLayout
log4j.appender.controllerAppender.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.stateChangeAppender=org.apache.log4j.FileAppender
log4j.appender.stateChangeAppender.File={dir}/state-change.log
log4j.appender.stateChangeAppender.layout=org.apache.log4j.PatternLayout
log4j.appender.stateChangeAppender.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.zookeeper=INFO
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.network.RequestChannel$=WARN
log4j.logger.kafka.controller=TRACE, controllerAppender
log4j.additivity.kafka.controller=false
log4j.logger.state.change.logger=INFO, stateChangeAppender
log4j.additivity.state.change.logger=false
log4j.logger.kafka.authorizer.logger=INFO
"""
"""Kafka 3.9's stock ``config/log4j.properties`` levels, into files of the broker's directory."""
START_TIMEOUT_S = 120.0
"""A Kafka JVM's start, registration and election on a busy machine."""
POLL_S = 0.05

_LEADER_AND_ISR = re.compile(
    r"\[Controller id=(?P<id>\d+) epoch=(?P<epoch>\d+)\] Sending LeaderAndIsr request to broker "
    r"(?P<broker>\d+) with (?P<leaders>\d+) become-leader and (?P<followers>\d+) become-follower partitions"
)
_UPDATE_METADATA = re.compile(
    r"\[Controller id=(?P<id>\d+) epoch=(?P<epoch>\d+)\] Sending UpdateMetadata request to brokers "
    r"\w*\((?P<brokers>[\d, ]*)\) for (?P<partitions>\d+) partitions"
)


def state_change_requests(text: str, controller_id: int, epoch: int) -> Sent:
    """The LeaderAndIsr and UpdateMetadata requests a Kafka controller's state-change log says it sent
    under ``epoch``: per broker and API, the partitions of each."""
    sent: Sent = {}
    for line in text.splitlines():
        lai, um = _LEADER_AND_ISR.search(line), _UPDATE_METADATA.search(line)
        m = lai or um
        if m is None or (int(m["id"]), int(m["epoch"])) != (controller_id, epoch):
            continue
        if lai is not None:
            told = [(int(lai["broker"]), "LeaderAndIsr", int(lai["leaders"]) + int(lai["followers"]))]
        else:
            brokers = filter(None, (b.strip() for b in m["brokers"].split(",")))
            told = [(int(b), "UpdateMetadata", int(m["partitions"])) for b in brokers]
        for broker, api, partitions in told:
            sent.setdefault(broker, {}).setdefault(api, []).append(partitions)
    return sent


@dataclass(frozen=True)
class KafkaSettings:
    """How Kafka's broker runs: its heap (``-Xms`` and ``-Xmx``) and properties beyond the bench's."""

    heap: str = "2g"
    overrides: dict[str, str] = field(default_factory=dict)


class StockKafkaBroker(KafkaBroker):
    """kafkapeer's Kafka broker with Kafka's stock JVM options in place of the test suite's (a small
    heap, C1 only): ``-Xms``/``-Xmx`` ``heap`` and ``kafka-run-class.sh``'s performance options."""

    heap = "2g"

    def command(self) -> list[str]:
        command = super().command()
        assert command[1 : 1 + len(JVM_OPTS)] == list(JVM_OPTS), command
        heap = (f"-Xms{self.heap}", f"-Xmx{self.heap}")
        return [command[0], *heap, *KAFKA_PERFORMANCE_OPTS, *command[1 + len(JVM_OPTS) :]]


class KafkaController:
    """A Kafka 3.9 broker whose KafkaController is the one under test: its stock JVM options and log
    levels, the simulated brokers' listener names, IBP 3.9, and no partition of its own."""

    def __init__(
        self, workdir: Path, zk_connect: str, kafka: KafkaSettings, broker_id: int = KAFKA_BROKER_ID
    ) -> None:
        plain, control = free_ports(2)
        settings: dict[str, Any] = {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "control.plane.listener.name": "CONTROLLER",
            "inter.broker.protocol.version": IBP,
            "auto.leader.rebalance.enable": "false",
            "zookeeper.session.timeout.ms": 18_000,
            **kafka.overrides,
        }
        listeners = f"PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{control}"
        self.broker = StockKafkaBroker(broker_id, zk_connect, workdir, listeners, **settings)
        self.broker.heap = kafka.heap
        (self.broker.dir / "log4j.properties").write_text(LOG4J.format(dir=self.broker.dir))
        self.state_change_log = self.broker.dir / "state-change.log"
        self.started_at = 0.0

    @property
    def broker_id(self) -> int:
        return self.broker.broker_id

    def start(self) -> None:
        self.started_at = time.time()
        self.broker.start()

    @property
    def pid(self) -> int:
        assert self.broker.process is not None
        return self.broker.process.pid

    def check_running(self) -> None:
        self.broker.check_running()

    def sent(self, epoch: int) -> Sent:
        """Its state-change log's LeaderAndIsr and UpdateMetadata requests of ``epoch``."""
        try:
            text = self.state_change_log.read_text(errors="replace")
        except OSError:
            return {}
        return state_change_requests(text, self.broker_id, epoch)

    def stop(self) -> None:
        """SIGTERM: its own controlled shutdown, then resigning frees ``/controller``; SIGKILL after
        120 s (then ``/controller`` stays until its session expires)."""
        try:
            self.broker.stop(timeout=120)
        except KafkaBrokerError as exc:
            print(f"  {exc}", flush=True)


async def wait_elected(zk: AsyncZooKeeper, controller: KafkaController, after: int, timeout: float) -> int:
    """Until ``/controller`` names the Kafka broker with an epoch above ``after``; that epoch. An error
    if the JVM exits, or after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        controller.check_running()
        try:
            data, _ = await zk.get(znodes.CONTROLLER)
            holder = znodes.decode_controller_registration(data, znodes.CONTROLLER)
            epoch_data, _ = await zk.get(znodes.CONTROLLER_EPOCH)
            epoch = znodes.decode_controller_epoch(epoch_data, znodes.CONTROLLER_EPOCH)
        except NoNodeError:  # not elected yet
            holder = epoch = None
        if (
            holder is not None
            and holder.broker_id == controller.broker_id
            and epoch is not None
            and epoch > after
        ):
            return epoch
        if time.monotonic() > deadline:
            tail = controller.broker.tail()
            raise TimeoutError(f"Kafka's controller not elected within {timeout} s:\n{tail}")
        await asyncio.sleep(POLL_S)


async def controller_endpoint(zk: AsyncZooKeeper, listener: str = INTER_BROKER_LISTENER) -> tuple[str, int]:
    """Where a broker sends ControlledShutdown: the active controller's broker (``/controller``), at its
    registered endpoint of the inter-broker ``listener``, the one UpdateMetadata lists it under."""
    data, _ = await zk.get(znodes.CONTROLLER)
    holder = znodes.decode_controller_registration(data, znodes.CONTROLLER)
    assert holder is not None, data
    path = znodes.broker_path(holder.broker_id)
    registration = znodes.decode_broker_registration((await zk.get(path))[0], path)
    endpoint = None if registration is None else registration.endpoint(listener)
    if endpoint is None:
        raise RuntimeError(f"broker {holder.broker_id}, the controller, has no {listener} endpoint in {path}")
    return endpoint.host, endpoint.port


async def wait_idle(zk: AsyncZooKeeper, controller: KafkaController, timeout: float) -> None:
    """Until Kafka's controller has processed every event queued so far: an ISR change notification of
    no partitions is created, and its event, behind the others in the controller's one queue, deletes
    it. Needed before deleting ``/controller`` under it: its own creation of ``/controller`` queued a
    ControllerChange that, processed after the deletion, resigns without a new election (the deletion
    found no watch to fire); a real failover, caused by an expired session, does not meet this."""
    path = await zk.create(
        znodes.ISR_CHANGE_NOTIFICATION_PREFIX, znodes.encode_isr_change_notification([]), sequence=True
    )
    deadline = time.monotonic() + timeout
    while await zk.exists(path) is not None:
        controller.check_running()
        if time.monotonic() > deadline:
            raise TimeoutError(f"Kafka's controller still busy after {timeout} s (it left {path})")
        await asyncio.sleep(POLL_S)


def java_version() -> str | None:
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (done.stderr or done.stdout).splitlines()
    return lines[0] if lines else None
