"""Control-request latency under data-plane load: KIP-291's dedicated control plane against a shared one.

KIP-291 gives control requests (LeaderAndIsr, UpdateMetadata, StopReplica) their own listener, a queue
of 20 and one handler thread, so a broker flooded by clients still applies leader changes promptly.
This checks whether that holds here, where both planes live in one process: one asyncio loop for the
sockets and handler threads that share one GIL.

One ZooKeeper, then one ``python -m broker`` process per mode, one mode after the other:

* dedicated: PLAINTEXT and CONTROLLER listeners with ``control.plane.listener.name=CONTROLLER``;
* shared: PLAINTEXT only, so control requests queue behind client requests (Kafka before KIP-291).

Each broker first receives one big UpdateMetadata v7 (``--partitions`` over ``--brokers``) on its
control path, so a Metadata request for all topics costs real handler time. A probe then sends one
control request every ``--interval-ms``, alternating LeaderAndIsr v5 (a partition of this broker,
leader epoch rising) and a small UpdateMetadata v7, one at a time over one persistent connection as a
controller does: first with the broker idle, then while load-generator processes keep the data-plane
queue full with pipelined Metadata v1 requests and, on ``--produce-connections`` of the connections,
Produce requests of many small batches to the probe partition (verified by scraping
``kafka_network_requestchannel_requestqueuesize`` from the broker's metrics port). Reported per phase:
client round trip, and the broker's own queue and handle times from its ``control_request_handled``
events (matched by correlation id), p50/p99/max; Metadata throughput; cores used by the broker and by
everything else on the machine (other benchmarks or tests running meanwhile skew every figure).
Targets: dedicated loaded p99 <= 2x idle p99, shared loaded p99 >= 10x dedicated loaded p99. Results
go to bench/results/control_latency.json and a table on stdout. ``--switch-interval-ms`` runs the
broker with another ``sys.setswitchinterval``, to see how much of the latency is GIL hand-off.

    .venv/bin/python -m bench.control_latency [--duration 30] [--quick] [--partitions 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import multiprocessing
import os
import signal
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import uvloop

from bench.codec import topic_states
from bench.machine import machine, write_report
from bench.zookeeper import zookeeper_workdir
from daemon.runtime import die_with_parent
from network.connection import KafkaConnection
from protocol import ApiKey, ErrorCode, encode_request, epoch_field
from protocol.record_batch import build_batch
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.election import try_elect

REPO = Path(__file__).resolve().parents[1]
BROKER_ID = 1
CONTROLLER_ID = 1001
CONTROLLER_EPOCH = 1
"""The benchmark plays the controller: it wins the election in a fresh ZooKeeper (epoch 1) as a
controller daemon would, so the broker confirms its epoch there (``controller.epoch.confirmation``)."""
LEADER_AND_ISR_VERSION = 5
UPDATE_METADATA_VERSION = 7
METADATA_VERSION = 1
PROBE_TOPIC = "control-latency-probe"
PROBE_TIMEOUT_S = 120.0
TARGET_DEDICATED_OVER_IDLE = 2.0
TARGET_SHARED_OVER_DEDICATED = 10.0
QUEUE_SIZE = "kafka_network_requestchannel_requestqueuesize"
DATA_IDLE = "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent"
CONTROL_IDLE = "kafka_server_kafkarequesthandlerpool_controlplanerequesthandleravgidlepercent"
SCRAPE_INTERVAL_S = 0.25
_INT32 = struct.Struct(">i")


@dataclass(frozen=True)
class Settings:
    partitions: int
    brokers: int
    io_threads: int
    queued_max_requests: int
    connections: int
    pipeline_depth: int
    load_processes: int
    produce_connections: int
    """Of ``connections``, how many send Produce (acks=1, many small batches) instead of Metadata."""
    interval_ms: float
    duration_s: float
    saturation_timeout_s: float
    switch_interval_ms: float | None
    """If set, the broker runs with ``sys.setswitchinterval`` at this value (an experiment, not a config)."""


class Counter(Protocol):
    """A shared ``multiprocessing`` integer: one writer (a load process), read by the benchmark."""

    value: int


# -- request bodies


def live_brokers(count: int, own: dict[str, tuple[str, int]]) -> list[dict[str, Any]]:
    """``count`` brokers with PLAINTEXT and CONTROLLER endpoints; the broker under test has its real ones."""
    brokers = []
    for b in range(count):
        if b == BROKER_ID:
            endpoints = [
                {"port": port, "host": host, "listener": name, "security_protocol": 0}
                for name, (host, port) in sorted(own.items())
            ]
        else:
            endpoints = [
                {"port": port, "host": f"broker-{b}.kafka.local", "listener": name, "security_protocol": 0}
                for port, name in ((9092, "PLAINTEXT"), (9093, "CONTROLLER"))
            ]
        brokers.append({"id": b, "endpoints": endpoints, "rack": f"rack-{b % 3}"})
    return brokers


def update_metadata(
    states: list[dict[str, Any]], brokers: list[dict[str, Any]], broker_epoch: int
) -> dict[str, Any]:
    return {
        "controller_id": CONTROLLER_ID,
        "controller_epoch": CONTROLLER_EPOCH,
        epoch_field(ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION): broker_epoch,
        "topic_states": states,
        "live_brokers": brokers,
    }


def leader_and_isr(leader_epoch: int, host: str, port: int, broker_epoch: int) -> dict[str, Any]:
    """Leadership of the probe partition for this broker with a newer leader epoch, so it is applied."""
    state = {
        "partition_index": 0,
        "controller_epoch": CONTROLLER_EPOCH,
        "leader": BROKER_ID,
        "leader_epoch": leader_epoch,
        "isr": [BROKER_ID],
        "partition_epoch": leader_epoch,
        "replicas": [BROKER_ID],
        "is_new": leader_epoch == 0,
    }
    return {
        "controller_id": CONTROLLER_ID,
        "controller_epoch": CONTROLLER_EPOCH,
        epoch_field(ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION): broker_epoch,
        "topic_states": [{"topic_name": PROBE_TOPIC, "partition_states": [state]}],
        "live_leaders": [{"broker_id": BROKER_ID, "host_name": host, "port": port}],
    }


class ProbeRequests:
    """LeaderAndIsr v5 and a small UpdateMetadata v7, alternately; the leader epoch keeps rising."""

    def __init__(self, small_update: dict[str, Any], leader: tuple[str, int], broker_epoch: int) -> None:
        self.small_update = small_update
        self.leader = leader
        self.broker_epoch = broker_epoch
        """The only live broker's epoch, hence the ``max_broker_epoch`` a controller would send."""
        self.leader_epoch = 0
        self._turn = itertools.cycle((ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA))

    def next(self) -> tuple[ApiKey, int, dict[str, Any]]:
        api = next(self._turn)
        if api is ApiKey.UPDATE_METADATA:
            return api, UPDATE_METADATA_VERSION, self.small_update
        body = leader_and_isr(self.leader_epoch, *self.leader, self.broker_epoch)
        self.leader_epoch += 1
        return api, LEADER_AND_ISR_VERSION, body


