"""Kafka's controller taking over and shutting a broker down, timed from outside as ours is.

Kafka's controller writes no event log of ours: a run is over when every LeaderAndIsr and
UpdateMetadata its state-change log says it sent (``settle``) has been answered by the ack brokers, and
the figures are those ``bench.failover`` and ``bench.controlled_shutdown`` record for our controller.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.ack_brokers import AckBrokers, merge_progress, merge_stats
from bench.controlled_shutdown import (
    BROKERS as SHUTDOWN_BROKERS,
)
from bench.controlled_shutdown import (
    SHUTTING_DOWN,
    cpu_used,
    last_ack_after,
    shutdown_request,
    shutdown_result,
    time_state_write,
    verify,
)
from bench.failover import FailoverCase
from bench.kafka_controller import (
    IBP,
    POLL_S,
    START_TIMEOUT_S,
    KafkaController,
    KafkaSettings,
    controller_endpoint,
    wait_elected,
    wait_idle,
)
from bench.measure import cpu_seconds, cpu_stall_us, peak_rss_mib, stall_share
from bench.takeover import ACK_APIS, QUIET_S, Sent, delete_controller, last_election
from bench.zk_populate import Cluster, ensure_chroot, populate
from protocol.ibp import control_wire
from zkserver.server import ZooKeeperServer
from zkstore.aio import AsyncZooKeeper

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
