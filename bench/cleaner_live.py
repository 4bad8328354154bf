"""The data plane's latency while the log cleaner compacts a log in a live broker, beside its latency idle.

Issue 30 asks the cleaner to run beside the data plane without stalling it; ``bench.log_cleaner`` times
the cleaner alone, this times what the clients of a broker see meanwhile. One ZooKeeper, one controller
and one ``python -m broker`` (``cluster.processes``; ``log.cleaner.backoff.ms`` 100, so the cleaner looks
for work ten times a second). A compacted topic (``cleanup.policy=compact``, ``--segment-bytes``
segments) gets ``--mb`` MB of keyed records, keys round-robin over ``--keys``, so nearly every record is
superseded; meanwhile its ``min.cleanable.dirty.ratio`` is 1.0, which no log's dirty share exceeds, so
the cleaner leaves it alone. A probe process (``bench.broker_apply_live.DataPlaneProbe``) keeps one
request in flight on the client listener, a Produce (acks=1, one batch of ten 100-byte records) to a
second, non-compacted topic, then a Fetch of that topic's first bytes, and times each round trip on
``CLOCK_MONOTONIC``, which this process shares. Each of ``--rounds`` rounds fills a compacted topic of
its own, waits a second, then has three phases:

1. **idle**: ``--idle-s`` with the dirty data in place and the cleaner held off;
2. **cleaning**: the ratio goes to 0.01 (``/config/changes``, applied live); the cleaner's next look
   picks the log; the window is its ``log_cleaned`` event's ``ts`` less the cleaning's ``seconds``,
   to ``ts``;
3. **after**: ``--after-s`` once the cleaning ended.

The report gives p50/p99/max per phase over the rounds' samples together, the ratios cleaning/idle of
p50 and p99 (the figures to compare: the same run on the same machine, where absolute times move 3x
from day to day) with their range over the rounds, the cleaning's length and MB; and per round, the
same per API, and per phase the cores used by the broker, by this benchmark with its probe and by the
rest of the machine (another job on the machine skews everything). bench/results/cleaner_live.json
and a JSON line on stdout.

    .venv/bin/python -m bench.cleaner_live [--mb 40] [--rounds 3] [--io-max-bytes-per-second N] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.broker_apply_live import DataPlaneProbe, Probes, cores, data_plane, monotonic_of
from bench.control_phases import cpu_now
from bench.machine import machine, write_report
from bench.measure import cpu_seconds, cpu_stall_us, ratio, scrape, stall_share, summary
from bench.zookeeper import zookeeper_workdir
from cluster.processes import BrokerProcess, ControllerProcess, Event
from network.connection import KafkaConnection
from protocol import ApiKey, ErrorCode
from protocol.record_batch import build_batch
from zkstore.aio import AsyncZooKeeper
from zkstore.entity_configs import change_topic_configs, write_topic_configs
from zkstore.topic_writes import create_topic

__all__ = ["COMPACTED", "PROBE_TOPIC", "Settings", "main", "run"]

BROKER_ID = 1
COMPACTED = "cleaner-live-compacted"
PROBE_TOPIC = "cleaner-live-probe"
HELD_RATIO = "1.0"
"""A log is cleaned when its dirty share is above its ratio: never above 1.0."""
RELEASED_RATIO = "0.01"
BACKOFF_MS = 100
"""log.cleaner.backoff.ms: the cleaner's sleep when no log is due (Kafka's default, 15 s, would make
the start of the cleaning wait)."""
PRODUCE_VERSION = 7
FETCH_VERSION = 4
APIS = (ApiKey.PRODUCE, ApiKey.FETCH)
FILL_IN_FLIGHT = 4
"""Produce requests outstanding while filling the compacted topic."""
CPU_INTERVAL_S = 0.1
SETTLE_S = 1.0
"""After a fill, before the idle phase: the last produce answers and the page cache's writes settle."""
TIMEOUT_S = 600.0
PHASES = ("idle", "cleaning", "after")
CLEANER_GAUGES = (
    "kafka_log_logcleaner_max_clean_time_secs",
    "kafka_log_logcleaner_cleaner_recopy_percent",
    "kafka_log_logcleaner_max_buffer_utilization_percent",
    "kafka_log_logcleaner_deadthreadcount",
)