# -- statistics


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(values: Sequence[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "p50": None, "p99": None, "max": None, "mean": None}
    return {
        "n": len(values),
        "p50": round(percentile(values, 0.5), 3),
        "p99": round(percentile(values, 0.99), 3),
        "max": round(max(values), 3),
        "mean": round(sum(values) / len(values), 3),
    }


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, 2)


# -- the load: Metadata v1 for all topics and Produce, pipelined, from separate processes

PRODUCE_VERSION = 7
PRODUCE_BATCHES = 200
"""One-record batches per Produce request: each costs the handler a header parse and a CRC check."""


def metadata_frame(correlation_id: int) -> bytes:
    return encode_request(
        ApiKey.METADATA, METADATA_VERSION, correlation_id, "control-latency-load", {"topics": None}
    )


def produce_frame(correlation_id: int) -> bytes:
    """acks=1 to the probe partition, which the probe's LeaderAndIsr makes this broker lead."""
    records = build_batch([(None, b"x" * 100)], 0) * PRODUCE_BATCHES
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 30000,
        "topic_data": [{"name": PROBE_TOPIC, "partition_data": [{"index": 0, "records": records}]}],
    }
    return encode_request(ApiKey.PRODUCE, PRODUCE_VERSION, correlation_id, "control-latency-load", body)


