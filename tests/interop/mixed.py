"""One cluster of both implementations: two of our controllers, two of our brokers, two Kafka 3.9 brokers.

Everything runs at IBP 3.9 with our brokers' listener names (clients and inter-broker traffic on
PLAINTEXT, control requests on CONTROLLER), so whichever implementation holds ``/controller`` drives every
broker, and clients bootstrapped on any broker reach whichever holds it. ``Workload`` runs Kafka's own
VerifiableProducer (acks=all, idempotent) and a group of VerifiableConsumers through the cluster, and
judges it at the end: every acknowledged record consumed by the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.java_tool import ToolsMissing, java_prefix
from chaos.verifiable import KafkaGroupWorkload, KafkaProducerWorkload, launched
from cluster.processes import BrokerProcess, ControllerProcess
from daemon.eventlog import EventLog
from kafkapeer.broker import KafkaBroker
from tests.interop.conftest import KafkaBrokers
from tests.interop.test_kafka_controller import IBP, START_TIMEOUT_S, kafka_at_39, ours_at_39
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.topic_writes import create_topic

OUR_CONTROLLERS = (1001, 1002)
OUR_BROKERS = (1, 2)
KAFKA_BROKERS = (3, 4)
TOPIC = "passing"
ASSIGNMENT = {0: (1, 3, 2), 1: (3, 2, 4), 2: (2, 4, 1), 3: (4, 1, 3)}
"""RF 3, every partition on both implementations, every broker a preferred leader once."""
RATE = 40
"""Records per second from the producer: enough to see progress within a second or two."""


@dataclass
class Mixed:
    cluster: Cluster
    kafka: KafkaBrokers
    zk: AsyncZooKeeper
    controllers: dict[int, ControllerProcess] = field(default_factory=dict)
    ours: dict[int, BrokerProcess] = field(default_factory=dict)
    kafkas: dict[int, KafkaBroker] = field(default_factory=dict)
    holders: list[tuple[int, int]] = field(default_factory=list)
    """(epoch, id) of every controller seen in ``/controller``, in order."""

    def start_controller(self, controller_id: int) -> ControllerProcess:
        process = self.cluster.start_controller(controller_id, inter_broker_protocol_version=IBP)
        self.controllers[controller_id] = process
        return process

    def restart_controller(self, controller_id: int) -> ControllerProcess:
        """The same candidate as a new process (killed first if it still runs)."""
        old = self.controllers[controller_id]
        old.kill()
        new = old.relaunch(generation=len(self.cluster.processes))
        self.cluster.processes.append(new)
        self.controllers[controller_id] = new
        return new.start()

    def bootstrap(self) -> str:
        ours = ["{}:{}".format(*b.endpoint("PLAINTEXT")) for b in self.ours.values()]
        return ",".join([*ours, *(k.bootstrap() for k in self.kafkas.values())])

    async def holder(self) -> tuple[int, int]:
        """(controller epoch, id) of whoever holds ``/controller`` now; waits while nobody does."""

        async def held() -> tuple[int, int] | None:
            try:
                data, _ = await self.zk.get(znodes.CONTROLLER)
                epoch, _ = await self.zk.get(znodes.CONTROLLER_EPOCH)
            except Exception:
                return None
            return int(epoch), int(json.loads(data)["brokerid"])

        found = await wait_until(held, "a controller in /controller", timeout=START_TIMEOUT_S, interval=0.1)
        if not self.holders or self.holders[-1] != found:
            self.holders.append(found)
        return found

    async def new_holder(self, after_epoch: int) -> tuple[int, int]:
        """The first controller elected after ``after_epoch``."""

        async def elected() -> tuple[int, int] | None:
            found = await self.holder()
            return found if found[0] > after_epoch else None

        return await wait_until(elected, f"a controller after epoch {after_epoch}", timeout=START_TIMEOUT_S)

    def is_ours(self, controller_id: int) -> bool:
        return controller_id in OUR_CONTROLLERS


async def mixed_cluster(cluster: Cluster, kafka: KafkaBrokers, zk: AsyncZooKeeper) -> Mixed:
    """Our controller 1001 elected first, 1002 standing by, then the four brokers and the topic, led on
    both kinds of broker."""
    mixed = Mixed(cluster, kafka, zk)
    await mixed.start_controller(OUR_CONTROLLERS[0]).wait_kind("controller_elected", timeout=30)
    await mixed.start_controller(OUR_CONTROLLERS[1]).wait_kind("controller_started", timeout=30)
    for broker_id in OUR_BROKERS:
        mixed.ours[broker_id] = await ours_at_39(cluster, broker_id, **{"replica.lag.time.max.ms": 5000})
    for broker_id in KAFKA_BROKERS:
        mixed.kafkas[broker_id] = await kafka_at_39(kafka, zk, broker_id)
    await create_topic(zk, TOPIC, ASSIGNMENT)
    await led_everywhere(mixed)
    await mixed.holder()
    return mixed


async def led_everywhere(mixed: Mixed, topic: str = TOPIC) -> None:
    """Every partition of ``topic`` has a live leader and a full ISR in ZooKeeper."""
    live = set(mixed.ours) | set(mixed.kafkas)

    async def led() -> bool:
        for partition, replicas in ASSIGNMENT.items():
            try:
                data, _ = await mixed.zk.get(znodes.partition_state_path(topic, partition))
            except Exception:
                return False
            state = json.loads(data)
            if state["leader"] not in live or sorted(state["isr"]) != sorted(replicas):
                return False
        return True

    await wait_until(led, f"{topic} led with full ISRs", timeout=START_TIMEOUT_S, interval=0.2)


@dataclass
class Workload:
    producer: KafkaProducerWorkload
    group: KafkaGroupWorkload
    history: Path

    async def progress(self, records: int = 2 * RATE, what: str = "") -> None:
        """Wait until ``records`` more are acknowledged and the group has consumed as many more."""
        acked = self.producer.acked
        consumed = sum(m.consumed for m in self.group.members)

        def moved() -> bool:
            return (
                self.producer.acked >= acked + records
                and sum(m.consumed for m in self.group.members) >= consumed + records
            )

        await wait_until(moved, f"{records} more records produced and consumed {what}".strip(), timeout=90)

    def judge(self) -> dict[str, Any]:
        """Every acknowledged value consumed by the group; the counts."""
        acked, consumed, failed = set(), set(), 0
        for line in self.history.read_text().splitlines():
            event = json.loads(line)
            if event["kind"] == "produce_acked":
                acked.add(event["value"])
            elif event["kind"] == "group_consumed":
                consumed.add(event["value"])
            elif event["kind"] == "produce_failed":
                failed += 1
        lost = sorted(acked - consumed)
        assert not lost, f"{len(lost)} acknowledged records never consumed, e.g. {lost[:5]}"
        return {"acked": len(acked), "consumed": len(consumed), "failed": failed}


@contextlib.asynccontextmanager
async def workload(mixed: Mixed, run_dir: Path) -> AsyncIterator[Workload]:
    """Kafka's producer and group running through ``mixed``; stopped, drained and judged on the way out
    (only when the body succeeded)."""
    try:
        java = java_prefix()
    except ToolsMissing as exc:
        raise AssertionError(f"Kafka's tools cannot run, so this interop test cannot: {exc}") from None
    await asyncio.to_thread(run_dir.mkdir, parents=True, exist_ok=True)
    history = EventLog(run_dir / "history.jsonl", "workload")
    topics = {TOPIC: "all"}
    async with launched(
        java, mixed.bootstrap(), "mixed", run_dir, history, topics, rate=RATE, idempotent=True, group=True
    ) as (producers, group):
        assert group is not None
        run = Workload(producers[0], group, run_dir / "history.jsonl")
        await run.progress(what="before any fault")
        yield run
        await asyncio.to_thread(run.producer.stop)
        drained = await asyncio.to_thread(group.drain, run.producer.acked_ends, 60)
        await asyncio.to_thread(group.stop)
        assert drained, "the group did not commit past every acknowledged record"