Samples = list[tuple[float, float, int, bool]]
"""The probe's round trips: (start, seconds, API key, answered without error)."""
Trace = list[tuple[float, dict[str, Any], int | None]]
"""CPU samples: (monotonic time, ``control_phases.cpu_now``, ``measure.cpu_stall_us``)."""


@dataclass(frozen=True)
class Settings:
    mb: float
    """Megabytes of keyed records produced to the compacted topic."""
    segment_bytes: int
    keys: int
    batch_records: int
    value_bytes: int
    idle_s: float
    after_s: float
    io_max_bytes_per_second: float | None
    """log.cleaner.io.max.bytes.per.second (None: Kafka's default, unlimited)."""
    rounds: int
    """Compacted topics filled and cleaned one after the other, each with its three phases."""


def probe_requests() -> Probes:
    """A small acks=1 Produce to the probe topic, then a Fetch of its first 16 KB (answered at once)."""
    records = build_batch([(None, b"p" * 100)] * 10, 0)
    produce = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 30000,
        "topic_data": [{"name": PROBE_TOPIC, "partition_data": [{"index": 0, "records": records}]}],
    }
    partition = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 16384}
    fetch = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 16384,
        "isolation_level": 0,
        "topics": [{"topic": PROBE_TOPIC, "partitions": [partition]}],
    }
    return ((ApiKey.PRODUCE, PRODUCE_VERSION, produce), (ApiKey.FETCH, FETCH_VERSION, fetch))


# -- the broker and its topics


def broker_overrides(settings: Settings) -> dict[str, Any]:
    overrides: dict[str, Any] = {"metrics_port": 0, "log_cleaner_backoff_ms": BACKOFF_MS}
    if settings.io_max_bytes_per_second is not None:
        overrides["log_cleaner_io_max_bytes_per_second"] = settings.io_max_bytes_per_second
    return overrides


@contextlib.asynccontextmanager
async def one_broker(
    workdir: Path, zk_connect: str, settings: Settings
) -> AsyncIterator[tuple[BrokerProcess, AsyncZooKeeper]]:
    """A controller and one broker, started and then stopped (also on errors)."""
    broker = BrokerProcess(BROKER_ID, zk_connect, workdir, **broker_overrides(settings))
    controller = ControllerProcess(1001, zk_connect, workdir)
    zk = AsyncZooKeeper(zk_connect)
    try:
        broker.start()
        controller.start()
        await broker.wait_kind("broker_started", timeout=60)
        await controller.wait_kind("failover_complete", timeout=60)
        await zk.start()
        yield broker, zk
    finally:
        await zk.close()
        for process in (broker, controller):
            with contextlib.suppress(Exception):
                process.stop(timeout=60)


async def create(broker: BrokerProcess, zk: AsyncZooKeeper, topic: str, configs: dict[str, str]) -> None:
    """One partition on the broker, with ``configs`` written first (as Kafka does); returns once it leads."""
    await write_topic_configs(zk, topic, configs)
    await create_topic(zk, topic, {0: (BROKER_ID,)})
    await broker.wait_kind("become_leader", timeout=60, topic=topic, partition=0)


def keyed_batches(settings: Settings) -> Iterator[bytes]:
    """Batches of ``batch_records`` keyed records, keys round-robin over ``keys``, without end."""
    value = b"v" * settings.value_bytes
    for first in itertools.count(0, settings.batch_records):
        keys = (f"key-{(first + n) % settings.keys:08d}".encode() for n in range(settings.batch_records))
        yield build_batch([(key, value) for key in keys], 0)


