"""The transactional workload of a chaos run: a transactional producer that aborts a share of its
transactions on purpose, and a consume-transform-produce loop that commits its input offsets in the
same transactions as its output (``send_offsets_to_transaction``); then the read-back of both output
topics with read_committed and read_uncommitted.

Every transaction's outcome goes to ``history.jsonl`` as the client saw it: ``committed`` (commit
returned), ``aborted`` (abort returned) or ``unknown`` (an error left it open: the coordinator aborts
it, or it committed before the error; either way all of it or none of it may show). The verdict
(``chaos.txn_verdict``) and the audit judge the read-backs against these lines.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from chaos import ChaosError
from chaos.group_workload import drain
from chaos.workload import CLIENT_LOG, VERIFY_GROUP
from cluster.console_cli import passing_consume_error
from daemon.eventlog import EventLog

__all__ = ["TransactionalWorkload", "read_transactional"]

log = logging.getLogger("chaos.txn")

RECORDS_PER_TXN = 5
ABORT_SHARE = 0.2
"""The share of the producer's transactions it aborts on purpose."""
PAUSE_S = 0.05
"""Between two of the producer's transactions."""
CALL_TIMEOUT_S = 30.0
"""What one transactional call may take before its outcome is left unknown."""
QUIET_POLLS = 6
"""Empty polls in a row (0.5 s each) after which a read-back has everything it will get."""
TXN_TIMEOUT_MS = 20_000
"""transaction.timeout.ms: a transaction a fault left open is aborted by its coordinator after this."""
STUCK_AFTER_S = CALL_TIMEOUT_S + 15.0
"""When a call that was given :data:`CALL_TIMEOUT_S` is given up on (:func:`bounded`)."""

T = TypeVar("T")


class Stuck(Exception):
    """A client call outlasted its own timeout."""


def bounded(call: Callable[[], T], what: str) -> T:
    """``call``'s answer, or :class:`Stuck` once it has taken :data:`STUCK_AFTER_S`.

    librdkafka's ``send_offsets_to_transaction`` can wait forever, whatever its timeout, for a group
    coordinator that has left the metadata (a zombie broker's, in a chaos run): the call runs in a
    thread of its own, left behind if it never returns, with the producer it holds."""
    answer: list[T] = []
    raised: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            answer.append(call())
        except BaseException as exc:  # handed to the caller below
            raised.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name=f"chaos-{what}", daemon=True).start()
    if not done.wait(STUCK_AFTER_S):
        raise Stuck(f"{what} did not return in {STUCK_AFTER_S:.0f} s")
    if raised:
        raise raised[0]
    return answer[0]


def _error_of(exc: KafkaException) -> KafkaError | None:
    error = exc.args[0] if exc.args else None
    return error if isinstance(error, KafkaError) else None


COORDINATOR_MOVING = (
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
)
"""Errors of a group whose coordinator is moving: asked again, whatever the client's retriable flag."""


