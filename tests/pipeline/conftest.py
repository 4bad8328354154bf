"""One local SparkSession for the whole session, and synthetic cluster directories to audit.

``ClusterLog`` writes JSON lines laid out like a real cluster directory (``DIR/<node>/events.jsonl``,
``DIR/chaos/<run>/events.jsonl`` and ``history.jsonl``) with the field names of docs/events.md and of the
chaos run contract, on one clock that advances 10 ms per line unless told otherwise.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipeline.load import Logs

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
RUN = "run-20260101T000000Z"
STEP = dt.timedelta(milliseconds=10)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from pipeline.session import local_session

    session = local_session("pipeline-tests", lasting=True)  # minutes of audits: C2 pays back
    try:
        yield session
    finally:
        session.stop()


def ts(at: dt.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ClusterLog:
    """Appends events as the daemons, the chaos runner and its workload would."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.clock = START

    def wait(self, seconds: float) -> None:
        self.clock += dt.timedelta(seconds=seconds)

    def _write(self, path: Path, node: str, kind: str, fields: dict[str, Any]) -> dict[str, Any]:
        self.clock += STEP
        event = {"ts": ts(self.clock), "node": node, "kind": kind, **fields}
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(json.dumps(event, separators=(",", ":")) + "\n")
        return event

    def emit(self, node: str, kind: str, **fields: Any) -> dict[str, Any]:
        return self._write(self.root / node / "events.jsonl", node, kind, fields)

    def chaos(self, kind: str, run: str = RUN, **fields: Any) -> dict[str, Any]:
        return self._write(self.root / "chaos" / run / "events.jsonl", "chaos", kind, fields)

    def workload(self, kind: str, run: str = RUN, **fields: Any) -> dict[str, Any]:
        return self._write(self.root / "chaos" / run / "history.jsonl", "workload", kind, fields)

    def raw(self, node: str, text: str) -> None:
        """A line as is, e.g. the torn tail of a killed daemon."""
        with (self.root / node / "events.jsonl").open("a") as f:
            f.write(text)

    # -- the controller's kinds, with every documented field

    def elected(self, node: str, epoch: int) -> None:
        cid = int(node.split("-")[1])
        self.emit(
            node,
            "controller_elected",
            controller_id=cid,
            controller_epoch=epoch,
            epoch_zk_version=epoch,
            rpc_endpoint=f"PLAINTEXT://127.0.0.1:{9090 + cid}",
        )
        self.emit(
            node,
            "failover_complete",
            controller_epoch=epoch,
            brokers=3,
            topics=1,
            partitions=2,
            duration_ms=12.5,
        )

    def resigned(self, node: str, epoch: int, reason: str = "controller moved") -> None:
        cid = int(node.split("-")[1])
        self.emit(node, "controller_resigned", controller_id=cid, controller_epoch=epoch, reason=reason)

    def broker_change(
        self,
        node: str,
        epoch: int,
        epochs: dict[int, int],
        *,
        new: tuple[int, ...] = (),
        dead: tuple[int, ...] = (),
        bounced: tuple[int, ...] = (),
        previous: dict[int, int] | None = None,
    ) -> None:
        self.emit(
            node,
            "broker_change",
            controller_epoch=epoch,
            new=list(new),
            dead=list(dead),
            bounced=list(bounced),
            epochs={str(b): e for b, e in epochs.items()},
            previous_epochs={str(b): e for b, e in (previous or {}).items()},
        )
        if dead and not (new or bounced):  # with new or bounced ones, the test writes it where it belongs
            self.emit(
                node,
                "brokers_removed",
                controller_epoch=epoch,
                brokers=sorted(dead),
                epochs={str(b): e for b, e in epochs.items()},
            )

    def isr_write(
        self,
        node: str,
        epoch: int,
        partition: int,
        leader: int,
        isr: list[int],
        reason: str,
        *,
        leader_epoch: int = 0,
        partition_epoch: int = 0,
        unclean: bool = False,
        topic: str = "demo",
    ) -> None:
        self.emit(
            node,
            "leader_and_isr_change",
            topic=topic,
            partition=partition,
            leader=leader,
            leader_epoch=leader_epoch,
            isr=isr,
            partition_epoch=partition_epoch,
            controller_epoch=epoch,
            reason=reason,
            unclean=unclean,
        )

    def shutdown_started(self, node: str, epoch: int, broker: int, broker_epoch: int) -> None:
        self.emit(
            node,
            "controlled_shutdown_started",
            broker=broker,
            broker_epoch=broker_epoch,
            controller_epoch=epoch,
        )

    # -- the broker's kinds

    def registered(self, broker: int, epoch: int, previous: int = -1) -> None:
        self.emit(f"broker-{broker}", "registered", broker_epoch=epoch, previous_epoch=previous)

    def handled(
        self,
        broker: int,
        now: int,
        *,
        error: str = "NONE",
        max_broker_epoch: int | None = None,
        broker_epoch: int | None = None,
        api: str = "UpdateMetadata",
        controller_epoch: int = 1,
        listener: str | None = None,
        queue_ms: float = 0.2,
        handle_ms: float = 0.1,
    ) -> None:
        """control_request_handled; max-broker-epoch versions unless ``broker_epoch`` is given."""
        epoch = (
            {"broker_epoch": broker_epoch}
            if broker_epoch is not None
            else {"max_broker_epoch": max_broker_epoch}
        )
        version = {"LeaderAndIsr": 5, "UpdateMetadata": 7, "StopReplica": 4}[api]
        if broker_epoch is not None:
            version = {"LeaderAndIsr": 2, "UpdateMetadata": 5, "StopReplica": 1}[api]
        self.emit(
            f"broker-{broker}",
            "control_request_handled",
            api=api,
            api_version=version,
            correlation_id=7,
            error=error,
            partition_errors=0,
            queue_ms=queue_ms,
            handle_ms=handle_ms,
            controller_id=1,
            controller_epoch=controller_epoch,
            **epoch,
            broker_epoch_now=now,
            **({"listener": listener} if listener is not None else {}),
        )