async def fill(broker: BrokerProcess, topic: str, settings: Settings) -> dict[str, Any]:
    """Produce ``settings.mb`` MB to ``topic``, ``FILL_IN_FLIGHT`` requests outstanding."""
    connection = await KafkaConnection.open(*broker.endpoint("PLAINTEXT"), client_id="cleaner-live-fill")
    batches = keyed_batches(settings)
    target, produced = settings.mb * 1e6, [0, 0]

    async def sender() -> None:
        while produced[0] < target:
            records = next(batches)
            produced[0] += len(records)
            produced[1] += settings.batch_records
            partition = {"index": 0, "records": records}
            body = {
                "transactional_id": None,
                "acks": 1,
                "timeout_ms": 30000,
                "topic_data": [{"name": topic, "partition_data": [partition]}],
            }
            _, answer = await connection.send(ApiKey.PRODUCE, PRODUCE_VERSION, body, timeout=60)
            code = answer["responses"][0]["partition_responses"][0]["error_code"]
            if code != ErrorCode.NONE:
                raise RuntimeError(f"producing to {topic} failed: {ErrorCode.name_of(code)}")

    began = time.monotonic()
    try:
        await asyncio.gather(*(sender() for _ in range(FILL_IN_FLIGHT)))
    finally:
        await connection.close()
    seconds = time.monotonic() - began
    return {
        "bytes": produced[0],
        "records": produced[1],
        "seconds": round(seconds, 2),
        "mb_per_s": round(produced[0] / seconds / 1e6, 1),
    }


def log_files(broker: BrokerProcess, topic: str) -> dict[str, Any]:
    """A compacted partition's segment files: how many and their megabytes."""
    sizes = [path.stat().st_size for path in (broker.dir / f"{topic}-0").glob("*.log")]
    return {"segments": len(sizes), "mb": round(sum(sizes) / 1e6, 2)}


def topic_configs(settings: Settings, ratio: str) -> dict[str, str]:
    """The compacted topic's overrides, the cleaner held off (``HELD_RATIO``) or let in."""
    return {
        "cleanup.policy": "compact",
        "segment.bytes": str(settings.segment_bytes),
        "min.cleanable.dirty.ratio": ratio,
    }


# -- the phases


async def cpu_trace(broker_pid: int, probe_pid: int, into: Trace) -> None:
    """Every ``CPU_INTERVAL_S`` until cancelled: the moment, everyone's CPU seconds so far, the CPU stall."""
    while True:
        helper = cpu_seconds(probe_pid) or 0.0
        into.append((time.monotonic(), cpu_now(broker_pid, None, helper), cpu_stall_us()))
        await asyncio.sleep(CPU_INTERVAL_S)


def phase_cpu(trace: Trace, start: float, end: float) -> dict[str, Any]:
    """Cores per party and the CPU stall share between the first and last moments traced in the span."""
    inside = [sample for sample in trace if start <= sample[0] <= end]
    if len(inside) < 2:
        return {"cores": None, "stall_share": None}
    (began, before, stall_before), (ended, after, stall_after) = inside[0], inside[-1]
    return {
        "cores": cores(before, after, ended - began),
        "stall_share": stall_share(stall_before, stall_after, ended - began),
    }


async def clean(
    broker: BrokerProcess, zk: AsyncZooKeeper, topic: str, settings: Settings
) -> tuple[Event, Event, float]:
    """Let the cleaner at ``topic``; its ``topic_config_applied`` and ``log_cleaned`` events, and when
    the change was written (monotonic)."""
    released = time.monotonic()
    await change_topic_configs(zk, topic, topic_configs(settings, RELEASED_RATIO))
    applied = await broker.wait_event(
        lambda e: (
            e["kind"] == "topic_config_applied"
            and e.get("topic") == topic
            and e.get("configs", {}).get("min.cleanable.dirty.ratio") == RELEASED_RATIO
        ),
        timeout=60,
        what=f"{topic}: the cleaner let in",
    )
    cleaned = await broker.wait_kind("log_cleaned", timeout=TIMEOUT_S, topic_partition=f"{topic}-0")
    return applied, cleaned, released


