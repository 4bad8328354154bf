"""Controlled shutdown of a broker that leads 10,000 partitions: how long the broker waits.

A broker shutting down asks the controller to move its leaderships away first (ControlledShutdown);
its shutdown is blocked until the answer, so that answer's latency is what operators feel on every
rolling restart. Each run writes a fresh cluster into its own chroot (RF 3 over 3
``bench.ack_brokers``, broker 1 leading every partition), starts ``python -m controller``, waits until
its failover has been acknowledged, then sends ControlledShutdown for broker 1 with its epoch to
the controller's RPC endpoint (from the ``controller_started`` event) and times request -> response.
It then checks in ZooKeeper that no partition is led by broker 1 or has it in its ISR, reads the
controller's ``controlled_shutdown_handled`` event, and waits until the LeaderAndIsr/UpdateMetadata
announcing the new leaders are acknowledged (``request_to_last_ack_s``: as the ack brokers saw it).
Target: <= 1.5 s.

The floor beside it: before the controller starts, one conditional setData of every partition state
broker 1 leads, of the bytes it holds, in 500-op multis with a few in flight (``time_state_write``):
the ZooKeeper writes any controlled shutdown must make (each of those partitions gets a new leader
and ISR), timed alone. ``--ibp 3.9`` runs the controller and the ack brokers on Apache Kafka 3.9's
wire and sends ControlledShutdown v3 (else v2). ``bench.kafka_anchor`` runs the same against
Apache Kafka 3.9's controller. Results go to bench/results/controlled_shutdown.json and stdout.

    .venv/bin/python -m bench.controlled_shutdown [--partitions 10000] [--runs 3] [--ibp 2.3-IV2|3.9]
        [--quick] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.ack_brokers import AckBrokers, merge_progress, merge_stats
from bench.controller_run import ControllerRun, event_time, reelect, settled
from bench.failover import state_paths
from bench.machine import machine, write_report
from bench.measure import cpu_seconds, peak_rss_mib, ratio
from bench.takeover import ACK_APIS
from bench.zk_populate import IN_FLIGHT, Cluster, commit_pipelined, ensure_chroot, populate
from bench.zookeeper import zookeeper_workdir
from network.connection import KafkaConnection
from protocol import ApiKey, ErrorCode
from protocol.ibp import DEFAULT_IBP, control_wire
from zkserver.server import ZooKeeperServer
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.batch_read import get_data_many
from zkstore.ops import SetData

BROKERS = (1, 2, 3)
SHUTTING_DOWN = 1
TARGET_S = 1.5


async def verify(zk: AsyncZooKeeper, cluster: Cluster) -> dict[str, int]:
    """Partitions still led by the shut-down broker, or with it in their ISR, per ZooKeeper."""
    paths = state_paths(cluster)
    led = in_isr = unreadable = 0
    for path, result in zip(paths, await get_data_many(zk, paths), strict=True):
        state = None if isinstance(result, Exception) else znodes.decode_leader_isr_state(result[0], path)
        if state is None:
            unreadable += 1
            continue
        led += state.leader == SHUTTING_DOWN
        in_isr += SHUTTING_DOWN in state.isr
    return {"checked": len(paths), "still_led": led, "still_in_isr": in_isr, "unreadable": unreadable}


async def time_state_write(zk: AsyncZooKeeper, cluster: Cluster) -> tuple[int, float]:
    """The floor: (partitions, seconds) to rewrite the state znode of every partition the shutting-down
    broker leads, each a setData at the version read of the bytes it holds (so nothing changes but
    versions), in 500-op multis with a few in flight. Any controlled shutdown writes at least these."""
    paths = state_paths(cluster)
    ops = []
    for path, result in zip(paths, await get_data_many(zk, paths), strict=True):
        if isinstance(result, Exception):
            raise RuntimeError(f"{path} unreadable: {result!r}")
        data, stat = result
        state = znodes.decode_leader_isr_state(data, path)
        if state is not None and state.leader == SHUTTING_DOWN:
            ops.append(SetData(path, data, stat.version))
    started = time.perf_counter()
    await commit_pipelined(zk, ops, IN_FLIGHT)
    return len(ops), time.perf_counter() - started


def control_endpoint(run: ControllerRun) -> tuple[str, int]:
    """Where our controller takes ControlledShutdown: its RPC endpoint (``controller_started``)."""
    started_event = run.first("controller_started")
    assert started_event is not None
    endpoint = znodes.Endpoint.parse(started_event["rpc_endpoint"])
    return endpoint.host, endpoint.port


async def shutdown_request(
    endpoint: tuple[str, int], broker_epoch: int, version: int = 2
) -> tuple[float, float, dict[str, Any]]:
    """ControlledShutdown for broker 1 sent as broker 1 would: (wall-clock time sent, seconds until the
    answer, the answer)."""
    host, port = endpoint
    connection = await KafkaConnection.open(
        host, port, client_id=f"broker-{SHUTTING_DOWN}", connect_timeout=5
    )
    try:
        sent_at, started = time.time(), time.perf_counter()
        _, response = await connection.send(
            ApiKey.CONTROLLED_SHUTDOWN,
            version,
            {"broker_id": SHUTTING_DOWN, "broker_epoch": broker_epoch},
            timeout=120,
        )
        return sent_at, time.perf_counter() - started, response
    finally:
        await connection.close()


def last_ack_after(progress: dict[str, Any], epoch: int, sent_at: float) -> float | None:
    """Seconds from ``sent_at`` to the ack brokers' last answer of a LeaderAndIsr or UpdateMetadata of
    ``epoch``, if that answer came after it (the requests announcing the new leaders)."""
    last = [
        at
        for apis in merge_progress(progress, epoch).values()
        for api, (_, at) in apis.items()
        if api in ACK_APIS.values()
    ]
    return round(max(last) - sent_at, 3) if last and max(last) > sent_at else None


def cpu_used(before: float | None, after: float | None) -> float | None:
    """The controller's CPU seconds over the request, where both readings were had."""
    return None if before is None or after is None else round(after - before, 2)


