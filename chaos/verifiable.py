"""Kafka's own VerifiableProducer and VerifiableConsumer as a chaos run's workload (``kafka-verifiable``).

The same run as the default workload's, with Kafka's clients instead of librdkafka: one
VerifiableProducer per topic (acks=all at the run's rate, and the acks=1 topic at half of it), and a
group of VerifiableConsumers on the acks=all topic. Their JSON lines are kept as printed in the run's
directory (``verifiable-producer.jsonl``, ``verifiable-consumer-0.jsonl``, ...) and written to
``history.jsonl`` as the default workload's events (:mod:`chaos.verifiable_events`), so the verdict,
the read-back and the audit judge Kafka's acknowledgements and Kafka's consumer as they judge
librdkafka's. The read-back itself stays the run's own (``chaos.workload.read_back``).

Values are ``<prefix>.<n>``, the prefix being the run's start in seconds since the epoch (unique per
run directory), negated for the acks=1 topic, so no two records of a run, or of two runs on one topic,
share a value. The acks=all producer is idempotent as Kafka's defaults make it: VerifiableProducer
sets ``retries=0``, which would turn idempotence off, so its config file sets ``retries`` back to
Kafka's default and ``enable.idempotence=true``.
"""

from __future__ import annotations

import asyncio
import calendar
import contextlib
import logging
import time
import zlib
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from chaos import ChaosError
from chaos.group_workload import drain, highest_commits
from chaos.java_tool import JavaTool
from chaos.verifiable_events import (
    NO_DELIVERY_REPORT,
    ProducerView,
    consumer_events,
    producer_event,
    sent_count,
    startup_ms,
    unreported,
)
from daemon.eventlog import EventLog

__all__ = ["KafkaGroupWorkload", "KafkaProducerWorkload", "launched", "value_prefix"]

log = logging.getLogger("chaos.verifiable")

PRODUCER_MAIN = "org.apache.kafka.tools.VerifiableProducer"
CONSUMER_MAIN = "org.apache.kafka.tools.VerifiableConsumer"
MEMBERS = 3
"""VerifiableConsumers in the run's group, as many as the default workload's members."""
KEYS = 1000
"""``--repeating-keys``: keys 0..999 in turn, so records spread over every partition as the default
workload's do; without keys Kafka's producer sticks to one partition per batch, and a fault on a
leader that gets no batches meanwhile tests nothing."""
STARTUP_TIMEOUT_S = 60.0
"""How long the JVMs may take to print ``startup_complete`` before the faults start."""
PRODUCER_STOP_TIMEOUT_S = 35.0
"""SIGTERM to SIGKILL for a producer unless the run says otherwise: its flush fits in it."""
CONSUMER_STOP_TIMEOUT_S = 40.0
"""SIGTERM to SIGKILL for a consumer: its last commit and ``close()`` (30 s at most) fit in it."""
PRODUCER_CONFIG: dict[str, object] = {
    # the default workload's 30 s message timeout; Kafka wants delivery >= linger + request timeout
    "delivery.timeout.ms": 30_000,
    "request.timeout.ms": 15_000,
    # learn a moved leadership within seconds, as the default workload's producer does
    "metadata.max.age.ms": 2_000,
}
IDEMPOTENT: dict[str, object] = {"enable.idempotence": "true", "retries": 2_147_483_647}
"""Kafka's producer defaults, which VerifiableProducer's own ``retries=0`` would turn off."""
NOT_IDEMPOTENT: dict[str, object] = {"enable.idempotence": "false"}
"""The acks=1 producer (and ``--no-idempotence``): the tool's ``retries=0``, nothing resent."""


def value_prefix(run_id: str) -> int:
    """The run's start in seconds since the epoch, read from its id (``run-20261122T104234Z``): unique
    per run directory, and a Java int (``--value-prefix``) until 2038. Another id gets a CRC."""
    try:
        return calendar.timegm(time.strptime(run_id, "run-%Y%m%dT%H%M%SZ"))
    except ValueError:
        return zlib.crc32(run_id.encode()) & 0x7FFFFFFF