async def one_round(
    broker: BrokerProcess, zk: AsyncZooKeeper, settings: Settings, index: int
) -> dict[str, Any]:
    """A compacted topic of its own, filled, then the phases: idle, cleaning, after."""
    topic = f"{COMPACTED}-{index}"
    await create(broker, zk, topic, topic_configs(settings, HELD_RATIO))
    filled = await fill(broker, topic, settings)
    before = log_files(broker, topic)
    await asyncio.sleep(SETTLE_S)
    offset = time.time() - time.monotonic()
    marks = {"idle": time.monotonic()}
    await asyncio.sleep(settings.idle_s)
    marks["idle_end"] = time.monotonic()
    applied, cleaned, marks["released"] = await clean(broker, zk, topic, settings)
    marks["applied"] = monotonic_of(applied["ts"], offset)
    marks["cleaning_end"] = monotonic_of(cleaned["ts"], offset)
    marks["cleaning"] = marks["cleaning_end"] - cleaned["seconds"]
    await asyncio.sleep(max(0.0, marks["cleaning_end"] + settings.after_s - time.monotonic()))
    marks["after_end"] = time.monotonic()
    logs = {"log_before": before, "log_after": log_files(broker, topic)}
    return {"topic": topic, "marks": marks, "fill": filled, "cleaned": cleaned, "logs": logs}


async def measure(broker: BrokerProcess, zk: AsyncZooKeeper, settings: Settings) -> dict[str, Any]:
    """The rounds, with the probe and the CPU trace running throughout."""
    probe = DataPlaneProbe(*broker.endpoint("PLAINTEXT"), probe_requests(), name="cleaner-live-probe")
    await probe.start()
    trace: Trace = []
    assert broker.process is not None
    tracer = asyncio.create_task(cpu_trace(broker.process.pid, probe.pid, trace))
    rounds: list[dict[str, Any]] = []
    try:
        for index in range(settings.rounds):
            rounds.append(await one_round(broker, zk, settings, index))
    finally:
        tracer.cancel()
        samples = await probe.stop()
    return {"rounds": rounds, "samples": samples, "trace": trace}


# -- the report


def spans(marks: dict[str, float]) -> dict[str, tuple[float, float]]:
    return {
        "idle": (marks["idle"], marks["idle_end"]),
        "cleaning": (marks["cleaning"], marks["cleaning_end"]),
        "after": (marks["cleaning_end"], marks["after_end"]),
    }


