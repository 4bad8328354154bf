"""Produce and consume throughput and latency through three real brokers, with confluent-kafka.

One ZooKeeper, one controller and three ``python -m broker`` processes on this machine; a topic of
``--partitions`` partitions with replication factor 3, leadership spread over the brokers. For acks=all
and then acks=1, with 1 KiB records:

1. the maximum rate: ``--records`` produced as fast as librdkafka will take them, timed from the
   first ``produce`` to the last delivery report (records/s, MB/s);
2. latency at half and at a quarter of that rate: records produced on a fixed schedule for
   ``--duration`` seconds, each timed from ``produce`` to its delivery report (p50/p99/max, ms);
3. consumer throughput: everything read back from the beginning with ``assign()``.

During the half-rate phase of acks=all, py-spy samples the broker leading partition 0 (only the
thread holding the GIL), and the report lists the share of wall time its interpreter ran each
thread and function: a total well under 1 means the broker was not what limited the rate. Results go to
bench/results/produce.json and a table on stdout.

    .venv/bin/python -m bench.produce [--records 300000] [--duration 20] [--partitions 6] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.machine import machine, write_report
from bench.measure import percentile
from bench.three_brokers import BROKERS, three_brokers
from bench.zookeeper import zookeeper_workdir
from daemon.runtime import die_with_parent

TOPIC = "bench-produce"
RECORD_BYTES = 1024


@dataclass(frozen=True)
class Settings:
    records: int
    duration_s: float
    partitions: int
    io_threads: int
    linger_ms: int
    profile_s: float


def latency_summary(values: list[float]) -> dict[str, float | int]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50_ms": round(percentile(values, 0.5), 2),
        "p99_ms": round(percentile(values, 0.99), 2),
        "max_ms": round(max(values), 2),
    }


class Timed:
    """A confluent-kafka producer whose delivery reports are timed; failures are counted."""

    def __init__(self, servers: str, acks: str, linger_ms: int) -> None:
        from confluent_kafka import Producer

        self.producer = Producer(
            {
                "bootstrap.servers": servers,
                "acks": acks,
                "linger.ms": linger_ms,
                "enable.idempotence": False,
                "message.timeout.ms": 120000,
            }
        )
        self.latencies_ms: list[float] = []
        self.failures = 0
        self.last_delivery = 0.0

    def send(self, value: bytes, partition: int) -> None:
        sent = time.perf_counter()

        def delivered(err: Any, _msg: Any) -> None:
            now = time.perf_counter()
            self.last_delivery = now
            if err is None:
                self.latencies_ms.append((now - sent) * 1000)
            else:
                self.failures += 1

        while True:
            try:
                self.producer.produce(TOPIC, value=value, partition=partition, on_delivery=delivered)
                return
            except BufferError:
                self.producer.poll(0.01)

    def flush(self) -> None:
        if self.producer.flush(180):
            raise RuntimeError("records still undelivered after 180 s")


def max_rate(servers: str, acks: str, settings: Settings) -> dict[str, Any]:
    producer = Timed(servers, acks, settings.linger_ms)
    value = os.urandom(RECORD_BYTES)
    started = time.perf_counter()
    for i in range(settings.records):
        producer.send(value, i % settings.partitions)
        if i % 1000 == 0:
            producer.producer.poll(0)
    producer.flush()
    seconds = producer.last_delivery - started
    return {
        "records": settings.records,
        "failures": producer.failures,
        "seconds": round(seconds, 2),
        "records_per_s": round(settings.records / seconds),
        "mb_per_s": round(settings.records * RECORD_BYTES / seconds / 1e6, 2),
        "latency": latency_summary(producer.latencies_ms),
    }


def paced(servers: str, acks: str, settings: Settings, rate: float) -> dict[str, Any]:
    """``rate`` records/s on a fixed schedule for the configured duration."""
    producer = Timed(servers, acks, settings.linger_ms)
    value = os.urandom(RECORD_BYTES)
    total = int(rate * settings.duration_s)
    started = time.perf_counter()
    for i in range(total):
        due = started + i / rate
        while (wait := due - time.perf_counter()) > 0:
            producer.producer.poll(min(wait, 0.005))
        producer.send(value, i % settings.partitions)
    producer.flush()
    seconds = time.perf_counter() - started
    return {
        "target_records_per_s": round(rate),
        "achieved_records_per_s": round(total / seconds),
        "failures": producer.failures,
        "latency": latency_summary(producer.latencies_ms),
    }


def consume_all(servers: str, settings: Settings, expected: int) -> dict[str, Any]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52428800,
        }
    )
    got = 0
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(settings.partitions)])
    started = time.perf_counter()
    deadline = started + 300
    while got < expected and time.perf_counter() < deadline:
        got += sum(1 for m in consumer.consume(num_messages=10000, timeout=0.5) if m.error() is None)
    seconds = time.perf_counter() - started
    consumer.close()
    return {
        "records": got,
        "seconds": round(seconds, 2),
        "records_per_s": round(got / seconds),
        "mb_per_s": round(got * RECORD_BYTES / seconds / 1e6, 2),
    }


def profile(pid: int, seconds: float, out: Path) -> dict[str, Any]:
    """Where the broker's interpreter spends its time (GIL-holding samples by function, py-spy)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        return {"error": "py-spy not installed (pip install -e '.[bench]')"}
    raw = out / f"py-spy-{pid}.txt"
    done = subprocess.run(
        [
            spy,
            "record",
            "-p",
            str(pid),
            "-d",
            str(int(seconds)),
            "--gil",
            "--threads",
            "--nonblocking",
            "-f",
            "raw",
            "-o",
            str(raw),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or not raw.exists():
        return {"error": (done.stderr or done.stdout).strip()[-300:]}
    own: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        n = int(count)
        total += n
        name = frames[0].split(": ", 1)[-1].strip('"')  # 'thread (tid): name' with --threads
        threads[name.rstrip("0123456789").rstrip("-")] += n
        function, _, where = frames[-1].partition(" (")
        own[f"{function} ({where.split(':')[0]})"] += n
    expected = seconds * 100  # py-spy's default rate: 100 samples/s

    def share(counts: collections.Counter[str]) -> list[list[Any]]:
        return [[k, round(v / expected, 3)] for k, v in counts.most_common(12)]

    return {
        "gil_held_share": round(total / expected, 3),
        "by_thread": share(threads),
        "by_function": share(own),
    }


async def run(settings: Settings, workdir: Path, zk_connect: str) -> dict[str, Any]:
    async with three_brokers(
        workdir, zk_connect, num_io_threads=settings.io_threads, replica_lag_time_max_ms=30000
    ) as cluster:
        replicas = await cluster.topic(TOPIC, settings.partitions)
        servers = cluster.servers
        loop = asyncio.get_running_loop()
        leader = next(b for b in cluster.brokers if b.broker_id == replicas[0][0])
        leader_pid = leader.process.pid  # type: ignore[union-attr]
        results: dict[str, Any] = {}
        produced = 0
        for acks in ("all", "1"):
            print(f"acks={acks}: maximum rate, {settings.records} records", flush=True)
            top = await loop.run_in_executor(None, max_rate, servers, acks, settings)
            produced += settings.records
            results[f"acks_{acks}"] = {"max_rate": top}
            for share in (0.5, 0.25):
                rate = top["records_per_s"] * share
                print(
                    f"acks={acks}: {top['records_per_s']} records/s at most; paced at {rate:.0f}/s",
                    flush=True,
                )
                spy: asyncio.Future[dict[str, Any]] | None = None
                if acks == "all" and share == 0.5 and settings.profile_s > 0:
                    spy = loop.run_in_executor(None, profile, leader_pid, settings.profile_s, workdir)
                paced_result = await loop.run_in_executor(None, paced, servers, acks, settings, rate)
                produced += int(rate * settings.duration_s)
                results[f"acks_{acks}"][f"paced_{int(share * 100)}pct"] = paced_result
                if spy is not None:
                    results[f"acks_{acks}"]["leader_profile_paced_50pct"] = await spy
        print("consuming everything back", flush=True)
        results["consumer"] = await loop.run_in_executor(None, consume_all, servers, settings, produced)
        return results


def table(results: dict[str, Any]) -> str:
    lines = [
        f"{'acks':<5} {'phase':<10} {'target/s':>9} {'records/s':>10} {'MB/s':>7} {'p50 ms':>8} "
        f"{'p99 ms':>8} {'max ms':>8}"
    ]
    for acks in ("all", "1"):
        r = results[f"acks_{acks}"]
        top = r["max_rate"]
        lat = top["latency"]
        lines.append(
            f"{acks:<5} {'max':<10} {'-':>9} {top['records_per_s']:>10} {top['mb_per_s']:>7} "
            f"{lat['p50_ms']:>8} {lat['p99_ms']:>8} {lat['max_ms']:>8}"
        )
        for name in ("paced_50pct", "paced_25pct"):
            p, lat = r[name], r[name]["latency"]
            mb = round(p["achieved_records_per_s"] * RECORD_BYTES / 1e6, 2)
            lines.append(
                f"{acks:<5} {name:<10} {p['target_records_per_s']:>9} "
                f"{p['achieved_records_per_s']:>10} {mb:>7} "
                f"{lat['p50_ms']:>8} {lat['p99_ms']:>8} {lat['max_ms']:>8}"
            )
    c = results["consumer"]
    lines.append(f"consumer: {c['records_per_s']} records/s, {c['mb_per_s']} MB/s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--records",
        type=int,
        default=300_000,
        help="records in each maximum-rate phase (long enough to saturate)",
    )
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of paced production")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--io-threads", type=int, default=4, help="each broker's num.io.threads")
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--profile", type=float, default=8.0, help="seconds of py-spy (0: none)")
    parser.add_argument("--quick", action="store_true", help="20,000 records, 5 s paced, no profile")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "produce.json"
    )
    args = parser.parse_args(argv)
    settings = Settings(
        records=20_000 if args.quick else args.records,
        duration_s=5.0 if args.quick else args.duration,
        partitions=args.partitions,
        io_threads=args.io_threads,
        linger_ms=args.linger_ms,
        profile_s=0.0 if args.quick else args.profile,
    )
    die_with_parent()
    with zookeeper_workdir("produce-bench-") as (server, workdir):
        started = time.time()
        results = asyncio.run(run(settings, workdir, server.connect_string))
    print(table(results))
    report = {
        "benchmark": "produce",
        "machine": machine(),
        "command": " ".join([Path(sys.executable).name, "-m", "bench.produce", *sys.argv[1:]]),
        "settings": {
            **asdict(settings),
            "record_bytes": RECORD_BYTES,
            "brokers": len(BROKERS),
            "replication_factor": 3,
        },
        "wall_s": round(time.time() - started, 1),
        **results,
    }
    write_report(args.out, report)
    print(json.dumps({k: report[k] for k in ("wall_s",)}))


if __name__ == "__main__":
    main()
