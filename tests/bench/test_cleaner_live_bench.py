"""A smoke run of bench.cleaner_live, so that it cannot rot: every phase probed, the cleaning found and real
(records removed, the log smaller), the ratios present. The numbers themselves are not judged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import cleaner_live
from bench.cleaner_live import PHASES


def assert_probed(figures: dict[str, Any]) -> None:
    assert figures["n"] > 0 and figures["failed"] == 0
    assert 0 < figures["p50"] <= figures["p99"] <= figures["max"]
    assert set(figures["by_api"]) == {"PRODUCE", "FETCH"}
    assert all(api["n"] > 0 for api in figures["by_api"].values())


@pytest.mark.zookeeper
def test_quick_run_times_the_data_plane_idle_while_cleaning_and_after(tmp_path: Path) -> None:
    out = tmp_path / "cleaner_live.json"
    cleaner_live.main(["--quick", "--out", str(out)])
    report = json.loads(out.read_text())
    assert report["benchmark"] == "cleaner_live" and report["machine"]["cores"]
    [round_] = report["rounds"]
    for phase in PHASES:
        assert_probed(round_["data_plane_ms"][phase])
        assert report["data_plane_ms"][phase]["n"] == round_["data_plane_ms"][phase]["n"]
        assert round_["cpu"][phase]["cores"]["broker"] > 0
    for figure in ("p50", "p99", "mean"):
        assert report[f"{figure}_cleaning_over_idle"] > 0
    cleaning = round_["cleaning"]
    assert cleaning["seconds"] > 0 and cleaning["mb_read"] > 3
    assert cleaning["records_kept"] == report["settings"]["keys"] < cleaning["records_removed"]
    assert cleaning["log_after"]["mb"] < cleaning["log_before"]["mb"] / 10
    assert cleaning["started_after_config_change_s"] >= 0
    assert report["cleaner_metrics"]["kafka_log_logcleaner_deadthreadcount"] == 0
    assert report["cleaner_metrics"]["kafka_log_logcleaner_max_clean_time_secs"] > 0
    assert report["broker_exit_code"] == 0 and report["broker_log_warnings"] == 0


def test_phases_take_whole_round_trips_but_any_that_overlaps_the_cleaning() -> None:
    """Idle is [10, 11], the cleaning [12, 13], after [13, 14] (seconds on the monotonic clock): a round
    trip that straddles a bound of idle or after is left out, one that overlaps the cleaning counts."""
    marks = {"idle": 10.0, "idle_end": 11.0, "cleaning": 12.0, "cleaning_end": 13.0, "after_end": 14.0}
    samples = [
        (10.1, 0.001, 0, True),
        (10.9995, 0.002, 0, True),  # ends after idle: out
        (11.999, 0.004, 0, True),  # overlaps the cleaning's start: in
        (12.5, 0.002, 0, True),
        (12.9995, 0.003, 0, True),  # overlaps the cleaning's end: in, and out of after
        (13.5, 0.001, 0, True),
    ]
    measured = {"rounds": [{"marks": marks}], "samples": samples}
    found = cleaner_live.pooled(measured)
    assert {phase: found["data_plane_ms"][phase]["n"] for phase in PHASES} == {
        "idle": 1,
        "cleaning": 3,
        "after": 1,
    }
    assert found["data_plane_ms"]["cleaning"]["max"] == 4.0
    assert found["p50_cleaning_over_idle"] == 3.0