async def _stream(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    depth: int,
    frame: Callable[[int], bytes],
    completed: Counter,
    failures: Counter,
) -> None:
    """Keep ``depth`` requests outstanding; responses are counted, not decoded (a cheap client)."""
    sent = itertools.count()
    expected = 0
    for _ in range(depth):
        writer.write(frame(next(sent)))
    try:
        while True:
            prefix = await reader.readexactly(_INT32.size)
            (size,) = _INT32.unpack(prefix)
            payload = await reader.readexactly(size)
            (correlation_id,) = _INT32.unpack_from(payload)
            if correlation_id != expected:
                raise ConnectionError(f"response {correlation_id} where {expected} was due")
            expected += 1
            completed.value += 1
            writer.write(frame(next(sent)))
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        failures.value += 1
    finally:
        writer.close()


@dataclass(frozen=True)
class LoadShare:
    """One load process's part of the load, and the counters and events it shares with the parent
    (multiprocessing values, passed when the process is spawned)."""

    host: str
    port: int
    connections: int
    producers: int
    depth: int
    completed: Any
    produced: Any
    failures: Any
    ready: Any
    stop: Any


async def _load(share: LoadShare) -> None:
    streams = [
        await asyncio.open_connection(share.host, share.port, limit=1 << 22) for _ in range(share.connections)
    ]
    tasks = [
        asyncio.create_task(
            _stream(r, w, share.depth, produce_frame, share.produced, share.failures)
            if i < share.producers
            else _stream(r, w, share.depth, metadata_frame, share.completed, share.failures)
        )
        for i, (r, w) in enumerate(streams)
    ]
    share.ready.set()
    # share.stop is a multiprocessing.Event set by the parent process: it cannot be awaited.
    while not share.stop.is_set() and not all(t.done() for t in tasks):  # noqa: ASYNC110
        await asyncio.sleep(0.1)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def load_worker(share: LoadShare) -> None:
    """A load-generator process: its own event loop, so the load never shares the probe's."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    uvloop.run(_load(share))


class LoadGenerator:
    """``connections`` Metadata and Produce streams split over ``processes`` spawned processes."""

    def __init__(self, host: str, port: int, settings: Settings) -> None:
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._ready = [context.Event() for _ in range(settings.load_processes)]
        self._completed = [context.Value("q", 0, lock=False) for _ in range(settings.load_processes)]
        self._produced = [context.Value("q", 0, lock=False) for _ in range(settings.load_processes)]
        producers, spare = divmod(settings.produce_connections, settings.load_processes)
        self._failures = [context.Value("q", 0, lock=False) for _ in range(settings.load_processes)]
        base, extra = divmod(settings.connections, settings.load_processes)
        self._processes = [
            context.Process(
                target=load_worker,
                args=(
                    LoadShare(
                        host=host,
                        port=port,
                        connections=base + (i < extra),
                        producers=producers + (i < spare),
                        depth=settings.pipeline_depth,
                        completed=self._completed[i],
                        produced=self._produced[i],
                        failures=self._failures[i],
                        ready=self._ready[i],
                        stop=self._stop,
                    ),
                ),
                name=f"control-latency-load-{i}",
                daemon=True,
            )
            for i in range(settings.load_processes)
        ]

    async def start(self, timeout: float = 60.0) -> None:
        for process in self._processes:
            process.start()
        deadline = time.monotonic() + timeout
        for ready, process in zip(self._ready, self._processes, strict=True):
            while not await asyncio.to_thread(ready.wait, 0.5):
                if not process.is_alive():
                    raise RuntimeError(f"{process.name} exited with code {process.exitcode}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{process.name} did not connect within {timeout} s")

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._processes if p.pid is not None]

    @property
    def completed(self) -> int:
        return sum(v.value for v in self._completed)

    @property
    def produced(self) -> int:
        return sum(v.value for v in self._produced)

    @property
    def failures(self) -> int:
        return sum(v.value for v in self._failures)

    def stop(self) -> None:
        self._stop.set()
        for process in self._processes:
            if process.pid is not None:
                process.join(10)
        for process in self._processes:
            if process.is_alive():
                process.terminate()
                process.join(5)


# -- the broker process


class BrokerRun:
    """``python -m broker --config FILE`` in its own directory, observed through its events.jsonl."""

    def __init__(self, mode: str, workdir: Path, zookeeper: str, settings: Settings) -> None:
        self.mode = mode
        self.dir = workdir / f"broker-{mode}"
        self.dir.mkdir(parents=True)
        self.control_listener = "CONTROLLER" if mode == "dedicated" else "PLAINTEXT"
        self.properties: dict[str, Any] = {
            "broker.id": BROKER_ID,
            "zookeeper.connect": zookeeper,
            "log.dirs": self.dir / "data",
            "num.io.threads": settings.io_threads,
            "queued.max.requests": settings.queued_max_requests,
            "controlled.shutdown.enable": "false",
            "metrics.port": 0,
        }
        if mode == "dedicated":
            self.properties |= {
                "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "control.plane.listener.name": "CONTROLLER",
            }
        else:
            self.properties["listeners"] = "PLAINTEXT://127.0.0.1:0"
        self.config_path = self.dir / "broker.properties"
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        self.events_path = self.dir / "data" / "events.jsonl"
        self.log_path = self.dir / "broker.log"
        self.switch_interval_ms = settings.switch_interval_ms
        self.process: subprocess.Popen[bytes] | None = None
        self.started: dict[str, Any] = {}

    def command(self) -> list[str]:
        if self.switch_interval_ms is None:
            return [sys.executable, "-m", "broker", "--config", str(self.config_path)]
        launcher = (
            f"import runpy, sys; sys.setswitchinterval({self.switch_interval_ms / 1000!r}); "
            "runpy.run_module('broker', run_name='__main__', alter_sys=True)"
        )
        return [sys.executable, "-c", launcher, "--config", str(self.config_path)]

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
            )

    def events(self) -> list[dict[str, Any]]:
        if not self.events_path.exists():
            return []
        with self.events_path.open(encoding="utf-8") as f:
            text = f.read()
        return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines() if line]

    async def wait_started(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            found = [e for e in self.events() if e["kind"] == "broker_started"]
            if found:
                self.started = found[-1]
                return
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"broker ({self.mode}) exited: {self.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"broker ({self.mode}) not started after {timeout} s: {self.tail()}")
            await asyncio.sleep(0.05)

    def endpoints(self) -> dict[str, tuple[str, int]]:
        found = {}
        for text in self.started["listeners"]:
            endpoint = znodes.Endpoint.parse(text)
            found[endpoint.listener_name] = (endpoint.host, endpoint.port)
        return found

    @property
    def metrics_port(self) -> int:
        return int(self.started["metrics_port"])

    @property
    def epoch(self) -> int:
        return int(self.started["broker_epoch"])

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text().splitlines()[-lines:])
        return ""

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM and wait; SIGKILL if it does not go."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU of a process so far (from /proc): shows whether the broker is CPU/GIL bound."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scrape(port: int) -> dict[str, float]:
    """The broker's unlabelled Prometheus samples."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, _, value = line.rpartition(" ")
            with contextlib.suppress(ValueError):
                values[name] = float(value)
    return values


