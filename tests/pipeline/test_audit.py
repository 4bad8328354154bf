"""``python -m pipeline audit`` end to end on a synthetic cluster directory with a chaos run: exit status,
the report file, a torn line, the statistics and the table; and the usage errors."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from rich.console import Console

from pipeline.__main__ import main
from pipeline.load import InputError, find_inputs
from pipeline.report import render
from tests.pipeline.conftest import RUN, ClusterLog, healthy_cluster

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TORN = '{"ts":"2026-01-01T00:09:59.000000Z","node":"broker-1","kind":"control_requ'


def seconds(start: dict[str, Any], end: dict[str, Any]) -> float:
    parse = dt.datetime.fromisoformat
    return round((parse(end["ts"]) - parse(start["ts"])).total_seconds(), 3)


def chaos_scenario(log: ClusterLog) -> dict[str, Any]:
    """A healthy cluster, then a chaos run that kills broker 2 and the active controller while it
    produces; the last acknowledged value is missing from the final read. Broker 1's log ends torn."""
    healthy_cluster(log)  # controller-1 hands over to controller-2 (2.01 s), which then shuts down
    log.wait(5)
    c1, c2 = "controller-1", "controller-2"
    log.elected(c1, 3)
    log.broker_change(c1, 3, {1: 10, 2: 30, 3: 50}, new=(1, 2, 3))
    marks: dict[str, Any] = {}
    marks["started"] = log.chaos("run_started", run_id=RUN, topic="chaos", partitions=2, faults=["kill"])
    values = [f"{RUN}-{i:06d}" for i in range(4)]

    def ack(i: int, latency: float) -> None:
        log.workload(
            "produce_acked", topic="chaos", partition=0, offset=i, value=values[i], latency_ms=latency
        )

    ack(0, 5.0)
    marks["broker_killed"] = log.chaos(
        "fault_injected", fault="kill", target="broker-2", role="broker", detail=None
    )
    ack(1, 50.0)
    log.broker_change(c1, 3, {1: 10, 3: 50}, dead=(2,), previous={2: 30})
    log.isr_write(c1, 3, 1, 1, [1, 3], "offline election", leader_epoch=3, partition_epoch=8)
    marks["broker_healed"] = log.chaos("fault_healed", fault="kill", target="broker-2", role="broker")
    ack(2, 7.0)
    marks["controller_killed"] = log.chaos(
        "fault_injected", fault="kill", target=c1, role="controller", detail="SIGKILL"
    )
    log.wait(1.5)
    log.elected(c2, 4)
    marks["controller_healed"] = log.chaos("fault_healed", fault="kill", target=c1, role="controller")
    # controller-2 is paused and resumed within its session timeout: it stays the controller
    marks["paused"] = log.chaos("fault_injected", fault="pause", target=c2, role="controller", detail=None)
    log.wait(0.5)
    log.chaos("fault_injected", fault="resume", target=c2, role="controller", detail="SIGCONT")
    marks["resumed"] = log.chaos("fault_healed", fault="pause", target=c2, role="controller")
    ack(3, 6.0)
    for i in range(3):  # the final read misses the last value
        log.workload("consumed", topic="chaos", partition=0, offset=i, value=values[i])
    marks["finished"] = log.chaos("run_finished", run_id=RUN, acked=4, failed=0, consumed=3, duration_s=2.0)
    log.raw("broker-1", TORN)
    return marks


