"""One chaos run against a running cluster (local processes or a compose project), from topic to verdict.

Order matters: faults stop and are healed before the producer stops, so the last records meet a
whole cluster; the read-back waits until every partition has a leader and its full replica set in
the ISR, so that it reads what every replica agrees on rather than a leader's view mid-recovery.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from chaos import ChaosError, controllers, safety, verifiable
from chaos.availability import availability
from chaos.faults import Lanes, fault_loop
from chaos.group_workload import GroupWorkload
from chaos.java_tool import java_prefix
from chaos.schedule import DEFAULT_FAULTS, FaultSchedule
from chaos.target import LocalCluster, RunInjector, Target
from chaos.txn_verdict import TxnVerdict, judge_transactions
from chaos.txn_workload import TransactionalWorkload, read_transactional
from chaos.verdict import Verdict, judge, read_lines
from chaos.workload import ProducerWorkload, read_back
from cluster import verify_replicas
from daemon.eventlog import EventLog
from placement.errors import AdminError
from zkstore import cluster_reads, topic_writes
from zkstore.aio import AsyncZooKeeper

log = logging.getLogger("chaos.run")

REPLICATED_TIMEOUT_S = 120.0
LED_TIMEOUT_S = 60.0
"""How long a new topic's partitions may take to get their first leaders."""
VERIFY_TIMEOUT_S = 30.0
LANE_SEED_STEP = 7919
"""The seed of a mixed run's lane n is the run's seed plus n times this (a prime, so lanes differ)."""
PRODUCER_STOP_TIMEOUT_S = 35.0
GROUP_DRAIN_TIMEOUT_S = 60.0
"""How long the consumer group may take to commit past the last acknowledged record after the faults."""
WORKLOADS = ("default", "kafka-verifiable")
"""``default``: librdkafka's producers and group (``chaos.workload``, ``chaos.group_workload``);
``kafka-verifiable``: Kafka's own VerifiableProducer and VerifiableConsumer (``chaos.verifiable``)."""


class Producing(Protocol):
    """What a run needs of a producer workload: its topic, its counts, and a stop."""

    topic: str
    acks: str
    acked: int
    failed: int
    acked_ends: dict[int, int]

    def stop(self, flush_timeout_s: float | None = None) -> None: ...


class Grouping(Protocol):
    """What a run needs of a consumer group workload: its name, a drain, and a stop."""

    group: str

    def drain(self, acked_ends: Mapping[int, int], timeout_s: float) -> bool: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class RunConfig:
    directory: Path
    duration_s: float = 60.0
    faults: tuple[str, ...] = DEFAULT_FAULTS
    roles: tuple[str, ...] = ("broker", "controller")
    interval_s: float = 8.0
    rate: int = 200
    topic: str = "chaos"
    partitions: int = 6
    replication_factor: int = 3
    seed: int | None = None
    """None picks one at random; the run records the seed it used."""
    acks1_topic: str | None = "chaos-acks1"
    """A second topic written with acks=1 at half the rate: its losses are reported, not failed (an
    acks=1 record only the fenced leader had is lost, as in Kafka); None for none."""
    overlap: int = 1
    """Fault loops running at once (``mixed``: faults overlap, never on one node, one cut or one
    ZooKeeper fault); each has its own schedule, seeded from the run's seed."""
    idempotent: bool = True
    """The acks=all producer is idempotent (the default of modern clients)."""
    group: bool = True
    """A consumer group of three members consumes the acks=all topic and commits as it goes."""
    workload: str = "default"
    """Who produces and consumes: one of :data:`WORKLOADS`."""
    transactions: bool = True
    """The transactional workload (``chaos.txn_workload``) beside the default one: a transactional
    producer to ``<topic>-txn`` and a consume-transform-produce loop from the topic to ``<topic>-eos``."""