# -- phases


@dataclass
class Sample:
    api: str
    correlation_id: int
    round_trip_ms: float
    error: str
    queue_ms: float | None = None
    handle_ms: float | None = None


@dataclass
class Scrapes:
    queue_size: list[float] = field(default_factory=list)
    data_idle: list[float] = field(default_factory=list)
    control_idle: list[float] = field(default_factory=list)


async def scrape_loop(port: int, into: Scrapes) -> None:
    while True:
        try:
            values = await asyncio.to_thread(scrape, port)
        except OSError:
            values = {}
        if QUEUE_SIZE in values:
            into.queue_size.append(values[QUEUE_SIZE])
            into.data_idle.append(values.get(DATA_IDLE, math.nan))
            into.control_idle.append(values.get(CONTROL_IDLE, math.nan))
        await asyncio.sleep(SCRAPE_INTERVAL_S)


def response_error(response: dict[str, Any]) -> str:
    codes = [response["error_code"], *(p["error_code"] for p in response.get("partition_errors", []))]
    return ErrorCode.name_of(next((c for c in codes if c), 0))


async def probe(
    connection: KafkaConnection, requests: ProbeRequests, duration_s: float, interval_s: float
) -> list[Sample]:
    """One request in flight at a time, as a controller sends; ticks missed while waiting are skipped."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    samples = []
    tick = 0
    while tick * interval_s < duration_s:
        delay = start + tick * interval_s - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        api, version, body = requests.next()
        correlation_id = connection.next_correlation_id
        began = time.perf_counter()
        _, response = await connection.send(api, version, body, timeout=PROBE_TIMEOUT_S)
        elapsed_ms = (time.perf_counter() - began) * 1000
        samples.append(Sample(api.name, correlation_id, elapsed_ms, response_error(response)))
        tick = max(tick + 1, math.ceil((loop.time() - start) / interval_s))
    return samples


def machine_busy_seconds() -> float | None:
    """CPU time all cores spent not idle (from /proc/stat)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + fields[4]
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def cpu_now(broker: BrokerRun, load: LoadGenerator | None) -> dict[str, float | None]:
    """CPU seconds so far of the broker, the load generators, this process and the whole machine."""
    load_cpu = [cpu_seconds(pid) for pid in load.pids] if load else []
    return {
        "broker": cpu_seconds(broker.pid),
        "load_generators": None if None in load_cpu else sum(c for c in load_cpu if c is not None),
        "benchmark": sum(os.times()[:2]),
        "machine": machine_busy_seconds(),
    }