def _properties(path: Path, settings: Mapping[str, object]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    return path


class KafkaProducerWorkload:
    """One VerifiableProducer writing ``view.topic``; its lines become ``produce_acked`` and
    ``produce_failed``. Started with :func:`launched`, stopped with :meth:`stop`."""

    def __init__(
        self, java: Sequence[str], servers: str, view: ProducerView, history: EventLog, run_dir: Path
    ) -> None:
        self.view = view
        self.topic = view.topic
        self.acks = view.acks
        self.history = history
        self.acked = self.failed = 0
        self.acked_ends: dict[int, int] = {}
        """Partition -> the offset after the highest acknowledged one: the read-back reads at least that."""
        self._reported: set[int] = set()
        self._started_ms: int | None = None
        self._sent: int | None = None
        name = "verifiable-producer" if view.acks == "all" else f"verifiable-producer-acks{view.acks}"
        config = _properties(
            run_dir / f"{name}.properties",
            {**PRODUCER_CONFIG, **(IDEMPOTENT if view.idempotent else NOT_IDEMPOTENT)},
        )
        args = [
            "--bootstrap-server", servers, "--topic", view.topic, "--throughput", str(view.rate),
            "--acks", "-1" if view.acks == "all" else view.acks,
            f"--value-prefix={view.prefix}",  # '=': a negative prefix is no option
            "--repeating-keys", str(KEYS),
            "--command-config", str(config),
        ]  # fmt: skip
        self.tool = JavaTool(name, [*java, PRODUCER_MAIN, *args], run_dir / f"{name}.jsonl", self._line)

    def _line(self, line: dict[str, Any]) -> None:
        started = startup_ms(line)
        if started is not None:
            self._started_ms = started
            return
        sent = sent_count(line)
        if sent is not None:
            self._sent = sent
            return
        event = producer_event(line, self.view, self._started_ms)
        if event is None:
            return
        kind, fields = event
        n = self.view.number(fields["value"])
        if n is not None:
            self._reported.add(n)
        if kind == "produce_acked":
            self.acked += 1
            end = fields["offset"] + 1
            self.acked_ends[fields["partition"]] = max(self.acked_ends.get(fields["partition"], 0), end)
        else:
            self.failed += 1
        self.history.emit(kind, **fields)

    def stop(self, flush_timeout_s: float | None = None) -> None:
        """SIGTERM: the tool stops sending, flushes, prints its last reports and ``tool_data``.
        Records sent and never reported on are recorded as failed (``NO_DELIVERY_REPORT``)."""
        died = self.tool.exit_status()
        status = self.tool.stop(PRODUCER_STOP_TIMEOUT_S if flush_timeout_s is None else flush_timeout_s)
        sent = self._sent if self._sent is not None else max(self._reported, default=-1) + 1
        now_ms = time.time() * 1000
        for value in unreported(self.view, sent, self._reported):
            self.failed += 1
            self.history.emit(
                "produce_failed",
                topic=self.topic,
                acks=self.acks,
                partition=None,
                value=value,
                error=NO_DELIVERY_REPORT,
                latency_ms=self.view.latency_ms(value, now_ms, self._started_ms),
            )
        log.info(
            "%s stopped (status %s): %d sent, %d acknowledged, %d failed",
            self.tool.name, status, sent, self.acked, self.failed,
        )  # fmt: skip
        if died is not None:
            raise ChaosError(f"{self.tool.name} exited with status {died} during the run: {self.tool.why()}")


class _Member:
    """One VerifiableConsumer of the group, named ``member-<index>`` in the history."""

    def __init__(
        self, java: Sequence[str], servers: str, group: str, topic: str, index: int, history: EventLog,
        run_dir: Path,
    ) -> None:  # fmt: skip
        self.name = f"member-{index}"
        self.group = group
        self.history = history
        self.committed: dict[int, int] = {}
        """Partition -> the last offset the coordinator acknowledged from this member."""
        self.consumed = 0
        args = ["--bootstrap-server", servers, "--topic", topic, "--group-id", group, "--verbose"]
        name = f"verifiable-consumer-{index}"
        self.tool = JavaTool(name, [*java, CONSUMER_MAIN, *args], run_dir / f"{name}.jsonl", self._line)

    def _line(self, line: dict[str, Any]) -> None:
        for kind, fields in consumer_events(line, self.name, self.group):
            if kind == "group_consumed":
                self.consumed += 1
            elif kind == "group_committed":
                self.committed[fields["partition"]] = fields["offset"]
            self.history.emit(kind, **fields)


class KafkaGroupWorkload:
    """:data:`MEMBERS` VerifiableConsumers in the group ``chaos-<run id>`` on ``topic``, each committing
    synchronously after every poll (the tool's default)."""

    def __init__(
        self, java: Sequence[str], servers: str, topic: str, run_id: str, history: EventLog, run_dir: Path,
        *, members: int = MEMBERS,
    ) -> None:  # fmt: skip
        self.group = f"chaos-{run_id}"
        self.members = [
            _Member(java, servers, self.group, topic, i, history, run_dir) for i in range(members)
        ]

    def committed(self) -> dict[int, int]:
        """Partition -> the highest offset any member committed."""
        return highest_commits(member.committed for member in self.members)

    def drain(self, acked_ends: Mapping[int, int], timeout_s: float) -> bool:
        """Wait until the group has committed past every acknowledged record; False at the deadline."""
        return drain(self.committed, self._member_exited, acked_ends, timeout_s)

    def _member_exited(self) -> bool:
        return any(m.tool.exit_status() is not None for m in self.members)

    def stop(self) -> None:
        """SIGTERM to every member at once: each commits, leaves the group and prints its last line."""
        died = {m.tool.name: m.tool.exit_status() for m in self.members if m.tool.exit_status() is not None}
        for member in self.members:
            member.tool.terminate()
        for member in self.members:
            member.tool.stop(CONSUMER_STOP_TIMEOUT_S)
        log.info("group %s stopped: %d records consumed", self.group, sum(m.consumed for m in self.members))
        if died:
            text = "; ".join(f"{name} with status {status}" for name, status in died.items())
            raise ChaosError(f"group members exited during the run: {text}")


def _wait_started(tools: Sequence[JavaTool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    for tool in tools:
        tool.wait_started(deadline)


@contextlib.asynccontextmanager
async def launched(
    java: Sequence[str],
    servers: str,
    run_id: str,
    run_dir: Path,
    history: EventLog,
    topics: Mapping[str, str],
    *,
    rate: int,
    idempotent: bool,
    group: bool,
) -> AsyncIterator[tuple[list[KafkaProducerWorkload], KafkaGroupWorkload | None]]:
    """The producers (one per topic, name -> acks) and the group, every JVM started and past its
    ``startup_complete``; on the way out, any tool still running (a run that failed) is killed."""
    prefix = value_prefix(run_id)
    producers = [
        KafkaProducerWorkload(
            java,
            servers,
            ProducerView(
                topic,
                acks,
                idempotent=idempotent and acks == "all",
                rate=rate if acks == "all" else max(1, rate // 2),
                prefix=prefix if acks == "all" else -prefix,
            ),
            history,
            run_dir,
        )
        for topic, acks in topics.items()
    ]
    all_topic = next(t for t, acks in topics.items() if acks == "all")
    members = KafkaGroupWorkload(java, servers, all_topic, run_id, history, run_dir) if group else None
    tools = [p.tool for p in producers] + ([m.tool for m in members.members] if members else [])
    try:
        for tool in tools:
            tool.start()
        await asyncio.to_thread(_wait_started, tools, STARTUP_TIMEOUT_S)
        log.info("Kafka's tools started: %s", ", ".join(f"{t.name} (pid {t.pid})" for t in tools))
        yield producers, members
    finally:
        for tool in tools:
            tool.kill()
