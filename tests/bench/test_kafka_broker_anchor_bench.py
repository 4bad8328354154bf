"""Small runs of the benchmarks that take Apache Kafka's broker as the anchor, so that they cannot rot:
``bench.kafka_control_latency`` (KIP-291's probe on a Kafka 3.9 broker and on ours, both modes) and
``bench.kafka_throughput`` (Kafka's producer and consumer perf tools against each). What is judged is
behaviour: each broker took every probe without error and says so itself, the load's records were
appended, and every record the tools sent was acknowledged, stored and read back. The numbers
themselves are not judged.

The two runs go side by side, each in its own process and ZooKeeper, to stay within a minute. Kafka's
jars are needed (``make kafka``); without them this fails, as the interop suite does, rather than
skipping.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.control_requests import Sample
from bench.kafka_control_latency import FIGURE_ROWS
from bench.kafka_control_targets import leader_and_isr_finished, state_change_acceptance
from bench.kafka_throughput import ROWS, Settings, parse_consumer, parse_producer
from bench.kafka_throughput import figures as throughput_figures

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 240
IMPLEMENTATIONS = ("kafka", "ours")


def test_the_perf_tools_output_is_read_as_printed() -> None:
    producer = (
        "305818 records sent, 61163.6 records/sec (5.83 MB/sec), 2330.6 ms avg latency, "
        "2893.0 ms max latency.\n"
        "1000000 records sent, 114038.088722 records/sec (10.88 MB/sec), 1919.12 ms avg latency, "
        "2893.00 ms max latency, 1907 ms 50th, 2802 ms 95th, 2885 ms 99th, 2892 ms 99.9th.\n"
    )
    assert parse_producer(producer) == {
        "records_sent": 1_000_000,
        "records_per_s": 114038.088722,
        "mib_per_s": 10.88,
        "latency_ms": {"avg": 1919.12, "max": 2893.0, "p50": 1907, "p95": 2802, "p99": 2885, "p999": 2892},
    }
    consumer = (
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n"
        "2026-11-26 20:55:39:344, 2026-11-26 20:55:41:398, 95.3674, 46.4301, 1000000, 486854.9172, "
        "807, 1247, 76.4775, 801924.6191\n"
    )
    assert parse_consumer(consumer) == {
        "records": 1_000_000,
        "records_per_s": 486854.9172,
        "mib_per_s": 46.4301,
        "rebalance_ms": 807,
        "fetch_ms": 1247,
        "fetch_records_per_s": 801924.6191,
        "fetch_mib_per_s": 76.4775,
    }
    assert parse_producer("no final line\n") == {} and parse_consumer("") == {}


def test_kafkas_state_change_log_tells_which_probes_it_handled() -> None:
    """Only lines naming the benchmark's controller count; a warning is counted apart."""
    head = "[2026-11-26 20:47:11,310] INFO [Broker id=1] Finished LeaderAndIsr request in"
    log = "\n".join(
        [
            f"{head} 8ms correlationId 2 from controller 1001 for 1 partitions",
            "[2026-11-26 20:47:11,311] INFO [Broker id=1] Add 1 partitions and deleted 0 partitions "
            "from metadata cache in response to UpdateMetadata request sent by controller 1001 epoch 1 "
            "with correlation id 3",
            f"{head} 9ms correlationId 4 from controller 10011 for 1 partitions",
            "[2026-11-26 20:47:12,000] WARN [Broker id=1] Ignoring LeaderAndIsr request from controller 7",
        ]
    )
    samples = [Sample("LEADER_AND_ISR", 2, 1.0, "NONE"), Sample("UPDATE_METADATA", 3, 1.0, "NONE")]
    samples.append(Sample("LEADER_AND_ISR", 4, 1.0, "NONE"))
    accepted = state_change_acceptance(log, samples)
    assert accepted["probes"] == 3 and accepted["recorded_without_error"] == 2
    assert accepted["state_change_warnings"] == 1
    assert leader_and_isr_finished(log) == {2: 8}


def run_side_by_side(commands: dict[str, list[str]], tmp_path: Path) -> None:
    processes = {}
    for name, command in commands.items():
        with (tmp_path / f"{name}.log").open("wb") as log:
            processes[name] = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    try:
        for name, process in processes.items():
            code = process.wait(RUN_TIMEOUT_S)
            assert code == 0, f"{name} exited {code}:\n{(tmp_path / f'{name}.log').read_text()[-4000:]}"
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()