@pytest.fixture(scope="module")
def audited(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The CLI run once on the scenario: its exit status, its stdout and what it wrote."""
    log = ClusterLog(tmp_path_factory.mktemp("audit") / "cluster")
    marks = chaos_scenario(log)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["audit", "--dir", str(log.root), "--json"])
    report_file = log.root / "audit.json"
    yield {
        "status": status,
        "stdout": out.getvalue(),
        "report": json.loads(report_file.read_text()),
        "marks": marks,
        "root": log.root,
    }


def test_a_failed_check_exits_1_and_the_report_is_written_and_printed(audited: dict[str, Any]) -> None:
    report = audited["report"]
    assert audited["status"] == 1
    assert json.loads(audited["stdout"]) == report
    assert report["passed"] is False and report["directory"] == str(audited["root"].resolve())
    verdicts = {c["name"]: c["verdict"] for c in report["checks"]}
    assert verdicts == {
        "one_controller_per_epoch": "passed",
        "broker_epochs_increase": "passed",
        "stale_requests_rejected": "passed",
        "ineligible_never_in_isr": "passed",
        "one_leader_per_leader_epoch": "skipped",
        "leader_epochs_grow": "passed",
        "no_older_controller_obeyed": "passed",
        "workload_no_loss": "failed",
        "workload_no_duplicates": "passed",
        "replicas_consistent": "skipped",
    }
    (lost,) = next(c for c in report["checks"] if c["name"] == "workload_no_loss")["examples"]
    assert (lost["run"], lost["value"], lost["offset"]) == (RUN, f"{RUN}-000003", 3)


def test_a_torn_line_is_counted_and_reported_not_fatal(audited: dict[str, Any]) -> None:
    inputs = audited["report"]["inputs"]
    assert (inputs["event_files"], inputs["history_files"], inputs["malformed_lines"]) == (6, 1, 1)
    assert inputs["malformed_by_file"] == {"broker-1/events.jsonl": 1}
    assert inputs["malformed_examples"] == [{"file": "broker-1/events.jsonl", "line": TORN}]


def test_the_statistics_of_the_cluster_and_of_the_run(audited: dict[str, Any]) -> None:
    stats, marks = audited["report"]["stats"], audited["marks"]
    killed = seconds(marks["controller_killed"], {"ts": _elected_ts(audited, 4)})
    paused = seconds(marks["paused"], marks["resumed"])
    assert (killed, paused) == (1.51, 0.52)
    cluster = stats["cluster"]
    assert cluster["controller_elections"] == 4
    # controller-1 resigns (2.01 s), controller-2 shuts down (5.01 s), controller-1 is killed, and
    # controller-2 is paused until it is resumed
    assert (cluster["controller_gaps"], cluster["time_without_controller_s"]) == (
        4,
        round(2.01 + 5.01 + killed + paused, 3),
    )
    assert cluster["leader_elections"] == {"offline election": 2, "controlled_shutdown election": 1}
    assert cluster["unclean_elections"] == 0
    assert cluster["control_request_errors"] == {"STALE_BROKER_EPOCH": 1}
    assert cluster["replicas_removed_offline"] == 6

    run = stats["runs"][RUN]
    assert (run["acked"], run["failed"], run["consumed"]) == (4, 0, 3)
    assert run["faults"] == {"kill": 2, "pause": 1}, "a resume opens no window"
    windows = [
        seconds(marks["broker_killed"], marks["broker_healed"]),
        seconds(marks["controller_killed"], marks["controller_healed"]),
        paused,
    ]
    assert run["fault_time_s"] == round(sum(windows), 3)
    assert run["produce_latency_ms"] == {
        "all": {"count": 4, "p50": 6.0, "p99": 50.0, "max": 50.0},
        "during_fault": {"count": 1, "p50": 50.0, "p99": 50.0, "max": 50.0},
        "no_fault": {"count": 3, "p50": 6.0, "p99": 7.0, "max": 7.0},
    }
    control = run["control"]
    assert (control["controller_elections"], control["controller_gaps"]) == (1, 2)
    assert control["time_without_controller_s"] == round(killed + paused, 3)
    assert control["leader_elections"] == {"offline election": 1}


def _elected_ts(audited: dict[str, Any], epoch: int) -> str:
    path = audited["root"] / "controller-2" / "events.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()]
    return next(
        e["ts"] for e in events if e["kind"] == "controller_elected" and e["controller_epoch"] == epoch
    )


def test_the_table_shows_each_check_with_its_verdict_and_an_example(audited: dict[str, Any]) -> None:
    console = Console(record=True, width=200)
    render(audited["report"], console, audited["root"] / "audit.json")
    text = console.export_text()
    assert "│ workload_no_loss " in text and "failed" in text and f"{RUN}-000003" in text
    assert "│ one_controller_per_epoch " in text and "passed" in text
    assert "1 malformed" in text and "audit.json" in text


def test_a_directory_without_event_logs_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "--dir", str(tmp_path)]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"pipeline: no events.jsonl under {tmp_path.resolve()}: is it a cluster directory?"
    )
    assert main(["audit", "--dir", str(tmp_path / "missing")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_an_unknown_run_and_bad_arguments_are_usage_errors(
    cluster_log: ClusterLog, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster_log.registered(1, 10)
    assert main(["audit", "--dir", str(cluster_log.root), "--run", "run-x"]) == 2
    assert "no chaos run 'run-x'" in capsys.readouterr().err
    assert main(["audit", "--bogus"]) == 2
    assert main([]) == 2
    assert main(["--help"]) == 0


def test_run_selects_that_runs_files_only(cluster_log: ClusterLog) -> None:
    cluster_log.registered(1, 10)
    cluster_log.chaos("run_started", run="run-a")
    cluster_log.workload("consumed", run="run-a", topic="t", partition=0, offset=0, value="a")
    cluster_log.chaos("run_started", run="run-b")
    root = cluster_log.root.resolve()
    everything = find_inputs(cluster_log.root)
    assert [p.relative_to(root).as_posix() for p in everything.event_files] == [
        "broker-1/events.jsonl",
        "chaos/run-a/events.jsonl",
        "chaos/run-b/events.jsonl",
    ]
    only_b = find_inputs(cluster_log.root, "run-b")
    assert [p.relative_to(root).as_posix() for p in only_b.event_files] == [
        "broker-1/events.jsonl",
        "chaos/run-b/events.jsonl",
    ]
    assert only_b.history_files == []
    with pytest.raises(InputError, match="no chaos run"):
        find_inputs(cluster_log.root, "run-c")
