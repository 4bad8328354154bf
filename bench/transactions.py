"""What transactions cost: transactional ÷ idempotent produce throughput, and commit latency.

Three real brokers (``bench.three_brokers``), one topic of ``--partitions`` partitions (RF 3), 1 KiB
records from confluent-kafka. In one run, alternating so that both see the same machine:

1. the idempotent producer's maximum rate (acks=all, ``enable.idempotence``): ``--records`` records,
   from the first ``produce`` to the last delivery report (the floor: the same records, no transaction);
2. the transactional producer's: the same records in transactions of each size of ``--per-txn``
   (500 and 5,000 records: a Streams application commits every 100 ms under exactly-once), each
   committed before the next begins (``commit_transaction`` waits for every delivery report and
   the coordinator's PrepareCommit write; the markers follow in the background);
3. commit latency: ``commit_transaction`` alone, timed per transaction (p50/p99/max), for
   transactions of each size and of one record.

The ratio transactional ÷ idempotent is the figure to compare across machines; the absolute rates sit
beside it. Results go to bench/results/transactions.json and a table on stdout.

    .venv/bin/python -m bench.transactions [--records 100000] [--per-txn 500,5000] [--partitions 6] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.machine import machine, write_report
from bench.measure import ratio, summary
from bench.three_brokers import three_brokers
from bench.zookeeper import zookeeper_workdir
from daemon.runtime import die_with_parent

TOPIC = "bench-txn"
RECORD_BYTES = 1024
SETTINGS = {"transaction_state_log_num_partitions": 6, "offsets_topic_num_partitions": 6}
"""Small internal topics, so the cluster starts fast (Kafka's defaults otherwise)."""


@dataclass(frozen=True)
class Settings:
    records: int
    per_txn: tuple[int, ...]
    partitions: int
    rounds: int
    single_commits: int


def idempotent_rate(servers: str, settings: Settings) -> dict[str, Any]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True, "linger.ms": 5})
    value = b"x" * RECORD_BYTES
    started = time.monotonic()
    for i in range(settings.records):
        _produce(producer, value, i % settings.partitions)
    assert producer.flush(120) == 0
    seconds = time.monotonic() - started
    return {"seconds": round(seconds, 3), "records_per_s": round(settings.records / seconds)}


def transactional_rate(servers: str, settings: Settings, name: str, per_txn: int) -> dict[str, Any]:
    """Every record in transactions of ``per_txn``; commit latencies kept."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "transactional.id": name, "linger.ms": 5})
    producer.init_transactions(60)
    value = b"x" * RECORD_BYTES
    commits: list[float] = []
    started = time.monotonic()
    for first in range(0, settings.records, per_txn):
        producer.begin_transaction()
        for i in range(first, min(first + per_txn, settings.records)):
            _produce(producer, value, i % settings.partitions)
        before = time.monotonic()
        producer.commit_transaction(60)
        commits.append((time.monotonic() - before) * 1000)
    seconds = time.monotonic() - started
    return {
        "per_txn": per_txn,
        "seconds": round(seconds, 3),
        "records_per_s": round(settings.records / seconds),
        "transactions": len(commits),
        "commit_ms": summary(commits),
    }


def single_record_commits(servers: str, settings: Settings) -> dict[str, Any]:
    """``commit_transaction`` of one-record transactions: the coordinator's round trips alone."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "transactional.id": "bench-single", "linger.ms": 0})
    producer.init_transactions(60)
    commits: list[float] = []
    for i in range(settings.single_commits):
        producer.begin_transaction()
        _produce(producer, b"x" * RECORD_BYTES, i % settings.partitions)
        before = time.monotonic()
        producer.commit_transaction(60)
        commits.append((time.monotonic() - before) * 1000)
    return {"transactions": len(commits), "commit_ms": summary(commits)}


def _produce(producer: Any, value: bytes, partition: int) -> None:
    while True:
        try:
            producer.produce(TOPIC, value=value, partition=partition)
            return
        except BufferError:
            producer.poll(0.05)


async def run(settings: Settings, workdir: Path, zk_connect: str) -> dict[str, Any]:
    async with three_brokers(workdir, zk_connect, **SETTINGS) as cluster:
        await cluster.topic(TOPIC, settings.partitions)
        servers = cluster.servers
        rounds: list[dict[str, Any]] = []
        for n in range(settings.rounds):
            for per_txn in settings.per_txn:
                print(f"round {n + 1}: idempotent, then transactions of {per_txn}", flush=True)
                idempotent = await asyncio.to_thread(idempotent_rate, servers, settings)
                name = f"bench-{n}-{per_txn}"
                transactional = await asyncio.to_thread(transactional_rate, servers, settings, name, per_txn)
                rounds.append(
                    {
                        "idempotent": idempotent,
                        "transactional": transactional,
                        "transactional_over_idempotent": ratio(
                            transactional["records_per_s"], idempotent["records_per_s"]
                        ),
                    }
                )
        print("one-record transactions", flush=True)
        single = await asyncio.to_thread(single_record_commits, servers, settings)
        medians = {}
        for per_txn in settings.per_txn:
            ratios = sorted(
                r["transactional_over_idempotent"] for r in rounds if r["transactional"]["per_txn"] == per_txn
            )
            medians[str(per_txn)] = ratios[len(ratios) // 2]
        return {"rounds": rounds, "median_ratio_by_txn_size": medians, "single_record": single}


def table(results: dict[str, Any]) -> str:
    head = f"{'per txn':<8} {'idempotent/s':>13} {'transactional/s':>16} {'ratio':>6}"
    lines = [f"{head} {'commit p50':>11} {'p99':>8}"]
    for r in results["rounds"]:
        commit = r["transactional"]["commit_ms"]
        lines.append(
            f"{r['transactional']['per_txn']:<8} {r['idempotent']['records_per_s']:>13} "
            f"{r['transactional']['records_per_s']:>16} {r['transactional_over_idempotent']:>6} "
            f"{commit['p50']:>9} ms {commit['p99']:>5} ms"
        )
    single = results["single_record"]["commit_ms"]
    lines.append(f"one-record transactions: commit p50 {single['p50']} ms, p99 {single['p99']} ms")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument(
        "--per-txn",
        type=lambda text: tuple(int(n) for n in text.split(",")),
        default=(500, 5000),
        help="records per transaction, comma-separated sizes (500,5000)",
    )
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--single-commits", type=int, default=200, help="one-record transactions timed")
    parser.add_argument("--quick", action="store_true", help="5,000 records, one round, 20 single commits")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "transactions.json"
    )
    args = parser.parse_args(argv)
    settings = Settings(
        records=5_000 if args.quick else args.records,
        per_txn=args.per_txn,
        partitions=args.partitions,
        rounds=1 if args.quick else args.rounds,
        single_commits=20 if args.quick else args.single_commits,
    )
    die_with_parent()
    with zookeeper_workdir("txn-bench-") as (server, workdir):
        results = asyncio.run(run(settings, workdir, server.connect_string))
    print(table(results))
    report = {
        "benchmark": "transactions",
        "machine": machine(),
        "command": " ".join([Path(sys.executable).name, "-m", "bench.transactions", *sys.argv[1:]]),
        "settings": {**asdict(settings), "record_bytes": RECORD_BYTES},
        "results": results,
    }
    write_report(args.out, report)


if __name__ == "__main__":
    main()