def healthy_cluster(log: ClusterLog) -> None:
    """A cluster's life without a fault of its own: start, topic, a broker bounce, a controlled shutdown,
    a controller failover, and a cluster stop that leaves a partition's last ISR member in place."""
    c1, c2 = "controller-1", "controller-2"
    log.emit(c1, "controller_started", controller_id=1, rpc_endpoint="PLAINTEXT://127.0.0.1:9091")
    log.elected(c1, 1)
    for broker, epoch in ((1, 10), (2, 12), (3, 14)):
        log.registered(broker, epoch)
    log.broker_change(c1, 1, {1: 10, 2: 12, 3: 14}, new=(1, 2, 3))
    log.emit(c1, "topics_created", topics=["demo"], partitions=2)
    log.isr_write(c1, 1, 0, 1, [1, 2, 3], "new partition")
    log.isr_write(c1, 1, 1, 2, [2, 3, 1], "new partition")
    for broker, now in ((1, 10), (2, 12), (3, 14)):
        log.handled(broker, now, max_broker_epoch=14, api="LeaderAndIsr")
    # broker 2 bounces (KIP-380): a new epoch; a request of the old generation is refused
    log.registered(2, 30)
    log.broker_change(c1, 1, {1: 10, 2: 30, 3: 14}, bounced=(2,), previous={2: 12})
    log.isr_write(c1, 1, 1, 3, [3, 1], "offline election", leader_epoch=1, partition_epoch=1)
    log.isr_write(c1, 1, 0, 1, [1, 3], "replica 2 offline", leader_epoch=0, partition_epoch=1)
    log.handled(2, 30, max_broker_epoch=14, api="LeaderAndIsr", error="STALE_BROKER_EPOCH")
    log.handled(2, 30, max_broker_epoch=30)
    log.handled(1, 10, broker_epoch=-1)  # per-broker version without a known epoch: accepted
    log.isr_write(c1, 1, 0, 1, [1, 3, 2], "AlterPartition from broker 1", partition_epoch=2)
    log.isr_write(c1, 1, 1, 3, [3, 1, 2], "AlterPartition from broker 3", leader_epoch=1, partition_epoch=2)
    # broker 3 shuts down: out of every ISR, then gone
    log.shutdown_started(c1, 1, 3, 14)
    log.isr_write(c1, 1, 1, 1, [1, 2], "controlled_shutdown election", leader_epoch=2, partition_epoch=3)
    log.isr_write(c1, 1, 0, 1, [1, 2], "replica 3 offline", partition_epoch=3)
    log.broker_change(c1, 1, {1: 10, 2: 30}, dead=(3,), previous={3: 14})
    # broker 3 is back with a new epoch, and catches up
    log.registered(3, 50)
    log.broker_change(c1, 1, {1: 10, 2: 30, 3: 50}, new=(3,))
    log.handled(3, 50, max_broker_epoch=50)
    log.isr_write(c1, 1, 0, 1, [1, 2, 3], "AlterPartition from broker 1", partition_epoch=4)
    # controller-1 resigns and controller-2 takes over; its first write predates its first broker_change
    log.resigned(c1, 1)
    log.wait(2)
    log.elected(c2, 2)
    log.isr_write(c2, 2, 1, 1, [1, 2, 3], "AlterPartition from broker 1", leader_epoch=2, partition_epoch=4)
    log.broker_change(c2, 2, {1: 10, 2: 30}, dead=(3,), previous={3: 50})
    log.isr_write(c2, 2, 0, 1, [1, 2], "replica 3 offline", partition_epoch=5)
    log.isr_write(c2, 2, 1, 1, [1, 2], "replica 3 offline", leader_epoch=2, partition_epoch=5)
    # the cluster stops: broker 1 after broker 2; partition 0 keeps its last ISR member, as Kafka does
    log.broker_change(c2, 2, {1: 10}, dead=(2,), previous={2: 30})
    log.isr_write(c2, 2, 0, 1, [1], "replica 2 offline", partition_epoch=6)
    log.isr_write(c2, 2, 1, 1, [1], "replica 2 offline", leader_epoch=2, partition_epoch=6)
    log.broker_change(c2, 2, {}, dead=(1,), previous={1: 10})
    log.isr_write(c2, 2, 0, -1, [1], "replica 1 offline", leader_epoch=1, partition_epoch=7)
    log.resigned(c2, 2, "shutting down")


