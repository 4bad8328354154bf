"""The workload of a chaos run: a paced producer whose every outcome goes to ``history.jsonl``, and the
final read-back of every partition.

Values are unique per run (``<run-id>-000123``), so each record can be followed from its delivery
report to where the read-back finds it. The acks=all producer is idempotent, as modern producers are
by default: it retries until ``message.timeout.ms``, and the partition leaders drop the copies a
retry resends, so any duplicate the read-back finds is the cluster's doing. A non-idempotent producer
(the acks=1 topic's) does not retry: a retried request that was written but not acknowledged would be
stored twice, which is that producer's normal at-least-once behaviour. A failed request is recorded
as ``produce_failed`` (outcome unknown).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from chaos import ChaosError
from cluster.console_cli import passing_consume_error
from daemon.eventlog import EventLog

log = logging.getLogger("chaos.workload")
CLIENT_LOG = logging.getLogger("chaos.librdkafka")
"""librdkafka's own lines (connections refused while a broker is down), in the run's log."""

MESSAGE_TIMEOUT_MS = 30_000
"""A record not acknowledged within this time fails with _MSG_TIMED_OUT (the outcome is unknown)."""
FLUSH_MARGIN_S = 5.0
VERIFY_GROUP = "chaos-verify"
"""librdkafka wants a group.id even with assign(); the read-back commits nothing under it."""


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


class ProducerWorkload:
    """Produces ``rate`` records/s to ``topic`` in a thread of its own until :meth:`stop`.

    Delivery reports are served by ``poll`` in that same thread, so the counters need no lock; the
    history's :class:`EventLog` is thread-safe anyway.
    """

    def __init__(
        self,
        servers: str,
        topic: str,
        run_id: str,
        rate: int,
        history: EventLog,
        *,
        acks: str = "all",
        idempotent: bool = False,
    ) -> None:
        self.topic = topic
        self.acks = acks
        self.idempotent = idempotent
        """``all``: every acknowledged record must survive. ``1``: only the leader had it when it was
        acknowledged, so a fenced leader can take it along; its losses are reported, not failed."""
        self.run_id = run_id
        self.rate = rate
        self.history = history
        self.sent = self.acked = self.failed = 0
        self.acked_ends: dict[int, int] = {}
        """Partition -> the offset after the highest acknowledged one: the read-back reads at least that."""
        self._outstanding: dict[str, float] = {}
        self._stop = threading.Event()
        self._flush_timeout_s = MESSAGE_TIMEOUT_MS / 1000 + FLUSH_MARGIN_S
        self._error: BaseException | None = None
        self._producer = Producer(
            {
                "bootstrap.servers": servers,
                "acks": acks,
                "enable.idempotence": idempotent,
                # idempotent: librdkafka's default retries (until message.timeout.ms); otherwise none
                **({} if idempotent else {"retries": 0}),
                "linger.ms": 5,
                "message.timeout.ms": MESSAGE_TIMEOUT_MS,
                # Learn a moved leadership within seconds even when the old leader is paused and says nothing.
                "topic.metadata.refresh.interval.ms": 2000,
                "logger": CLIENT_LOG,
            }
        )
        self._thread = threading.Thread(target=self._run, name=f"chaos-producer-acks-{acks}", daemon=True)

    def start(self) -> ProducerWorkload:
        self._thread.start()
        return self

    def stop(self, flush_timeout_s: float | None = None) -> None:
        """Stop producing, wait for outstanding delivery reports, record the rest as failed."""
        if flush_timeout_s is not None:
            self._flush_timeout_s = flush_timeout_s
        self._stop.set()
        self._thread.join()
        if self._error is not None:
            raise ChaosError(f"the producer failed: {self._error!r}") from self._error

    def _run(self) -> None:
        try:
            self._produce_until_stopped()
        except BaseException as exc:  # reported by stop(); the thread must still end cleanly
            self._error = exc
        finally:
            self._finish()

    def _produce_until_stopped(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            due = started + self.sent / self.rate
            now = time.monotonic()
            if now < due:
                self._producer.poll(min(due - now, 0.05))
                continue
            prefix = self.run_id if self.acks == "all" else f"{self.run_id}-acks{self.acks}"
            self._send(f"{prefix}-{self.sent:06d}")
            self._producer.poll(0)

    def _send(self, value: str) -> None:
        self._outstanding[value] = time.monotonic()
        while True:
            try:
                self._producer.produce(self.topic, value=value.encode(), on_delivery=self._delivered)
                break
            except BufferError:  # librdkafka's queue is full: serve delivery reports, then retry
                self._producer.poll(0.1)
        self.sent += 1

    def _delivered(self, err: KafkaError | None, message: Any) -> None:
        value = message.value().decode()
        latency = _ms(time.monotonic() - self._outstanding.pop(value, time.monotonic()))
        partition = message.partition()
        if err is None:
            self.acked += 1
            self.acked_ends[partition] = max(self.acked_ends.get(partition, 0), message.offset() + 1)
            self.history.emit(
                "produce_acked",
                topic=self.topic,
                acks=self.acks,
                idempotent=self.idempotent,
                partition=partition,
                offset=message.offset(),
                value=value,
                latency_ms=latency,
            )
        else:
            self._failed(value, partition if partition >= 0 else None, err.name(), latency)

    def _failed(self, value: str, partition: int | None, error: str, latency_ms: float) -> None:
        self.failed += 1
        self.history.emit(
            "produce_failed",
            topic=self.topic,
            acks=self.acks,
            partition=partition,
            value=value,
            error=error,
            latency_ms=latency_ms,
        )

    def _finish(self) -> None:
        remaining = self._producer.flush(self._flush_timeout_s)
        if remaining:
            log.warning(
                "%d records unacknowledged after %.0f s: purging them", remaining, self._flush_timeout_s
            )
            self._producer.purge()
            self._producer.flush(5.0)  # their delivery reports: _PURGE_QUEUE or _PURGE_INFLIGHT
        for value, since in list(self._outstanding.items()):  # never reported: failed all the same
            del self._outstanding[value]
            self._failed(value, None, "NO_DELIVERY_REPORT", _ms(time.monotonic() - since))
        log.info("producer stopped: %d sent, %d acknowledged, %d failed", self.sent, self.acked, self.failed)


def read_back(
    servers: str,
    topic: str,
    history: EventLog,
    *,
    partitions: int,
    acked_ends: Mapping[int, int],
    timeout_s: float = 60.0,
) -> int:
    """Read every partition of ``topic`` from its start to its high watermark with ``assign()`` (no
    group, no commits), writing one ``consumed`` line per record; returns the number read.

    The watermarks are taken only once the brokers' metadata lists all ``partitions`` and every high
    watermark has reached ``acked_ends``: a broker that has not caught up with the controller yet, or a
    new leader whose high watermark still lags, must not make acknowledged records look lost."""
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": VERIFY_GROUP,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "logger": CLIENT_LOG,
        }
    )
    deadline = time.monotonic() + timeout_s
    try:
        ends = _watermarks(consumer, topic, deadline, partitions, acked_ends)
        position = {p: low for p, (low, high) in ends.items() if high > low}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in position])
        count = 0
        while any(position[p] < ends[p][1] for p in position):
            if time.monotonic() > deadline:
                behind = {p: f"{position[p]}/{ends[p][1]}" for p in position if position[p] < ends[p][1]}
                raise ChaosError(
                    f"the read-back did not reach the high watermarks in {timeout_s:g} s: {behind}"
                )
            for message in consumer.consume(num_messages=500, timeout=0.5):
                error = message.error()
                if error is not None:
                    if passing_consume_error(error):
                        continue
                    raise ChaosError(f"reading {topic}: {error.str()}")
                partition, offset = message.partition(), message.offset()
                if partition is None or offset is None:  # only error events lack them
                    continue
                if offset >= ends[partition][1]:
                    continue
                value = message.value()
                history.emit(
                    "consumed",
                    topic=topic,
                    partition=partition,
                    offset=offset,
                    value=None if value is None else value.decode("utf-8", errors="backslashreplace"),
                )
                position[partition] = offset + 1
                count += 1
        return count
    finally:
        consumer.close()


def _watermarks(
    consumer: Consumer, topic: str, deadline: float, partitions: int, acked_ends: Mapping[int, int]
) -> dict[int, tuple[int, int]]:
    """Each partition's (log start, high watermark), asked again until the metadata lists every
    partition without error and each high watermark covers what was acknowledged there."""
    while True:
        try:
            metadata = consumer.list_topics(topic, timeout=10).topics[topic]
            if metadata.error is not None:
                raise KafkaException(metadata.error)
            found = sorted(metadata.partitions)
            if len(found) != partitions:
                raise ChaosError(f"the metadata lists {len(found)} of {partitions} partitions")
            ends = {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
                for p in found
            }
            short = {
                p: f"{ends[p][1]}<{end}" for p, end in acked_ends.items() if ends.get(p, (0, 0))[1] < end
            }
            if short:
                raise ChaosError(f"high watermarks below acknowledged offsets: {short}")
            return ends
        except (KafkaException, KeyError, ChaosError) as exc:
            if time.monotonic() > deadline:
                raise ChaosError(f"no usable watermarks for {topic}: {exc}") from None
            log.info("watermarks of %s not usable yet (%s); retrying", topic, exc)
            time.sleep(0.5)
