"""Consumer-group rebalances and idempotent producing through three real brokers, with confluent-kafka.

One ZooKeeper, one controller and three ``python -m broker`` processes with Kafka's group defaults
(``__consumer_offsets`` of 50 partitions, replication factor 3), one topic of 60 partitions.

1. **Rebalance after a member leaves**, for groups of 2 (the floor), 3 and 30 members: every member
   subscribes and waits for its assignment; then one member closes (LeaveGroup) and the time until
   every remaining member holds its new assignment is measured. librdkafka learns of a rebalance at
   its next heartbeat (``heartbeat.interval.ms``, 3 s by default), which bounds what any broker can do;
   the figures are reported as a ratio to the two-member group's.
2. **Idempotent vs plain produce throughput**: ``--records`` 1 KiB records at acks=all as fast as
   librdkafka takes them, with ``enable.idempotence`` false, then true; the ratio idempotent/plain.
   librdkafka caps an idempotent producer at 5 requests in flight per broker (a plain one is
   unlimited by default), so a plain producer capped the same way is measured too: idempotent /
   plain-at-5 is what the brokers' producer-state checks cost together with librdkafka's own
   idempotent bookkeeping.
3. **The broker's share**: the same 20-record batches appended straight to a partition log in this
   process, without and with producer ids (``Log.append_as_leader``), batches per second and the
   ratio: what the producer-state checks cost a leader, with no client or network in the way.

Results go to bench/results/groups.json and a table on stdout.

    .venv/bin/python -m bench.groups [--records 100000] [--members 3,30] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.machine import machine, write_report
from bench.three_brokers import three_brokers
from bench.zookeeper import zookeeper_workdir
from daemon.runtime import die_with_parent

TOPIC = "bench-groups"
PARTITIONS = 60
RECORD_BYTES = 1024
ASSIGN_TIMEOUT_S = 120.0


class Member(threading.Thread):
    """One group member polling in its own thread; ``assigned`` holds its current partitions."""

    def __init__(self, servers: str, group: str, index: int) -> None:
        super().__init__(daemon=True, name=f"{group}-{index}")
        from confluent_kafka import Consumer

        self.assigned: frozenset[int] | None = None
        self.changed_at = 0.0
        self.stop = threading.Event()
        self.consumer = Consumer({"bootstrap.servers": servers, "group.id": group, "client.id": self.name})

    def run(self) -> None:
        def on_assign(_: Any, partitions: list[Any]) -> None:
            self.assigned = frozenset(p.partition for p in partitions)
            self.changed_at = time.monotonic()

        def on_revoke(_: Any, partitions: list[Any]) -> None:
            self.assigned = None

        self.consumer.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke)
        while not self.stop.is_set():
            self.consumer.poll(0.05)
        self.consumer.close()

    def leave(self) -> None:
        self.stop.set()
        self.join(30)


def _wait(condition: Any, what: str) -> None:
    deadline = time.monotonic() + ASSIGN_TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {ASSIGN_TIMEOUT_S:g} s")
        time.sleep(0.01)


def _shared(members: list[Member]) -> bool:
    """Every member holds an assignment and together they hold every partition once."""
    held = [m.assigned for m in members]
    if any(h is None for h in held):
        return False
    return sorted(p for h in held if h is not None for p in h) == list(range(PARTITIONS))


def rebalance(servers: str, size: int, group: str) -> dict[str, Any]:
    members = [Member(servers, group, i) for i in range(size)]
    started = time.monotonic()
    for member in members:
        member.start()
    try:
        _wait(lambda: _shared(members), f"assignment for {size} members")
        formed = time.monotonic() - started
        leaving, staying = members[-1], members[:-1]
        left = time.monotonic()
        leaving.leave()
        _wait(lambda: _shared(staying), f"rebalance of {size - 1} members")
        settled = max(m.changed_at for m in staying) - left
        return {"members": size, "formed_s": round(formed, 3), "rebalance_after_leave_s": round(settled, 3)}
    finally:
        for member in members:
            member.stop.set()
        for member in members:
            member.join(30)


def produce_rate(
    servers: str, records: int, idempotent: bool, in_flight: int | None = None
) -> dict[str, Any]:
    from confluent_kafka import Producer

    config: dict[str, Any] = {"bootstrap.servers": servers, "acks": "all", "linger.ms": 5}
    config["enable.idempotence"] = idempotent
    if in_flight is not None:
        config["max.in.flight.requests.per.connection"] = in_flight
    producer = Producer(config)
    value = b"x" * RECORD_BYTES
    failures = 0

    def delivered(err: Any, _: Any) -> None:
        nonlocal failures
        failures += err is not None

    started = time.monotonic()
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value=value, partition=i % PARTITIONS, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    remaining = producer.flush(120)
    elapsed = time.monotonic() - started
    return {
        "idempotent": idempotent,
        "max_in_flight": in_flight,
        "records": records,
        "failed": failures + remaining,
        "seconds": round(elapsed, 3),
        "records_per_s": round(records / elapsed),
    }


async def run(records: int, sizes: list[int], workdir: Path, zk_connect: str) -> dict[str, Any]:
    async with three_brokers(workdir, zk_connect) as cluster:
        await cluster.topic(TOPIC, PARTITIONS)
        servers = cluster.servers
        results: dict[str, Any] = {"rebalance": []}
        for size in [2, *sizes]:
            print(f"group of {size}: forming, then one member leaves", flush=True)
            results["rebalance"].append(await asyncio.to_thread(rebalance, servers, size, f"bench-{size}"))
        floor = results["rebalance"][0]["rebalance_after_leave_s"]
        for entry in results["rebalance"]:
            entry["ratio_to_two_members"] = (
                round(entry["rebalance_after_leave_s"] / floor, 2) if floor else None
            )
        plain, capped, idempotent = [], [], []
        for _ in range(3):  # interleaved, so drift between the phases hits all alike
            print(f"producing {records} records: plain, plain at 5 in flight, idempotent", flush=True)
            plain.append(await asyncio.to_thread(produce_rate, servers, records, False))
            capped.append(await asyncio.to_thread(produce_rate, servers, records, False, 5))
            idempotent.append(await asyncio.to_thread(produce_rate, servers, records, True))
        p = statistics.median(r["records_per_s"] for r in plain)
        c = statistics.median(r["records_per_s"] for r in capped)
        i = statistics.median(r["records_per_s"] for r in idempotent)
        results["produce"] = {
            "plain": plain,
            "plain_5_in_flight": capped,
            "idempotent": idempotent,
            "plain_records_per_s": p,
            "plain_5_in_flight_records_per_s": c,
            "idempotent_records_per_s": i,
            "ratio_idempotent_to_plain": round(i / p, 3),
            "ratio_idempotent_to_plain_5_in_flight": round(i / c, 3),
        }
        return results


def log_append(batches: int) -> dict[str, Any]:
    from broker.log import Log, LogConfig
    from protocol.record_batch import build_batch

    records = [(None, b"x" * RECORD_BYTES)] * 20
    variants = {
        "plain": [build_batch(records) for _ in range(batches)],
        "idempotent": [
            build_batch(records, producer_id=7, producer_epoch=0, base_sequence=i * 20)
            for i in range(batches)
        ],
    }
    rates: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(3):
        for name, data in variants.items():
            with tempfile.TemporaryDirectory() as directory:
                log = Log.open(Path(directory) / "bench-0", LogConfig())
                started = time.perf_counter()
                for batch in data:
                    log.append_as_leader(batch, 0)
                rates[name].append(batches / (time.perf_counter() - started))
                log.close()
    plain, idempotent = (statistics.median(rates[n]) for n in ("plain", "idempotent"))
    return {
        "batches": batches,
        "plain_batches_per_s": round(plain),
        "idempotent_batches_per_s": round(idempotent),
        "ratio_idempotent_to_plain": round(idempotent / plain, 3),
    }


def table(results: dict[str, Any]) -> str:
    lines = [f"{'members':>7} {'formed s':>9} {'rebalance s':>12} {'x 2 members':>12}"]
    for r in results["rebalance"]:
        ratio = r["ratio_to_two_members"]
        lines.append(f"{r['members']:>7} {r['formed_s']:>9} {r['rebalance_after_leave_s']:>12} {ratio:>12}")
    p = results["produce"]
    lines.append(
        f"acks=all produce: plain {p['plain_records_per_s']} records/s, plain at 5 in flight "
        f"{p['plain_5_in_flight_records_per_s']}, idempotent {p['idempotent_records_per_s']} "
        f"(ratios {p['ratio_idempotent_to_plain']} and {p['ratio_idempotent_to_plain_5_in_flight']})"
    )
    a = results["log_append"]
    lines.append(
        f"log append: plain {a['plain_batches_per_s']} batches/s, idempotent {a['idempotent_batches_per_s']} "
        f"(ratio {a['ratio_idempotent_to_plain']})"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000, help="records per produce phase")
    parser.add_argument("--members", default="3,30", help="group sizes besides the two-member floor")
    parser.add_argument("--quick", action="store_true", help="10,000 records, a group of 3 only")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "groups.json"
    )
    args = parser.parse_args(argv)
    records = 10_000 if args.quick else args.records
    sizes = [3] if args.quick else [int(s) for s in args.members.split(",")]
    die_with_parent()
    with zookeeper_workdir("groups-bench-") as (server, workdir):
        started = time.time()
        results = asyncio.run(run(records, sizes, workdir, server.connect_string))
    results["log_append"] = log_append(1000 if args.quick else 5000)
    print(table(results))
    report = {
        "benchmark": "groups",
        "machine": machine(),
        "command": " ".join([Path(sys.executable).name, "-m", "bench.groups", *sys.argv[1:]]),
        "settings": {
            "records": records,
            "record_bytes": RECORD_BYTES,
            "partitions": PARTITIONS,
            "sizes": sizes,
        },
        "wall_s": round(time.time() - started, 1),
        **results,
    }
    write_report(args.out, report)
    print(json.dumps({"wall_s": report["wall_s"]}))


if __name__ == "__main__":
    main()
