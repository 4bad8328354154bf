"""Control passes between our controller and Apache Kafka 3.9's, and back, while Kafka's own clients run.

One cluster (``tests/interop/mixed.py``): our controllers 1001 and 1002, our brokers 1 and 2, Kafka 3.9
brokers 3 and 4, a topic with replicas on both kinds, Kafka's VerifiableProducer (acks=all, idempotent)
and a group of VerifiableConsumers. After each step the records keep flowing; at the end every
acknowledged record has been consumed. Every Kafka broker runs a KafkaController of its own that
claims ``/controller`` whenever it is free, so who wins an election among both kinds is a race: the
steps accept either winner where the issue says "whichever wins", and make the next holder certain
where a step needs one kind (only that kind's candidates left running).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.interop.conftest import KafkaBrokers
from tests.interop.mixed import (
    ASSIGNMENT,
    KAFKA_BROKERS,
    OUR_CONTROLLERS,
    TOPIC,
    Mixed,
    led_everywhere,
    mixed_cluster,
    workload,
)
from tests.interop.test_kafka_controller import START_TIMEOUT_S, registered
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper


async def kafka_holds_it(mixed: Mixed) -> int:
    """Make a Kafka broker the controller: kill our candidates while one holds ``/controller`` (the next
    holder can only be a Kafka broker), then start them again as standbys. Returns the holder."""
    epoch, holder = await mixed.holder()
    while mixed.is_ours(holder):
        for controller_id in OUR_CONTROLLERS:
            mixed.controllers[controller_id].kill()
        epoch, holder = await mixed.new_holder(epoch)
    for controller_id in OUR_CONTROLLERS:
        if mixed.controllers[controller_id].process.poll() is not None:  # type: ignore[union-attr]
            await mixed.restart_controller(controller_id).wait_kind("controller_started", timeout=30)
    return holder


async def ours_hold_it(mixed: Mixed) -> int:
    """Make one of our candidates the controller while a Kafka broker holds it: stop the other Kafka
    broker (a controlled shutdown through Kafka's controller), SIGKILL the holder (only our candidates
    are left to claim ``/controller`` once its session expires), then start both Kafka brokers again."""
    epoch, holder = await mixed.holder()
    assert holder in KAFKA_BROKERS
    (other,) = (b for b in KAFKA_BROKERS if b != holder)
    await asyncio.to_thread(mixed.kafkas[other].stop)  # the JVM exits 143 after its shutdown hooks
    assert mixed.kafkas[other].log_lines("Controlled shutdown request returned successfully")
    mixed.kafkas[holder].kill()
    epoch, winner = await mixed.new_holder(epoch)
    assert mixed.is_ours(winner), f"{winner} won /controller with no Kafka broker running"
    for broker_id in (holder, other):
        mixed.kafkas[broker_id].start()
        await registered(mixed.zk, mixed.kafkas[broker_id])
    return winner


async def test_control_passes_from_ours_to_kafkas_controller_and_back_with_nothing_lost(
    cluster: Cluster, kafka: KafkaBrokers, zk: AsyncZooKeeper, tmp_path: Path
) -> None:
    mixed = await mixed_cluster(cluster, kafka, zk)
    async with workload(mixed, tmp_path / "workload") as run:
        # SIGKILL our active controller: our standby or a Kafka broker wins, and the cluster goes on.
        epoch, first = await mixed.holder()
        assert first == OUR_CONTROLLERS[0]
        mixed.controllers[first].kill()
        epoch, winner = await mixed.new_holder(epoch)
        await run.progress(what=f"under controller {winner}")

        holder = await kafka_holds_it(mixed)
        await run.progress(what=f"under Kafka's controller on broker {holder}")

        # Kafka's controller bounces our broker 2 faster than its session: a new czxid, a new generation.
        mixed.ours[2] = cluster.restart(2)
        await mixed.ours[2].wait_kind("broker_started", timeout=START_TIMEOUT_S)
        await led_everywhere(mixed)
        await run.progress(what="after our broker's bounce under Kafka's controller")

        winner = await ours_hold_it(mixed)
        await led_everywhere(mixed)
        await run.progress(what=f"under our controller {winner} again")

    counts = run.judge()
    kinds = {"ours" if mixed.is_ours(c) else "kafka" for _, c in mixed.holders}
    assert kinds == {"ours", "kafka"}, mixed.holders
    assert counts["acked"] >= 5 * 2 * 40


async def partitions_led_by(mixed: Mixed, broker_id: int) -> list[int]:
    """The partitions of the topic ``broker_id`` leads, as ZooKeeper says."""
    led = []
    for partition in ASSIGNMENT:
        data, _ = await mixed.zk.get(znodes.partition_state_path(TOPIC, partition))
        if json.loads(data)["leader"] == broker_id:
            led.append(partition)
    return led


@pytest.mark.mixed
async def test_controlled_shutdowns_cross_implementations(
    cluster: Cluster, kafka: KafkaBrokers, zk: AsyncZooKeeper, tmp_path: Path
) -> None:
    """Our controller shuts a Kafka broker down with its leadership moved first, and Kafka's controller
    ours. (A Kafka broker cannot be bounced inside its session: it refuses to start while its old
    registration stands; ``test_our_controller`` shows our controller telling its restart by czxid.)"""
    mixed = await mixed_cluster(cluster, kafka, zk)
    controller = mixed.controllers[OUR_CONTROLLERS[0]]
    async with workload(mixed, tmp_path / "workload") as run:
        assert await partitions_led_by(mixed, 3)  # the preferred leader of partition 1
        await asyncio.to_thread(mixed.kafkas[3].stop)
        handled = await controller.wait_kind("controlled_shutdown_handled", timeout=30, broker=3)
        assert handled["remaining"] == 0 and handled["led"] >= 1
        assert mixed.kafkas[3].log_lines("Controlled shutdown request returned successfully")
        assert not await partitions_led_by(mixed, 3)
        mixed.kafkas[3].start()
        await led_everywhere(mixed)
        await run.progress(what="after Kafka broker 3's controlled shutdown by our controller")

        holder = await kafka_holds_it(mixed)
        await run.progress(what=f"under Kafka's controller on broker {holder}")
        assert await asyncio.to_thread(mixed.ours[1].stop) == 0
        shutdown = mixed.ours[1].of_kind("controlled_shutdown_attempt")
        assert shutdown and shutdown[-1]["error"] == "NONE" and not shutdown[-1]["remaining"]
        assert shutdown[-1]["api_version"] == 3
        assert not await partitions_led_by(mixed, 1)
        mixed.ours[1] = cluster.restart(1)
        await led_everywhere(mixed)
        await run.progress(what="after our broker 1's controlled shutdown by Kafka's controller")
    run.judge()


@pytest.mark.mixed
async def test_a_controller_of_either_kind_whose_session_expires_is_replaced_and_fenced(
    cluster: Cluster, kafka: KafkaBrokers, zk: AsyncZooKeeper, tmp_path: Path
) -> None:
    """SIGSTOP the active controller past its ZooKeeper session (6 s), ours then Kafka's: another
    candidate is elected with a higher epoch, the paused one resumes as a follower (ours resigns; a
    Kafka broker re-registers with a new czxid), and the records keep flowing."""
    mixed = await mixed_cluster(cluster, kafka, zk)
    async with workload(mixed, tmp_path / "workload") as run:
        epoch, first = await mixed.holder()
        paused = mixed.controllers[first]
        paused.pause()
        try:
            epoch, winner = await mixed.new_holder(epoch)
        finally:
            paused.resume()
        assert winner != first
        resigned = await paused.wait_kind("controller_resigned", timeout=30)
        assert resigned["controller_epoch"] < epoch
        await run.progress(what=f"after our controller's session expired, under {winner}")

        holder = await kafka_holds_it(mixed)
        epoch, _ = await mixed.holder()
        czxid = (await zk.get(f"{znodes.BROKER_IDS}/{holder}"))[1].czxid
        mixed.kafkas[holder].pause()
        try:
            epoch, winner = await mixed.new_holder(epoch)
        finally:
            mixed.kafkas[holder].resume()
        assert winner != holder

        async def registered_again() -> bool:
            stat = await zk.exists(f"{znodes.BROKER_IDS}/{holder}")
            return stat is not None and stat.czxid > czxid

        await wait_until(registered_again, f"Kafka broker {holder} registered again", timeout=START_TIMEOUT_S)
        await led_everywhere(mixed)
        await run.progress(what=f"after Kafka's controller's session expired, under {winner}")
    run.judge()