def cpu_shares(
    before: dict[str, float | None], after: dict[str, float | None], seconds: float
) -> dict[str, float | None]:
    """Cores used by each party over a phase; ``other`` is what else ran on the machine meanwhile."""
    shares: dict[str, float | None] = {}
    for key, start in before.items():
        end = after[key]
        shares[key] = None if start is None or end is None else round((end - start) / seconds, 2)
    known = [shares[k] for k in ("broker", "load_generators", "benchmark")]
    machine_share = shares["machine"]
    shares["other"] = (
        None
        if machine_share is None or None in known
        else round(max(0.0, machine_share - sum(k for k in known if k is not None)), 2)
    )
    return shares


async def measure_phase(
    name: str,
    broker: BrokerRun,
    connection: KafkaConnection,
    requests: ProbeRequests,
    settings: Settings,
    load: LoadGenerator | None,
) -> dict[str, Any]:
    scrapes = Scrapes()
    scraper = asyncio.create_task(scrape_loop(broker.metrics_port, scrapes))
    cpu_before, completed_before, produced_before, began = (
        cpu_now(broker, load),
        load.completed if load else 0,
        load.produced if load else 0,
        time.monotonic(),
    )
    try:
        samples = await probe(connection, requests, settings.duration_s, settings.interval_ms / 1000)
    finally:
        scraper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await scraper
    elapsed = time.monotonic() - began
    cpu = cpu_shares(cpu_before, cpu_now(broker, load), elapsed)
    completed = (load.completed if load else 0) - completed_before
    produced = (load.produced if load else 0) - produced_before
    return {
        "phase": name,
        "seconds": round(elapsed, 2),
        "samples": samples,
        "metadata_requests": completed,
        "metadata_per_s": round(completed / elapsed, 1),
        "produce_requests": produced,
        "produce_per_s": round(produced / elapsed, 1),
        "records_per_s": round(produced * PRODUCE_BATCHES / elapsed),
        "load_failures": load.failures if load else 0,
        "cpu_cores": cpu,
        "load_average": [round(v, 2) for v in os.getloadavg()],
        "scrapes": scrapes,
    }


async def wait_saturated(port: int, capacity: int, timeout: float) -> dict[str, Any]:
    """Until the data-plane queue has read full (or within 5% of it) on five scrapes in a row."""
    began = time.monotonic()
    run = 0
    seen: list[float] = []
    while run < 5:
        if time.monotonic() - began > timeout:
            raise RuntimeError(f"data-plane queue never stayed full within {timeout} s: sizes {seen[-20:]}")
        size = (await asyncio.to_thread(scrape, port)).get(QUEUE_SIZE, 0.0)
        seen.append(size)
        run = run + 1 if size >= 0.95 * capacity else 0
        await asyncio.sleep(0.2)
    return {"seconds_to_saturate": round(time.monotonic() - began, 2), "queue_sizes_seen": seen}


