"""A small run of bench.broker_apply in its own process, so that it cannot rot: both parts measured, every
field of the report present and sane. The numbers themselves are not judged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.broker_apply_live import broker_steps
from daemon.eventlog import format_ts

ROOT = Path(__file__).resolve().parents[2]
STEPS = ("transfer", "queue", "decode", "gc_after_decode", "apply", "finish")


def run_bench(out: Path) -> dict[str, Any]:
    command = [
        *(sys.executable, "-m", "bench.broker_apply"),
        *("--partitions", "2000", "--big-partitions", "5000", "--runs", "1"),
        *("--idle-s", "1", "--after-s", "0.5", "--out", str(out)),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert "p99 during / idle" in done.stdout
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def assert_latencies(figures: dict[str, Any]) -> None:
    assert figures["n"] > 0 and figures["failed"] == 0
    assert 0 < figures["p50"] <= figures["p99"] <= figures["max"]
    assert set(figures["by_api"]) == {"METADATA", "API_VERSIONS"}


def check_in_process(result: dict[str, Any]) -> None:
    assert result["partitions"] == 2000 == result["cached_partitions"]
    assert result["bytes"] > 2000 * 40
    for step in ("decode", "apply", "warm_apply"):
        assert result[f"{step}_s"] > 0
    for step in ("decode", "apply", "release", "decode_warm", "warm_apply", "warm_release"):
        assert result[f"{step}_s"] >= 0 and result[f"{step}_gc_s"] >= 0
        assert result[f"{step}_gc_collections"] >= 0 and result[f"{step}_gc_max_pause_s"] >= 0
        assert all(gen in (0, 1, 2) and sec >= 0.01 for gen, sec in result[f"{step}_gc_long_pauses"])
    assert result["handle_s"] > 0 and result["handle_over_decode"] > 0
    assert result["apply_over_decode"] > 0 and result["warm_apply_over_decode"] > 0
    assert result["release_over_decode"] is not None and result["release_over_decode"] >= 0
    assert result["peak_rss_mib"] >= result["rss_before_mib"] > 0


def check_broker_process(live: dict[str, Any]) -> None:
    assert live["partitions"] == 5000 and live["bytes"] > 5000 * 40 and live["error"] == "NONE"
    assert live["broker_exit_code"] == 0
    assert live["window_s"] > 0
    for phase in ("idle", "during", "after"):
        assert_latencies(live["data_plane_ms"][phase])
    for ratio in ("p99_during_over_idle", "p50_during_over_idle", "max_during_over_idle"):
        assert live[ratio] > 0
    assert live["target_p99_over_idle_max"] == 3.0
    assert tuple(live["broker_steps_s"]) == STEPS == tuple(live["data_plane_ms_by_step"])
    assert all(seconds >= 0 for seconds in live["broker_steps_s"].values())
    assert sum(live["broker_steps_s"].values()) == pytest.approx(live["window_s"], abs=0.01)
    assert live["update_metadata_ms"]["local"] > 0
    for phase in ("idle", "during"):
        assert set(live["data_plane_broker_ms"][phase]) == {"Metadata", "ApiVersions"}
        assert set(live["cpu_cores"]) == {"idle", "window"} and live["cpu_cores"]["idle"]["broker"] > 0
    assert live["data_plane_broker_ms"]["idle"]["Metadata"]["requests"] > 0
    assert live["broker_peak_rss_mib"] > 0


@pytest.mark.zookeeper
def test_a_small_run_reports_both_parts(tmp_path: Path) -> None:
    report = run_bench(tmp_path / "broker_apply.json")
    assert report["benchmark"] == "broker_apply" and report["machine"]["cores"]
    [in_process] = report["in_process"]
    check_in_process(in_process)
    check_broker_process(report["broker_process"])
    assert isinstance(report["target_met"], bool)
    assert report["target_p99_during_over_idle_max"] == 3.0


def test_the_broker_steps_cut_the_window_in_order() -> None:
    """Read after 0.1 s, queued 0.1 s, decoded until 0.25 s (the handling's 0.45 s start there), the
    received event at 0.3 s, handled at 0.7 s (events carry wall-clock stamps; ``offset`` is wall minus
    monotonic)."""
    offset = 1_700_000_000.0
    marks = {"sent": 10.0, "answered": 11.0, "offset": offset}

    def event(kind: str, at: float, **fields: Any) -> dict[str, Any]:
        ts = format_ts(offset + at)
        return {"kind": kind, "ts": ts, "api": "UpdateMetadata", "correlation_id": 7, **fields}

    events = [
        event("control_request_received", 10.3, queue_ms=100.0),
        event("control_request_handled", 10.7, queue_ms=100.0, handle_ms=450.0),
    ]
    steps = broker_steps(marks, events, 7, local_ms=500.0)
    assert list(steps) == list(STEPS)
    bounds = [bound for span in steps.values() for bound in span]
    assert bounds == sorted(bounds) and bounds[0] == 10.0 and bounds[-1] == 11.0
    lengths = {name: round(end - start, 3) for name, (start, end) in steps.items()}
    assert lengths == {
        "transfer": 0.1,
        "queue": 0.1,
        "decode": 0.05,
        "gc_after_decode": 0.05,
        "apply": 0.4,
        "finish": 0.3,
    }
    assert broker_steps(marks, events[:1], 7, local_ms=500.0) == {}