@dataclass
class RunResult:
    run_id: str
    run_dir: Path
    seed: int
    verdict: Verdict
    crashed: list[str] = field(default_factory=list)
    """Nodes found not running that no fault had taken down."""
    unsafe: list[str] = field(default_factory=list)
    """Control-plane safety rules broken, from the daemons' logs (``chaos.safety``)."""
    inconsistent: list[str] = field(default_factory=list)
    """Replicas that do not hold their leader's batches up to the high watermark."""
    availability: dict[str, dict[str, float]] = field(default_factory=dict)
    """Fault kind -> the longest time without a controller and a partition without a leader."""
    controllers: dict[str, int] = field(default_factory=dict)
    """Implementation (``ours``, ``kafka``) -> controller epochs it held during the run."""

    txn: TxnVerdict = field(default_factory=TxnVerdict)
    """The transactional workload's verdict (empty when it did not run)."""

    @property
    def ok(self) -> bool:
        return self.verdict.ok and self.txn.ok and not self.unsafe and not self.inconsistent


def new_run_dir(directory: Path) -> tuple[str, Path]:
    """``DIR/chaos/run-<UTC time>``; a second run within the same second waits for the next one."""
    while True:
        run_id = "run-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        run_dir = directory / "chaos" / run_id
        try:
            run_dir.mkdir(parents=True)
        except FileExistsError:
            time.sleep(0.2)
            continue
        return run_id, run_dir


async def ensure_topic(zk: AsyncZooKeeper, topic: str, partitions: int, rf: int) -> int:
    """Create ``topic`` unless it exists, then wait until every partition has a leader; returns its
    partition count (an existing topic keeps its own)."""
    existing = {t.topic: t for t in await cluster_reads.list_topics(zk)}
    if topic in existing:
        partitions = existing[topic].partition_count
        log.info("topic %s exists with %d partitions; using it", topic, partitions)
    else:
        await topic_writes.create_new_topic(zk, topic, partitions, rf)
        log.info("created topic %s: %d partitions, replication factor %d", topic, partitions, rf)
    deadline = time.monotonic() + LED_TIMEOUT_S
    while True:
        described = await cluster_reads.describe_topics(zk, [topic])
        if len(described) == partitions and all(p.leader is not None and p.leader >= 0 for p in described):
            return partitions
        if time.monotonic() > deadline:
            raise ChaosError(f"topic {topic} has partitions without a leader after {LED_TIMEOUT_S:g} s")
        await asyncio.sleep(0.1)


async def wait_replicated(zk: AsyncZooKeeper, topic: str, timeout_s: float = REPLICATED_TIMEOUT_S) -> None:
    """Until every partition has a leader and its whole replica set in the ISR."""
    deadline = time.monotonic() + timeout_s
    while True:
        partitions = await cluster_reads.describe_topics(zk, [topic])
        short = [p for p in partitions if p.leader is None or p.leader < 0 or set(p.isr) != set(p.replicas)]
        if not short:
            return
        if time.monotonic() > deadline:
            text = "; ".join(
                f"{topic}-{p.partition} leader {p.leader} isr {list(p.isr)} replicas {list(p.replicas)}"
                for p in short
            )
            raise ChaosError(
                f"after {timeout_s:g} s, partitions still without a leader or a full ISR: {text}"
            )
        await asyncio.sleep(0.5)


@contextlib.asynccontextmanager
async def _logs(run_dir: Path) -> AsyncIterator[tuple[EventLog, EventLog]]:
    events = EventLog(run_dir / "events.jsonl", node="chaos")
    history = EventLog(run_dir / "history.jsonl", node="workload")
    try:
        yield events, history
    finally:
        events.close()
        history.close()