def ratios(latency: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    idle, cleaning, after = (latency[name] for name in PHASES)
    return {
        "p50_cleaning_over_idle": ratio(cleaning["p50"], idle["p50"]),
        "p99_cleaning_over_idle": ratio(cleaning["p99"], idle["p99"]),
        "mean_cleaning_over_idle": ratio(cleaning["mean"], idle["mean"]),
        "max_cleaning_over_idle": ratio(cleaning["max"], idle["max"]),
        "p99_after_over_idle": ratio(after["p99"], idle["p99"]),
    }


def round_report(measured: dict[str, Any], samples: Samples, trace: Trace) -> dict[str, Any]:
    """One round: latency per phase and per API, the ratios to idle, the cleaning's figures, CPU."""
    marks, cleaned = measured["marks"], measured["cleaned"]
    latency = {
        name: data_plane(samples, start, end, overlap=name == "cleaning", apis=APIS)
        for name, (start, end) in spans(marks).items()
    }
    seconds = cleaned["seconds"]
    return {
        "topic": measured["topic"],
        "fill": measured["fill"],
        "data_plane_ms": latency,
        **ratios(latency),
        "cleaning": {
            "seconds": seconds,
            "mb_read": round(cleaned["bytes_read"] / 1e6, 2),
            "mb_written": round(cleaned["bytes_written"] / 1e6, 2),
            "mb_per_s": round(cleaned["bytes_read"] / 1e6 / seconds, 1) if seconds else None,
            **{k: cleaned[k] for k in ("records_removed", "records_kept", "start_offset", "end_offset")},
            "started_after_config_change_s": round(marks["cleaning"] - marks["released"], 3),
            "config_applied_after_change_s": round(marks["applied"] - marks["released"], 3),
            **measured["logs"],
        },
        "cpu": {name: phase_cpu(trace, *span) for name, span in spans(marks).items()},
    }


def pooled(measured: dict[str, Any]) -> dict[str, Any]:
    """Every round's samples of each phase together: p50/p99/max, and the ratios to idle."""
    latency = {}
    for name in PHASES:
        overlap = name == "cleaning"
        bounds = [spans(each["marks"])[name] for each in measured["rounds"]]
        milliseconds = [
            d * 1000
            for s, d, _, _ in measured["samples"]
            for start, end in bounds
            if (s < end and s + d > start if overlap else s >= start and s + d <= end)
        ]
        latency[name] = summary(milliseconds)
    return {"data_plane_ms": latency, **ratios(latency)}


def report(measured: dict[str, Any]) -> dict[str, Any]:
    """The pooled figures, the spread of the ratios over the rounds, the cleaning's medians, each round."""
    rounds = [round_report(each, measured["samples"], measured["trace"]) for each in measured["rounds"]]
    spread = {
        key: [min(r[key] or 0 for r in rounds), max(r[key] or 0 for r in rounds)]
        for key in ("p50_cleaning_over_idle", "p99_cleaning_over_idle", "mean_cleaning_over_idle")
    }
    cleaning = {
        key: statistics.median(r["cleaning"][key] for r in rounds)
        for key in ("seconds", "mb_read", "mb_written", "records_removed")
    }
    return {**pooled(measured), "ratio_range_over_rounds": spread, "cleaning": cleaning, "rounds": rounds}


async def run(settings: Settings, workdir: Path, zk_connect: str) -> dict[str, Any]:
    """Start the cluster and the probe topic, measure the rounds, read the cleaner's gauges."""
    async with one_broker(workdir, zk_connect, settings) as (broker, zk):
        await create(broker, zk, PROBE_TOPIC, {})
        result = report(await measure(broker, zk, settings))
        port = int(broker.of_kind("broker_started")[-1]["metrics_port"])
        gauges = await asyncio.to_thread(scrape, port)
        result["cleaner_metrics"] = {name: gauges.get(name) for name in CLEANER_GAUGES}
    result["broker_exit_code"] = broker.process.returncode if broker.process else None
    result["broker_log_warnings"] = sum(" WARNING " in line for line in broker.tail(100_000).splitlines())
    return result


def parse_settings(argv: list[str] | None) -> tuple[Settings, argparse.Namespace]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=float, default=40.0, help="MB of keyed records to clean")
    parser.add_argument("--segment-bytes", type=int, default=1 << 20)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--batch-records", type=int, default=200)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument("--after-s", type=float, default=5.0)
    parser.add_argument(
        "--io-max-bytes-per-second", type=float, default=None, help="log.cleaner.io.max.bytes.per.second"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--quick", action="store_true", help="one round of 4 MB in 64 KB segments, 1 s idle and after"
    )
    parser.add_argument("--keep", type=Path, help="run under this directory and keep it (every log)")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "cleaner_live.json"
    )
    args = parser.parse_args(argv)
    settings = Settings(
        mb=4.0 if args.quick else args.mb,
        segment_bytes=64 * 1024 if args.quick else args.segment_bytes,
        keys=500 if args.quick else args.keys,
        batch_records=args.batch_records,
        value_bytes=args.value_bytes,
        idle_s=1.0 if args.quick else args.idle_s,
        after_s=1.0 if args.quick else args.after_s,
        io_max_bytes_per_second=args.io_max_bytes_per_second,
        rounds=1 if args.quick else args.rounds,
    )
    return settings, args


def main(argv: list[str] | None = None) -> None:
    settings, args = parse_settings(argv)
    started = time.time()
    with zookeeper_workdir("cleaner-live-bench-", keep=args.keep) as (server, workdir):
        results = asyncio.run(run(settings, workdir, server.connect_string))
    full = {
        "benchmark": "cleaner_live",
        "machine": machine(),
        "command": " ".join([Path(sys.executable).name, "-m", "bench.cleaner_live", *(argv or sys.argv[1:])]),
        "settings": {**asdict(settings), "log_cleaner_backoff_ms": BACKOFF_MS},
        "wall_s": round(time.time() - started, 1),
        **results,
    }
    write_report(args.out, full)
    headline = {
        phase: {k: full["data_plane_ms"][phase][k] for k in ("p50", "p99", "max")} for phase in PHASES
    }
    keys = [f"{figure}_cleaning_over_idle" for figure in ("p50", "p99", "mean")]
    keys += ["ratio_range_over_rounds", "cleaning"]
    print(json.dumps({"data_plane_ms": headline, **{k: full[k] for k in keys}}))


if __name__ == "__main__":
    main()
