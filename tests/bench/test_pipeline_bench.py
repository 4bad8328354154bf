"""A smoke run of bench.pipeline, so that it cannot rot, and the generator's promise: its directories
pass every check. The numbers themselves are not judged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import pipeline
from bench.audit_logs import generate


@pytest.mark.long
def test_a_quick_run_audits_a_generated_directory_in_fresh_processes(tmp_path: Path) -> None:
    """Three fresh JVMs (two floors and the audit); the audit passes every check it could judge, and
    its stderr is empty: Spark's start-up lines went to its log."""
    out = tmp_path / "pipeline.json"
    assert pipeline.main(["--rows", "40000", "--out", str(out)]) == 0
    (size,) = json.loads(out.read_text())["sizes"]
    assert size["history_rows"] == 40000 and size["lines"] > 40000
    assert size["checks_failed"] == [] and size["checks_skipped"] == []
    assert size["audit_stderr"] == "" and size["audit_stdout_is_the_report"]
    for part in ("floor", "floor_every_field", "audit"):
        assert size[part]["seconds"] > 0 and size[part]["peak_rss_mb"] > 100, "the JVM is counted"
    assert size["audit_over_floor"] > 0 and size["audit_over_floor_every_field"] > 0
    assert Path(size["class_data_archive"]["path"]).is_file(), "both JVMs measured map the archive"


def test_generated_runs_bounce_brokers_and_read_back_everything(tmp_path: Path) -> None:
    written = generate(tmp_path / "logs", 200_000, runs=2, partitions=4)
    assert written["history_rows"] == 200_000
    runs = sorted((tmp_path / "logs" / "chaos").iterdir())
    assert len(runs) == 2
    events = [json.loads(line) for line in (runs[0] / "events.jsonl").read_text().splitlines()]
    faults = [e for e in events if e["kind"] == "fault_injected"]
    assert len(faults) == 2 and {e["fault"] for e in faults} == {"bounce"}
    history = (runs[0] / "history.jsonl").read_text().splitlines()
    acked = {json.loads(line)["value"] for line in history if '"produce_acked"' in line}
    consumed = {json.loads(line)["value"] for line in history if '"consumed"' in line}
    assert len(acked) == 50_000 and acked == consumed