async def run(config: RunConfig, target: Target | None = None) -> RunResult:
    """One run against ``target`` (the running local cluster in ``config.directory`` by default):
    topic, faults under a workload, healing, full ISRs, read-back, verdict. Everything it does is in
    the run's two logs."""
    if config.workload not in WORKLOADS:
        raise ChaosError(f"unknown workload {config.workload!r}: one of {', '.join(WORKLOADS)}")
    # Kafka's tools missing (no java, no jars) stop the run before it touches the cluster.
    java = java_prefix() if config.workload == "kafka-verifiable" else None
    target = target or LocalCluster(config.directory)
    directory = target.directory
    seed = config.seed if config.seed is not None else random.randrange(2**31)
    schedules = _schedules(config, target, seed)
    servers = target.bootstrap_servers()
    started = time.monotonic()
    async with target.zookeeper_session() as zk:
        # The topic first: a run that cannot start (say, a replication factor above the brokers)
        # leaves no run directory behind for `list` and the audit.
        topics = {config.topic: "all", **({config.acks1_topic: "1"} if config.acks1_topic else {})}
        counts = {t: await ensure_topic(zk, t, config.partitions, config.replication_factor) for t in topics}
        txn_topics = _transactional_topics(config)
        for t in txn_topics:
            await ensure_topic(zk, t, config.partitions, config.replication_factor)
        run_id, run_dir = new_run_dir(directory)
        log.info("chaos run %s in %s (seed %d)", run_id, run_dir, seed)
        async with _logs(run_dir) as (events, history):
            _emit_started(events, config, run_id, counts[config.topic], seed)
            injector = target.injector(events, zk)
            # Who holds /controller is sampled until the settling is over, so that the rule about one
            # active controller sees a Kafka broker's controller elected meanwhile.
            async with controllers.watching(zk, events):
                async with _workloads(config, java, servers, run_dir, history, topics) as (workloads, group):
                    txn = _start_transactional(config, servers, run_id, history, seed, txn_topics)
                    await _faults_then_heal(config.duration_s, schedules, injector, workloads, group)
                    log.info("faults over and healed; stopping the producers")
                    if txn is not None:
                        await asyncio.to_thread(txn.stop_producer)
                    consumed = await _read_back_all(zk, servers, workloads, counts, history)
                    if group is not None:
                        await _drain_group(group, workloads[0])
                    if txn is not None:
                        await _finish_transactional(zk, servers, txn, workloads[0], history, txn_topics)
                reports = await _verified_replicas(target, [*topics, *txn_topics])
                inconsistent = verify_replicas.record(events, reports)
                await _settle_after_faults(list(read_lines(run_dir / "events.jsonl")))
            run_lines = list(read_lines(run_dir / "events.jsonl"))
            judged_at = datetime.now(UTC)
            daemon_lines = _daemon_lines(target, run_lines)
            figures = availability(daemon_lines, run_lines)
            events.emit("availability", by_fault=figures)
            events.emit(
                "run_finished",
                run_id=run_id,
                acked=sum(w.acked for w in workloads),
                failed=sum(w.failed for w in workloads),
                consumed=consumed,
                duration_s=round(time.monotonic() - started, 3),
            )
        verdict = judge(read_lines(run_dir / "history.jsonl", run_dir / "events.jsonl"))
        txn_verdict = judge_transactions(read_lines(run_dir / "history.jsonl"))
        unsafe = safety.violations(daemon_lines, run_lines, judged_at)
        held = controllers.held_by(run_lines)
        crashed = injector.crashed
        return RunResult(
            run_id, run_dir, seed, verdict, crashed, unsafe, inconsistent, figures, held, txn_verdict
        )


def _schedules(config: RunConfig, target: Target, seed: int) -> list[FaultSchedule]:
    """One fault schedule per lane (``config.overlap``) over the target's nodes, lane n seeded with
    ``seed`` plus n times ``LANE_SEED_STEP``."""
    nodes = target.nodes()
    return [
        FaultSchedule(
            nodes,
            faults=config.faults,
            roles=config.roles,
            interval_s=config.interval_s,
            seed=seed + LANE_SEED_STEP * lane,
            cuts=target.cuts,
        )
        for lane in range(config.overlap)
    ]


def _emit_started(events: EventLog, config: RunConfig, run_id: str, partitions: int, seed: int) -> None:
    """``run_started``: what the run is about to do, with the seed it uses."""
    events.emit(
        "run_started",
        run_id=run_id,
        topic=config.topic,
        partitions=partitions,
        replication_factor=config.replication_factor,
        faults=list(config.faults),
        seed=seed,
        duration_s=float(config.duration_s),
        rate=config.rate,
        interval_s=float(config.interval_s),
        overlap=config.overlap,
        acks1_topic=config.acks1_topic,
    )


