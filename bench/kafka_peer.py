"""Apache Kafka 3.9's broker beside ours: what the benchmarks taking Kafka's broker as the anchor share.

* :class:`AnchorKafkaBroker`: a Kafka 3.9 broker (ZooKeeper mode) as ``kafka-server-start.sh`` runs it:
  ``-Xms1g -Xmx1g`` and ``kafka-run-class.sh``'s performance options (G1, C2), Kafka's stock log levels
  (``server.log``, ``state-change.log``, ``controller.log`` in its directory), and, when asked, JMX on a
  loopback port as ``JMX_PORT`` gives it (``KAFKA_JMX_OPTS``);
* :class:`JmxSampler`: Kafka's own ``JmxTool`` reading MBeans from that port while a phase runs, so
  Kafka's request queue is watched the way our broker's Prometheus gauge is;
* :func:`tool_command` and :func:`run_measured`: Kafka's command-line tools (``kafka-producer-perf-test``
  and the rest, by their script names) as their scripts run them (``-Xmx512m``, the same performance
  options), and a child process's exact CPU seconds (``wait4``);
* :class:`MachineLoad`: what else the machine did meanwhile (load average, CPU pressure stall share);
* :func:`chroot`: a ZooKeeper chroot per implementation, so the two never see each other's znodes;
  :func:`wait_leader` and :func:`end_offset`: a partition's leader and its records, asked of either
  broker over the wire (Metadata v1, ListOffsets v1);
* :func:`report_head` and :func:`figure_table`: what every such report starts with, and the table of
  each figure for Kafka, ours and ours/Kafka on stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.kafka_controller import KAFKA_PERFORMANCE_OPTS, LOG4J, StockKafkaBroker, java_version
from bench.machine import machine
from bench.measure import cpu_stall_us, stall_share
from kafkapeer.jars import KAFKA_39
from kafkapeer.tools import JVM_OPTS as TOOL_JVM_OPTS
from kafkapeer.tools import TOOLS_LOG4J, java_command, main_class
from network.connection import KafkaConnection
from protocol import ApiKey, ErrorCode
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper

__all__ = [
    "KAFKA_HEAP",
    "TOOLS_HEAP",
    "AnchorKafkaBroker",
    "JmxSampler",
    "MachineLoad",
    "MeasuredRun",
    "cell",
    "chroot",
    "end_offset",
    "figure_table",
    "kafka_facts",
    "report_head",
    "run_measured",
    "tool_command",
    "wait_leader",
]

VERSION = ".".join(KAFKA_39.split(".")[:2])
"""``3.9``: the key of Kafka's jar set in ``kafkapeer.tools``."""
KAFKA_HEAP = "1g"
"""``kafka-server-start.sh``'s ``KAFKA_HEAP_OPTS``: ``-Xmx1G -Xms1G``."""
TOOLS_HEAP = "512m"
"""``kafka-producer-perf-test.sh``'s and ``kafka-consumer-perf-test.sh``'s ``KAFKA_HEAP_OPTS``."""
START_TIMEOUT_S = 120.0
"""A Kafka JVM's start and registration on a busy machine."""
JMX_TOOL = "org.apache.kafka.tools.JmxTool"
"""``kafka-jmx.sh``'s main class."""
STARTED = "started (kafka.server.KafkaServer)"
"""The line ``KafkaServer.startup`` logs once its listeners take requests."""


def jmx_options(port: int) -> list[str]:
    """``kafka-run-class.sh``'s ``KAFKA_JMX_OPTS`` with ``JMX_PORT`` set, on loopback."""
    return [
        "-Dcom.sun.management.jmxremote",
        "-Dcom.sun.management.jmxremote.authenticate=false",
        "-Dcom.sun.management.jmxremote.ssl=false",
        f"-Dcom.sun.management.jmxremote.port={port}",
        f"-Dcom.sun.management.jmxremote.rmi.port={port}",
        "-Dcom.sun.management.jmxremote.host=127.0.0.1",
        "-Djava.rmi.server.hostname=127.0.0.1",
    ]