def committed_offsets(
    consumer: Consumer,
    partitions: list[TopicPartition],
    *,
    deadline_s: float = 2 * CALL_TIMEOUT_S,
    pause_s: float = 0.5,
) -> list[TopicPartition]:
    """The group's committed offsets of ``partitions``, asked again while its coordinator moves or the
    call times out (a chaos run moves coordinators on purpose); another error, or one that outlasts
    ``deadline_s``, is raised."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            answer: list[TopicPartition] = consumer.committed(partitions, timeout=CALL_TIMEOUT_S)
            return answer
        except KafkaException as exc:
            error = _error_of(exc)
            again = error is not None and (error.retriable() or error.code() in COORDINATOR_MOVING)
            if not again or time.monotonic() + pause_s >= deadline:
                raise
            log.info("committed offsets: %s; asking again", error.name() if error is not None else exc)
            time.sleep(pause_s)


def _transactional(servers: str, transactional_id: str) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": servers,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": TXN_TIMEOUT_MS,
            "topic.metadata.refresh.interval.ms": 2000,
            "logger": CLIENT_LOG,
        }
    )
    producer.init_transactions(CALL_TIMEOUT_S)
    return producer


class _Transactor:
    """One transactional id's producer, with Kafka's error handling around each transaction: a
    retriable commit is tried again, an abortable error aborts, and a fatal one (or a failed abort)
    starts a new producer, whose ``init_transactions`` fences the old one and ends what it left open."""

    def __init__(self, servers: str, transactional_id: str) -> None:
        self.servers = servers
        self.transactional_id = transactional_id
        self.producer: Producer | None = None

    def ready(self) -> Producer:
        while self.producer is None:
            try:
                self.producer = _transactional(self.servers, self.transactional_id)
            except KafkaException as exc:
                log.info("%s: init_transactions failed (%s); again", self.transactional_id, exc)
                time.sleep(1.0)
        return self.producer

    def end(self, commit: bool) -> tuple[str, str | None]:
        """Commit or abort the open transaction: (outcome, the error that decided it)."""
        producer = self.ready()
        deadline = time.monotonic() + CALL_TIMEOUT_S
        while True:
            try:
                if commit:
                    producer.commit_transaction(CALL_TIMEOUT_S)
                    return "committed", None
                producer.abort_transaction(CALL_TIMEOUT_S)
                return "aborted", None
            except KafkaException as exc:
                error = _error_of(exc)
                name = error.name() if error is not None else str(exc)
                if error is not None and error.retriable() and time.monotonic() < deadline:
                    continue
                if commit and error is not None and error.txn_requires_abort():
                    commit = False  # the transaction cannot commit: abort it, a known outcome
                    continue
                self.reset()
                return "unknown", name

    def failed(self, exc: KafkaException) -> tuple[str, str | None]:
        """A call inside the transaction failed: abort it if the client says it must be, else start over
        with a new producer and leave the outcome unknown."""
        error = _error_of(exc)
        if error is not None and error.txn_requires_abort():
            return self.end(commit=False)
        self.reset()
        return "unknown", str(exc)

    def reset(self) -> None:
        """Drop the producer; the next :meth:`ready` starts a new one, fencing this one."""
        self.producer = None


class TransactionalProducer:
    """Transactions of :data:`RECORDS_PER_TXN` values to ``topic``, :data:`ABORT_SHARE` aborted."""

    def __init__(self, servers: str, topic: str, run_id: str, history: EventLog, *, seed: int) -> None:
        self.topic = topic
        self.run_id = run_id
        self.history = history
        self.transactor = _Transactor(servers, f"chaos-{run_id}-txn")
        self.random = random.Random(seed)
        self.count = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-txn-producer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._one()
                time.sleep(PAUSE_S)
        except BaseException as exc:  # reported by the workload's stop(); the thread must end cleanly
            self.error = exc

    def _one(self) -> None:
        values = [f"{self.run_id}-t{self.count:05d}-{i}" for i in range(RECORDS_PER_TXN)]
        abort = self.random.random() < ABORT_SHARE
        producer = self.transactor.ready()
        try:
            producer.begin_transaction()
            for value in values:
                producer.produce(self.topic, value=value.encode())
            producer.flush(CALL_TIMEOUT_S)  # in the log before it ends: an abort then has work to do
            outcome, error = self.transactor.end(commit=not abort)
        except KafkaException as exc:
            outcome, error = self.transactor.failed(exc)
        self.history.emit(
            "txn_ended",
            transactional_id=self.transactor.transactional_id,
            topic=self.topic,
            txn=self.count,
            values=values,
            intended="abort" if abort else "commit",
            outcome=outcome,
            error=error,
        )
        self.count += 1


class TransformLoop:
    """Reads ``source`` with read_committed in its own group and writes ``eos:<value>`` to ``sink``,
    in the input's partition, committing the input positions in each transaction."""

    def __init__(self, servers: str, source: str, sink: str, run_id: str, history: EventLog) -> None:
        self.servers, self.source, self.sink = servers, source, sink
        self.group = f"chaos-{run_id}-eos"
        self.history = history
        self.transactor = _Transactor(servers, f"chaos-{run_id}-eos")
        self.committed: dict[int, int] = {}
        """Partition -> the input position the last committed transaction stored."""
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": servers,
                "group.id": self.group,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "logger": CLIENT_LOG,
            }
        )
        self._thread = threading.Thread(target=self._run, name="chaos-eos-loop", daemon=True)

    def start(self) -> None:
        self._consumer.subscribe([self.source])
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                batch = [
                    m for m in self._consumer.consume(num_messages=100, timeout=0.5) if m.error() is None
                ]
                if batch:
                    self._transform(batch)
        except BaseException as exc:
            self.error = exc
        finally:
            try:
                self._consumer.close()
            except KafkaException as exc:
                log.info("the transform loop's consumer did not leave cleanly: %s", exc)

    def _transform(self, batch: list[Any]) -> None:
        producer = self.transactor.ready()
        inputs = [[m.partition(), m.offset(), m.value().decode()] for m in batch]
        positions: dict[int, int] = {}
        for partition, offset, _ in inputs:
            positions[partition] = max(positions.get(partition, 0), offset + 1)
        try:
            producer.begin_transaction()
            for partition, _, value in inputs:
                producer.produce(self.sink, value=f"eos:{value}".encode(), partition=partition)
            offsets = [TopicPartition(self.source, p, o) for p, o in positions.items()]
            metadata = self._consumer.consumer_group_metadata()
            bounded(
                lambda: producer.send_offsets_to_transaction(offsets, metadata, CALL_TIMEOUT_S),
                "send_offsets_to_transaction",
            )
            outcome, error = self.transactor.end(commit=True)
        except KafkaException as exc:
            outcome, error = self.transactor.failed(exc)
        except Stuck as exc:
            # Its producer is left to the stuck call; the next one fences it and ends its transaction.
            self.transactor.reset()
            outcome, error = "unknown", str(exc)
        self.history.emit("eos_ended", group=self.group, inputs=inputs, outcome=outcome, error=error)
        if outcome == "committed":
            self.committed.update(positions)
        else:
            self._rewind()

    def _rewind(self) -> None:
        """After a transaction that did not commit: back to the positions the group has committed, so
        its inputs are transformed again (what Kafka's exactly-once applications do)."""
        assignment = self._consumer.assignment()
        if not assignment:
            return
        for tp in committed_offsets(self._consumer, assignment):
            self._consumer.seek(
                TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
            )


