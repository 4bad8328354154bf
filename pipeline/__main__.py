"""``python -m pipeline audit --dir DIR [--out FILE] [--run RUN_ID | --since TIME | --runs N] [--json]``.

Exit status: 0 when every check passed (or was skipped for lack of input), 1 when one failed, 2 on a
usage error such as a directory without event logs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

DEFAULT_DIR = Path(".run") / "cluster"
"""Where ``make run`` keeps its cluster (cluster.state_file.DEFAULT_DIR, not imported to stay fast)."""
REPORT_FILE = "audit.json"


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="python -m pipeline", description="PySpark audit of a cluster directory's event logs."
    )
    commands = top.add_subparsers(dest="command", required=True)
    audit = commands.add_parser(
        "audit",
        help="check the event logs and chaos histories under DIR and write a JSON report",
        description="Reads every events.jsonl under DIR and every chaos history.jsonl (DIR may hold "
        "one cluster or many, such as a campaign's seed-N directories), runs the checks of "
        "docs/pipeline.md, and writes the report. Exit status 0: all passed; 1: a check failed; "
        "2: usage error.",
    )
    audit.add_argument(
        "--dir",
        type=Path,
        default=DEFAULT_DIR,
        help=f"cluster directory, or a directory of them (default {DEFAULT_DIR})",
    )
    audit.add_argument("--out", type=Path, metavar="FILE", help=f"report path (default DIR/{REPORT_FILE})")
    audit.add_argument(
        "--run", metavar="RUN_ID", help="audit only this chaos run (DIR/chaos/RUN_ID, or CLUSTER/RUN_ID)"
    )
    audit.add_argument(
        "--since",
        type=since_time,
        metavar="TIME",
        help="only the chaos runs that started at TIME or later (ISO 8601, UTC unless it says otherwise)",
    )
    audit.add_argument(
        "--runs", type=positive, metavar="N", help="only the latest N chaos runs (of every cluster under DIR)"
    )
    audit.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    audit.add_argument(
        "--parquet",
        type=Path,
        metavar="DIR",
        help="also write the parsed events and histories and the checks' findings there as Parquet "
        "tables (events, history, findings)",
    )
    audit.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="also write one self-contained HTML page: each run's timeline (faults, controller epochs, "
        "leaders and ISRs, produce latency and throughput), control-request latency, the checks",
    )
    audit.add_argument(
        "--verbose",
        action="store_true",
        help="leave Spark's own start-up lines on stderr (by default they go to FILE's -spark.log beside "
        "the report)",
    )
    return top


def since_time(text: str) -> dt.datetime:
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from exc
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a positive number: {text!r}")
    return int(text)


def spark_log(report: Path) -> Path:
    """Where the JVM's own stderr goes: ``audit-spark.log`` beside ``audit.json``."""
    return report.with_name(f"{report.stem}-spark.log")


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), as a return value for callers and tests
        return exc.code if isinstance(exc.code, int) else 2
    from pipeline.load import InputError, find_inputs

    try:
        inputs = find_inputs(args.dir, args.run, since=args.since, last=args.runs)
    except InputError as exc:
        print(f"pipeline: {exc}", file=sys.stderr)
        return 2
    from pyspark.sql import SparkSession

    from pipeline.jvm import finish
    from pipeline.report import audit, render, write
    from pipeline.session import local_session

    out = args.out or inputs.root / REPORT_FILE
    owned = SparkSession.getActiveSession() is None  # a caller's session (tests) is left running
    log = None if args.verbose else spark_log(out)
    spark = local_session(jvm_log=log, input_bytes=inputs.size, record=owned)
    try:
        report = audit(spark, inputs, args.run, args.parquet, args.html)
    finally:
        if owned:
            finish(spark)
    write(report, out)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        from rich.console import Console

        render(report, Console(), out)
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