def chaos_run(
    log: ClusterLog, values: int = 6, run: str = RUN, *, transactions: bool = False
) -> list[dict[str, Any]]:
    """A chaos run whose producer got every value acknowledged and whose final read found them all;
    with ``transactions``, also a clean transactional workload (:func:`transactional_workload`)."""
    log.chaos(
        "run_started",
        run=run,
        run_id=run,
        topic="chaos",
        partitions=2,
        replication_factor=3,
        faults=["kill"],
        seed=1,
        duration_s=1.0,
        rate=10,
        interval_s=0.5,
    )
    acked = []
    for i in range(values):
        acked.append(
            log.workload(
                "produce_acked",
                run=run,
                topic="chaos",
                partition=i % 2,
                offset=i // 2,
                value=f"{run}-{i:06d}",
                latency_ms=5.0 + i,
            )
        )
    for event in acked:
        log.workload("consumed", run=run, **{k: event[k] for k in ("topic", "partition", "offset", "value")})
    if transactions:
        transactional_workload(log, acked, run)
    log.chaos("run_finished", run=run, run_id=run, acked=values, failed=0, consumed=values, duration_s=1.0)
    return acked


TXN_OUTCOMES = ("committed", "aborted", "committed", "unknown")
"""The producer's transactions in a clean transactional workload: the unknown one did commit."""


def transactional_workload(
    log: ClusterLog,
    acked: list[dict[str, Any]],
    run: str = RUN,
    *,
    unread: frozenset[tuple[str, str]] = frozenset(),
    offsets: dict[str, int] | None = None,
) -> list[dict[str, Any]]:
    """The transactional workload of a chaos run (chaos/txn_workload.py) as it goes right: transactions
    of two values (one for the third) ending as :data:`TXN_OUTCOMES`, read back with read_committed
    (all but the aborted one) and read_uncommitted (all); the transform loop's transaction over the
    ``acked`` inputs aborted once, then committed, with its input offsets, and its outputs read back
    once each. ``unread`` holds (isolation, value) pairs the read-backs miss (``eos:<value>`` for an
    output), ``offsets`` replaces the committed offsets. Returns the ``txn_ended`` lines."""
    ended = []
    for n, outcome in enumerate(TXN_OUTCOMES):
        ended.append(
            log.workload(
                "txn_ended",
                run=run,
                transactional_id=f"chaos-{run}-txn",
                topic="chaos-txn",
                txn=n,
                values=[f"{run}-t{n:05d}-{i}" for i in range(1 if n == 2 else 2)],
                intended="abort" if outcome == "aborted" else "commit",
                outcome=outcome,
                error="_TIMED_OUT" if outcome == "unknown" else None,
            )
        )
    group = f"chaos-{run}-eos"
    inputs = [[e["partition"], e["offset"], e["value"]] for e in acked]
    log.workload("eos_ended", run=run, group=group, inputs=inputs[:2], outcome="aborted", error="_FENCED")
    log.workload("eos_ended", run=run, group=group, inputs=inputs, outcome="committed", error=None)
    ends: dict[str, int] = {}
    for partition, offset, _ in inputs:
        ends[str(partition)] = max(ends.get(str(partition), 0), offset + 1)
    log.workload("eos_group_committed", run=run, group=group, offsets=ends if offsets is None else offsets)

    def read(topic: str, isolation: str, partition: int, offset: int, value: str) -> None:
        if (isolation, value) not in unread:
            log.workload("txn_consumed", run=run, topic=topic, isolation=isolation, partition=partition,
                         offset=offset, value=value)  # fmt: skip

    for isolation in ("read_committed", "read_uncommitted"):
        visible = [e for e in ended if isolation == "read_uncommitted" or e["outcome"] != "aborted"]
        for offset, value in enumerate(v for e in visible for v in e["values"]):
            read("chaos-txn", isolation, 0, offset, value)
    for partition, offset, value in inputs:
        read("chaos-eos", "read_committed", partition, offset, f"eos:{value}")
    return ended


@pytest.fixture
def cluster_log(tmp_path: Path) -> ClusterLog:
    return ClusterLog(tmp_path / "cluster")


@pytest.fixture
def read(spark: SparkSession) -> Iterator[Any]:
    """``read(log)``: the parsed logs of a ClusterLog's directory; released after the test."""
    from pipeline.load import find_inputs, load

    loaded: list[Logs] = []

    def _read(log: ClusterLog) -> Logs:
        logs = load(spark, find_inputs(log.root))
        loaded.append(logs)
        return logs

    yield _read
    for logs in loaded:
        logs.release()