API_NAMES = {ApiKey.LEADER_AND_ISR.name: "LeaderAndIsr", ApiKey.UPDATE_METADATA.name: "UpdateMetadata"}
"""Sample.api (ApiKey names) -> the names the broker's events use."""


def attach_broker_times(phases: list[dict[str, Any]], events: list[dict[str, Any]]) -> int:
    """Fill each sample's queue/handle times from the broker's events; returns how many had none."""
    handled = {(e["api"], e["correlation_id"]): e for e in events if e["kind"] == "control_request_handled"}
    missing = 0
    for phase in phases:
        for sample in phase["samples"]:
            event = handled.get((API_NAMES[sample.api], sample.correlation_id))
            if event is None:
                missing += 1
                continue
            sample.queue_ms, sample.handle_ms = event["queue_ms"], event["handle_ms"]
    return missing


def report_phase(phase: dict[str, Any], capacity: int, control_plane: bool) -> dict[str, Any]:
    samples: list[Sample] = phase.pop("samples")
    scrapes: Scrapes = phase.pop("scrapes")
    timed = [
        (s.round_trip_ms, s.queue_ms, s.handle_ms)
        for s in samples
        if s.queue_ms is not None and s.handle_ms is not None
    ]
    errors: dict[str, int] = {}
    for s in samples:
        errors[s.error] = errors.get(s.error, 0) + 1
    sizes = scrapes.queue_size
    data_idle = [v for v in scrapes.data_idle if not math.isnan(v)]
    # Without a control plane the broker reports its (absent) handler as always idle: not a measurement.
    control_idle = [v for v in scrapes.control_idle if not math.isnan(v)] if control_plane else []
    return {
        **phase,
        "probes": len(samples),
        "responses": errors,
        "round_trip_ms": summary([s.round_trip_ms for s in samples]),
        "broker_queue_ms": summary([queue for _, queue, _ in timed]),
        "broker_handle_ms": summary([handle for _, _, handle in timed]),
        "broker_total_ms": summary([queue + handle for _, queue, handle in timed]),
        # Reading the request and writing the response on the broker's event loop, plus the client side.
        "outside_handler_ms": summary([rtt - queue - handle for rtt, queue, handle in timed]),
        "round_trip_ms_by_api": {
            API_NAMES[api]: summary([s.round_trip_ms for s in samples if s.api == api]) for api in API_NAMES
        },
        "data_queue_size": {
            "scrapes": len(sizes),
            "mean": round(sum(sizes) / len(sizes), 1) if sizes else None,
            "min": min(sizes, default=None),
            "max": max(sizes, default=None),
            "full_share": round(sum(s >= capacity for s in sizes) / len(sizes), 2) if sizes else None,
        },
        "data_handler_idle_mean": round(sum(data_idle) / len(data_idle), 3) if data_idle else None,
        "control_handler_idle_mean": round(sum(control_idle) / len(control_idle), 3)
        if control_idle
        else None,
    }


