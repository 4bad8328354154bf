"""One probing phase of the control-latency benchmark, measured and then reported.

:func:`measure_phase` probes for ``duration_s`` while scraping the broker's metrics and counting the
load's requests and everyone's CPU; :func:`attach_broker_times` then matches each probe with the
broker's own queue and handle times (its ``control_request_handled`` events), and :func:`report_phase`
turns a phase into summaries (p50/p99/max), rates and CPU shares.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from collections.abc import Coroutine
from typing import Any

from bench.control_broker import BrokerRun, Scrapes, scrape_loop
from bench.control_load import PRODUCE_BATCHES, LoadGenerator
from bench.control_requests import ProbeRequests, Sample, probe
from bench.control_settings import Settings
from bench.measure import cpu_seconds, machine_busy_seconds, summary
from network.connection import KafkaConnection
from protocol import ApiKey

__all__ = ["attach_broker_times", "cpu_now", "cpu_shares", "measure_phase", "probe_sampling", "report_phase"]


def cpu_now(broker_pid: int, load: LoadGenerator | None, helper_s: float = 0.0) -> dict[str, float | None]:
    """CPU seconds so far of the broker, the load generators, this benchmark (this process and
    ``helper_s`` of its helper processes) and the whole machine."""
    load_cpu = [cpu_seconds(pid) for pid in load.pids] if load else []
    return {
        "broker": cpu_seconds(broker_pid),
        "load_generators": None if None in load_cpu else sum(c for c in load_cpu if c is not None),
        "benchmark": sum(os.times()[:2]) + helper_s,
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


async def probe_sampling(
    sampler: Coroutine[Any, Any, None],
    connection: KafkaConnection,
    requests: ProbeRequests,
    settings: Settings,
) -> list[Sample]:
    """One phase's probes, ``sampler`` (the broker's queue, read until cancelled) running beside them."""
    task = asyncio.create_task(sampler)
    try:
        return await probe(connection, requests, settings.duration_s, settings.interval_ms / 1000)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def measure_phase(
    name: str,
    broker: BrokerRun,
    connection: KafkaConnection,
    requests: ProbeRequests,
    settings: Settings,
    load: LoadGenerator | None,
) -> dict[str, Any]:
    scrapes = Scrapes()
    cpu_before, completed_before, produced_before, began = (
        cpu_now(broker.pid, load),
        load.completed if load else 0,
        load.produced if load else 0,
        time.monotonic(),
    )
    samples = await probe_sampling(scrape_loop(broker.metrics_port, scrapes), connection, requests, settings)
    elapsed = time.monotonic() - began
    cpu = cpu_shares(cpu_before, cpu_now(broker.pid, load), elapsed)
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
