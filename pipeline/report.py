"""Running every check on a cluster directory, and the report: a JSON document and a terminal table."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.checks import broker_epochs_increase, one_controller_per_epoch, stale_requests_rejected
from pipeline.isr import ineligible_never_in_isr
from pipeline.leadership import leader_epochs_grow, no_older_controller_obeyed, one_leader_per_leader_epoch
from pipeline.load import Inputs, load
from pipeline.result import CheckResult
from pipeline.stats import statistics
from pipeline.workload import replicas_consistent, workload_no_duplicates, workload_no_loss

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from rich.console import Console

REPORT_VERSION = 1
EXAMPLE_CHARS = 120


def audit(spark: SparkSession, inputs: Inputs, run: str | None = None) -> dict[str, Any]:
    """The report of one directory: inputs read, every check's result, and the statistics."""
    logs = load(spark, inputs)
    try:
        events, history = logs.events, logs.history
        checks: list[CheckResult] = [
            one_controller_per_epoch(events),
            broker_epochs_increase(events),
            stale_requests_rejected(events),
            ineligible_never_in_isr(events),
            one_leader_per_leader_epoch(events),
            leader_epochs_grow(events),
            no_older_controller_obeyed(events),
            workload_no_loss(history, events),
            workload_no_duplicates(history),
            replicas_consistent(events),
        ]
        stats = statistics(events, history)
    finally:
        logs.release()
    return {
        "version": REPORT_VERSION,
        "directory": str(inputs.root),
        "run": run,
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "passed": all(c.passed for c in checks),
        "inputs": logs.summary,
        "checks": [c.to_dict() for c in checks],
        "stats": stats,
    }


def write(report: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    tmp.replace(path)


def render(report: dict[str, Any], console: Console, out: Path) -> None:
    """One row per check (verdict, violations, one example), then what was read and where the report is."""
    from rich.table import Table

    colours = {"passed": "green", "failed": "bold red", "skipped": "yellow"}
    table = Table(title=f"audit of {report['directory']}")
    table.add_column("check", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("checked", justify="right", no_wrap=True)
    table.add_column("violations", justify="right", no_wrap=True)
    table.add_column("example", overflow="fold")
    for check in report["checks"]:
        example = check["examples"][0] if check["examples"] else check["details"].get("skipped", "")
        text = example if isinstance(example, str) else json.dumps(example, separators=(",", ":"))
        if len(text) > EXAMPLE_CHARS:
            text = text[: EXAMPLE_CHARS - 1] + "…"
        verdict = check["verdict"]
        table.add_row(
            check["name"],
            f"[{colours[verdict]}]{verdict}[/]",
            str(check["checked"]),
            str(check["violations"]),
            text,
            end_section=False,
        )
    console.print(table)
    inputs = report["inputs"]
    console.print(
        f"{inputs['event_files']} event logs, {inputs['history_files']} histories, {inputs['lines']} lines"
        f", {inputs['malformed_lines']} malformed; report written to {out}",
        highlight=False,
        soft_wrap=True,
    )
