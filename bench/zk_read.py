"""Reading every partition's state from ZooKeeper: pipelined single gets beside batched multi-reads.

A controller that takes over must read one ``/brokers/topics/T/partitions/P/state`` znode per
partition before it can act, so this read rate bounds failover time. The script starts its own
ZooKeeper (a fresh data dir, removed afterwards), writes ``--znodes`` partition states of ~80 bytes
in 500-op multis, then reads them all (a) with ``zk.get`` at bounded concurrency and (b) with
``get_data_many``; it also lists every topic's partitions both ways. Each figure is the best of
``--runs`` runs in the same process against the same server. Results go to
bench/results/zk_read.json (and stdout); nothing here is asserted.

The server gets a 1 GiB heap (``--heap``): 100,000 partitions are 200,000 znodes, and in the test
suite's 256 MiB the JVM spends its time collecting garbage, making every read ~30x slower.

    .venv/bin/python -m bench.zk_read [--znodes 100000] [--runs 3] [--heap 1g] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.machine import machine, write_report
from bench.zookeeper import jvm_opts, zookeeper_workdir
from zkserver.four_letter_words import four_letter_word
from zkserver.server import ZooKeeperServer
from zkstore import batch_read
from zkstore.aio import AsyncZooKeeper
from zkstore.batch_read import get_children_many, get_data_many
from zkstore.ops import Create, Op

PARTITIONS_PER_TOPIC = 100
CREATE_BATCH_OPS = 500
STATE = b'{"controller_epoch":1,"leader":%d,"version":1,"leader_epoch":0,"isr":[%d,%d,%d]}'


def state_path(topic: int, partition: int) -> str:
    return f"/brokers/topics/bench-{topic}/partitions/{partition}/state"


def layout(znodes: int) -> tuple[list[Op], list[str], list[str]]:
    """Create ops in parent-first order, the state paths to read, and the partition dirs to list."""
    ops: list[Op] = [Create("/brokers"), Create("/brokers/topics")]
    states: list[str] = []
    listings: list[str] = []
    topics = -(-znodes // PARTITIONS_PER_TOPIC)
    for t in range(topics):
        partitions = min(PARTITIONS_PER_TOPIC, znodes - t * PARTITIONS_PER_TOPIC)
        ops += [Create(f"/brokers/topics/bench-{t}"), Create(f"/brokers/topics/bench-{t}/partitions")]
        listings.append(f"/brokers/topics/bench-{t}/partitions")
        for p in range(partitions):
            leader = (t + p) % 3 + 1
            ops += [Create(f"/brokers/topics/bench-{t}/partitions/{p}")]
            ops += [Create(state_path(t, p), STATE % (leader, leader, leader % 3 + 1, (leader + 1) % 3 + 1))]
            states.append(state_path(t, p))
    return ops, states, listings


async def populate(zk: AsyncZooKeeper, ops: list[Op]) -> float:
    """Write ``ops`` in multis of CREATE_BATCH_OPS, a few in flight; returns the seconds taken."""
    started = time.perf_counter()
    batches = [ops[i : i + CREATE_BATCH_OPS] for i in range(0, len(ops), CREATE_BATCH_OPS)]
    # Parents come first in ``ops``, so a batch may only start once the previous one committed:
    # ZooKeeper applies a session's requests in order, so pipelining them is still safe.
    in_flight = 4
    for i in range(0, len(batches), in_flight):
        results = await asyncio.gather(*(zk.multi(batch) for batch in batches[i : i + in_flight]))
        failed = [r for batch in results for r in batch if isinstance(r, Exception)]
        if failed:
            raise RuntimeError(f"creating the bench znodes failed: {failed[0]!r}")
    return time.perf_counter() - started


async def best_of(runs: int, read: Callable[[], Awaitable[list[Any]]]) -> tuple[list[float], list[Any]]:
    """Wall-clock seconds of each run, and the last run's results (to check them)."""
    seconds: list[float] = []
    results: list[Any] = []
    for _ in range(runs):
        started = time.perf_counter()
        results = await read()
        seconds.append(time.perf_counter() - started)
    return seconds, results


def figures(ops: int, seconds: list[float]) -> dict[str, Any]:
    best = min(seconds)
    return {
        "ops": ops,
        "best_s": round(best, 4),
        "ops_per_s": round(ops / best),
        "all_s": [round(s, 4) for s in seconds],
    }