class AnchorKafkaBroker(StockKafkaBroker):
    """A Kafka 3.9 broker with its stock JVM options, heap and log levels; JMX on ``jmx_port`` if set."""

    def __init__(
        self,
        broker_id: int,
        zk_connect: str,
        workdir: Path,
        listeners: str,
        *,
        jmx_port: int | None = None,
        **overrides: object,
    ) -> None:
        super().__init__(broker_id, zk_connect, workdir, listeners, **overrides)
        self.heap = KAFKA_HEAP
        self.jmx_port = jmx_port
        (self.dir / "log4j.properties").write_text(LOG4J.format(dir=self.dir))

    def command(self) -> list[str]:
        command = super().command()
        return command if self.jmx_port is None else [command[0], *jmx_options(self.jmx_port), *command[1:]]

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def wait_ready(self, zk: AsyncZooKeeper, timeout: float = START_TIMEOUT_S) -> int:
        """Until it is registered in ``/brokers/ids/N`` and has logged that it started; its broker epoch
        (the registration's czxid, which Kafka checks every control request's ``broker_epoch`` against).
        ``zk`` is a session in the broker's chroot."""
        path = f"{znodes.BROKER_IDS}/{self.broker_id}"
        deadline = time.monotonic() + timeout
        while True:
            self.check_running()
            stat = await zk.exists(path)
            if stat is not None and self.log_lines(STARTED):
                return int(stat.czxid)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} not started within {timeout} s:\n{self.tail()}")
            await asyncio.sleep(0.1)

    def log_text(self, name: str = "server.log") -> str:
        """One of its log files (``server.log``, ``state-change.log``, ``controller.log``), or ''."""
        try:
            return (self.dir / name).read_text(errors="replace")
        except OSError:
            return ""


def tool_command(script: str, args: Sequence[str], log_config: Path, heap: str = TOOLS_HEAP) -> list[str]:
    """``bin/<script>.sh ARGS`` of Kafka 3.9 as ``java``: the script's heap and ``kafka-run-class.sh``'s
    performance options in place of kafkapeer's quick-start ones (C1 only, serial GC). ``script`` is a
    name of ``kafkapeer.tools.MAIN_CLASSES`` or ``kafka-jmx``."""
    log_config.write_text(TOOLS_LOG4J)
    main = JMX_TOOL if script == "kafka-jmx" else main_class(script, VERSION)
    command = java_command(VERSION, main, list(args), log_config=log_config)
    assert command[1 : 1 + len(TOOL_JVM_OPTS)] == list(TOOL_JVM_OPTS), command
    return [command[0], f"-Xmx{heap}", *KAFKA_PERFORMANCE_OPTS, *command[1 + len(TOOL_JVM_OPTS) :]]