@contextlib.asynccontextmanager
async def _workloads(
    config: RunConfig,
    java: list[str] | None,
    servers: str,
    run_dir: Path,
    history: EventLog,
    topics: dict[str, str],
) -> AsyncIterator[tuple[Sequence[Producing], Grouping | None]]:
    """The run's producers (one per topic) and its consumer group, started: librdkafka's, or with
    ``java`` (``kafka-verifiable``) Kafka's own tools, their raw lines kept in ``run_dir``, whose JVMs
    are killed on the way out if the run failed before stopping them."""
    run_id = run_dir.name
    if java is None:
        producers = _start_producers(config, servers, run_id, history, topics)
        group = GroupWorkload(servers, config.topic, run_id, history).start() if config.group else None
        yield producers, group
        return
    async with verifiable.launched(
        java, servers, run_id, run_dir, history, topics,
        rate=config.rate, idempotent=config.idempotent, group=config.group,
    ) as (kafka_producers, kafka_group):  # fmt: skip
        yield kafka_producers, kafka_group


def _start_producers(
    config: RunConfig, servers: str, run_id: str, history: EventLog, topics: dict[str, str]
) -> list[ProducerWorkload]:
    """One started producer per topic (name -> acks): the acks=all one at the run's rate, the acks=1
    one at half of it; only an acks=all producer may be idempotent."""
    return [
        ProducerWorkload(
            servers,
            t,
            run_id,
            config.rate if acks == "all" else max(1, config.rate // 2),
            history,
            acks=acks,
            idempotent=config.idempotent and acks == "all",
        ).start()
        for t, acks in topics.items()
    ]


async def _faults_then_heal(
    duration_s: float,
    schedules: list[FaultSchedule],
    injector: RunInjector,
    workloads: Sequence[Producing],
    group: Grouping | None,
) -> None:
    """Faults for ``duration_s``, then every one healed. When that fails, the producers and the group
    still stop before the failure goes on."""
    try:
        try:
            await _faults_for(duration_s, schedules, injector)
        finally:
            await injector.heal_all()
    except BaseException:
        # The producers still stop, but a failure to stop must not hide why the run ended.
        for workload in workloads:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(workload.stop, PRODUCER_STOP_TIMEOUT_S)
        if group is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(group.stop)
        raise


async def _read_back_all(
    zk: AsyncZooKeeper,
    servers: str,
    workloads: Sequence[Producing],
    partitions: dict[str, int],
    history: EventLog,
) -> int:
    """Stop every producer, wait for each topic's full ISRs, read each topic back; records read."""
    for workload in workloads:
        await asyncio.to_thread(workload.stop, PRODUCER_STOP_TIMEOUT_S)
    consumed = 0
    for workload in workloads:
        log.info("waiting until every partition of %s has its full ISR", workload.topic)
        await wait_replicated(zk, workload.topic)
        consumed += await asyncio.to_thread(
            read_back,
            servers,
            workload.topic,
            history,
            partitions=partitions[workload.topic],
            # acks=1 records may be gone with a fenced leader: its high watermark may rightly stay
            # below what was acknowledged, so only acks=all offsets are waited for.
            acked_ends=dict(workload.acked_ends) if workload.acks == "all" else {},
        )
    log.info("read back %d records", consumed)
    return consumed


def _transactional_topics(config: RunConfig) -> list[str]:
    """The transactional workload's two output topics, when it runs (librdkafka's workload only)."""
    if not config.transactions or config.workload != "default":
        return []
    return [f"{config.topic}-txn", f"{config.topic}-eos"]


def _start_transactional(
    config: RunConfig, servers: str, run_id: str, history: EventLog, seed: int, txn_topics: list[str]
) -> TransactionalWorkload | None:
    if not txn_topics:
        return None
    txn_topic, eos_topic = txn_topics
    return TransactionalWorkload(
        servers, config.topic, txn_topic, eos_topic, run_id, history, seed=seed
    ).start()


async def _finish_transactional(
    zk: AsyncZooKeeper,
    servers: str,
    txn: TransactionalWorkload,
    source: Producing,
    history: EventLog,
    txn_topics: list[str],
) -> None:
    """Let the transform loop commit past every acknowledged input, stop it, and read both output
    topics back: the producer's in both isolation levels, the loop's with read_committed."""
    log.info("waiting until the transform loop has committed every acknowledged input")
    await asyncio.to_thread(txn.drain, dict(source.acked_ends), GROUP_DRAIN_TIMEOUT_S)
    await asyncio.to_thread(txn.stop)
    txn_topic, eos_topic = txn_topics
    for topic in txn_topics:
        await wait_replicated(zk, topic)
    for topic, isolation in (
        (txn_topic, "read_committed"),
        (txn_topic, "read_uncommitted"),
        (eos_topic, "read_committed"),
    ):
        await asyncio.to_thread(read_transactional, servers, topic, history, isolation=isolation)


async def _drain_group(group: Grouping, workload: Producing) -> None:
    """Let the group commit past everything acknowledged (the verdict names what it missed), then
    have its members leave."""
    log.info("waiting until the consumer group %s has committed every acknowledged record", group.group)
    await asyncio.to_thread(group.drain, dict(workload.acked_ends), GROUP_DRAIN_TIMEOUT_S)
    await asyncio.to_thread(group.stop)


async def _verified_replicas(
    target: Target, topics: list[str], timeout_s: float = VERIFY_TIMEOUT_S
) -> list[verify_replicas.PartitionReport]:
    """The replicas' consistency, asked again until it holds or ``timeout_s`` passed: right after the
    last fault a leader may not answer yet (its LeaderAndIsr still on the way) or a follower may be
    mid-truncation. What still differs at the deadline is the answer."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            reports = await target.verify_replicas(topics)
        except AdminError as exc:
            if time.monotonic() > deadline:
                raise
            log.info("replica verification: %s; asking again", exc)
        else:
            if all(r.consistent for r in reports) or time.monotonic() > deadline:
                return reports
        await asyncio.sleep(1.0)


async def _settle_after_faults(run_lines: list[dict[str, Any]]) -> None:
    """Let ``safety.SETTLE_S`` pass since the last fault was healed, so the rule about one active
    controller is judged on the settled cluster too."""
    healed = [stop for _, stop, _, _ in safety.fault_intervals(run_lines) if stop != safety.NEVER]
    if healed:
        wait = (max(healed) - datetime.now(UTC)).total_seconds() + safety.SETTLE_S
        if wait > 0:
            log.info("letting the control plane settle for %.0f s after the last fault", wait)
            await asyncio.sleep(wait)


def _daemon_lines(target: Target, run_lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The daemons' event log lines up to now (the end of the run): the rules hold over the cluster's
    whole history (who was elected before the run started matters to who is active in it), and the
    shutdown of a cluster the run started comes after."""
    until = next((line["ts"] for line in run_lines if line.get("kind") == "run_finished"), "~")
    return [line for line in read_lines(*target.daemon_events()) if line.get("ts", "") <= until]


async def _faults_for(duration_s: float, schedules: list[FaultSchedule], injector: RunInjector) -> None:
    """Start faults for ``duration_s``, one loop per schedule; a fault in progress then runs its course
    and is healed first."""
    stop = asyncio.Event()
    lanes = Lanes() if len(schedules) > 1 else None
    loops = [asyncio.create_task(fault_loop(s, injector, stop, lanes)) for s in schedules]
    try:
        await asyncio.wait(loops, timeout=duration_s, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        stop.set()  # every loop heals what it did before it ends
        outcomes = await asyncio.gather(*loops, return_exceptions=True)
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    if failures:  # a loop only ends early by failing
        raise failures[0]
