"""Finding and reading a cluster directory's JSON-lines logs into two DataFrames: events and histories.

Every ``events.jsonl`` under the directory (daemons at ``DIR/<node>/``, chaos runs at
``DIR/chaos/<run>/``) and every ``DIR/chaos/<run>/history.jsonl`` is read as text and parsed with one
explicit schema. The schema names only the fields the audit uses: kinds disagree on the type of some
fields they do not share (``partitions`` is a count in ``failover_complete`` and a list in
``partitions_added``), and a schema inferred over all kinds would turn those into strings or corrupt rows.

A line that is not a JSON object with ``ts``, ``node`` and ``kind`` (the torn last line of a killed
daemon) is counted and reported, never fatal. So is a line whose fields have unexpected types: its other
fields are still used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

EVENTS_FILE = "events.jsonl"
HISTORY_FILE = "history.jsonl"
CHAOS_DIR = "chaos"
CORRUPT = "_corrupt_record"
MAX_MALFORMED_EXAMPLES = 5
MALFORMED_TEXT_CHARS = 200

POSITION = ["file", "block", "eid"]
"""Where a line sits: its file, the split it was read in, and its rank there."""
ORDER = ["ts", *POSITION]
"""Event order: by time, ties by position in the file (``block`` is the split's offset, ``eid`` rises
within a split), so lines with the same microsecond keep the order the daemon wrote them in."""

# (name, Spark DDL type) of every field the audit uses.
FIELDS: list[tuple[str, str]] = [
    ("ts", "timestamp"),
    ("node", "string"),
    ("kind", "string"),
    # controller lifecycle and broker changes
    ("controller_id", "bigint"),
    ("controller_epoch", "bigint"),
    ("epoch_zk_version", "bigint"),
    ("epoch", "bigint"),
    ("reason", "string"),
    ("new", "array<bigint>"),
    ("dead", "array<bigint>"),
    ("bounced", "array<bigint>"),
    ("epochs", "map<string,bigint>"),
    ("previous_epochs", "map<string,bigint>"),
    # partition state
    ("topic", "string"),
    ("partition", "bigint"),
    ("leader", "bigint"),
    ("leader_epoch", "bigint"),
    ("isr", "array<bigint>"),
    ("partition_epoch", "bigint"),
    ("unclean", "boolean"),
    ("previous_isr", "array<bigint>"),
    ("proposed", "array<bigint>"),
    ("change", "string"),
    # brokers, requests and their epochs
    ("broker", "bigint"),
    ("broker_epoch", "bigint"),
    ("previous_epoch", "bigint"),
    ("max_broker_epoch", "bigint"),
    ("broker_epoch_now", "bigint"),
    ("api", "string"),
    ("api_version", "bigint"),
    ("listener", "string"),
    ("control_plane_listener", "string"),
    ("queue_ms", "double"),
    ("handle_ms", "double"),
    ("correlation_id", "bigint"),
    ("error", "string"),
    # chaos runs (node "chaos") and their workload histories (node "workload")
    ("run_id", "string"),
    ("fault", "string"),
    ("target", "string"),
    ("role", "string"),
    ("detail", "string"),
    ("duration_s", "double"),
    ("duration_ms", "double"),
    ("acked", "bigint"),
    ("failed", "bigint"),
    ("consumed", "bigint"),
    ("offset", "bigint"),
    ("value", "string"),
    ("acks", "string"),
    ("idempotent", "boolean"),
    ("partitions", "bigint"),
    ("consistent", "bigint"),
    ("divergences", "array<string>"),
    ("latency_ms", "double"),
    (CORRUPT, "string"),
]


class InputError(Exception):
    """Nothing to audit: no event log, or no such chaos run (a usage error, not a failed audit)."""


@dataclass(frozen=True)
class Inputs:
    root: Path
    event_files: list[Path]
    history_files: list[Path]


@dataclass
class Logs:
    """Parsed lines: ``events`` from every events.jsonl, ``history`` from the workload histories."""

    events: DataFrame
    history: DataFrame
    parsed: DataFrame
    """The cached DataFrame both derive from; ``release`` frees it."""
    summary: dict[str, Any] = field(default_factory=dict)

    def release(self) -> None:
        self.parsed.unpersist()


def find_inputs(root: Path, run: str | None = None) -> Inputs:
    """Every events.jsonl under ``root`` and every chaos history; with ``run``, no other run's files."""
    root = root.resolve()
    if not root.is_dir():
        raise InputError(f"{root} is not a directory")
    if run is not None and not (root / CHAOS_DIR / run).is_dir():
        raise InputError(f"no chaos run {run!r} in {root / CHAOS_DIR}")

    def wanted(path: Path) -> bool:
        parts = path.relative_to(root).parts
        return run is None or len(parts) != 3 or parts[0] != CHAOS_DIR or parts[1] == run

    events = sorted(p for p in root.rglob(EVENTS_FILE) if p.is_file() and wanted(p))
    if not events:
        raise InputError(f"no {EVENTS_FILE} under {root}: is it a cluster directory?")
    histories = sorted(p for p in (root / CHAOS_DIR).glob(f"*/{HISTORY_FILE}") if p.is_file() and wanted(p))
    return Inputs(root, events, histories)


