"""``python -m pipeline audit`` end to end on a synthetic cluster directory with a chaos run: exit status,
the report file, a torn line, the statistics and the table; and the usage errors."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from rich.console import Console

from pipeline.__main__ import main
from pipeline.load import InputError, find_inputs
from pipeline.report import render
from tests.pipeline.conftest import RUN, ClusterLog, chaos_run, healthy_cluster

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
    parquet, page = log.root.parent / "parquet", log.root.parent / "report.html"
    with contextlib.redirect_stdout(out):
        status = main(
            ["audit", "--dir", str(log.root), "--json", "--parquet", str(parquet), "--html", str(page)]
        )
    report_file = log.root / "audit.json"
    yield {
        "status": status,
        "stdout": out.getvalue(),
        "report": json.loads(report_file.read_text()),
        "marks": marks,
        "root": log.root,
        "parquet": parquet,
        "html": page,
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
        "partition_epochs_written_once": "passed",
        "broker_epochs_move_forward": "skipped",
        "no_older_controller_obeyed": "passed",
        "workload_no_loss": "failed",
        "workload_no_duplicates": "passed",
        "txn_isolation": "skipped",
        "txn_durability": "skipped",
        "eos_exactly_once": "skipped",
        "replicas_consistent": "skipped",
    }
    (lost,) = next(c for c in report["checks"] if c["name"] == "workload_no_loss")["examples"]
    assert (lost["run"], lost["value"], lost["offset"]) == (RUN, f"{RUN}-000003", 3)


def test_the_events_and_findings_are_parquet_tables_pandas_reads(audited: dict[str, Any]) -> None:
    import pandas as pd

    parquet: Path = audited["parquet"]
    assert audited["report"]["parquet"] == {
        name: str(parquet / name) for name in ("events", "history", "findings")
    }
    events = pd.read_parquet(parquet / "events")
    lines = sum(
        1 for f in audited["root"].rglob("events.jsonl") for line in f.read_text().splitlines() if line
    )
    assert len(events) == lines - 1, "every line but the torn one"
    assert {"ts", "node", "kind", "file", "run", "leader_epoch", "queue_ms"} <= set(events.columns)
    assert str(events["ts"].dtype).startswith("datetime64")
    killed = events[(events["kind"] == "fault_injected") & (events["target"] == "broker-2")]
    assert list(killed["run"]) == [RUN]
    history = pd.read_parquet(parquet / "history")
    assert set(history["kind"]) == {"produce_acked", "consumed"}
    findings = pd.read_parquet(parquet / "findings")
    assert set(findings["check"]) == {c["name"] for c in audited["report"]["checks"]}
    (lost,) = findings[findings["check"] == "workload_no_loss"].itertuples()
    assert (lost.verdict, lost.violations) == ("failed", 1)
    assert json.loads(lost.example)["value"] == f"{RUN}-000003"


def test_the_html_page_holds_the_checks_and_a_plot_per_run_and_of_control_latency(
    audited: dict[str, Any],
) -> None:
    text = audited["html"].read_text()
    assert audited["report"]["html"] == str(audited["html"])
    assert text.count("src='data:image/png;base64,") == 2, "the run's timeline and the latency histograms"
    assert "http" not in text.replace("http-equiv", ""), "nothing to fetch: the page works offline"
    for check in audited["report"]["checks"]:
        assert f"id='check-{check['name']}'" in text
    assert f"<a href='#check-workload_no_loss'>run {RUN}, value {RUN}-000003" in text
    assert f"<h2 id='{RUN}'>Run {RUN}</h2>" in text


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make clients installs it)")
def test_chromium_renders_the_plots(audited: dict[str, Any], tmp_path: Path) -> None:
    """A real browser shows the page with its plots: a screenshot holds many pixels of the plots'
    own colours (the controller epoch's line, the swimlanes' leaders, the latency and throughput lines)."""
    import matplotlib.image
    import numpy as np

    shot = tmp_path / "page.png"
    command = [
        str(CHROMIUM),
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--screenshot={shot}",
        "--window-size=1300,2600",
        audited["html"].resolve().as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert shot.is_file(), done.stderr[-2000:]
    pixels = matplotlib.image.imread(shot)[:, :, :3]
    palette = {"blue": (0x1F, 0x77, 0xB4), "green": (0x2C, 0xA0, 0x2C), "red": (0xD6, 0x27, 0x28)}
    found = {
        name: int((np.abs(pixels - np.array(rgb) / 255).max(axis=2) < 0.08).sum())
        for name, rgb in palette.items()
    }
    assert all(count > 200 for count in found.values()), found


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


def test_how_fast_the_control_plane_reacted(audited: dict[str, Any]) -> None:
    """Bounce detection, failover, and each fault's first election, from the scenario's clock (10 ms a
    line): the kill of broker 2 is followed by its partition's election 4 lines later; the kill of the
    active controller by the next election 1.51 s later."""
    stats = audited["report"]["stats"]
    cluster = stats["cluster"]["availability"]
    assert cluster["bounce_detection_ms"] == {
        "new": {"count": 4, "p50": 10.0, "p99": 30.0, "max": 30.0},
        "bounced": {"count": 1, "p50": 10.0, "p99": 10.0, "max": 10.0},
    }
    assert cluster["failover_ms"]["all"]["count"] == 4
    assert cluster["failover_to_last_broker_ms"]["all"]["count"] == 1
    killed = seconds(audited["marks"]["controller_killed"], {"ts": _elected_ts(audited, 4)})
    run = stats["runs"][RUN]["availability"]
    assert run["fault_to_first_election_s"] == {
        "kill": {"count": 2, "p50": 0.04, "p99": killed, "max": killed}
    }


def test_control_request_latency_by_plane_and_api(cluster_log: ClusterLog, read: Any) -> None:
    """KIP-291 measured from the logs: requests on a broker's control-plane listener apart from those
    that shared the data plane's queue."""
    from pipeline.stats import fault_windows, run_windows, statistics

    log = cluster_log
    log.emit("broker-1", "broker_started", broker_id=1, broker_epoch=10, control_plane_listener="CONTROLLER")
    log.emit("broker-2", "broker_started", broker_id=2, broker_epoch=12, control_plane_listener=None)
    for ms in (1.0, 2.0, 3.0):
        log.handled(
            1,
            10,
            max_broker_epoch=10,
            api="LeaderAndIsr",
            listener="CONTROLLER",
            queue_ms=ms,
            handle_ms=ms / 10,
        )
    log.handled(1, 10, max_broker_epoch=10, listener="INTERNAL", queue_ms=9.0, handle_ms=0.5)
    log.handled(2, 12, max_broker_epoch=12, listener="INTERNAL", queue_ms=40.0, handle_ms=1.0)
    log.handled(2, 12, max_broker_epoch=12)  # a line from before handled lines named their listener
    logs = read(log)
    windows = run_windows(logs.events, logs.history)
    faults = fault_windows(logs.events, windows)
    latency = statistics(logs.events, logs.history, windows, faults)["cluster"]["control_latency_ms"]
    assert latency == {
        "control": {
            "LeaderAndIsr": {
                "count": 3,
                "queue": {"p50": 2.0, "p99": 3.0, "max": 3.0},
                "handle": {"p50": 0.2, "p99": 0.3, "max": 0.3},
            }
        },
        "data": {
            "UpdateMetadata": {
                "count": 2,
                "queue": {"p50": 9.0, "p99": 40.0, "max": 40.0},
                "handle": {"p50": 0.5, "p99": 1.0, "max": 1.0},
            }
        },
        "unknown": {
            "UpdateMetadata": {
                "count": 1,
                "queue": {"p50": 0.2, "p99": 0.2, "max": 0.2},
                "handle": {"p50": 0.1, "p99": 0.1, "max": 0.1},
            }
        },
    }


