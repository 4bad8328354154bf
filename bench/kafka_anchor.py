"""Kafka's controller as the anchor: Apache Kafka 3.9's ZooKeeper controller beside ours, in one run.

Same machine, same ZooKeeper, same simulated brokers (``bench.ack_brokers`` on Kafka 3.9's wire:
LeaderAndIsr v7, UpdateMetadata v8, StopReplica v4, each answered at once with Kafka's response
layout), so that the brokers cost both controllers the same; each figure beside a floor measured in
the same run, and each implementation as a ratio to the other.

**Failover** (``bench.failover``'s ``FailoverCase``, at ``--ibp 3.9``): for each ``--partitions``
count (RF 3 over ``--brokers`` simulated brokers, every leader live), one cluster in its own chroot,
then ``--runs`` controller processes of each implementation, taking turns (ours first):

* ours: ``python -m controller`` at ``inter.broker.protocol.version=3.9``, as ``bench.failover`` runs it;
* Kafka's: a Kafka 3.9 broker (id 0, hosting no partition, the simulated brokers' listener names: a
  ``CONTROLLER`` control plane beside ``PLAINTEXT``, ``auto.leader.rebalance.enable=false`` like ours)
  started while ``/controller`` is free, so its KafkaController wins the election; stopped (SIGTERM)
  after the run, which frees ``/controller`` for the next.

Each process takes over **cold** (its first takeover: process start-up is not timed, but its first
run of every code path is), then ``--reelections`` times **warm**: ``/controller`` is deleted under
it, and both implementations then resign and win the election again in the same process, a full
failover each time. A real failover is the warm kind for Kafka (a long-running broker's JVM takes
over) and for ours (a standby candidate that has waited, imported and connected).

Both are timed the same way, from outside: from the election's commit (``/controller_epoch``'s mtime;
both bump it in the multi-op that creates ``/controller``) to the last LeaderAndIsr or UpdateMetadata
of that epoch a simulated broker answered (``elected_to_last_ack_s``). Kafka's controller also sends
UpdateMetadata to its own broker, a live broker like any other; that answer is not waited for: the
figure ends at the simulated brokers' last answer. A run is over when every request the controller
says it sent (ours: its event log; Kafka's: the ``Sending LeaderAndIsr request to broker …`` and
``Sending UpdateMetadata request to brokers …`` lines of its state-change log) has been answered and
nothing moved for half a second; the partitions those requests carried are kept (``acked``). The
floor: one multi-read of every partition state (``bench.failover``), which any takeover does.

**Controlled shutdown** (``bench.controlled_shutdown``): ``--shutdown-runs`` runs per implementation,
each on a fresh cluster where broker 1 leads ``--shutdown-partitions`` partitions (RF 3 over 3
brokers); after the failover is acknowledged, broker 1 sends ControlledShutdown v3 with its epoch,
to our controller's RPC endpoint or, as a Kafka broker does, to the controller's broker
(``/controller``) at its registered inter-broker endpoint, and the answer is timed; ZooKeeper must
then show no partition led by broker 1 or with it in its ISR. Before it, each controller has taken
over ``--reelections`` more times (warm), and Kafka's has drained its event queue; the shutdown
itself is each process's first. The floor: one conditional setData of every partition state it
leads, in 500-op multis (``bench.controlled_shutdown``).

Kafka runs with its stock JVM options (``kafka-run-class.sh``'s G1 settings, C2) and ``-Xms``/``-Xmx``
``--kafka-heap``, and its stock log levels (``config/log4j.properties``: ``kafka.controller`` at TRACE
into controller.log, ``state.change.logger`` at INFO into state-change.log). The jars come from
``make kafka``; without them this stops. ``--kafka-config`` sets more broker properties, to see
what a setting changes (the anchor itself is Kafka at its defaults). Results go to
bench/results/kafka_anchor.json (with the machine, the date and the machine's load) and a table on
stdout.

    .venv/bin/python -m bench.kafka_anchor [--partitions 10000,100000] [--brokers 3] [--runs 3]
        [--shutdown-partitions 10000] [--shutdown-runs 3] [--quick] [--heap 2g] [--kafka-heap 2g]
        [--reelections 1] [--kafka-config KEY=VALUE] [--timeout 300] [--workdir DIR] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kazoo.exceptions import NoNodeError

from bench.ack_brokers import AckBrokers, merge_progress, merge_stats
from bench.controlled_shutdown import (
    BROKERS as SHUTDOWN_BROKERS,
)
from bench.controlled_shutdown import (
    SHUTTING_DOWN,
    cpu_used,
    last_ack_after,
    one_run,
    shutdown_request,
    shutdown_result,
    summary,
    time_state_write,
    verify,
)
from bench.failover import ACK_APIS, QUIET_S, FailoverCase, Sent, delete_controller, last_election
from bench.machine import machine, write_report
from bench.measure import cpu_seconds, cpu_stall_us, peak_rss_mib, ratio, stall_share
from bench.zk_populate import Cluster, ensure_chroot, populate
from bench.zookeeper import zookeeper_workdir
from kafkapeer.broker import JVM_OPTS, KafkaBroker, KafkaBrokerError
from kafkapeer.jars import BROKER, KAFKA_39, classpath
from protocol.ibp import MIXED_CLUSTER_IBP, control_wire
from zkserver.ports import free_ports
from zkserver.server import ZooKeeperServer
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


Counts = dict[int, dict[str, int]]


def sent_counts(sent: Sent, brokers: Sequence[int]) -> Counts:
    return {b: {api: len(sent.get(b, {}).get(api, [])) for api in ACK_APIS} for b in brokers}


def answer_counts(progress: dict[str, Any], epoch: int, brokers: Sequence[int]) -> Counts:
    answers = merge_progress(progress, epoch)
    return {
        b: {api: int(answers.get(b, {}).get(wire, [0])[0]) for api, wire in ACK_APIS.items()} for b in brokers
    }


async def settle(
    controller: KafkaController,
    ack: AckBrokers,
    epoch: int,
    brokers: Sequence[int],
    enough: Callable[[Sent], bool],
    timeout: float,
    what: str,
) -> Sent:
    """Until every LeaderAndIsr and UpdateMetadata Kafka's controller logged under ``epoch`` for
    ``brokers`` has been answered, ``enough`` holds for them, and nothing moved for QUIET_S."""
    deadline = time.monotonic() + timeout
    last_state: tuple[Counts, Counts] | None = None
    still_since = time.monotonic()
    while True:
        controller.check_running()
        sent = controller.sent(epoch)
        progress = await asyncio.to_thread(ack.progress)
        state = (sent_counts(sent, brokers), answer_counts(progress, epoch, brokers))
        if state != last_state:
            last_state, still_since = state, time.monotonic()
        elif state[0] == state[1] and enough(sent) and time.monotonic() - still_since >= QUIET_S:
            return sent
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout} s: sent {state[0]}, answered {state[1]}")
        await asyncio.sleep(POLL_S)


def failover_told(brokers: Sequence[int], partitions: int) -> Callable[[Sent], bool]:
    """Every broker got a LeaderAndIsr and an UpdateMetadata carrying every partition."""
    return lambda sent: all(
        sent.get(b, {}).get("LeaderAndIsr") and partitions in sent.get(b, {}).get("UpdateMetadata", [])
        for b in brokers
    )


async def kafka_takeover(
    case: FailoverCase, controller: KafkaController, zk: AsyncZooKeeper, after: int, cpu_before: float | None
) -> dict[str, Any]:
    """Kafka's controller wins an election above epoch ``after`` in ``case``'s cluster: until its
    failover is acknowledged, the figures ``case.failover`` records for ours (those only our event log
    has are absent). ``cpu_before``: its CPU seconds when the takeover was caused (None: take them when
    the election is seen)."""
    brokers = case.cluster.brokers
    ack_before = case.ack_cpu_seconds()
    stall_before, wall_before = cpu_stall_us(), time.monotonic()
    await wait_elected(zk, controller, after, START_TIMEOUT_S)
    at_election = cpu_seconds(controller.pid) if cpu_before is None else cpu_before
    epoch, elected_at = await last_election(case.connect)
    told = failover_told(brokers, case.partitions)
    sent = await settle(controller, case.ack, epoch, brokers, told, case.timeout, "acknowledged failover")
    peak, cpu = peak_rss_mib(controller.pid), cpu_seconds(controller.pid)
    stalled = stall_share(stall_before, cpu_stall_us(), time.monotonic() - wall_before)
    return {
        "controller_epoch": epoch,
        "start_to_elected_s": None
        if cpu_before is not None
        else round(elected_at - controller.started_at, 3),
        **await case.acknowledged(sent),
        "controller_peak_rss_mib": peak,
        "controller_cpu_s": cpu,
        "controller_cpu_after_election_s": None
        if cpu is None or at_election is None
        else round(cpu - at_election, 2),
        "ack_brokers_cpu_s": case.ack_cpu_since(ack_before),
        "cpu_stall_share": stalled,
    }


async def kafka_failover(
    case: FailoverCase, index: int, kafka: KafkaSettings, reelections: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A Kafka broker started while ``/controller`` is free takes over (cold: the JVM's first); then
    ``reelections`` warm takeovers by the same JVM, each caused by deleting ``/controller`` (Kafka's
    controller resigns and runs again). The cold record and the warm ones."""
    controller = KafkaController(case.workdir / f"kafka-{case.name}-{index}", case.connect, kafka)
    warm: list[dict[str, Any]] = []
    zk = AsyncZooKeeper(case.connect)
    await zk.start()
    try:
        epoch, _ = await last_election(case.connect)
        controller.start()
        cold = await kafka_takeover(case, controller, zk, epoch, None)
        for _ in range(reelections):
            await wait_idle(zk, controller, case.timeout)
            cpu_before = cpu_seconds(controller.pid)
            await delete_controller(case.connect)
            warm.append(
                await kafka_takeover(
                    case,
                    controller,
                    zk,
                    (warm or [cold])[-1]["controller_epoch"],
                    cpu_before,
                )
            )
    finally:
        await zk.close()
        controller.stop()
    return cold, warm


