"""The real-broker half of ``bench.broker_apply``: one broker process, its data plane timed while it applies
one full UpdateMetadata on its control listener, and where that request's time went.

:func:`measure_live` plays controller 1001 at epoch 1 (``bench.control_requests.elect``) towards one
``python -m broker`` with a dedicated CONTROLLER listener (``bench.control_broker.BrokerRun``), as
``bench.control_latency`` does. A :class:`DataPlaneProbe` process keeps one request in flight on the
PLAINTEXT listener (Metadata v1 for one topic, then ApiVersions, over and over, unless given other
requests: ``bench.cleaner_live`` sends Produce and Fetch) and times each round trip
with ``CLOCK_MONOTONIC``, which this process shares, so its samples fall into the benchmark's phases:
idle, the apply window (from writing the UpdateMetadata until its answer is read) and after. The window
is cut into the broker's own steps (:func:`broker_steps`) from its events (``control_request_received``
once the handler has decoded the request, ``control_request_handled`` once it has applied it, whose
``handle_ms`` starts where decoding ended) and its request metrics (queue and local time).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import multiprocessing
import signal
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bench.codec import topic_states
from bench.control_broker import BrokerRun
from bench.control_phases import cpu_now, cpu_shares
from bench.control_requests import SEED_WIRE, elect, live_brokers, update_metadata
from bench.control_settings import CONTROLLER_ID, PROBE_TIMEOUT_S, Settings
from bench.measure import cpu_seconds, cpu_stall_us, peak_rss_mib, ratio, stall_share, summary
from daemon.runtime import die_with_parent
from network.connection import BlockingConnection, KafkaConnection
from protocol import ApiKey, ErrorCode
from protocol.registry import message_codec
from zkstore.aio import AsyncZooKeeper

__all__ = [
    "BROKERS",
    "TARGET_P99_OVER_IDLE",
    "DataPlaneProbe",
    "Probes",
    "answer_error",
    "big_update",
    "data_plane",
    "measure_live",
    "monotonic_of",
    "update_codec",
]

BROKERS = 3
"""Live brokers in every UpdateMetadata; partitions have RF 3 over them (the broker under test is 1)."""
PER_TOPIC = 100
"""Partitions per topic, as ``bench.codec.topic_states`` makes them."""
PROBE_TOPIC = "topic-00000"
"""The topic the data-plane probe asks for: the first of the big request, sent alone first (warm-up), so
every Metadata answer, idle or during the apply, carries the same 100 partitions."""
TARGET_P99_OVER_IDLE = 3.0
TIMER = "kafka_network_requestmetrics_{}_sum"
TIMERS = {"queue": "requestqueuetimems", "local": "localtimems", "send": "responsesendtimems"}
DATA_APIS = ("Metadata", "ApiVersions")


def update_codec() -> Any:
    """The UpdateMetadata codec of the default wire (the seed's v7, ``max_broker_epoch``)."""
    return message_codec(ApiKey.UPDATE_METADATA, SEED_WIRE.update_metadata, "request", SEED_WIRE.dialect)


def big_update(partitions: int, endpoints: dict[str, tuple[str, int]], broker_epoch: int) -> dict[str, Any]:
    """A full UpdateMetadata: ``partitions`` over topics of 100, RF 3 over 3 live brokers."""
    states = topic_states(partitions, BROKERS, {"zk_version": 0, "offline_replicas": []}, PER_TOPIC)
    return update_metadata(states, live_brokers(BROKERS, endpoints), broker_epoch)


# -- the data-plane probe (its own process, so its timing never waits on this one's GIL)

Probes = tuple[tuple[ApiKey, int, dict[str, Any]], ...]
"""Requests a probe sends in turn: (API, version, body)."""

PROBES: Probes = (
    (ApiKey.METADATA, 1, {"topics": [{"name": PROBE_TOPIC}]}),
    (ApiKey.API_VERSIONS, 0, {}),
)


@dataclass(frozen=True)
class ProbeShare:
    host: str
    port: int
    ready: Any
    stop: Any
    out: Connection
    probes: Probes = PROBES
    """The requests sent in turn (``bench.cleaner_live`` sends Produce and Fetch)."""
    client_id: str = "broker-apply-probe"


def answer_error(response: dict[str, Any]) -> int:
    """A probe answer's error code: its first topic's (Metadata), else that topic's first partition's
    (Produce, Fetch), else its own (ApiVersions)."""
    topics = response.get("topics") or response.get("responses")
    if not topics:
        return int(response.get("error_code", 0))
    first = topics[0]
    if "error_code" in first:
        return int(first["error_code"])
    partitions = first.get("partition_responses") or first.get("partitions") or [{}]
    return int(partitions[0].get("error_code", 0))


def probe_worker(share: ProbeShare) -> None:
    """One request in flight until told to stop; sends back ``(start, seconds, api_key, ok)`` samples."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    connection = BlockingConnection(share.host, share.port, client_id=share.client_id, timeout=10)
    samples: list[tuple[float, float, int, bool]] = []
    share.ready.set()
    for api, version, body in itertools.cycle(share.probes):
        if share.stop.is_set():
            break
        began = time.monotonic()
        try:
            response = connection.send(api, version, body, timeout=PROBE_TIMEOUT_S)
        except (ConnectionError, TimeoutError):
            samples.append((began, time.monotonic() - began, int(api), False))
            break
        elapsed = time.monotonic() - began
        samples.append((began, elapsed, int(api), answer_error(response) == ErrorCode.NONE))
    connection.close()
    share.out.send(samples)


class DataPlaneProbe:
    """The probe process: started once, stopped once, its samples read back."""

    def __init__(
        self, host: str, port: int, probes: Probes = PROBES, name: str = "broker-apply-probe"
    ) -> None:
        context = multiprocessing.get_context("spawn")
        self._ready, self._stop = context.Event(), context.Event()
        self._receive, send = context.Pipe(duplex=False)
        share = ProbeShare(host, port, self._ready, self._stop, send, probes, name)
        self._process = context.Process(target=probe_worker, args=(share,), name=name)

    async def start(self, timeout: float = 60.0) -> None:
        self._process.start()
        deadline = time.monotonic() + timeout
        while not await asyncio.to_thread(self._ready.wait, 0.5):
            if not self._process.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the data-plane probe did not start (exit code {self._process.exitcode})")

    @property
    def pid(self) -> int:
        assert self._process.pid is not None
        return self._process.pid

    async def stop(self, timeout: float = 60.0) -> list[tuple[float, float, int, bool]]:
        """Its samples (none if it died without sending them); the process is gone afterwards."""
        self._stop.set()
        samples: list[tuple[float, float, int, bool]] = []
        if await asyncio.to_thread(self._receive.poll, timeout):
            samples = self._receive.recv()
        await asyncio.to_thread(self._process.join, 10)
        if self._process.is_alive():
            self._process.terminate()
            await asyncio.to_thread(self._process.join, 5)
        return samples


# -- what the broker says about its requests


def request_times(port: int) -> dict[str, dict[str, float]]:
    """Cumulative queue, local and send milliseconds and counts per request name, from ``/metrics``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    wanted = {TIMER.format(metric): part for part, metric in TIMERS.items()}
    count_name = TIMER.format(TIMERS["local"]).replace("_sum", "_count")
    times: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            request = sample.labels.get("request")
            if request is None:
                continue
            if sample.name in wanted:
                times.setdefault(request, {})[wanted[sample.name]] = sample.value
            elif sample.name == count_name:
                times.setdefault(request, {})["count"] = sample.value
    return times


def mean_times(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Per data-plane API between two scrapes: requests handled and their mean queue (which includes
    the pause at the data plane's checkpoint before each request), local and send milliseconds."""
    means: dict[str, Any] = {}
    for api in DATA_APIS:
        start, end = before.get(api, {}), after.get(api, {})
        count = end.get("count", 0.0) - start.get("count", 0.0)
        means[api] = {"requests": int(count)} | {
            f"{part}_ms_mean": round((end.get(part, 0.0) - start.get(part, 0.0)) / count, 3)
            if count
            else None
            for part in TIMERS
        }
    return means


def monotonic_of(ts: str, offset: float) -> float:
    """An event's wall-clock ``ts`` on this machine's monotonic clock (``offset``: wall - monotonic)."""
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() - offset


def broker_steps(
    marks: dict[str, float], events: list[dict[str, Any]], correlation_id: int, local_ms: float | None
) -> dict[str, tuple[float, float]]:
    """The apply window cut into the broker's steps, as (start, end) on the monotonic clock. Empty if
    the request's events are missing.

    * transfer: from writing the request until the broker had read the whole frame;
    * queue: in the control plane's queue;
    * decode: the handler thread decoding (with the cyclic collector paused, ``protocol/message_codec``);
    * gc_after_decode: from the end of decoding (``handle_ms`` starts there) to the
      ``control_request_received`` event, whose allocation is the first after decoding: the young
      collection it starts walks every object the decoder made (part 1 times it alone);
    * apply: to the ``control_request_handled`` event (``MetadataCache.update``);
    * finish: freeing the decoded request, encoding and writing the answer, reading it here.
    """
    found = {
        e["kind"]: e
        for e in events
        if e.get("api") == "UpdateMetadata" and e.get("correlation_id") == correlation_id
    }
    received, handled = found.get("control_request_received"), found.get("control_request_handled")
    if received is None or handled is None or local_ms is None:
        return {}
    decoded = monotonic_of(received["ts"], marks["offset"])
    applied = monotonic_of(handled["ts"], marks["offset"])
    dequeued = min(decoded, applied - local_ms / 1000)
    started = min(decoded, max(dequeued, applied - handled["handle_ms"] / 1000))
    read = max(marks["sent"], dequeued - handled["queue_ms"] / 1000)
    return {
        "transfer": (marks["sent"], read),
        "queue": (read, dequeued),
        "decode": (dequeued, started),
        "gc_after_decode": (started, decoded),
        "apply": (decoded, applied),
        "finish": (applied, marks["answered"]),
    }


# -- the run


def data_plane(
    samples: list[tuple[float, float, int, bool]],
    start: float,
    end: float,
    *,
    overlap: bool = True,
    apis: tuple[ApiKey, ...] = (ApiKey.METADATA, ApiKey.API_VERSIONS),
) -> dict[str, Any]:
    """Round trips (ms) that overlapped ``[start, end]`` (or, not ``overlap``, lay wholly inside it),
    all of them and per API of ``apis``, and the answers per second that arrived within it."""
    inside = [
        (s, d, api, ok)
        for s, d, api, ok in samples
        if (s < end and s + d > start if overlap else s >= start and s + d <= end)
    ]
    milliseconds = [d * 1000 for _, d, _, _ in inside]
    return {
        **summary(milliseconds),
        "per_s": round(sum(start <= s + d <= end for s, d, *_ in samples) / (end - start), 1)
        if end > start
        else None,
        "failed": sum(not ok for *_, ok in inside),
        "by_api": {
            ApiKey(key).name: summary([d * 1000 for _, d, api, _ in inside if api == key]) for key in apis
        },
    }


def cores(before: dict[str, float | None], after: dict[str, float | None], seconds: float) -> dict[str, Any]:
    """Cores used over ``seconds`` by the broker, by this benchmark with its probe, and by the rest of
    the machine (``other``: another benchmark or test run skews every figure)."""
    shares = cpu_shares(before, after, seconds)
    return {
        "broker": shares["broker"],
        "benchmark_and_probe": shares["benchmark"],
        "other": shares["other"],
        "machine": shares["machine"],
    }


async def apply_window(
    broker: BrokerRun, connection: KafkaConnection, raw: bytes, probe_pid: int, seconds: tuple[float, float]
) -> dict[str, Any]:
    """Idle for ``seconds[0]``, then one UpdateMetadata of ``raw``, then ``seconds[1]`` more; the
    moments, the broker's request times before and after each, CPU and the answer."""
    port, pid = broker.metrics_port, broker.pid

    def cpu() -> tuple[dict[str, float | None], int | None]:
        return cpu_now(pid, None, cpu_seconds(probe_pid) or 0.0), cpu_stall_us()

    scrapes = [await asyncio.to_thread(request_times, port)]
    marks, used = {"idle": time.monotonic()}, [cpu()]
    await asyncio.sleep(seconds[0])
    marks["idle_end"] = time.monotonic()
    used.append(cpu())
    scrapes.append(await asyncio.to_thread(request_times, port))
    marks["sent"], marks["offset"] = time.monotonic(), time.time() - time.monotonic()
    used.append(cpu())
    correlation_id, response = await connection.send(
        ApiKey.UPDATE_METADATA, SEED_WIRE.update_metadata, raw, timeout=PROBE_TIMEOUT_S
    )
    marks["answered"] = time.monotonic()
    used.append(cpu())
    scrapes.append(await asyncio.to_thread(request_times, port))
    await asyncio.sleep(seconds[1])
    marks["after"] = time.monotonic()
    spans = {
        "idle": (0, 1, marks["idle_end"] - marks["idle"]),
        "window": (2, 3, marks["answered"] - marks["sent"]),
    }
    return {
        "marks": marks,
        "correlation_id": correlation_id,
        "error": ErrorCode.name_of(response["error_code"]),
        "scrapes": scrapes,
        "cpu_cores": {k: cores(used[a][0], used[b][0], s) for k, (a, b, s) in spans.items()},
        "cpu_stall_share": {k: stall_share(used[a][1], used[b][1], s) for k, (a, b, s) in spans.items()},
    }


def broker_settings(partitions: int, idle_s: float) -> Settings:
    """The broker's own defaults (8 data-plane threads, a queue of 500); no load generators here."""
    return Settings(
        partitions=partitions,
        brokers=BROKERS,
        io_threads=8,
        queued_max_requests=500,
        connections=0,
        pipeline_depth=0,
        load_processes=0,
        produce_connections=0,
        interval_ms=0.0,
        duration_s=idle_s,
        saturation_timeout_s=0.0,
        switch_interval_ms=None,
    )


async def prepare(broker: BrokerRun, partitions: int) -> tuple[KafkaConnection, bytes, dict[str, Any]]:
    """Encode the big request (before any timing), connect as the controller and warm the cache with
    the probe's topic alone."""
    endpoints = broker.endpoints()
    codec = update_codec()

    def encoded() -> tuple[bytes, dict[str, Any]]:
        body = big_update(partitions, endpoints, broker.epoch)
        began = time.perf_counter()
        raw = codec.encode(body)
        return raw, {"encode_s": round(time.perf_counter() - began, 3), "bytes": len(raw)}

    raw, built = await asyncio.to_thread(encoded)
    connection = await KafkaConnection.open(
        *endpoints["CONTROLLER"], client_id=f"controller-{CONTROLLER_ID}", connect_timeout=10
    )
    warm = big_update(PER_TOPIC, endpoints, broker.epoch)
    _, response = await connection.send(
        ApiKey.UPDATE_METADATA, SEED_WIRE.update_metadata, warm, timeout=PROBE_TIMEOUT_S
    )
    if response["error_code"]:
        raise RuntimeError(f"warm-up UpdateMetadata failed: {ErrorCode.name_of(response['error_code'])}")
    return connection, raw, built


def live_report(
    window: dict[str, Any], samples: list[tuple[float, float, int, bool]], events: list[dict[str, Any]]
) -> dict[str, Any]:
    """The window's figures: data-plane latency idle, during and after, and per broker step."""
    marks = window.pop("marks")
    idle_start, sent, answered = window.pop("scrapes")
    big = {
        part: answered.get("UpdateMetadata", {}).get(part, 0.0)
        - sent.get("UpdateMetadata", {}).get(part, 0.0)
        for part in TIMERS
    }
    steps = broker_steps(marks, events, window["correlation_id"], big["local"] or None)
    phases = {
        "idle": data_plane(samples, marks["idle"], marks["idle_end"], overlap=False),
        "during": data_plane(samples, marks["sent"], marks["answered"]),
        "after": data_plane(samples, marks["answered"], marks["after"], overlap=False),
    }
    length = marks["answered"] - marks["sent"]
    return {
        **window,
        "window_s": round(length, 3),
        "data_plane_ms": phases,
        "p99_during_over_idle": ratio(phases["during"]["p99"], phases["idle"]["p99"]),
        "p50_during_over_idle": ratio(phases["during"]["p50"], phases["idle"]["p50"]),
        "max_during_over_idle": ratio(phases["during"]["max"], phases["idle"]["max"]),
        "target_p99_over_idle_max": TARGET_P99_OVER_IDLE,
        "broker_steps_s": {name: round(end - start, 3) for name, (start, end) in steps.items()},
        "broker_steps_share": {name: ratio(end - start, length) for name, (start, end) in steps.items()},
        "update_metadata_ms": {part: round(value, 1) for part, value in big.items()},
        "data_plane_ms_by_step": {name: data_plane(samples, *span) for name, span in steps.items()},
        "data_plane_broker_ms": {
            "idle": mean_times(idle_start, sent),
            "during": mean_times(sent, answered),
        },
    }


async def measure_live(
    zookeeper: str, workdir: Path, partitions: int, idle_s: float, after_s: float
) -> dict[str, Any]:
    """Part 2: one broker process, idle then under one full UpdateMetadata of ``partitions``."""
    zk = AsyncZooKeeper(zookeeper)
    await zk.start()
    broker = BrokerRun("dedicated", workdir, zookeeper, broker_settings(partitions, idle_s))
    probe: DataPlaneProbe | None = None
    connection: KafkaConnection | None = None
    result: dict[str, Any] = {"partitions": partitions}
    try:
        await elect(zk)
        broker.start()
        await broker.wait_started()
        connection, raw, built = await prepare(broker, partitions)
        probe = DataPlaneProbe(*broker.endpoints()["PLAINTEXT"])
        await probe.start()
        window = await apply_window(broker, connection, raw, probe.pid, (idle_s, after_s))
        del raw
        samples = await probe.stop()
        probe = None
        result |= {**built, **live_report(window, samples, broker.events())}
        result["broker_peak_rss_mib"] = peak_rss_mib(broker.pid)
    finally:
        if probe is not None:
            with contextlib.suppress(Exception):
                await probe.stop()
        if connection is not None:
            await connection.close()
        result["broker_exit_code"] = broker.stop()
        await zk.close()
    result["broker_log_warnings"] = sum(" WARNING " in line for line in broker.tail(10_000).splitlines())
    return result


def step_rows(result: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], float | None]]:
    """The table's rows: each phase and each broker step with its data-plane figures and length."""
    for name in ("idle", "during", "after"):
        yield name, result["data_plane_ms"][name], None
    for name, figures in result["data_plane_ms_by_step"].items():
        yield f"  {name}", figures, result["broker_steps_s"][name]
