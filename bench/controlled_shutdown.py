"""Controlled shutdown of a broker that leads 10,000 partitions: how long the broker waits.

A broker shutting down asks the controller to move its leaderships away first (ControlledShutdown);
its shutdown is blocked until the answer, so that answer's latency is what operators feel on every
rolling restart. Each run writes a fresh cluster into its own chroot (RF 3 over 3
``bench.ack_brokers``, broker 1 leading every partition), starts ``python -m controller``, waits until
its failover has been acknowledged, then sends ControlledShutdown v2 for broker 1 with its epoch to
the controller's RPC endpoint (from the ``controller_started`` event) and times request -> response.
It then checks in ZooKeeper that no partition is led by broker 1 or has it in its ISR, reads the
controller's ``controlled_shutdown_handled`` event, and waits until the LeaderAndIsr/UpdateMetadata
announcing the new leaders are acknowledged. Target: <= 1.5 s. Results go to
bench/results/controlled_shutdown.json and stdout.

    .venv/bin/python -m bench.controlled_shutdown [--partitions 10000] [--runs 3] [--quick] [--out PATH]
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

from bench.ack_brokers import AckBrokers, merge_stats
from bench.failover import ControllerRun, event_time, settled
from bench.machine import machine, write_report
from bench.measure import cpu_seconds, peak_rss_mib
from bench.zk_populate import Cluster, ensure_chroot, populate
from bench.zookeeper import zookeeper_workdir
from network.connection import KafkaConnection
from protocol import ApiKey, ErrorCode
from zkserver.server import ZooKeeperServer
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.batch_read import get_data_many

BROKERS = (1, 2, 3)
SHUTTING_DOWN = 1
TARGET_S = 1.5


async def verify(zk: AsyncZooKeeper, cluster: Cluster) -> dict[str, int]:
    """Partitions still led by the shut-down broker, or with it in their ISR, per ZooKeeper."""
    paths = []
    for t in range(-(-cluster.partitions // cluster.per_topic)):
        count = min(cluster.per_topic, cluster.partitions - t * cluster.per_topic)
        paths += [znodes.partition_state_path(cluster.topic(t), p) for p in range(count)]
    led = in_isr = unreadable = 0
    for path, result in zip(paths, await get_data_many(zk, paths), strict=True):
        state = None if isinstance(result, Exception) else znodes.decode_leader_isr_state(result[0], path)
        if state is None:
            unreadable += 1
            continue
        led += state.leader == SHUTTING_DOWN
        in_isr += SHUTTING_DOWN in state.isr
    return {"checked": len(paths), "still_led": led, "still_in_isr": in_isr, "unreadable": unreadable}


async def shutdown_request(run: ControllerRun, broker_epoch: int) -> tuple[float, dict[str, Any]]:
    started_event = run.first("controller_started")
    assert started_event is not None
    endpoint = znodes.Endpoint.parse(started_event["rpc_endpoint"])
    connection = await KafkaConnection.open(
        endpoint.host, endpoint.port, client_id=f"broker-{SHUTTING_DOWN}", connect_timeout=5
    )
    try:
        started = time.perf_counter()
        _, response = await connection.send(
            ApiKey.CONTROLLED_SHUTDOWN,
            2,
            {"broker_id": SHUTTING_DOWN, "broker_epoch": broker_epoch},
            timeout=120,
        )
        return time.perf_counter() - started, response
    finally:
        await connection.close()


async def one_run(server: ZooKeeperServer, index: int, partitions: int, workdir: Path) -> dict[str, Any]:
    connect = f"{server.connect_string}/controlled-shutdown-{index}"
    await ensure_chroot(connect)
    cluster = Cluster(partitions, BROKERS, leader=SHUTTING_DOWN)
    zk = AsyncZooKeeper(connect)
    await zk.start()
    ack = AckBrokers(len(BROKERS), zookeeper=connect)
    run = ControllerRun(workdir / f"controller-{index}", connect)
    try:
        await populate(zk, cluster)
        epochs = ack.start()
        run.start()
        await run.wait_until(settled(run, len(BROKERS)), 120, "acknowledged failover")
        cpu_before = cpu_seconds(run.pid)
        seconds, response = await shutdown_request(run, epochs[SHUTTING_DOWN].epoch)
        cpu_after = cpu_seconds(run.pid)
        await run.wait_until(lambda _: run.first("controlled_shutdown_handled") is not None, 30, "its event")
        checked = await verify(zk, cluster)
        # The LeaderAndIsr and UpdateMetadata that announce the new leaders, until answered.
        await run.wait_until(settled(run, len(BROKERS)), 60, "acknowledged shutdown")
        peak = peak_rss_mib(run.pid)
    finally:
        run.stop()
        stats = merge_stats(ack.stop())
        await zk.close()
    handled = run.first("controlled_shutdown_handled")
    began = run.first("controlled_shutdown_started")
    assert handled is not None and began is not None
    after = [e for e in run.events if e["kind"] == "response_received" and event_time(e) >= event_time(began)]
    return {
        "partitions": partitions,
        "request_to_response_s": round(seconds, 3),
        "error": ErrorCode(response["error_code"]).name,
        "remaining_partitions": len(response["remaining_partitions"]),
        "handled_duration_ms": handled["duration_ms"],
        "controller_cpu_s": (
            None if cpu_before is None or cpu_after is None else round(cpu_after - cpu_before, 2)
        ),
        "led": handled["led"],
        "followed": handled["followed"],
        "started_to_last_ack_s": round(max(map(event_time, after)) - event_time(began), 3) if after else None,
        "zookeeper": checked,
        "correct": checked["still_led"] == 0 and checked["still_in_isr"] == 0 and checked["unreadable"] == 0,
        "requests_with_failover": stats["requests"],
        "bytes_with_failover": stats["bytes"],
        "controller_peak_rss_mib": peak,
    }


async def run_all(server: ZooKeeperServer, args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    results = []
    for i in range(args.runs):
        r = await one_run(server, i, args.partitions, workdir)
        print(
            f"run {i + 1}: request -> response {r['request_to_response_s']} s "
            f"(handled in {r['handled_duration_ms']} ms), {r['error']}, "
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
    parser.add_argument("--heap", default="1g", help="the ZooKeeper JVM's -Xmx")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "controlled_shutdown.json"
    )
    args = parser.parse_args()
    if args.quick:
        args.partitions, args.runs = 2_000, 1

    with zookeeper_workdir("controlled-shutdown-bench-", args.heap) as (server, workdir):
        results = asyncio.run(run_all(server, args, workdir))
    median = statistics.median(r["request_to_response_s"] for r in results)
    summary = {
        "median_request_to_response_s": round(median, 3),
        "median_handled_ms": round(statistics.median(r["handled_duration_ms"] for r in results), 3),
        "all_correct": all(r["correct"] for r in results),
        "target_s": TARGET_S,
        "target_met": median <= TARGET_S,
    }
    print(json.dumps(summary))
    report = {
        "benchmark": "controlled_shutdown",
        "machine": machine(),
        "command": " ".join([Path(sys.executable).name, "-m", "bench.controlled_shutdown", *sys.argv[1:]]),
        "brokers": len(BROKERS),
        "replication_factor": 3,
        **summary,
        "results": results,
    }
    write_report(args.out, report)


if __name__ == "__main__":
    main()
