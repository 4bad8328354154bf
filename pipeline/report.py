"""Running every check on a cluster directory, and the report: a JSON document and a terminal table."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.availability import BY_FAULT, availability
from pipeline.batch import drive
from pipeline.checks import broker_epochs_increase, one_controller_per_epoch, stale_requests_rejected
from pipeline.epochs import broker_epochs_move_forward, partition_epochs_written_once
from pipeline.isr import ineligible_never_in_isr
from pipeline.leadership import leader_epochs_grow, no_older_controller_obeyed, one_leader_per_leader_epoch
from pipeline.load import Inputs, load
from pipeline.parquet import write_parquet
from pipeline.result import CheckResult
from pipeline.stats import CLUSTER, cluster_scope, counted_history, fault_windows, statistics, windows_of
from pipeline.suspects import Suspects
from pipeline.text import phrase, plural
from pipeline.timeline import timelines
from pipeline.transactions import eos_exactly_once, txn_durability, txn_isolation
from pipeline.workload import NO_LOSS, replicas_consistent, workload_no_duplicates, workload_no_loss

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from rich.console import Console

REPORT_VERSION = 1
EVENT_CHECKS = (
    one_controller_per_epoch,
    broker_epochs_increase,
    stale_requests_rejected,
    ineligible_never_in_isr,
    one_leader_per_leader_epoch,
    leader_epochs_grow,
    partition_epochs_written_once,
    broker_epochs_move_forward,
    no_older_controller_obeyed,
    replicas_consistent,
)
"""The checks of the event logs alone, in the report's order (replicas_consistent comes last of all)."""
TRANSACTION_CHECKS = (txn_isolation, txn_durability, eos_exactly_once)


def audit(
    spark: SparkSession,
    inputs: Inputs,
    run: str | None = None,
    parquet: Path | None = None,
    html: Path | None = None,
) -> dict[str, Any]:
    """The report of one directory: inputs read, every check's result, and the statistics; with
    ``parquet``, the events and findings are also written there (``pipeline.parquet``), with
    ``html``, the page of timelines and histograms (``pipeline.html``)."""
    logs = load(spark, inputs)
    try:
        events, history = logs.events, logs.history
        suspects = Suspects(history, logs.topics)
        # Four threads, so that both cores stay busy while one of them waits on a job of a single task
        # (one step at a time measured the same at ten million rows, and slower at one million).
        with ThreadPoolExecutor(max_workers=4, thread_name_prefix="audit") as pool:
            on_events = pool.submit(drive, [check.steps(events) for check in EVENT_CHECKS])
            on_history = pool.submit(
                drive,
                [
                    workload_no_loss.steps(history, events, suspects),
                    workload_no_duplicates.steps(history, suspects),
                    *(check.steps(history, events) for check in TRANSACTION_CHECKS),
                ],
            )
            # Each run's time window (from its files' first and last lines, found while loading) and
            # its faults' windows, computed once for the statistics, the reaction times and the timelines.
            windows = windows_of(spark, inputs, logs.spans)
            faults = fault_windows(events, windows).cache()
            clusters = inputs.clusters
            counted = counted_history(spark, inputs, logs.kinds)
            stats_done = pool.submit(statistics, events, history, windows, faults, clusters, counted)
            figures_done = pool.submit(availability, events, windows, faults, clusters)
            stats, figures = stats_done.result(), figures_done.result()
            checks, found = on_events.result(), on_history.result()
        suspects.release()
        checks = [*checks[:-1], *found, checks[-1]]  # the report's order: replicas_consistent last
        stats[CLUSTER]["availability"] = figures.get(CLUSTER, {})
        for name, cluster_stats in stats.get("clusters", {}).items():
            cluster_stats["availability"] = figures.get(cluster_scope(name), {})
        for name, run_stats in stats["runs"].items():
            run_stats["availability"] = figures.get(name, {})
        tables = write_parquet(spark, parquet, events, history, checks) if parquet is not None else {}
        plotted = timelines(events, history, windows, faults) if html is not None else None
        faults.unpersist()
        windows.unpersist()
    finally:
        logs.release()
    report = {
        "version": REPORT_VERSION,
        "directory": str(inputs.root),
        "run": run,
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "passed": all(c.passed for c in checks),
        "inputs": logs.summary,
        "checks": [c.to_dict() for c in checks],
        "summary": summary(checks, stats, clusters),
        "stats": stats,
        **({"parquet": tables} if tables else {}),
        **({"html": str(html)} if html is not None else {}),
    }
    if html is not None and plotted is not None:
        from pipeline.html import write_html  # matplotlib only when a page is asked for

        write_html(report, plotted, html)
    return report