class TransactionalWorkload:
    """Both clients of a run's transactional workload."""

    def __init__(
        self,
        servers: str,
        source: str,
        txn_topic: str,
        eos_topic: str,
        run_id: str,
        history: EventLog,
        *,
        seed: int,
    ) -> None:
        self.producer = TransactionalProducer(servers, txn_topic, run_id, history, seed=seed)
        self.loop = TransformLoop(servers, source, eos_topic, run_id, history)
        self.history = history

    def start(self) -> TransactionalWorkload:
        self.producer.start()
        self.loop.start()
        return self

    def stop_producer(self) -> None:
        self.producer.stop()

    def drain(self, acked_ends: Mapping[int, int], timeout_s: float) -> bool:
        """Wait until the transform loop has committed past every acknowledged input record."""
        return drain(
            lambda: dict(self.loop.committed), lambda: self.loop.error is not None, acked_ends, timeout_s
        )

    def stop(self) -> None:
        self.producer.stop()
        self.loop.stop()
        self.history.emit("eos_group_committed", group=self.loop.group, offsets=dict(self.loop.committed))
        failed = [
            f"{n}: {c.error!r}" for n, c in (("producer", self.producer), ("loop", self.loop)) if c.error
        ]
        if failed:
            raise ChaosError(f"the transactional workload failed: {'; '.join(failed)}")


def read_transactional(
    servers: str, topic: str, history: EventLog, *, isolation: str, timeout_s: float = 90.0
) -> int:
    """Every record of ``topic`` as a consumer with ``isolation`` sees it (``txn_consumed`` lines);
    done once the consumer's positions reach the ends (ListOffsets in that isolation: the last stable
    offsets for read_committed), or once :data:`QUIET_POLLS` polls in a row brought nothing (a
    partition ending in aborted records or a marker, which are never delivered). Returns how many."""
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": VERIFY_GROUP,
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "logger": CLIENT_LOG,
        }
    )
    deadline = time.monotonic() + timeout_s
    count = quiet = 0
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        while True:
            messages = consumer.consume(num_messages=500, timeout=0.5)
            quiet = 0 if messages else quiet + 1
            for message in messages:
                error = message.error()
                if error is not None:
                    if passing_consume_error(error):
                        continue
                    raise ChaosError(f"reading {topic} ({isolation}): {error.str()}")
                raw = message.value()
                value = raw.decode() if raw is not None else ""
                history.emit("txn_consumed", topic=topic, isolation=isolation, partition=message.partition(),
                             offset=message.offset(), value=value)  # fmt: skip
                count += 1
            positions = consumer.position([TopicPartition(topic, p) for p in partitions])
            if quiet >= QUIET_POLLS or all(tp.offset >= ends[tp.partition] for tp in positions):
                return count
            if time.monotonic() > deadline:
                behind = {tp.partition: f"{tp.offset}/{ends[tp.partition]}" for tp in positions}
                raise ChaosError(f"the {isolation} read-back of {topic} stopped short: {behind}")
    finally:
        consumer.close()