def java_env() -> dict[str, str]:
    """This environment without what would change how Kafka's scripts' JVMs run."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "JAVA_TOOL_OPTIONS"))}


@dataclass(frozen=True)
class MeasuredRun:
    """A finished child process: exit code, output, wall time and its own CPU seconds (user + system)."""

    command: list[str]
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float


def run_measured(command: list[str], workdir: Path, name: str, timeout: float) -> MeasuredRun:
    """Run ``command`` to its end, its output in ``workdir/name.{out,err}``; its CPU from ``wait4``'s
    rusage, exact to the last tick (``/proc/<pid>/stat`` is gone once a process is reaped)."""
    out, err = workdir / f"{name}.out", workdir / f"{name}.err"
    began = time.monotonic()
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(command, stdout=stdout, stderr=stderr, env=java_env())
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - began > timeout:
            process.kill()
            pid, status, usage = os.wait4(process.pid, 0)
            break
        time.sleep(0.02)
    wall = time.monotonic() - began
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    return MeasuredRun(
        command,
        process.returncode,
        out.read_text(errors="replace"),
        err.read_text(errors="replace"),
        round(wall, 2),
        round(usage.ru_utime + usage.ru_stime, 2),
    )


class JmxSampler:
    """``kafka-jmx`` (``org.apache.kafka.tools.JmxTool``) polling ``objects`` every ``interval_ms`` from
    a broker's JMX port; each row (``time`` and ``<object>:<attribute>`` -> value) is kept as it comes."""

    def __init__(self, port: int, objects: Sequence[str], workdir: Path, interval_ms: int = 250) -> None:
        args = [
            "--jmx-url", f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{port}/jmxrmi",
            *[item for name in objects for item in ("--object-name", name)],
            "--attributes", "Value", "--reporting-interval", str(interval_ms),
        ]  # fmt: skip
        self.command = tool_command("kafka-jmx", args, workdir / "jmx-log4j.properties", heap="64m")
        self.stderr_path = workdir / "jmx.err"
        self.rows: list[dict[str, float]] = []
        self.process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        with self.stderr_path.open("w") as stderr:
            self.process = subprocess.Popen(
                self.command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=java_env()
            )
        self._reader = threading.Thread(target=self._read, name="jmx-sampler", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for row in csv.DictReader(self.process.stdout):
            values = {}
            for key, value in row.items():
                with contextlib.suppress(TypeError, ValueError):
                    values[key.strip()] = float(value)
            self.rows.append(values)

    def latest(self, key: str) -> float | None:
        """The newest value of ``key`` (``<object name>:Value``), or None before the first row."""
        for row in reversed(self.rows):
            if key in row:
                return row[key]
        return None

    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._reader is not None:
            self._reader.join(5)

    def error(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""


class MachineLoad:
    """The machine's load over a run: load averages at both ends and the share of wall time some task
    was waiting for a CPU (PSI). Benchmarks and tests of other people may be running meanwhile."""

    def __init__(self) -> None:
        self.date = datetime.now(UTC).isoformat(timespec="seconds")
        self.loadavg_before = os.getloadavg()
        self.stall_before = cpu_stall_us()
        self.began = time.monotonic()

    def report(self) -> dict[str, Any]:
        seconds = time.monotonic() - self.began
        return {
            "loadavg_1_5_15_before": [round(v, 2) for v in self.loadavg_before],
            "loadavg_1_5_15_after": [round(v, 2) for v in os.getloadavg()],
            "cpu_stall_share": stall_share(self.stall_before, cpu_stall_us(), seconds),
            "seconds": round(seconds, 1),
        }


async def chroot(connect_string: str, name: str) -> str:
    """``connect_string/name`` once that chroot exists (created here)."""
    zk = AsyncZooKeeper(connect_string)
    await zk.start()
    try:
        await zk.ensure_path(f"/{name}")
    finally:
        await zk.close()
    return f"{connect_string}/{name}"


async def _ask(host: str, port: int, api: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
    connection = await KafkaConnection.open(host, port, client_id="bench-kafka-peer", connect_timeout=10)
    try:
        _, response = await connection.send(api, version, body, timeout=60)
    finally:
        await connection.close()
    return response


async def end_offset(host: str, port: int, topic: str, partition: int = 0) -> dict[str, Any]:
    """``topic-partition``'s latest offset (ListOffsets v1: the high watermark, which with one replica
    is the log end): how many records it holds from offset 0; and the error, if any."""
    body = {
        "replica_id": -1,
        "topics": [{"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1}]}],
    }
    response = await _ask(host, port, ApiKey.LIST_OFFSETS, 1, body)
    found = response["topics"][0]["partitions"][0]
    return {"error": ErrorCode.name_of(found["error_code"]), "offset": found["offset"]}


async def wait_leader(host: str, port: int, topic: str, leader: int, timeout: float = 60.0) -> None:
    """Until the broker's Metadata (v1) names ``leader`` for partition 0 of ``topic``."""
    deadline = time.monotonic() + timeout
    while True:
        response = await _ask(host, port, ApiKey.METADATA, 1, {"topics": [{"name": topic}]})
        partitions = [p for t in response["topics"] if t["name"] == topic for p in t["partitions"]]
        if any(
            p["partition_index"] == 0 and p["error_code"] == 0 and p["leader_id"] == leader
            for p in partitions
        ):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}-0 not led by {leader} within {timeout} s: {response['topics']}")
        await asyncio.sleep(0.2)


def kafka_facts() -> dict[str, Any]:
    """Which Kafka and JVM ran, and how: for the report."""
    return {
        "version": KAFKA_39,
        "java": java_version(),
        "broker_heap": KAFKA_HEAP,
        "tools_heap": TOOLS_HEAP,
        "jvm_options": list(KAFKA_PERFORMANCE_OPTS),
        "log_levels": "Kafka's stock config/log4j.properties",
    }


def report_head(benchmark: str, argv: Sequence[str] | None, load: MachineLoad) -> dict[str, Any]:
    """The report's first keys: which benchmark ran, where, when, beside what load, how it was called
    (``argv``, else this process's arguments) and which Kafka it measured."""
    return {
        "benchmark": benchmark,
        "machine": machine(),
        "date": load.date,
        "load": load.report(),
        "command": " ".join(
            [Path(sys.executable).name, "-m", f"bench.{benchmark}", *(sys.argv[1:] if argv is None else argv)]
        ),
        "kafka": kafka_facts(),
    }


def cell(value: float | None, width: int) -> str:
    """A figure right-aligned to ``width`` with two decimals; ``-`` where there is none."""
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.2f}"


def figure_table(
    figs: dict[str, Any], rows: Sequence[tuple[str, str]], label_width: int, value_width: int
) -> list[str]:
    """A header, then per ``(label, key)`` of ``rows`` Kafka's figure, ours and ours/Kafka (``figs``
    holds them under ``kafka``, ``ours`` and ``ours_over_kafka``)."""
    lines = [f"{'figure':<{label_width}}{'kafka':>{value_width}}{'ours':>{value_width}}{'ours/kafka':>12}"]
    for label, key in rows:
        kafka, ours = cell(figs["kafka"][key], value_width), cell(figs["ours"][key], value_width)
        lines.append(f"{label:<{label_width}}{kafka}{ours}{cell(figs['ours_over_kafka'][key], 12)}")
    return lines