def summary(checks: list[CheckResult], stats: dict[str, Any], clusters: list[str]) -> dict[str, Any]:
    """The view across runs, for a directory holding many (a night of CI): violations per check and
    per cluster, the reaction-time figures per fault kind over every run, and one line per run."""
    by_fault: dict[str, dict[str, Any]] = {}
    for figure, keyed in stats[CLUSTER].get("availability", {}).items():
        if figure in BY_FAULT:
            for kind, figures in keyed.items():
                by_fault.setdefault(kind, {})[figure] = figures
    lost: dict[str, int] = next((c.details.get("lost_by_run", {}) for c in checks if c.name == NO_LOSS), {})
    by_cluster: dict[str, dict[str, int]] = {}
    for check in checks:
        for cluster, count in check.details.get("violations_by_cluster", {}).items():
            by_cluster.setdefault(cluster, {})[check.name] = count
    return {
        "clusters": clusters,
        "runs": len(stats["runs"]),
        "violations": {c.name: c.violations for c in checks if c.verdict != "skipped"},
        **({"violations_by_cluster": dict(sorted(by_cluster.items()))} if len(clusters) > 1 else {}),
        "by_fault": dict(sorted(by_fault.items())),
        "by_run": {
            name: {
                "faults": sum(run["faults"].values()),
                "acked": run["acked"],
                "failed": run["failed"],
                "lost": lost.get(name, 0),
                "produce_p99_ms": run["produce_latency_ms"]["all"]["p99"],
            }
            for name, run in stats["runs"].items()
        },
    }


def write(report: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    tmp.replace(path)


def render(report: dict[str, Any], console: Console, out: Path) -> None:
    """One row per check (verdict, how much it examined, violations), then one line per failed or
    skipped check with its first example as a phrase (the report holds them all, in full), then what
    was read and where the report is. Narrow columns only: readable at any width, in a log too."""
    from rich.table import Table

    colours = {"passed": "green", "failed": "bold red", "skipped": "yellow"}
    table = Table(title=f"audit of {report['directory']}", title_justify="left")
    table.add_column("check", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("checked", justify="right", no_wrap=True)
    table.add_column("violations", justify="right", no_wrap=True)
    for check in report["checks"]:
        verdict = check["verdict"]
        table.add_row(
            check["name"],
            f"[{colours[verdict]}]{verdict}[/]",
            str(check["checked"]),
            str(check["violations"]),
        )
    console.print(table)
    for check in report["checks"]:
        if check["verdict"] == "failed":
            more = check["violations"] - 1
            suffix = f" (and {plural(more, 'more')})" if more > 0 else ""
            console.print(f"{check['name']}: {phrase(check['examples'][0])}{suffix}", soft_wrap=True)
        elif check["verdict"] == "skipped":
            console.print(f"{check['name']}: skipped, {check['details'].get('skipped', '')}", soft_wrap=True)
    summary = report.get("summary", {})
    if summary.get("runs", 0) > 1 or len(summary.get("clusters", [])) > 1:
        failing = {
            cluster: ", ".join(f"{name} {n}" for name, n in sorted(checks.items()))
            for cluster, checks in summary.get("violations_by_cluster", {}).items()
        }
        where = "; ".join(f"{cluster}: {text}" for cluster, text in failing.items())
        console.print(
            f"across {plural(summary['runs'], 'chaos run')} in {plural(len(summary['clusters']), 'cluster')}"
            f"{': violations in ' + where if where else ''}",
            highlight=False,
            soft_wrap=True,
        )
    inputs = report["inputs"]
    read = [
        plural(inputs["event_files"], "event log"),
        plural(inputs["history_files"], "history", "histories"),
        plural(inputs["lines"], "line"),
    ]
    console.print(
        f"{', '.join(read)}, {inputs['malformed_lines']} malformed; report written to {out}",
        highlight=False,
        soft_wrap=True,
    )