async def run_mode(mode: str, zookeeper: str, workdir: Path, settings: Settings) -> dict[str, Any]:
    """Warm the broker's metadata cache, probe it idle, then probe it under load."""
    broker = BrokerRun(mode, workdir, zookeeper, settings)
    load: LoadGenerator | None = None
    connection: KafkaConnection | None = None
    phases: list[dict[str, Any]] = []
    result: dict[str, Any] = {"mode": mode, "control_listener": broker.control_listener}
    try:
        broker.start()
        await broker.wait_started()
        endpoints = broker.endpoints()
        control_host, control_port = endpoints[broker.control_listener]
        connection = await KafkaConnection.open(
            control_host, control_port, client_id=f"controller-{CONTROLLER_ID}", connect_timeout=10
        )
        brokers = live_brokers(settings.brokers, endpoints)
        states = topic_states(
            settings.partitions, settings.brokers, {"zk_version": 0, "offline_replicas": []}
        )
        began = time.perf_counter()
        _, response = await connection.send(
            ApiKey.UPDATE_METADATA,
            UPDATE_METADATA_VERSION,
            update_metadata(states, brokers, broker.epoch),
            timeout=PROBE_TIMEOUT_S,
        )
        if response["error_code"]:
            raise RuntimeError(f"warm-up UpdateMetadata failed: {ErrorCode.name_of(response['error_code'])}")
        result["warm_up_update_metadata_ms"] = round((time.perf_counter() - began) * 1000, 1)
        # The small UpdateMetadata re-sends one partition unchanged and the same brokers: cache size kept.
        first = states[0]
        small = update_metadata(
            [{"topic_name": first["topic_name"], "partition_states": first["partition_states"][:1]}],
            brokers,
            broker.epoch,
        )
        requests = ProbeRequests(small, endpoints["PLAINTEXT"], broker.epoch)
        print(f"{mode}: idle probe for {settings.duration_s:.0f} s", flush=True)
        phases.append(await measure_phase("idle", broker, connection, requests, settings, None))
        load = LoadGenerator(*endpoints["PLAINTEXT"], settings)
        await load.start()
        result["saturation"] = await wait_saturated(
            broker.metrics_port, settings.queued_max_requests, settings.saturation_timeout_s
        )
        print(
            f"{mode}: data-plane queue full after {result['saturation']['seconds_to_saturate']} s; "
            f"loaded probe for {settings.duration_s:.0f} s",
            flush=True,
        )
        phases.append(await measure_phase("loaded", broker, connection, requests, settings, load))
    finally:
        if load is not None:
            load.stop()
        if connection is not None:
            await connection.close()
        result["broker_exit_code"] = broker.stop()
    result["events_missing"] = attach_broker_times(phases, broker.events())
    result["broker_log_warnings"] = sum(" WARNING " in line for line in broker.tail(10_000).splitlines())
    result["phases"] = {
        p["phase"]: report_phase(p, settings.queued_max_requests, mode == "dedicated") for p in phases
    }
    return result


# -- output


def table(modes: dict[str, dict[str, Any]]) -> str:
    head = (
        f"{'mode':<10}{'phase':<8}{'probes':>7}{'rtt p50':>9}{'rtt p99':>9}{'rtt max':>9}"
        f"{'queue p50':>11}{'queue p99':>11}{'queue max':>11}{'handle p99':>11}{'md/s':>8}{'prod/s':>8}"
        f"{'dq mean':>9}"
        f"{'cpu':>6}{'other':>6}"
    )
    lines = [head, "-" * len(head)]

    def f(value: float | None, width: int) -> str:
        return f"{'-':>{width}}" if value is None else f"{value:>{width}.2f}"

    for mode, result in modes.items():
        for name, p in result["phases"].items():
            rtt, queue, handle = p["round_trip_ms"], p["broker_queue_ms"], p["broker_handle_ms"]
            lines.append(
                f"{mode:<10}{name:<8}{p['probes']:>7}{f(rtt['p50'], 9)}{f(rtt['p99'], 9)}{f(rtt['max'], 9)}"
                f"{f(queue['p50'], 11)}{f(queue['p99'], 11)}{f(queue['max'], 11)}{f(handle['p99'], 11)}"
                f"{p['metadata_per_s']:>8.1f}{p['produce_per_s']:>8.1f}{f(p['data_queue_size']['mean'], 9)}"
                f"{f(p['cpu_cores']['broker'], 6)}{f(p['cpu_cores']['other'], 6)}"
            )
    return "\n".join(lines)