def median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return round(statistics.median(values), 3) if values else None


def side(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One implementation's takeovers of a kind in a failover case: medians and every run."""
    return {
        "median_s": median(runs, "elected_to_last_ack_s"),
        "runs_s": [r["elected_to_last_ack_s"] for r in runs],
        "median_controller_cpu_after_election_s": median(runs, "controller_cpu_after_election_s"),
        "median_ack_brokers_cpu_s": median(runs, "ack_brokers_cpu_s"),
        "median_cpu_stall_share": median(runs, "cpu_stall_share"),
        "runs": runs,
    }


def compared(ours: list[dict[str, Any]], kafka: list[dict[str, Any]], floor: float | None) -> dict[str, Any]:
    """Both sides of one kind of takeover, and their ratios to the floor and to each other."""
    a, b = side(ours), side(kafka)
    return {
        "ours": a,
        "kafka": b,
        "ours_over_floor": ratio(a["median_s"], floor),
        "kafka_over_floor": ratio(b["median_s"], floor),
        "ours_over_kafka": ratio(a["median_s"], b["median_s"]),
        "cpu_after_election_ours_over_kafka": ratio(
            a["median_controller_cpu_after_election_s"], b["median_controller_cpu_after_election_s"]
        ),
    }


async def failover_case(
    server: ZooKeeperServer, partitions: int, args: argparse.Namespace, workdir: Path
) -> dict[str, Any]:
    """``args.runs`` processes of each implementation, taking turns in one cluster: each takes over
    cold, then ``args.reelections`` times warm."""
    case = FailoverCase(server, partitions, args.brokers, workdir, timeout=args.timeout, ibp=IBP)
    kafka_cold: list[dict[str, Any]] = []
    kafka_warm: list[dict[str, Any]] = []

    def show(who: str, runs: list[dict[str, Any]]) -> None:
        print(f"  {who:<6} elected -> last ack {[r['elected_to_last_ack_s'] for r in runs]} s", flush=True)

    try:
        await case.start()
        for i in range(args.runs):
            warm_before = len(case.warm_runs)
            ours = await case.failover(args.reelections)
            show("ours", [ours, *case.warm_runs[warm_before:]])
            cold, warm = await kafka_failover(case, i, args.kafka, args.reelections)
            case.takeovers += 1 + len(warm)
            kafka_cold.append(cold)
            kafka_warm += warm
            show("kafka", [cold, *warm])
    finally:
        case.stop()
    floor = case.state_read_s
    return {
        "partitions": partitions,
        "brokers": args.brokers,
        "replication_factor": 3,
        "figure": "elected_to_last_ack_s",
        "floor": "partition_state_read_s",
        "floor_s": None if floor is None else round(floor, 3),
        "cold": compared(case.runs, kafka_cold, floor),
        "warm": compared(case.warm_runs, kafka_warm, floor) if args.reelections else None,
        "ours_detail": case.result(),
        "ours_detail_note": "bench.failover's figures of our cold takeovers; its request and byte counts "
        "are per takeover of either implementation (the ack brokers served both)",
    }


def shutdown_told(before: Counts) -> Callable[[Sent], bool]:
    """Some LeaderAndIsr or UpdateMetadata sent after the ``before`` counts."""
    return lambda sent: sent_counts(sent, list(before)) != before


async def kafka_controlled_shutdown(
    server: ZooKeeperServer, index: int, partitions: int, workdir: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """``bench.controlled_shutdown``'s run with Kafka's controller: a fresh cluster, Kafka's failover
    acknowledged (then ``args.reelections`` more), then broker 1's ControlledShutdown v3 to Kafka's
    inter-broker listener once Kafka's controller is idle."""
    timeout = args.timeout
    name = f"anchor-shutdown-kafka-{index}"
    connect = f"{server.connect_string}/{name}"
    await ensure_chroot(connect)
    cluster = Cluster(partitions, SHUTDOWN_BROKERS, leader=SHUTTING_DOWN)
    zk = AsyncZooKeeper(connect)
    await zk.start()
    ack = AckBrokers(len(SHUTDOWN_BROKERS), zookeeper=connect, ibp=IBP)
    controller = KafkaController(workdir / name, connect, args.kafka)
    version = control_wire(IBP).controlled_shutdown
    try:
        await populate(zk, cluster)
        written, write_s = await time_state_write(zk, cluster)
        epochs = ack.start()
        controller.start()
        epoch = await wait_elected(zk, controller, 0, START_TIMEOUT_S)
        told = failover_told(SHUTDOWN_BROKERS, partitions)
        sent = await settle(controller, ack, epoch, SHUTDOWN_BROKERS, told, timeout, "acknowledged failover")
        for _ in range(args.reelections):
            await wait_idle(zk, controller, timeout)
            await delete_controller(connect)
            epoch = await wait_elected(zk, controller, epoch, START_TIMEOUT_S)
            sent = await settle(
                controller, ack, epoch, SHUTDOWN_BROKERS, told, timeout, "acknowledged failover"
            )
        await wait_idle(zk, controller, timeout)
        before = sent_counts(sent, SHUTDOWN_BROKERS)
        cpu_before = cpu_seconds(controller.pid)
        sent_at, seconds, response = await shutdown_request(
            await controller_endpoint(zk), epochs[SHUTTING_DOWN].epoch, version
        )
        cpu_after = cpu_seconds(controller.pid)
        checked = await verify(zk, cluster)
        await settle(
            controller, ack, epoch, SHUTDOWN_BROKERS, shutdown_told(before), 60, "acknowledged shutdown"
        )
        progress = await asyncio.to_thread(ack.progress)
        peak = peak_rss_mib(controller.pid)
    finally:
        controller.stop()
        stats = merge_stats(ack.stop())
        await zk.close()
    return shutdown_result(
        partitions,
        args.reelections,
        version,
        (written, write_s),
        (seconds, response),
        {
            "controller_cpu_s": cpu_used(cpu_before, cpu_after),
            "request_to_last_ack_s": last_ack_after(progress, epoch, sent_at),
        },
        checked,
        stats,
        peak,
    )


async def shutdown_case(server: ZooKeeperServer, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """``args.shutdown_runs`` controlled shutdowns per implementation, taking turns, each on a fresh
    cluster."""
    ours: list[dict[str, Any]] = []
    kafka: list[dict[str, Any]] = []
    partitions = args.shutdown_partitions
    for i in range(args.shutdown_runs):
        r = await one_run(
            server,
            i,
            partitions,
            workdir,
            ibp=IBP,
            prefix="anchor-shutdown-ours",
            reelections=args.reelections,
        )
        ours.append(r)
        print(f"  ours   request -> response {r['request_to_response_s']:.3f} s", flush=True)
        r = await kafka_controlled_shutdown(server, i, partitions, workdir, args)
        kafka.append(r)
        print(f"  kafka  request -> response {r['request_to_response_s']:.3f} s", flush=True)
    ours_side, kafka_side = summary(ours), summary(kafka)
    floor = statistics.median(r["partition_state_write_s"] for r in ours + kafka)
    return {
        "partitions": partitions,
        "brokers": len(SHUTDOWN_BROKERS),
        "replication_factor": 3,
        "figure": "request_to_response_s",
        "floor": "partition_state_write_s",
        "floor_s": round(floor, 3),
        "ours": {"median_s": ours_side["median_request_to_response_s"], **ours_side, "runs": ours},
        "kafka": {"median_s": kafka_side["median_request_to_response_s"], **kafka_side, "runs": kafka},
        "ours_over_floor": ratio(ours_side["median_request_to_response_s"], floor),
        "kafka_over_floor": ratio(kafka_side["median_request_to_response_s"], floor),
        "ours_over_kafka": ratio(
            ours_side["median_request_to_response_s"], kafka_side["median_request_to_response_s"]
        ),
    }


async def run_all(server: ZooKeeperServer, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    failover = []
    for partitions in args.partition_counts:
        print(f"failover: {partitions} partitions over {args.brokers} brokers", flush=True)
        failover.append(await failover_case(server, partitions, args, workdir))
    shutdown = None
    if args.shutdown_runs:
        print(f"controlled shutdown of a broker leading {args.shutdown_partitions} partitions", flush=True)
        shutdown = await shutdown_case(server, args, workdir)
    return {"failover": failover, "controlled_shutdown": shutdown}


def table_rows(report: dict[str, Any]) -> list[tuple[str, Any, Any, Any, Any, Any, Any]]:
    """(figure, ours s, Kafka's s, floor s, ours/floor, Kafka/floor, ours/Kafka) per line."""
    rows = []
    cases = []
    for c in report["failover"]:
        for kind in ("cold", "warm"):
            if c[kind] is not None:
                cases.append((f"failover, {c['partitions']:,} partitions, {kind}", {**c, **c[kind]}))
    if report["controlled_shutdown"] is not None:
        c = report["controlled_shutdown"]
        cases.append((f"controlled shutdown, {c['partitions']:,} led", c))
    for label, c in cases:
        rows.append(
            (
                label,
                c["ours"]["median_s"],
                c["kafka"]["median_s"],
                c["floor_s"],
                c["ours_over_floor"],
                c["kafka_over_floor"],
                c["ours_over_kafka"],
            )
        )
    return rows


def print_table(report: dict[str, Any]) -> None:
    head = ("ours s", "kafka s", "floor s", "ours/floor", "kafka/floor", "ours/kafka")
    print(f"{'figure':<36}" + "".join(f"{h:>12}" for h in head))
    for label, *cells in table_rows(report):
        print(f"{label:<36}" + "".join(f"{'-' if c is None else c:>12}" for c in cells))


def java_version() -> str | None:
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (done.stderr or done.stdout).splitlines()
    return lines[0] if lines else None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.kafka_anchor",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--partitions", default="10000,100000", help="failover cases, comma-separated")
    parser.add_argument("--brokers", type=int, default=3, help="simulated brokers of the failover cases")
    parser.add_argument(
        "--runs",
        type=int,
        default=3,
        help="controller processes per implementation and case (cold takeovers)",
    )
    parser.add_argument(
        "--reelections",
        type=int,
        default=1,
        help="warm takeovers per process after its first, each caused by deleting /controller",
    )
    parser.add_argument("--shutdown-partitions", type=int, default=10_000, help="partitions broker 1 leads")
    parser.add_argument(
        "--shutdown-runs", type=int, default=3, help="controlled shutdowns per implementation (0: none)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="2,000 partitions, one run of each (a smoke run, not a figure)"
    )
    parser.add_argument("--heap", default="2g", help="the ZooKeeper JVM's -Xmx")
    parser.add_argument("--kafka-heap", default="2g", help="the Kafka broker's -Xms and -Xmx")
    parser.add_argument(
        "--kafka-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a property of Kafka's broker beyond the bench's (repeatable), e.g. "
        "zookeeper.max.in.flight.requests=100; the anchor is Kafka at its defaults",
    )
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait for one takeover")
    parser.add_argument(
        "--workdir",
        type=Path,
        help="keep ZooKeeper's data and every process's logs here (default: a temporary directory, removed)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "kafka_anchor.json"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.partitions, args.runs, args.shutdown_partitions, args.shutdown_runs = "2000", 1, 2000, 1
        args.reelections = 1
    args.partition_counts = [int(p) for p in args.partitions.split(",")]
    overrides = dict(item.partition("=")[::2] for item in args.kafka_config)
    if any(not key or not value for key, value in overrides.items()):
        parser.error("--kafka-config takes KEY=VALUE")
    args.kafka = KafkaSettings(args.kafka_heap, overrides)
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    classpath(BROKER)  # JarsMissing, naming `make kafka`, before anything starts
    started = datetime.now(UTC)
    load_before, stall_before, wall_before = os.getloadavg(), cpu_stall_us(), time.monotonic()
    with zookeeper_workdir("kafka-anchor-bench-", args.heap, args.workdir) as (server, workdir):
        results = asyncio.run(run_all(server, args, workdir))
    load = {
        "loadavg_1_5_15_before": [round(v, 2) for v in load_before],
        "loadavg_1_5_15_after": [round(v, 2) for v in os.getloadavg()],
        "cpu_stall_share": stall_share(stall_before, cpu_stall_us(), time.monotonic() - wall_before),
    }
    report = {
        "benchmark": "kafka_anchor",
        "machine": machine(),
        "date": started.isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - wall_before, 1),
        "load": load,
        "command": " ".join(
            [Path(sys.executable).name, "-m", "bench.kafka_anchor", *(sys.argv[1:] if argv is None else argv)]
        ),
        "kafka": {
            "version": KAFKA_39,
            "java": java_version(),
            "heap": args.kafka.heap,
            "jvm_options": list(KAFKA_PERFORMANCE_OPTS),
            "overrides": args.kafka.overrides,
        },
        "inter_broker_protocol_version": IBP,
        "zookeeper_heap": args.heap,
        **results,
    }
    print()
    print_table(report)
    print(f"load: {load}")
    write_report(args.out, report)


if __name__ == "__main__":
    main()
