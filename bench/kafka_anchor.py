"""Kafka's controller as the anchor: Apache Kafka 3.9's ZooKeeper controller beside ours, in one run.

Same machine, same ZooKeeper, same simulated brokers (``bench.ack_brokers`` on Kafka 3.9's wire:
LeaderAndIsr v7, UpdateMetadata v8, StopReplica v4, each answered at once with Kafka's response
layout), so that the brokers cost both controllers the same; each figure beside a floor measured in
the same run, and each implementation as a ratio to the other.

**Failover** (``bench.failover``'s ``FailoverCase``, at ``--ibp 3.9``): for each ``--partitions``
count (RF 3 over ``--brokers`` simulated brokers, every leader live), one cluster in its own chroot,
then ``--runs`` controller processes of each implementation, taking turns (ours first):

* ours: ``python -m controller`` at ``inter.broker.protocol.version=3.9``, as ``bench.failover`` runs it;
* Kafka's: a Kafka 3.9 broker (id 0, hosting no partition, the simulated brokers' listener names: a
  ``CONTROLLER`` control plane beside ``PLAINTEXT``, ``auto.leader.rebalance.enable=false`` like ours)
  started while ``/controller`` is free, so its KafkaController wins the election; stopped (SIGTERM)
  after the run, which frees ``/controller`` for the next.

Each process takes over **cold** (its first takeover: process start-up is not timed, but its first
run of every code path is), then ``--reelections`` times **warm**: ``/controller`` is deleted under
it, and both implementations then resign and win the election again in the same process, a full
failover each time. A real failover is the warm kind for Kafka (a long-running broker's JVM takes
over) and for ours (a standby candidate that has waited, imported and connected).

Both are timed the same way, from outside: from the election's commit (``/controller_epoch``'s mtime;
both bump it in the multi-op that creates ``/controller``) to the last LeaderAndIsr or UpdateMetadata
of that epoch a simulated broker answered (``elected_to_last_ack_s``). Kafka's controller also sends
UpdateMetadata to its own broker, a live broker like any other; that answer is not waited for: the
figure ends at the simulated brokers' last answer. A run is over when every request the controller
says it sent (ours: its event log; Kafka's: the ``Sending LeaderAndIsr request to broker …`` and
``Sending UpdateMetadata request to brokers …`` lines of its state-change log) has been answered and
nothing moved for half a second; the partitions those requests carried are kept (``acked``). The
floor: one multi-read of every partition state (``bench.failover``), which any takeover does.

**Controlled shutdown** (``bench.controlled_shutdown``): ``--shutdown-runs`` runs per implementation,
each on a fresh cluster where broker 1 leads ``--shutdown-partitions`` partitions (RF 3 over 3
brokers); after the failover is acknowledged, broker 1 sends ControlledShutdown v3 with its epoch,
to our controller's RPC endpoint or, as a Kafka broker does, to the controller's broker
(``/controller``) at its registered inter-broker endpoint, and the answer is timed; ZooKeeper must
then show no partition led by broker 1 or with it in its ISR. Before it, each controller has taken
over ``--reelections`` more times (warm), and Kafka's has drained its event queue; the shutdown
itself is each process's first. The floor: one conditional setData of every partition state it
leads, in 500-op multis (``bench.controlled_shutdown``).

Kafka runs with its stock JVM options (``kafka-run-class.sh``'s G1 settings, C2) and ``-Xms``/``-Xmx``
``--kafka-heap``, and its stock log levels (``config/log4j.properties``: ``kafka.controller`` at TRACE
into controller.log, ``state.change.logger`` at INFO into state-change.log). The jars come from
``make kafka``; without them this stops. ``--kafka-config`` sets more broker properties, to see
what a setting changes (the anchor itself is Kafka at its defaults). Results go to
bench/results/kafka_anchor.json (with the machine, the date and the machine's load) and a table on
stdout.

    .venv/bin/python -m bench.kafka_anchor [--partitions 10000,100000] [--brokers 3] [--runs 3]
        [--shutdown-partitions 10000] [--shutdown-runs 3] [--quick] [--heap 2g] [--kafka-heap 2g]
        [--reelections 1] [--kafka-config KEY=VALUE] [--timeout 300] [--workdir DIR] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.controlled_shutdown import BROKERS as SHUTDOWN_BROKERS
from bench.controlled_shutdown import one_run, summary
from bench.failover import FailoverCase
from bench.kafka_controller import IBP, KAFKA_PERFORMANCE_OPTS, KafkaSettings, java_version
from bench.kafka_takeover import kafka_controlled_shutdown, kafka_failover
from bench.machine import machine, write_report
from bench.measure import cpu_stall_us, ratio, stall_share
from bench.zookeeper import zookeeper_workdir
from kafkapeer.jars import BROKER, KAFKA_39, classpath
from zkserver.server import ZooKeeperServer


def median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return round(statistics.median(values), 3) if values else None


def side(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One implementation's takeovers of a kind in a failover case: medians and every run."""
    return {
        "median_s": median(runs, "elected_to_last_ack_s"),
        "runs_s": [r["elected_to_last_ack_s"] for r in runs],
        "median_controller_cpu_after_election_s": median(runs, "controller_cpu_after_election_s"),
        "median_ack_brokers_cpu_s": median(runs, "ack_brokers_cpu_s"),
        "median_cpu_stall_share": median(runs, "cpu_stall_share"),
        "runs": runs,
    }