def verdict(modes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    dedicated, shared = modes["dedicated"]["phases"], modes["shared"]["phases"]
    idle_p99 = dedicated["idle"]["round_trip_ms"]["p99"]
    loaded_p99 = dedicated["loaded"]["round_trip_ms"]["p99"]
    shared_p99 = shared["loaded"]["round_trip_ms"]["p99"]
    over_idle = ratio(loaded_p99, idle_p99)
    shared_over = ratio(shared_p99, loaded_p99)
    return {
        "dedicated_loaded_over_idle_p99": over_idle,
        "dedicated_loaded_over_idle_p50": ratio(
            dedicated["loaded"]["round_trip_ms"]["p50"], dedicated["idle"]["round_trip_ms"]["p50"]
        ),
        "target_dedicated_loaded_over_idle_max": TARGET_DEDICATED_OVER_IDLE,
        "dedicated_target_met": over_idle is not None and over_idle <= TARGET_DEDICATED_OVER_IDLE,
        "shared_over_dedicated_loaded_p99": shared_over,
        "shared_over_dedicated_loaded_p50": ratio(
            shared["loaded"]["round_trip_ms"]["p50"], dedicated["loaded"]["round_trip_ms"]["p50"]
        ),
        "target_shared_over_dedicated_min": TARGET_SHARED_OVER_DEDICATED,
        "shared_target_met": shared_over is not None and shared_over >= TARGET_SHARED_OVER_DEDICATED,
        "metadata_per_s_dedicated_loaded": dedicated["loaded"]["metadata_per_s"],
        "metadata_per_s_shared_loaded": shared["loaded"]["metadata_per_s"],
        "produce_per_s_dedicated_loaded": dedicated["loaded"]["produce_per_s"],
        "produce_per_s_shared_loaded": shared["loaded"]["produce_per_s"],
    }


async def run_all(zookeeper: str, workdir: Path, settings: Settings) -> dict[str, dict[str, Any]]:
    zk = AsyncZooKeeper(zookeeper)
    await zk.start()
    try:
        registration = znodes.ControllerRegistration(CONTROLLER_ID, int(time.time() * 1000))
        token = await try_elect(zk, CONTROLLER_ID, registration.encode())
        if token is None or token.epoch != CONTROLLER_EPOCH:
            raise RuntimeError(f"the benchmark could not become controller with epoch {CONTROLLER_EPOCH}")
        return {mode: await run_mode(mode, zookeeper, workdir, settings) for mode in ("dedicated", "shared")}
    finally:
        await zk.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of probing per phase")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 5 s per phase")
    parser.add_argument("--interval-ms", type=float, default=50.0, help="time between probe requests")
    parser.add_argument("--partitions", type=int, default=20_000, help="in the warm-up UpdateMetadata")
    parser.add_argument("--brokers", type=int, default=50, help="live brokers in every UpdateMetadata")
    parser.add_argument("--io-threads", type=int, default=2, help="the broker's num.io.threads")
    parser.add_argument("--queued-max-requests", type=int, default=50, help="the data-plane queue capacity")
    parser.add_argument("--connections", type=int, default=64, help="Metadata client connections")
    parser.add_argument("--pipeline-depth", type=int, default=3, help="Metadata requests written ahead")
    parser.add_argument(
        "--load-processes", type=int, default=1, help="processes the connections are split over"
    )
    parser.add_argument(
        "--produce-connections",
        type=int,
        default=None,
        help="of the connections, how many send Produce instead of Metadata (default: half)",
    )
    parser.add_argument(
        "--switch-interval-ms",
        type=float,
        default=None,
        help="experiment: run the broker with sys.setswitchinterval at this value (CPython's default: 5)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "control_latency.json"
    )
    args = parser.parse_args(argv)
    settings = Settings(
        partitions=args.partitions,
        brokers=args.brokers,
        io_threads=args.io_threads,
        queued_max_requests=args.queued_max_requests,
        connections=args.connections,
        pipeline_depth=args.pipeline_depth,
        load_processes=args.load_processes,
        produce_connections=args.connections // 2
        if args.produce_connections is None
        else args.produce_connections,
        interval_ms=args.interval_ms,
        duration_s=5.0 if args.quick else args.duration,
        saturation_timeout_s=60.0,
        switch_interval_ms=args.switch_interval_ms,
    )
    with zookeeper_workdir("control-latency-bench-") as (server, workdir):
        modes = asyncio.run(run_all(server.connect_string, workdir, settings))
    outcome = verdict(modes)
    print(table(modes))
    print(json.dumps(outcome))
    report = {
        "benchmark": "control_latency",
        "machine": machine(),
        "command": " ".join([Path(sys.executable).name, "-m", "bench.control_latency", *sys.argv[1:]]),
        "settings": {
            **asdict(settings),
            "control_plane_queue_capacity": 20,
            "control_plane_threads": 1,
            "metadata_version": METADATA_VERSION,
            "probe_requests": ["LeaderAndIsr v5", "UpdateMetadata v7 (1 partition, all brokers)"],
            "saturation_check": f"scraped {QUEUE_SIZE} every {SCRAPE_INTERVAL_S} s",
        },
        **outcome,
        "modes": modes,
    }
    write_report(args.out, report)


if __name__ == "__main__":
    main()