def ddl_schema() -> str:
    return ", ".join(f"`{name}` {kind}" for name, kind in FIELDS)


def load(spark: SparkSession, inputs: Inputs) -> Logs:
    """Read and parse every input once, and cache the result: every check reads it again."""
    from pyspark.sql import functions as F

    # Spark takes paths as Hadoop globs: brackets, braces, * and ? in a directory name are escaped.
    paths = [re.sub(r"([\\\[\]{}*?])", r"\\\1", str(p)) for p in (*inputs.event_files, *inputs.history_files)]
    # Spark names each file by a URL-encoded URI; decoded (a literal "+" kept) it is the path again.
    path = F.url_decode(
        F.regexp_replace(F.regexp_replace("_metadata.file_path", r"^file:(//)?", ""), r"\+", "%2B")
    )
    text = (
        spark.read.text(paths)
        .select(
            "value",
            path.alias("file"),
            F.col("_metadata.file_block_start").alias("block"),
            F.monotonically_increasing_id().alias("eid"),
        )
        .filter(F.trim("value") != "")
    )
    parsed = text.select(
        "file",
        "block",
        "eid",
        F.col("value").alias("_line"),
        F.from_json("value", ddl_schema(), {"columnNameOfCorruptRecord": CORRUPT}).alias("j"),
    ).select("file", "block", "eid", "_line", "j.*")
    chaos = rf"^\Q{inputs.root}\E/{CHAOS_DIR}/([^/]+)/"
    run_dir = F.regexp_extract("file", chaos + "[^/]+$", 1)
    parsed = parsed.withColumns(
        {
            "run": F.when(run_dir != "", run_dir),
            "history": F.col("file").rlike(chaos + HISTORY_FILE.replace(".", r"\.") + "$"),
            "malformed": F.col("ts").isNull() | F.col("node").isNull() | F.col("kind").isNull(),
        }
    )
    # The raw text is kept only where the report may quote it, so the cache holds each line once.
    parsed = parsed.withColumn("_line", F.when(F.col("malformed"), F.col("_line"))).cache()
    good = parsed.filter(~F.col("malformed")).drop("_line", "malformed", CORRUPT)
    events = good.filter(~F.col("history")).drop("history")
    history = good.filter(F.col("history")).drop("history")
    return Logs(events, history, parsed, summarise(parsed, inputs))


def summarise(parsed: DataFrame, inputs: Inputs) -> dict[str, Any]:
    """Lines read, and the malformed ones (torn or not JSON objects) per file with a few examples."""
    from pyspark.sql import functions as F

    root = inputs.root
    per_file = parsed.groupBy("file").agg(
        F.count(F.lit(1)).alias("lines"),
        F.sum(F.col("malformed").cast("int")).alias("malformed"),
        F.sum((~F.col("malformed") & F.col(CORRUPT).isNotNull()).cast("int")).alias("mistyped"),
    )
    files = per_file.collect()
    malformed = sum(r["malformed"] for r in files)
    examples = []
    if malformed:
        bad = parsed.filter("malformed").orderBy("file", "block", "eid").limit(MAX_MALFORMED_EXAMPLES)
        examples = [
            {"file": relative(r["file"], root), "line": r["_line"][:MALFORMED_TEXT_CHARS]}
            for r in bad.select("file", "_line").collect()
        ]
    return {
        "event_files": len(inputs.event_files),
        "history_files": len(inputs.history_files),
        "lines": sum(r["lines"] for r in files),
        "malformed_lines": malformed,
        "malformed_by_file": {relative(r["file"], root): r["malformed"] for r in files if r["malformed"]},
        "malformed_examples": examples,
        "mistyped_lines": sum(r["mistyped"] for r in files),
    }


def relative(path: str, root: Path) -> str:
    """An input's path relative to the audited directory, as the report shows it."""
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path