def compared(ours: list[dict[str, Any]], kafka: list[dict[str, Any]], floor: float | None) -> dict[str, Any]:
    """Both sides of one kind of takeover, and their ratios to the floor and to each other."""
    a, b = side(ours), side(kafka)
    return {
        "ours": a,
        "kafka": b,
        "ours_over_floor": ratio(a["median_s"], floor),
        "kafka_over_floor": ratio(b["median_s"], floor),
        "ours_over_kafka": ratio(a["median_s"], b["median_s"]),
        "cpu_after_election_ours_over_kafka": ratio(
            a["median_controller_cpu_after_election_s"], b["median_controller_cpu_after_election_s"]
        ),
    }


async def failover_case(
    server: ZooKeeperServer, partitions: int, args: argparse.Namespace, workdir: Path
) -> dict[str, Any]:
    """``args.runs`` processes of each implementation, taking turns in one cluster: each takes over
    cold, then ``args.reelections`` times warm."""
    case = FailoverCase(server, partitions, args.brokers, workdir, timeout=args.timeout, ibp=IBP)
    kafka_cold: list[dict[str, Any]] = []
    kafka_warm: list[dict[str, Any]] = []

    def show(who: str, runs: list[dict[str, Any]]) -> None:
        print(f"  {who:<6} elected -> last ack {[r['elected_to_last_ack_s'] for r in runs]} s", flush=True)

    try:
        await case.start()
        for i in range(args.runs):
            warm_before = len(case.warm_runs)
            ours = await case.failover(args.reelections)
            show("ours", [ours, *case.warm_runs[warm_before:]])
            cold, warm = await kafka_failover(case, i, args.kafka, args.reelections)
            case.takeovers += 1 + len(warm)
            kafka_cold.append(cold)
            kafka_warm += warm
            show("kafka", [cold, *warm])
    finally:
        case.stop()
    floor = case.state_read_s
    return {
        "partitions": partitions,
        "brokers": args.brokers,
        "replication_factor": 3,
        "figure": "elected_to_last_ack_s",
        "floor": "partition_state_read_s",
        "floor_s": None if floor is None else round(floor, 3),
        "cold": compared(case.runs, kafka_cold, floor),
        "warm": compared(case.warm_runs, kafka_warm, floor) if args.reelections else None,
        "ours_detail": case.result(),
        "ours_detail_note": "bench.failover's figures of our cold takeovers; its request and byte counts "
        "are per takeover of either implementation (the ack brokers served both)",
    }