def check_control_latency(report: dict[str, Any]) -> None:
    assert report["kafka"]["version"].startswith("3.9")
    assert report["date"] and report["machine"]["cores"] and "cpu_stall_share" in report["load"]
    for implementation in IMPLEMENTATIONS:
        for mode in ("dedicated", "shared"):
            run = report["results"][implementation][mode]
            where = (implementation, mode)
            accepted = run["accepted"]
            assert accepted["probes"] > 0, where
            assert (
                accepted["recorded_by_broker"] == accepted["recorded_without_error"] == accepted["probes"]
            ), where
            for name, phase in run["phases"].items():
                assert phase["responses"] == {"NONE": phase["probes"]}, (where, name)
                assert phase["round_trip_ms"]["p99"] is not None, (where, name)
                assert phase["leader_and_isr_handle_ms"]["n"] > 0, (where, name)
            assert run["phases"]["loaded"]["metadata_per_s"] > 0, where
            produce = run["produce"]
            assert produce["probe_partition_end"]["error"] == "NONE", where
            assert produce["probe_partition_end"]["offset"] >= produce["records_answered"] > 0, where
        for _, key in FIGURE_ROWS:
            assert report["figures"][implementation][key] is not None, (implementation, key)
    assert report["results"]["kafka"]["dedicated"]["accepted"]["state_change_warnings"] == 0
    assert report["results"]["kafka"]["shared"]["accepted"]["state_change_warnings"] == 0
    assert all(report["figures"]["ours_over_kafka"][key] is not None for _, key in FIGURE_ROWS)


def check_throughput(report: dict[str, Any], records: int) -> None:
    assert report["kafka"]["version"].startswith("3.9")
    assert report["date"] and report["machine"]["cores"] and "cpu_stall_share" in report["load"]
    for implementation in IMPLEMENTATIONS:
        counted = report["counted"][implementation]
        assert counted["all"], (implementation, counted)
        assert counted["consumed"] and all(c >= records for c in counted["consumed"])
        for _, key in ROWS:
            assert report["figures"][implementation][key] is not None, (implementation, key)
    assert all(report["figures"]["ours_over_kafka"][key] is not None for _, key in ROWS)


@pytest.mark.zookeeper
@pytest.mark.long
def test_both_brokers_take_the_probes_and_the_perf_tools_records(kafka_jars: str, tmp_path: Path) -> None:
    control_out, throughput_out = tmp_path / "kafka_control_latency.json", tmp_path / "kafka_throughput.json"
    records = 20_000
    run_side_by_side(
        {
            "control": [
                sys.executable, "-m", "bench.kafka_control_latency",
                "--duration", "1", "--warm-up", "1", "--partitions", "1000", "--brokers", "5",
                "--connections", "16", "--saturation-timeout", "2",
                "--workdir", str(tmp_path / "control"), "--out", str(control_out),
            ],
            "throughput": [
                sys.executable, "-m", "bench.kafka_throughput",
                "--records", str(records), "--runs", "1", "--warm-up-records", "0",
                "--workdir", str(tmp_path / "throughput"), "--out", str(throughput_out),
            ],
        },
        tmp_path,
    )  # fmt: skip
    check_control_latency(json.loads(control_out.read_text()))
    check_throughput(json.loads(throughput_out.read_text()), records)


def test_throughput_figures_put_ours_over_kafka() -> None:
    """The fastest run's figures (and the median), per-record CPU from the run's CPU seconds, the ratio."""

    def run(rate: float, broker_cpu: float) -> dict[str, Any]:
        return {
            "records_per_s": rate,
            "mib_per_s": rate / 1e4,
            "latency_ms": {"p99": 5},
            "cpu_s": {"broker": broker_cpu},
            "broker_cores": 0.5,
            "tool_cpu_s": 1.0,
            "tool_cores": 1.0,
        }

    def side(rates: list[float], cpu: float) -> dict[str, Any]:
        runs = [run(rate, cpu) for rate in rates]
        consume = {
            "fetch_records_per_s": 1e5,
            "fetch_mib_per_s": 10.0,
            "cpu_s": {"broker": cpu},
            "tool_cpu_s": 1,
        }
        return {
            "produce_acks_1": {"runs": runs},
            "produce_acks_all": {"runs": runs},
            "consume": {"runs": [consume]},
        }

    settings = Settings(records=1000, runs=3, record_size=100, warm_up_records=0, timeout_s=1)
    figs = throughput_figures({"kafka": side([1, 3, 2], 2.0), "ours": side([4, 4, 9], 1.0)}, settings)
    assert (
        figs["kafka"]["produce_acks_1_records_per_s"] == 3
        and figs["ours"]["produce_acks_1_records_per_s"] == 9
    )
    assert figs["kafka"]["produce_acks_1_median_records_per_s"] == 2
    assert figs["kafka"]["produce_acks_all_broker_cpu_us_per_record"] == 2000.0
    assert figs["ours_over_kafka"]["produce_acks_1_records_per_s"] == 3.0
    assert figs["ours_over_kafka"]["consume_broker_cpu_us_per_record"] == 0.5
    assert figs["spread"]["kafka"]["produce_acks_all_records_per_s"] == [1, 3]
