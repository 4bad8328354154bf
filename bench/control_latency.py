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
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.codec import topic_states
from bench.control_broker import QUEUE_SIZE, SCRAPE_INTERVAL_S, BrokerRun, wait_saturated
from bench.control_load import LoadGenerator
from bench.control_phases import attach_broker_times, measure_phase, report_phase
from bench.control_requests import ProbeRequests, elect, live_brokers, update_metadata
from bench.control_settings import (
    CONTROLLER_ID,
    METADATA_VERSION,
    PROBE_TIMEOUT_S,
    UPDATE_METADATA_VERSION,
    Settings,
    add_probe_options,
    probe_settings,
)
from bench.machine import machine, write_report
from bench.measure import ratio
from bench.zookeeper import zookeeper_workdir
from network.connection import KafkaConnection
from protocol import ApiKey, ErrorCode
from zkstore.aio import AsyncZooKeeper

TARGET_DEDICATED_OVER_IDLE = 2.0
TARGET_SHARED_OVER_DEDICATED = 10.0


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
        await elect(zk)
        return {mode: await run_mode(mode, zookeeper, workdir, settings) for mode in ("dedicated", "shared")}
    finally:
        await zk.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_probe_options(parser)
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
    settings = probe_settings(
        args, produce_connections=args.produce_connections, switch_interval_ms=args.switch_interval_ms
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