async def shutdown_case(server: ZooKeeperServer, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """``args.shutdown_runs`` controlled shutdowns per implementation, taking turns, each on a fresh
    cluster."""
    ours: list[dict[str, Any]] = []
    kafka: list[dict[str, Any]] = []
    partitions = args.shutdown_partitions
    for i in range(args.shutdown_runs):
        r = await one_run(
            server,
            i,
            partitions,
            workdir,
            ibp=IBP,
            prefix="anchor-shutdown-ours",
            reelections=args.reelections,
        )
        ours.append(r)
        print(f"  ours   request -> response {r['request_to_response_s']:.3f} s", flush=True)
        r = await kafka_controlled_shutdown(server, i, partitions, workdir, args)
        kafka.append(r)
        print(f"  kafka  request -> response {r['request_to_response_s']:.3f} s", flush=True)
    ours_side, kafka_side = summary(ours), summary(kafka)
    floor = statistics.median(r["partition_state_write_s"] for r in ours + kafka)
    return {
        "partitions": partitions,
        "brokers": len(SHUTDOWN_BROKERS),
        "replication_factor": 3,
        "figure": "request_to_response_s",
        "floor": "partition_state_write_s",
        "floor_s": round(floor, 3),
        "ours": {"median_s": ours_side["median_request_to_response_s"], **ours_side, "runs": ours},
        "kafka": {"median_s": kafka_side["median_request_to_response_s"], **kafka_side, "runs": kafka},
        "ours_over_floor": ratio(ours_side["median_request_to_response_s"], floor),
        "kafka_over_floor": ratio(kafka_side["median_request_to_response_s"], floor),
        "ours_over_kafka": ratio(
            ours_side["median_request_to_response_s"], kafka_side["median_request_to_response_s"]
        ),
    }


async def run_all(server: ZooKeeperServer, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    failover = []
    for partitions in args.partition_counts:
        print(f"failover: {partitions} partitions over {args.brokers} brokers", flush=True)
        failover.append(await failover_case(server, partitions, args, workdir))
    shutdown = None
    if args.shutdown_runs:
        print(f"controlled shutdown of a broker leading {args.shutdown_partitions} partitions", flush=True)
        shutdown = await shutdown_case(server, args, workdir)
    return {"failover": failover, "controlled_shutdown": shutdown}


def table_rows(report: dict[str, Any]) -> list[tuple[str, Any, Any, Any, Any, Any, Any]]:
    """(figure, ours s, Kafka's s, floor s, ours/floor, Kafka/floor, ours/Kafka) per line."""
    rows = []
    cases = []
    for c in report["failover"]:
        for kind in ("cold", "warm"):
            if c[kind] is not None:
                cases.append((f"failover, {c['partitions']:,} partitions, {kind}", {**c, **c[kind]}))
    if report["controlled_shutdown"] is not None:
        c = report["controlled_shutdown"]
        cases.append((f"controlled shutdown, {c['partitions']:,} led", c))
    for label, c in cases:
        rows.append(
            (
                label,
                c["ours"]["median_s"],
                c["kafka"]["median_s"],
                c["floor_s"],
                c["ours_over_floor"],
                c["kafka_over_floor"],
                c["ours_over_kafka"],
            )
        )
    return rows


def print_table(report: dict[str, Any]) -> None:
    head = ("ours s", "kafka s", "floor s", "ours/floor", "kafka/floor", "ours/kafka")
    print(f"{'figure':<36}" + "".join(f"{h:>12}" for h in head))
    for label, *cells in table_rows(report):
        print(f"{label:<36}" + "".join(f"{'-' if c is None else c:>12}" for c in cells))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.kafka_anchor",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--partitions", default="10000,100000", help="failover cases, comma-separated")
    parser.add_argument("--brokers", type=int, default=3, help="simulated brokers of the failover cases")
    parser.add_argument(
        "--runs",
        type=int,
        default=3,
        help="controller processes per implementation and case (cold takeovers)",
    )
    parser.add_argument(
        "--reelections",
        type=int,
        default=1,
        help="warm takeovers per process after its first, each caused by deleting /controller",
    )
    parser.add_argument("--shutdown-partitions", type=int, default=10_000, help="partitions broker 1 leads")
    parser.add_argument(
        "--shutdown-runs", type=int, default=3, help="controlled shutdowns per implementation (0: none)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="2,000 partitions, one run of each (a smoke run, not a figure)"
    )
    parser.add_argument("--heap", default="2g", help="the ZooKeeper JVM's -Xmx")
    parser.add_argument("--kafka-heap", default="2g", help="the Kafka broker's -Xms and -Xmx")
    parser.add_argument(
        "--kafka-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a property of Kafka's broker beyond the bench's (repeatable), e.g. "
        "zookeeper.max.in.flight.requests=100; the anchor is Kafka at its defaults",
    )
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait for one takeover")
    parser.add_argument(
        "--workdir",
        type=Path,
        help="keep ZooKeeper's data and every process's logs here (default: a temporary directory, removed)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "kafka_anchor.json"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.partitions, args.runs, args.shutdown_partitions, args.shutdown_runs = "2000", 1, 2000, 1
        args.reelections = 1
    args.partition_counts = [int(p) for p in args.partitions.split(",")]
    overrides = dict(item.partition("=")[::2] for item in args.kafka_config)
    if any(not key or not value for key, value in overrides.items()):
        parser.error("--kafka-config takes KEY=VALUE")
    args.kafka = KafkaSettings(args.kafka_heap, overrides)
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    classpath(BROKER)  # JarsMissing, naming `make kafka`, before anything starts
    started = datetime.now(UTC)
    load_before, stall_before, wall_before = os.getloadavg(), cpu_stall_us(), time.monotonic()
    with zookeeper_workdir("kafka-anchor-bench-", args.heap, args.workdir) as (server, workdir):
        results = asyncio.run(run_all(server, args, workdir))
    load = {
        "loadavg_1_5_15_before": [round(v, 2) for v in load_before],
        "loadavg_1_5_15_after": [round(v, 2) for v in os.getloadavg()],
        "cpu_stall_share": stall_share(stall_before, cpu_stall_us(), time.monotonic() - wall_before),
    }
    report = {
        "benchmark": "kafka_anchor",
        "machine": machine(),
        "date": started.isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - wall_before, 1),
        "load": load,
        "command": " ".join(
            [Path(sys.executable).name, "-m", "bench.kafka_anchor", *(sys.argv[1:] if argv is None else argv)]
        ),
        "kafka": {
            "version": KAFKA_39,
            "java": java_version(),
            "heap": args.kafka.heap,
            "jvm_options": list(KAFKA_PERFORMANCE_OPTS),
            "overrides": args.kafka.overrides,
        },
        "inter_broker_protocol_version": IBP,
        "zookeeper_heap": args.heap,
        **results,
    }
    print()
    print_table(report)
    print(f"load: {load}")
    write_report(args.out, report)


if __name__ == "__main__":
    main()