def shutdown_result(
    partitions: int,
    reelections: int,
    version: int,
    state_write: tuple[int, float],
    answer: tuple[float, dict[str, Any]],
    own: dict[str, Any],
    checked: dict[str, int],
    stats: dict[str, Any],
    peak: float | None,
) -> dict[str, Any]:
    """One run's figures, alike for either controller: the floor (``state_write``: partitions written,
    seconds), the answer (seconds, body), ``own`` (the controller's CPU and what only that run records,
    such as its last acknowledgement), ZooKeeper's check, the ack brokers' traffic and the controller's
    peak RSS."""
    written, write_s = state_write
    seconds, response = answer
    return {
        "partitions": partitions,
        "reelections_before": reelections,
        "controlled_shutdown_version": version,
        "request_to_response_s": round(seconds, 3),
        "partition_state_write_s": round(write_s, 3),
        "partition_states_written": written,
        "over_state_write": ratio(seconds, write_s),
        "error": ErrorCode(response["error_code"]).name,
        "remaining_partitions": len(response["remaining_partitions"]),
        **own,
        "zookeeper": checked,
        "correct": checked["still_led"] == 0 and checked["still_in_isr"] == 0 and checked["unreadable"] == 0,
        "requests_with_failover": stats["requests"],
        "bytes_with_failover": stats["bytes"],
        "controller_peak_rss_mib": peak,
    }


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over runs: the answer, the floor, their ratio, and the last acknowledgement."""
    median = statistics.median(r["request_to_response_s"] for r in runs)
    floor = statistics.median(r["partition_state_write_s"] for r in runs)
    acks = [r["request_to_last_ack_s"] for r in runs if r.get("request_to_last_ack_s") is not None]
    return {
        "median_request_to_response_s": round(median, 3),
        "median_partition_state_write_s": round(floor, 3),
        "over_state_write": ratio(median, floor),
        "median_request_to_last_ack_s": round(statistics.median(acks), 3) if acks else None,
        "all_request_to_response_s": [r["request_to_response_s"] for r in runs],
        "all_correct": all(r["correct"] for r in runs),
    }


async def one_run(
    server: ZooKeeperServer,
    index: int,
    partitions: int,
    workdir: Path,
    *,
    ibp: str | None = None,
    prefix: str = "controlled-shutdown",
    reelections: int = 0,
) -> dict[str, Any]:
    """A fresh cluster in ``/<prefix>-<index>``, our controller, its failover acknowledged (then
    ``reelections`` more by the same process, ``/controller`` deleted under it), then broker 1's
    ControlledShutdown (v3 on Kafka 3.9's wire, else v2)."""
    connect = f"{server.connect_string}/{prefix}-{index}"
    await ensure_chroot(connect)
    cluster = Cluster(partitions, BROKERS, leader=SHUTTING_DOWN)
    zk = AsyncZooKeeper(connect)
    await zk.start()
    ack = AckBrokers(len(BROKERS), zookeeper=connect, ibp=ibp or DEFAULT_IBP)
    settings: dict[str, Any] = {} if ibp is None else {"inter.broker.protocol.version": ibp}
    run = ControllerRun(workdir / f"{prefix}-controller-{index}", connect, **settings)
    version = control_wire(ibp or DEFAULT_IBP).controlled_shutdown
    try:
        await populate(zk, cluster)
        written, write_s = await time_state_write(zk, cluster)
        epochs = ack.start()
        run.start()
        await run.wait_until(settled(run, len(BROKERS)), 120, "acknowledged failover")
        for _ in range(reelections):
            await reelect(run, connect, len(BROKERS), 120)
        cpu_before = cpu_seconds(run.pid)
        sent_at, seconds, response = await shutdown_request(
            control_endpoint(run), epochs[SHUTTING_DOWN].epoch, version
        )
        cpu_after = cpu_seconds(run.pid)
        await run.wait_until(lambda _: run.first("controlled_shutdown_handled") is not None, 30, "its event")
        checked = await verify(zk, cluster)
        # The LeaderAndIsr and UpdateMetadata that announce the new leaders, until answered.
        await run.wait_until(settled(run, len(BROKERS), run.latest_epoch()), 60, "acknowledged shutdown")
        peak = peak_rss_mib(run.pid)
        progress = await asyncio.to_thread(ack.progress)
    finally:
        run.stop()
        stats = merge_stats(ack.stop())
        await zk.close()
    handled = run.first("controlled_shutdown_handled")
    began = run.first("controlled_shutdown_started")
    assert handled is not None and began is not None
    after = [e for e in run.events if e["kind"] == "response_received" and event_time(e) >= event_time(began)]
    return shutdown_result(
        partitions,
        reelections,
        version,
        (written, write_s),
        (seconds, response),
        {
            "handled_duration_ms": handled["duration_ms"],
            "controller_cpu_s": cpu_used(cpu_before, cpu_after),
            "led": handled["led"],
            "followed": handled["followed"],
            "started_to_last_ack_s": (
                round(max(map(event_time, after)) - event_time(began), 3) if after else None
            ),
            "request_to_last_ack_s": last_ack_after(progress, began["controller_epoch"], sent_at),
        },
        checked,
        stats,
        peak,
    )


async def run_all(server: ZooKeeperServer, args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    results = []
    for i in range(args.runs):
        r = await one_run(server, i, args.partitions, workdir, ibp=args.ibp)
        print(
            f"run {i + 1}: request -> response {r['request_to_response_s']} s "
            f"(handled in {r['handled_duration_ms']} ms; write floor {r['partition_state_write_s']} s), "
            f"{r['error']}, "
            f"ZooKeeper {'correct' if r['correct'] else 'WRONG: ' + json.dumps(r['zookeeper'])}",
            flush=True,
        )
        results.append(r)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3, help="each on a fresh cluster; the median counts")
    parser.add_argument("--quick", action="store_true", help="one run of 2,000 partitions")
    parser.add_argument(
        "--ibp",
        default=None,
        help="the controller's and ack brokers' inter.broker.protocol.version (3.9: Kafka's wire)",
    )
    parser.add_argument("--heap", default="1g", help="the ZooKeeper JVM's -Xmx")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "controlled_shutdown.json"
    )
    args = parser.parse_args()
    if args.quick:
        args.partitions, args.runs = 2_000, 1

    with zookeeper_workdir("controlled-shutdown-bench-", args.heap) as (server, workdir):
        results = asyncio.run(run_all(server, args, workdir))
    figures = summary(results)
    figures |= {
        "median_handled_ms": round(statistics.median(r["handled_duration_ms"] for r in results), 3),
        "target_s": TARGET_S,
        "target_met": figures["median_request_to_response_s"] <= TARGET_S,
    }
    print(json.dumps(figures))
    report = {
        "benchmark": "controlled_shutdown",
        "machine": machine(),
        "command": " ".join([Path(sys.executable).name, "-m", "bench.controlled_shutdown", *sys.argv[1:]]),
        "brokers": len(BROKERS),
        "replication_factor": 3,
        "inter_broker_protocol_version": args.ibp or DEFAULT_IBP,
        **figures,
        "results": results,
    }
    write_report(args.out, report)


if __name__ == "__main__":
    main()
