"""A smoke run of bench.log_cleaner, so that it cannot rot: the three passes measured in one run and
the ratios present (the numbers themselves are not judged)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import log_cleaner


def test_quick_run_measures_the_cleaner_beside_a_read(tmp_path: Path) -> None:
    out = tmp_path / "log_cleaner.json"
    log_cleaner.main(["--quick", "--out", str(out)])
    report = json.loads(out.read_text())
    [round_] = report["rounds"]
    assert set(round_["mb_per_s"]) == {"read", "read_decode", "clean"}
    assert round_["clean"]["records_kept"] < round_["clean"]["records_read"]
    assert report["ratio_clean_to_read"] is not None and report["ratio_clean_to_read_decode"] is not None