async def run(server: ZooKeeperServer, args: argparse.Namespace) -> dict[str, Any]:
    zk = AsyncZooKeeper(server.connect_string)
    await zk.start()
    try:
        ops, states, listings = layout(args.znodes)
        create_s = await populate(zk, ops)
        print(f"created {len(ops)} znodes in {create_s:.2f} s ({len(ops) / create_s:,.0f} ops/s)")

        def gets() -> Awaitable[list[Any]]:
            return get_data_many(zk, states, use_multi_read=False, fallback_in_flight=args.get_concurrency)

        def multi_reads() -> Awaitable[list[Any]]:
            return get_data_many(
                zk, states, batch_ops=args.batch_ops, max_in_flight=args.in_flight, use_multi_read=True
            )

        def child_gets() -> Awaitable[list[Any]]:
            return get_children_many(
                zk, listings, use_multi_read=False, fallback_in_flight=args.get_concurrency
            )

        def child_multi_reads() -> Awaitable[list[Any]]:
            return get_children_many(
                zk, listings, batch_ops=args.batch_ops, max_in_flight=args.in_flight, use_multi_read=True
            )

        get_s, by_get = await best_of(args.runs, gets)
        multi_s, by_multi = await best_of(args.runs, multi_reads)
        if by_get != by_multi or any(not isinstance(r, tuple) for r in by_multi):
            raise RuntimeError("single gets and multi-reads disagree")
        child_get_s, children_by_get = await best_of(args.runs, child_gets)
        child_multi_s, children_by_multi = await best_of(args.runs, child_multi_reads)
        if children_by_get != children_by_multi:
            raise RuntimeError("single get-children and multi-reads disagree")
    finally:
        await zk.close()

    srvr = four_letter_word(server.host, server.port, "srvr")
    version = next((line.split(":", 1)[1].strip() for line in srvr.splitlines() if "version" in line), "?")
    get_data = {"get": figures(len(states), get_s), "multi_read": figures(len(states), multi_s)}
    get_children = {
        "get": figures(len(listings), child_get_s),
        "multi_read": figures(len(listings), child_multi_s),
    }
    return {
        "benchmark": "zk_read",
        "machine": machine(),
        "zookeeper": {"version": version, "jvm_opts": list(jvm_opts(args.heap))},
        "znodes": len(states),
        "payload_bytes": len(by_multi[0][0]),
        "runs": args.runs,
        "settings": {
            "get_concurrency": args.get_concurrency,
            "batch_ops": args.batch_ops,
            "max_in_flight": args.in_flight,
            "max_response_bytes": batch_read.MAX_RESPONSE_BYTES,
        },
        "create": {
            "znodes": len(ops),
            "seconds": round(create_s, 3),
            "ops_per_s": round(len(ops) / create_s),
        },
        "get_data": get_data,
        "get_children": get_children,
        "speedup_get_data": round(min(get_s) / min(multi_s), 1),
        "speedup_get_children": round(min(child_get_s) / min(child_multi_s), 1),
    }


def print_table(report: dict[str, Any]) -> None:
    print(f"\n{'read':<32}{'ops':>9}{'single gets':>22}{'multi-read':>22}{'speedup':>9}")
    for label, key in (
        ("partition states (getData)", "get_data"),
        ("partition lists (getChildren)", "get_children"),
    ):
        single, multi = report[key]["get"], report[key]["multi_read"]
        cells = [f"{r['ops_per_s']:>9,}/s {r['best_s']:>8.3f} s" for r in (single, multi)]
        speedup = single["best_s"] / multi["best_s"]
        print(f"{label:<32}{single['ops']:>9,}{cells[0]:>22}{cells[1]:>22}{speedup:>8.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--znodes", type=int, default=100_000, help="partition-state znodes to read")
    parser.add_argument("--runs", type=int, default=3, help="runs of each read; the best counts")
    parser.add_argument("--heap", default="1g", help="the ZooKeeper JVM's -Xmx")
    parser.add_argument("--get-concurrency", type=int, default=batch_read.DEFAULT_FALLBACK_IN_FLIGHT)
    parser.add_argument("--batch-ops", type=int, default=batch_read.DEFAULT_BATCH_OPS)
    parser.add_argument("--in-flight", type=int, default=batch_read.DEFAULT_MAX_IN_FLIGHT)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "zk_read.json"
    )
    args = parser.parse_args()
    if args.znodes < 1 or args.runs < 1:
        parser.error("--znodes and --runs must be positive")

    with zookeeper_workdir("zk-read-bench-", args.heap) as (server, _):
        report = asyncio.run(run(server, args))
    print_table(report)
    write_report(args.out, report)


if __name__ == "__main__":
    main()
