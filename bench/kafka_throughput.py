"""Produce and consume throughput of Apache Kafka's broker and of ours, measured by Kafka's own tools.

An honest ratio of a Python data plane to a JVM one: the same load generator on the same machine in
the same run, against one Apache Kafka 3.9 broker (ZooKeeper mode, ``kafka-server-start.sh``'s JVM
options and heap) and against one ``python -m broker`` with its ``python -m controller``, each alone in
its own ZooKeeper chroot, one after the other (Kafka first). Both at their defaults except what a
one-broker cluster needs: ``offsets.topic.replication.factor=1``, ``offsets.topic.num.partitions=1``,
``group.initial.rebalance.delay.ms=0``. Kafka's broker is its own controller here.

For each implementation, topics of one partition (replication factor 1, created by a write of
``/brokers/topics/<topic>`` that each controller picks up), then Kafka 3.9's tools as their scripts run
them (``-Xmx512m``, ``kafka-run-class.sh``'s performance options):

1. ``--warm-up-records`` records (default 2N) produced to a topic of their own and read back, not
   reported: the first run of every code path, and Kafka's JIT compiler;
2. ``--runs`` times, ``kafka-producer-perf-test --num-records N --record-size 100 --throughput -1``
   with ``acks=1``, then ``acks=all`` (the 3.9 producer's defaults otherwise: ``linger.ms=0``,
   ``batch.size=16384``, idempotence on at ``acks=all``), each acks value to its own topic: records/s,
   MiB/s and latencies as the tool prints them; the fastest run is reported (and the median and the
   spread of all);
3. ``--runs`` times, ``kafka-consumer-perf-test --messages N`` on the ``acks=1`` topic from its start,
   each in a group of its own (a group member: the join is in ``rebalance.time.ms``, left out of the
   fetch rates reported); the fastest run is reported.

Counted: the producer tool counts only acknowledged records, the consumer tool the records it read,
and each topic's high watermark (ListOffsets) must hold exactly N per run. CPU: the broker's (and our
controller's) CPU seconds over each tool run from ``/proc``, the tool's own from ``wait4``; the
broker's CPU per record is where a Python data plane's gap shows. The machine's load (CPU pressure
stall share) is recorded: on a machine shared with other work every figure moves. Results go to
bench/results/kafka_throughput.json and a table on stdout.

    .venv/bin/python -m bench.kafka_throughput [--records 1000000] [--runs 5] [--quick]
        [--record-size 100] [--warm-up-records N] [--workdir DIR] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from bench.kafka_peer import (
    AnchorKafkaBroker,
    MachineLoad,
    chroot,
    end_offset,
    figure_table,
    report_head,
    run_measured,
    tool_command,
    wait_leader,
)
from bench.machine import write_report
from bench.measure import cpu_seconds, cpu_stall_us, ratio, stall_share
from bench.zookeeper import zookeeper_workdir
from cluster.processes import BrokerProcess, ControllerProcess
from kafkapeer.jars import BROKER, classpath
from zkserver.ports import free_ports
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.topic_writes import create_topic

IMPLEMENTATIONS = ("kafka", "ours")
ACKS = ("1", "all")
BROKER_ID = 1
CONTROLLER_ID = 1001
ONE_BROKER = {
    "offsets.topic.replication.factor": 1,
    "offsets.topic.num.partitions": 1,
    "group.initial.rebalance.delay.ms": 0,
}
"""What a one-broker cluster needs of either implementation (a consumer group's offsets topic)."""
CONSUMED_TOPIC = "perf-acks-1"

_PRODUCER_FINAL = re.compile(
    r"(?P<records>\d+) records sent, (?P<rps>[\d.]+) records/sec \((?P<mib>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, "
    r"(?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th"
)


@dataclass(frozen=True)
class Settings:
    records: int
    runs: int
    record_size: int
    warm_up_records: int
    timeout_s: float


# -- the two sides


class Side(Protocol):
    implementation: str

    @property
    def bootstrap(self) -> tuple[str, int]: ...

    def pids(self) -> dict[str, int]:
        """The processes whose CPU counts: the broker, and our controller."""

    async def start(self, zk: AsyncZooKeeper) -> None: ...

    def stop(self) -> int | None: ...


class KafkaSide:
    """One Kafka 3.9 broker, its own controller."""

    implementation = "kafka"

    def __init__(self, workdir: Path, zk_connect: str) -> None:
        (port,) = free_ports(1)
        self.broker = AnchorKafkaBroker(
            BROKER_ID, zk_connect, workdir / "kafka", f"PLAINTEXT://127.0.0.1:{port}", **ONE_BROKER
        )

    @property
    def bootstrap(self) -> tuple[str, int]:
        return self.broker.endpoint("PLAINTEXT")

    def pids(self) -> dict[str, int]:
        return {"broker": self.broker.pid}

    async def start(self, zk: AsyncZooKeeper) -> None:
        self.broker.start()
        await self.broker.wait_ready(zk)
        while (await zk.exists(znodes.CONTROLLER)) is None:  # it elects itself; topics need it
            self.broker.check_running()
            await asyncio.sleep(0.1)

    def stop(self) -> int | None:
        return self.broker.stop(timeout=120)


class OurSide:
    """``python -m broker`` (id 1) and ``python -m controller`` (1001), as ``bench.three_brokers``
    starts them."""

    implementation = "ours"

    def __init__(self, workdir: Path, zk_connect: str) -> None:
        overrides = {k.replace(".", "_"): v for k, v in ONE_BROKER.items()}
        self.broker = BrokerProcess(BROKER_ID, zk_connect, workdir / "ours", **overrides)
        self.controller = ControllerProcess(CONTROLLER_ID, zk_connect, workdir / "ours")

    @property
    def bootstrap(self) -> tuple[str, int]:
        return self.broker.endpoint("PLAINTEXT")

    def pids(self) -> dict[str, int]:
        assert self.broker.process is not None and self.controller.process is not None
        return {"broker": self.broker.process.pid, "controller": self.controller.process.pid}

    async def start(self, zk: AsyncZooKeeper) -> None:
        self.broker.start()
        self.controller.start()
        await self.broker.wait_kind("broker_started", timeout=60)
        await self.controller.wait_kind("failover_complete", timeout=60)

    def stop(self) -> int | None:
        codes = []
        for process in (self.broker, self.controller):
            with contextlib.suppress(Exception):
                codes.append(process.stop(timeout=60))
        return max(codes, default=None)


def make_side(implementation: str, workdir: Path, zk_connect: str) -> Side:
    return KafkaSide(workdir, zk_connect) if implementation == "kafka" else OurSide(workdir, zk_connect)


# -- the tools


def parse_producer(stdout: str) -> dict[str, Any]:
    """The producer tool's last line: records acknowledged, their rate and latencies."""
    found = list(_PRODUCER_FINAL.finditer(stdout))
    if not found:
        return {}
    m = found[-1]
    return {
        "records_sent": int(m["records"]),
        "records_per_s": float(m["rps"]),
        "mib_per_s": float(m["mib"]),
        "latency_ms": {
            "avg": float(m["avg"]),
            "max": float(m["max"]),
            **{k: int(m[k]) for k in ("p50", "p95", "p99", "p999")},
        },
    }


def parse_consumer(stdout: str) -> dict[str, Any]:
    """The consumer tool's header and figures line, keyed by the header's names."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    for i, line in enumerate(lines[:-1]):
        if line.startswith("start.time"):
            keys = [k.strip() for k in line.split(",")]
            values = [v.strip() for v in lines[i + 1].split(",")]
            figures = dict(zip(keys, values, strict=False))
            return {
                "records": int(figures["data.consumed.in.nMsg"]),
                "records_per_s": float(figures["nMsg.sec"]),
                "mib_per_s": float(figures["MB.sec"]),
                "rebalance_ms": int(figures["rebalance.time.ms"]),
                "fetch_ms": int(figures["fetch.time.ms"]),
                "fetch_records_per_s": float(figures["fetch.nMsg.sec"]),
                "fetch_mib_per_s": float(figures["fetch.MB.sec"]),
            }
    return {}


async def run_tool(
    side: Side, workdir: Path, name: str, script: str, args: list[str], settings: Settings
) -> dict[str, Any]:
    """One tool run, with the CPU each of the side's processes and the tool used over it."""
    command = tool_command(script, args, workdir / f"{name}-log4j.properties")
    before = {k: cpu_seconds(pid) for k, pid in side.pids().items()}
    stall = cpu_stall_us()
    run = await asyncio.to_thread(run_measured, command, workdir, name, settings.timeout_s)
    after = {k: cpu_seconds(pid) for k, pid in side.pids().items()}
    cpu = {k: spent(before[k], after[k]) for k in before}
    if run.returncode != 0:
        raise RuntimeError(
            f"{side.implementation} {name}: {script} exited {run.returncode}:\n{run.stderr[-3000:]}"
        )
    return {
        "wall_s": run.wall_s,
        "tool_cpu_s": run.cpu_s,
        "cpu_s": cpu,
        "cpu_stall_share": stall_share(stall, cpu_stall_us(), run.wall_s),
        "stdout": run.stdout,
        "stderr_tail": run.stderr[-1000:],
    }


def spent(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else round(after - before, 2)


def producer_args(topic: str, records: int, settings: Settings, acks: str, bootstrap: str) -> list[str]:
    return [
        "--topic", topic, "--num-records", str(records), "--record-size", str(settings.record_size),
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}", f"acks={acks}",
    ]  # fmt: skip


async def make_topic(zk: AsyncZooKeeper, side: Side, topic: str) -> None:
    await create_topic(zk, topic, {0: (BROKER_ID,)})
    await wait_leader(*side.bootstrap, topic, BROKER_ID)


async def produce(
    side: Side, workdir: Path, settings: Settings, acks: str, run: int, bootstrap: str
) -> dict[str, Any]:
    topic = f"perf-acks-{acks}"
    print(
        f"{side.implementation}: producer run {run + 1}, acks={acks}, {settings.records} records", flush=True
    )
    args = producer_args(topic, settings.records, settings, acks, bootstrap)
    done = await run_tool(
        side, workdir, f"produce-acks-{acks}-{run}", "kafka-producer-perf-test", args, settings
    )
    figures = parse_producer(done.pop("stdout"))
    broker_cpu = done["cpu_s"]["broker"]
    figures["broker_cores"] = None if broker_cpu is None else round(broker_cpu / done["wall_s"], 2)
    figures["tool_cores"] = round(done["tool_cpu_s"] / done["wall_s"], 2)
    return {**figures, **done}


async def consume(
    side: Side, workdir: Path, settings: Settings, topic: str, records: int, name: str
) -> dict[str, Any]:
    """One consumer perf run reading ``records`` of ``topic`` from the start, in a group of its own."""
    args = [
        "--bootstrap-server", "{}:{}".format(*side.bootstrap), "--topic", topic, "--messages", str(records),
        "--timeout", str(int(settings.timeout_s * 1000)), "--group", f"perf-{side.implementation}-{name}",
    ]  # fmt: skip
    done = await run_tool(side, workdir, name, "kafka-consumer-perf-test", args, settings)
    return {**parse_consumer(done.pop("stdout")), **done}


async def warm_up(side: Side, zk: AsyncZooKeeper, workdir: Path, settings: Settings) -> dict[str, Any]:
    """Both code paths once, unreported: the warm-up records produced, then read back."""
    await make_topic(zk, side, "perf-warm-up")
    bootstrap = "{}:{}".format(*side.bootstrap)
    print(f"{side.implementation}: warm-up, {settings.warm_up_records} records", flush=True)
    args = producer_args("perf-warm-up", settings.warm_up_records, settings, "1", bootstrap)
    done = await run_tool(side, workdir, "warm-up", "kafka-producer-perf-test", args, settings)
    produced = parse_producer(done.pop("stdout")) | done
    consumed = await consume(
        side, workdir, settings, "perf-warm-up", settings.warm_up_records, "warm-up-consume"
    )
    return {"produce": produced, "consume": consumed}


async def measure(side: Side, zk: AsyncZooKeeper, workdir: Path, settings: Settings) -> dict[str, Any]:
    """The warm-up, then ``runs`` producer runs of each acks value (interleaved), then ``runs``
    consumer runs."""
    bootstrap = "{}:{}".format(*side.bootstrap)
    result: dict[str, Any] = {}
    if settings.warm_up_records:
        result["warm_up"] = await warm_up(side, zk, workdir, settings)
    for acks in ACKS:
        await make_topic(zk, side, f"perf-acks-{acks}")
        result[f"produce_acks_{acks}"] = {"runs": []}
    for run in range(settings.runs):
        for acks in ACKS:
            done = await produce(side, workdir, settings, acks, run, bootstrap)
            result[f"produce_acks_{acks}"]["runs"].append(done)
    for acks in ACKS:
        result[f"produce_acks_{acks}"]["high_watermark"] = await end_offset(
            *side.bootstrap, f"perf-acks-{acks}"
        )
    result["consume"] = {"runs": []}
    for run in range(settings.runs):
        print(f"{side.implementation}: consumer run {run + 1}, {settings.records} records", flush=True)
        done = await consume(side, workdir, settings, CONSUMED_TOPIC, settings.records, f"consume-{run}")
        result["consume"]["runs"].append(done)
    return result


async def run_side(
    implementation: str, connect_string: str, workdir: Path, settings: Settings
) -> dict[str, Any]:
    zk_connect = await chroot(connect_string, implementation)
    side = make_side(implementation, workdir, zk_connect)
    zk = AsyncZooKeeper(zk_connect)
    await zk.start()
    try:
        await side.start(zk)
        result = await measure(side, zk, workdir / implementation, settings)
    finally:
        exit_code = side.stop()
        await zk.close()
    return {**result, "exit_code": exit_code}


async def run_all(connect_string: str, workdir: Path, settings: Settings) -> dict[str, dict[str, Any]]:
    for implementation in IMPLEMENTATIONS:
        (workdir / implementation).mkdir(parents=True, exist_ok=True)
    return {i: await run_side(i, connect_string, workdir, settings) for i in IMPLEMENTATIONS}


# -- figures and output


def per_record_us(cpu_s: float | None, records: int) -> float | None:
    return None if cpu_s is None or not records else round(cpu_s / records * 1e6, 2)


def fastest(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the most records/s: the one least disturbed by whatever else the machine ran, and
    for Kafka the one its JIT compiler had most warmed up (``bench.codec`` too reports the best run)."""
    return max(runs, key=lambda run: run.get("records_per_s", 0.0))


def figures(results: dict[str, dict[str, Any]], settings: Settings) -> dict[str, Any]:
    """Per implementation, the fastest producer run of each acks value (and the median records/s of
    all runs) and the consumer run; then ours over Kafka for each."""
    out: dict[str, Any] = {}
    n = settings.records
    for implementation, r in results.items():
        figs: dict[str, Any] = {}
        for acks in ACKS:
            runs = r[f"produce_acks_{acks}"]["runs"]
            best = fastest(runs)
            prefix = f"produce_acks_{acks}"
            figs[f"{prefix}_records_per_s"] = best.get("records_per_s")
            figs[f"{prefix}_mib_per_s"] = best.get("mib_per_s")
            figs[f"{prefix}_p99_ms"] = best.get("latency_ms", {}).get("p99")
            figs[f"{prefix}_broker_cpu_us_per_record"] = per_record_us(best["cpu_s"]["broker"], n)
            figs[f"{prefix}_broker_cores"] = best["broker_cores"]
            figs[f"{prefix}_tool_cpu_us_per_record"] = per_record_us(best["tool_cpu_s"], n)
            figs[f"{prefix}_tool_cores"] = best["tool_cores"]
            rates = [run["records_per_s"] for run in runs if "records_per_s" in run]
            figs[f"{prefix}_median_records_per_s"] = round(statistics.median(rates), 1) if rates else None
        consume = max(r["consume"]["runs"], key=lambda run: run.get("fetch_records_per_s", 0.0))
        figs["consume_fetch_records_per_s"] = consume.get("fetch_records_per_s")
        figs["consume_fetch_mib_per_s"] = consume.get("fetch_mib_per_s")
        figs["consume_broker_cpu_us_per_record"] = per_record_us(consume["cpu_s"]["broker"], n)
        figs["consume_tool_cpu_us_per_record"] = per_record_us(consume["tool_cpu_s"], n)
        out[implementation] = figs
    out["ours_over_kafka"] = {key: ratio(out["ours"][key], out["kafka"][key]) for key in out["kafka"]}
    out["spread"] = {implementation: spread(r) for implementation, r in results.items()}
    return out


def spread(result: dict[str, Any]) -> dict[str, list[float]]:
    """The slowest and the fastest producer run of each acks value (records/s): how far apart runs
    on this machine fell."""
    out = {}
    for acks in ACKS:
        rates = [
            run["records_per_s"] for run in result[f"produce_acks_{acks}"]["runs"] if "records_per_s" in run
        ]
        if rates:
            out[f"produce_acks_{acks}_records_per_s"] = [round(min(rates)), round(max(rates))]
    return out


def counted(results: dict[str, dict[str, Any]], settings: Settings) -> dict[str, Any]:
    """Whether every record was acknowledged (each run), stored (each topic's high watermark holds
    every run's) and read back, per implementation."""
    out = {}
    for implementation, r in results.items():
        sides: dict[str, Any] = {}
        for acks in ACKS:
            produced = r[f"produce_acks_{acks}"]
            sides[f"acks_{acks}"] = {
                "records_sent": [run.get("records_sent") for run in produced["runs"]],
                "high_watermark": produced["high_watermark"]["offset"],
            }
        # The consumer tool stops after the poll that reaches --messages and counts all that poll returned.
        sides["consumed"] = consumed = [run.get("records") for run in r["consume"]["runs"]]
        total = settings.records * settings.runs
        sides["all"] = all(c is not None and settings.records <= c <= total for c in consumed) and all(
            sides[f"acks_{acks}"]["records_sent"] == [settings.records] * settings.runs
            and sides[f"acks_{acks}"]["high_watermark"] == total
            for acks in ACKS
        )
        out[implementation] = sides
    return out


ROWS = (
    ("produce acks=1 records/s", "produce_acks_1_records_per_s"),
    ("produce acks=1 records/s, median", "produce_acks_1_median_records_per_s"),
    ("produce acks=1 MiB/s", "produce_acks_1_mib_per_s"),
    ("produce acks=1 p99 ms", "produce_acks_1_p99_ms"),
    ("produce acks=1 broker CPU us/rec", "produce_acks_1_broker_cpu_us_per_record"),
    ("produce acks=1 broker cores", "produce_acks_1_broker_cores"),
    ("produce acks=1 tool cores", "produce_acks_1_tool_cores"),
    ("produce acks=all records/s", "produce_acks_all_records_per_s"),
    ("produce acks=all records/s, median", "produce_acks_all_median_records_per_s"),
    ("produce acks=all MiB/s", "produce_acks_all_mib_per_s"),
    ("produce acks=all p99 ms", "produce_acks_all_p99_ms"),
    ("produce acks=all broker CPU us/rec", "produce_acks_all_broker_cpu_us_per_record"),
    ("produce acks=all broker cores", "produce_acks_all_broker_cores"),
    ("produce acks=all tool cores", "produce_acks_all_tool_cores"),
    ("consume records/s (fetch)", "consume_fetch_records_per_s"),
    ("consume MiB/s (fetch)", "consume_fetch_mib_per_s"),
    ("consume broker CPU us/rec", "consume_broker_cpu_us_per_record"),
)


def table(figs: dict[str, Any]) -> str:
    return "\n".join(figure_table(figs, ROWS, label_width=36, value_width=12))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.kafka_throughput",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--records", type=int, default=1_000_000, help="records per producer run")
    parser.add_argument(
        "--runs", type=int, default=5, help="producer runs per acks value (the fastest is reported)"
    )
    parser.add_argument("--record-size", type=int, default=100, help="bytes per record")
    parser.add_argument(
        "--warm-up-records", type=int, default=None, help="records of the unreported first run (default: 2N)"
    )
    parser.add_argument("--quick", action="store_true", help="200,000 records, one run")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one tool run may take")
    parser.add_argument("--workdir", type=Path, help="keep every log here (default: a temporary directory)")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "kafka_throughput.json"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    classpath(BROKER)  # JarsMissing, naming `make kafka`, before anything starts
    records = 200_000 if args.quick else args.records
    if args.quick:
        args.runs = 1
    settings = Settings(
        records=records,
        runs=args.runs,
        record_size=args.record_size,
        warm_up_records=2 * records if args.warm_up_records is None else args.warm_up_records,
        timeout_s=args.timeout,
    )
    load = MachineLoad()
    with zookeeper_workdir("kafka-throughput-", keep=args.workdir) as (server, workdir):
        results = asyncio.run(run_all(server.connect_string, workdir, settings))
    figs = figures(results, settings)
    print(table(figs))
    report = {
        **report_head("kafka_throughput", argv, load),
        "settings": {
            **asdict(settings),
            "one_broker_settings": ONE_BROKER,
            "partitions": 1,
            "replication_factor": 1,
        },
        "figures": figs,
        "counted": counted(results, settings),
        "results": results,
    }
    print(f"load: {report['load']}")
    print(json.dumps({"counted": report["counted"], "ours_over_kafka": figs["ours_over_kafka"]}))
    write_report(args.out, report)


if __name__ == "__main__":
    main()