def _elected_ts(audited: dict[str, Any], epoch: int) -> str:
    path = audited["root"] / "controller-2" / "events.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()]
    return next(
        e["ts"] for e in events if e["kind"] == "controller_elected" and e["controller_epoch"] == epoch
    )


@pytest.mark.parametrize("width", [80, 200], ids=["a log's 80 columns", "a wide terminal"])
def test_the_table_reads_at_any_width_with_each_failure_as_a_phrase(
    audited: dict[str, Any], width: int
) -> None:
    console = Console(record=True, width=width)
    render(audited["report"], console, audited["root"] / "audit.json")
    lines = console.export_text().splitlines()
    rows = {line.split("│")[1].strip(): line for line in lines if line.startswith("│ ")}
    assert "failed" in rows["workload_no_loss"] and "passed" in rows["one_controller_per_epoch"]
    assert all(len(line) <= width for line in rows.values())
    (lost,) = [line for line in lines if line.startswith("workload_no_loss: ")]
    assert f"run {RUN}, value {RUN}-000003, topic chaos, partition 0, offset 3" in lost
    assert not any("{" in line for line in lines), "examples are phrases, not JSON"
    summary = lines[-1] if "audit.json" in lines[-1] else " ".join(lines[-2:])
    assert "6 event logs, 1 history, " in summary and "1 malformed" in summary


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


def test_the_windows_and_counts_found_while_loading_are_those_of_a_pass_over_the_lines(
    tmp_path: Path, spark: Any, read: Any
) -> None:
    """pipeline.stats.windows_of and counted_history, from the job that fills the caches, give what
    run_windows and history_metrics compute over every line, for runs of two clusters and a torn line."""
    from pipeline.stats import counted_history, history_metrics, run_windows, windows_of

    for cluster in ("seed-1", "seed-2"):
        log = ClusterLog(tmp_path / cluster)
        chaos_run(log)
        log.workload("produce_failed", topic="chaos", value="x", error="timed out")
    torn = next((tmp_path / "seed-2" / "chaos").iterdir()) / "history.jsonl"
    torn.write_text(torn.read_text() + '{"ts":"2099-01-01T00:00:00Z","node":"wor')
    log = ClusterLog(tmp_path)
    logs = read(log)
    inputs = find_inputs(tmp_path)

    def rows(df: Any) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in df.collect())

    assert rows(windows_of(spark, inputs, logs.spans)) == rows(run_windows(logs.events, logs.history))
    summed = history_metrics(logs.history).groupBy("scope", "metric", "key").sum("value")
    assert rows(counted_history(spark, inputs, logs.kinds)) == rows(summed)
    assert len(rows(summed)) == 6
