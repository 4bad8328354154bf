"""Finding and reading a cluster directory's JSON-lines logs into two DataFrames: events and histories.

Every ``events.jsonl`` under the directory (daemons at ``DIR/<node>/``, chaos runs at
``DIR/chaos/<run>/``) and every ``DIR/chaos/<run>/history.jsonl`` is read as text and parsed with one
explicit schema. The directory may also hold several clusters (a campaign's ``DIR/seed-N/``, a night
of CI): each line is placed in its *cluster*, the directory its node or ``chaos`` directory is in
(``.`` for DIR itself), and every check keys on it, since node names, broker ids, epochs and czxids
repeat from one cluster to the next. A run of another cluster than ``.`` is named ``<cluster>/<run>``.

The schema names only the fields the audit uses: kinds disagree on the type of some
fields they do not share (``partitions`` is a count in ``failover_complete`` and a list in
``partitions_added``), and a schema inferred over all kinds would turn those into strings or corrupt rows.
Where the check that reads a field needs a type another kind contradicts, the field is declared a
string, which holds any JSON value as its text, and the check parses it (``offsets``: a count in
``coordinator_loaded``, a map in ``eos_group_committed``); so the other kind's lines are not mistyped.

A line that is not a JSON object with ``ts``, ``node`` and ``kind`` (the torn last line of a killed
daemon) is counted and reported, never fatal. So is a line whose fields have unexpected types: its other
fields are still used.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from functools import reduce
from operator import or_
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

EVENTS_FILE = "events.jsonl"
HISTORY_FILE = "history.jsonl"
CHAOS_DIR = "chaos"
CORRUPT = "_corrupt_record"
EARLIEST = dt.datetime.min.replace(tzinfo=dt.UTC)
"""The start of a run whose first line cannot be read: before any --since."""
ROOT_CLUSTER = "."
"""The cluster whose node directories are the audited directory's own."""
MAX_MALFORMED_EXAMPLES = 5
MALFORMED_TEXT_CHARS = 200

SOURCE = "source"
"""The cached column of a line's file number (``Sources``): its file, cluster and run are looked up by it."""
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
    ("min_insync_replicas", "bigint"),
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
    # the transactional workload's lines (chaos/txn_workload.py): its transactions and read-backs
    ("transactional_id", "string"),
    ("txn", "bigint"),
    ("values", "array<string>"),
    ("intended", "string"),
    ("outcome", "string"),
    ("isolation", "string"),
    ("group", "string"),
    ("inputs", "array<array<string>>"),  # [partition, offset, value] each: the numbers as their text
    # JSON text: a count in coordinator_loaded and group_deleted, partition -> offset in
    # eos_group_committed (parsed by the check that reads it, pipeline.transactions)
    ("offsets", "string"),
    (CORRUPT, "string"),
]
HISTORY_FIELDS = {
    *("ts", "node", "kind", "topic", "partition", "offset", "value", "acks", "idempotent", "latency_ms"),
    *("error", "transactional_id", "txn", "values", "intended", "outcome", "isolation", "group", "inputs"),
    "offsets",
}
"""The fields of the workload's lines (docs/events.md, "Workload"): all a history keeps of the schema."""
HISTORY_ONLY = HISTORY_FIELDS - {"ts", "node", "kind", "topic", "partition", "offset", "error", "group"}
"""Fields only the histories use: the event logs' cache leaves them out."""
EVENT_COLUMNS = [name for name, _ in FIELDS if name != CORRUPT and name not in HISTORY_ONLY]
HISTORY_COLUMNS = [name for name, _ in FIELDS if name in HISTORY_FIELDS]
TRANSACTIONAL = [
    "transactional_id",
    "txn",
    "values",
    "intended",
    "outcome",
    "isolation",
    "group",
    "inputs",
    "offsets",
]
"""Fields that only a few lines set (the transactional workload's, the group coordinator's): a cache
holds them as one struct column, ``PACKED``, null where none is set. Nine null columns on every
produced and consumed line took a tenth of the time the history's cache takes to fill."""
PACKED = "_packed"


class InputError(Exception):
    """Nothing to audit: no event log, or no such chaos run (a usage error, not a failed audit)."""


@dataclass(frozen=True)
class Placement:
    """Where a file's lines belong: their cluster, and the chaos run (its report name) if any."""

    cluster: str
    run: str | None = None


@dataclass(frozen=True)
class Inputs:
    root: Path
    event_files: list[Path]
    history_files: list[Path]
    placements: dict[Path, Placement] = field(default_factory=dict)

    def placement(self, path: Path) -> Placement:
        return self.placements.get(path) or place(self.root, path)

    @property
    def clusters(self) -> list[str]:
        return sorted({self.placement(p).cluster for p in (*self.event_files, *self.history_files)})

    @property
    def size(self) -> int:
        """Bytes in every file."""
        return sum(p.stat().st_size for p in (*self.event_files, *self.history_files))

    @property
    def runs(self) -> list[str]:
        names = (self.placement(p).run for p in (*self.event_files, *self.history_files))
        return sorted({r for r in names if r is not None})


@dataclass
class Logs:
    """Parsed lines: ``events`` from every events.jsonl, ``history`` from the workload histories."""

    events: DataFrame
    history: DataFrame
    cached: list[DataFrame]
    """The cached lines both derive from; ``release`` frees them."""
    summary: dict[str, Any] = field(default_factory=dict)
    topics: list[str] | None = None
    """Every topic a line names, found by the job that fills the caches (``pipeline.suspects`` numbers
    them)."""
    kinds: dict[tuple[str, str], int] = field(default_factory=dict)
    """(file, kind) -> its lines, from the same job (the statistics count the workload's by them)."""
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)
    """File -> the ``ts`` of its first and last line in microseconds, from the same job (a chaos run's
    time window is that of its files)."""

    def release(self) -> None:
        for lines in self.cached:
            lines.unpersist()


def place(root: Path, path: Path) -> Placement:
    """``[CLUSTER/]chaos/RUN/FILE`` is run RUN of CLUSTER, ``[CLUSTER/]NODE/events.jsonl`` a daemon of it."""
    parts = path.relative_to(root).parts
    if len(parts) >= 3 and parts[-3] == CHAOS_DIR:
        cluster = "/".join(parts[:-3]) or ROOT_CLUSTER
        return Placement(cluster, parts[-2] if cluster == ROOT_CLUSTER else f"{cluster}/{parts[-2]}")
    return Placement("/".join(parts[:-2]) or ROOT_CLUSTER)


def find_inputs(
    root: Path, run: str | None = None, *, since: dt.datetime | None = None, last: int | None = None
) -> Inputs:
    """Every events.jsonl under ``root`` and every chaos history, placed in their clusters and runs.

    The filters choose chaos runs: ``run`` by name (``RUN`` or ``CLUSTER/RUN``), ``since`` those that
    started then or later, ``last`` the latest N. With any of them, only the chosen runs' files are
    read, with the daemon logs of the clusters they ran on (earlier elections and epochs are context
    the checks need)."""
    root = root.resolve()
    if not root.is_dir():
        raise InputError(f"{root} is not a directory")
    events = sorted(p for p in root.rglob(EVENTS_FILE) if p.is_file())
    if not events:
        raise InputError(f"no {EVENTS_FILE} under {root}: is it a cluster directory?")
    histories = sorted(
        p for p in root.rglob(HISTORY_FILE) if p.is_file() and p.parent.parent.name == CHAOS_DIR
    )
    placements = {p: place(root, p) for p in (*events, *histories)}
    if run is None and since is None and last is None:
        return Inputs(root, events, histories, placements)
    started = {
        (pl.cluster, pl.run): run_start(p) or EARLIEST
        for p, pl in placements.items()
        if pl.run and p.name == EVENTS_FILE
    }
    chosen = [key for key in started if run is None or run in (key[1], key[1].rsplit("/", 1)[-1])]
    if since is not None:
        chosen = [key for key in chosen if started[key] >= since]
    if last is not None:
        chosen = sorted(chosen, key=lambda k: (started[k], k))[-last:] if last > 0 else []
    if not chosen:
        wanted = f"chaos run {run!r}" if run is not None else "chaos run"
        raise InputError(f"no {wanted} under {root} matches the filters")
    keep_runs = {r for _, r in chosen}
    keep_clusters = {c for c, _ in chosen}

    def kept(path: Path) -> bool:
        pl = placements[path]
        return pl.run in keep_runs if pl.run is not None else pl.cluster in keep_clusters

    return Inputs(root, [p for p in events if kept(p)], [p for p in histories if kept(p)], placements)


def run_start(events_file: Path) -> dt.datetime | None:
    """A chaos run's start: the ``ts`` of its first event (``run_started``); None if unreadable."""
    try:
        with events_file.open(encoding="utf-8") as f:
            first = json.loads(f.readline())
        return dt.datetime.fromisoformat(first["ts"].replace("Z", "+00:00"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def ddl_schema(columns: list[str] | None = None) -> str:
    """The schema lines are parsed with: every field, or ``columns`` and those that place a line
    (``ts``, ``node``, ``kind``) with the corrupt-record column. A history parsed with its own twenty
    fields takes a quarter less time than with all of them."""
    wanted = None if columns is None else {*columns, "ts", "node", "kind", CORRUPT}
    return ", ".join(f"`{name}` {kind}" for name, kind in FIELDS if wanted is None or name in wanted)


def file_path(uri: str) -> str:
    """A file's path from the URI Spark names it by (URL-encoded; a literal "+" is kept)."""
    from urllib.parse import unquote

    return unquote(file_uri_path(uri))


def file_uri_path(uri: str) -> str:
    """The still encoded path of a ``file:`` URI."""
    return re.sub(r"^file:(//)?", "", uri)


def load(spark: SparkSession, inputs: Inputs) -> Logs:
    """Read and parse every input once, and cache the result: every check reads it again.

    The event logs and the histories are cached apart, each with only its own columns: a cached
    column costs memory on every row even where it is null, and the histories are nearly all of a big
    directory's lines (ten million of them held every event field besides their own, and the audit ran
    out of its heap). Where a line comes from is cached as the number of its file (``SOURCE``), and
    its file, cluster and run are looked up from that number as the checks read it: three strings on
    every line took a fifth of the time the caches take to fill. One job fills both caches while it
    counts the lines per file."""
    from pipeline.session import fit_to

    fit_to(spark, inputs.size)
    event_text, history_text = _read(spark, inputs.event_files), _read(spark, inputs.history_files)
    sources = Sources.of(inputs, [text for text in (event_text, history_text) if text is not None])
    event_lines = _lines(event_text, sources, inputs.event_files, EVENT_COLUMNS)
    history_lines = _lines(history_text, sources, inputs.history_files, HISTORY_COLUMNS)
    good = [
        None if lines is None else sources.placed(lines.filter(~lines["malformed"]), columns)
        for lines, columns in ((event_lines, EVENT_COLUMNS), (history_lines, HISTORY_COLUMNS))
    ]
    events = good[0]
    assert events is not None  # find_inputs insists on an event log
    history = good[1] if good[1] is not None else _empty(spark, HISTORY_COLUMNS)
    cached = [lines for lines in (event_lines, history_lines) if lines is not None]
    return Logs(events, history, cached, *summarise(cached, sources, inputs.root))


@dataclass(frozen=True)
class Sources:
    """The input files in order, each line's ``SOURCE`` its index here: the file, cluster and run of a
    line are looked up by it (a literal array indexed per line, no string compared)."""

    paths: list[Path]
    placements: list[Placement]
    numbers: dict[str, int]
    """A file's URI (as Spark names it, URL-encoded) -> its number. A listing names a file
    file:///PATH and a line file:/PATH: both are keys."""

    @classmethod
    def of(cls, inputs: Inputs, texts: list[DataFrame]) -> Sources:
        path_of = {uri: Path(file_path(uri)) for text in texts for uri in text.inputFiles()}
        paths = sorted(set(path_of.values()))
        index = {path: i for i, path in enumerate(paths)}
        numbers = {
            f"file:{slashes}{file_uri_path(uri)}": index[path]
            for uri, path in path_of.items()
            for slashes in ("", "//")
        }
        return cls(paths, [inputs.placement(p) for p in paths], numbers)

    def number(self) -> Column:
        """Each line's file number, from its ``uri``."""
        from pyspark.sql import functions as F

        return F.create_map(*[F.lit(x) for pair in self.numbers.items() for x in pair])[F.col("uri")]

    def placed(self, lines: DataFrame, columns: list[str]) -> DataFrame:
        """``lines`` with ``file``, ``cluster`` and ``run`` in place of the file number, and the
        ``TRANSACTIONAL`` fields out of their struct: the columns every check reads,
        ``[*POSITION, *columns, "cluster", "run"]``."""
        from pyspark.sql import functions as F

        def of(values: list[str | None]) -> Column:
            return F.array(*[F.lit(v).cast("string") for v in values])[F.col(SOURCE)]

        return lines.select(
            of([str(p) for p in self.paths]).alias("file"),
            *POSITION[1:],
            *(F.col(f"{PACKED}.{c}").alias(c) if c in TRANSACTIONAL else c for c in columns),
            of([pl.cluster for pl in self.placements]).alias("cluster"),
            of([pl.run for pl in self.placements]).alias("run"),
        )


def _read(spark: SparkSession, files: list[Path]) -> DataFrame | None:
    """The lines of ``files`` as text (None if there are none)."""
    if not files:
        return None
    # Spark takes paths as Hadoop globs: brackets, braces, * and ? in a directory name are escaped.
    return spark.read.text([re.sub(r"([\\\[\]{}*?])", r"\\\1", str(p)) for p in files])


def _lines(
    read: DataFrame | None, sources: Sources, files: list[Path], columns: list[str]
) -> DataFrame | None:
    """``files`` (``read``: their text) parsed with ``columns`` (:func:`ddl_schema`), with where each
    line sits (its file's number, ``SOURCE``, and its place in the file), ``malformed``, ``mistyped``
    and the text of a malformed line (``_line``); cached, not yet filled."""
    from pyspark.sql import functions as F

    from pipeline.jvm import SMALL_INPUT_BYTES

    if read is None:
        return None
    text = read.select(
        "value",
        F.col("_metadata.file_path").alias("uri"),
        F.col("_metadata.file_block_start").alias("block"),
        F.monotonically_increasing_id().alias("eid"),
    ).filter(F.trim("value") != "")
    parsed = text.select(
        sources.number().alias(SOURCE),
        "block",
        "eid",
        F.col("value").alias("_line"),
        F.from_json("value", ddl_schema(columns), {"columnNameOfCorruptRecord": CORRUPT}).alias("j"),
    ).select(SOURCE, "block", "eid", "_line", "j.*")
    malformed = F.col("ts").isNull() | F.col("node").isNull() | F.col("kind").isNull()
    packed = [c for c in columns if c in TRANSACTIONAL]
    some = reduce(or_, [F.col(c).isNotNull() for c in packed], F.lit(False))
    lines = parsed.select(
        SOURCE,
        *POSITION[1:],
        *(c for c in columns if c not in packed),
        *([F.when(some, F.struct(*packed)).alias(PACKED)] if packed else []),
        malformed.alias("malformed"),
        (~malformed & F.col(CORRUPT).isNotNull()).alias("mistyped"),
        # The raw text is kept only where the report may quote it, so the cache holds each line once.
        F.when(malformed, F.col("_line")).alias("_line"),
    )
    if sum(p.stat().st_size for p in files) < SMALL_INPUT_BYTES:
        # One partition: the checks' windows, groupings and joins over it need no shuffle at all.
        lines = lines.coalesce(1)
    return lines.cache()


def _empty(spark: SparkSession, columns: list[str]) -> DataFrame:
    """No history: an empty table with the history's columns, typed as the schema types them."""
    types = dict(FIELDS)
    fields = [("file", "string"), ("block", "bigint"), ("eid", "bigint"), *((c, types[c]) for c in columns)]
    ddl = ", ".join(f"`{name}` {kind}" for name, kind in [*fields, ("cluster", "string"), ("run", "string")])
    return spark.createDataFrame([], ddl)


def summarise(
    cached: list[DataFrame], sources: Sources, root: Path
) -> tuple[dict[str, Any], list[str], dict[tuple[str, str], int], dict[str, tuple[int, int]]]:
    """Lines read, and the malformed ones (torn or not JSON objects) per file with a few examples; and
    every topic named, the lines of each kind per file, and each file's first and last ``ts`` (those
    of :class:`Logs`). The job that counts them fills the caches."""
    from functools import reduce

    from pyspark.sql import functions as F

    columns = [SOURCE, "block", "eid", "malformed", "mistyped", "_line", "topic", "kind", "ts"]
    lines = reduce(lambda a, b: a.unionByName(b), [c.select(*columns) for c in cached])
    good_ts = F.when(~F.col("malformed"), F.unix_micros("ts"))
    # Grouped by topic too rather than collecting each file's topics: a set in the aggregation would
    # take it out of Spark's hash table of numbers, a second per million lines.
    kind = F.when(~F.col("malformed"), F.col("kind")).alias("kind")
    per_kind = lines.groupBy(SOURCE, kind, "topic").agg(
        F.count(F.lit(1)).alias("lines"),
        F.sum(F.col("malformed").cast("int")).alias("malformed"),
        F.sum(F.col("mistyped").cast("int")).alias("mistyped"),
        F.min(good_ts).alias("first"),
        F.max(good_ts).alias("last"),
    )
    rows = per_kind.collect()
    files: dict[str, dict[str, int]] = {}
    spans: dict[str, tuple[int, int]] = {}
    kinds: dict[tuple[str, str], int] = {}
    for r in rows:
        file = str(sources.paths[r[SOURCE]])
        counts = files.setdefault(file, {"lines": 0, "malformed": 0, "mistyped": 0})
        for name in counts:
            counts[name] += r[name]
        if r["first"] is not None:
            first, last = spans.get(file, (r["first"], r["last"]))
            spans[file] = (min(first, r["first"]), max(last, r["last"]))
        if r["kind"] is not None:
            kinds[(file, r["kind"])] = kinds.get((file, r["kind"]), 0) + r["lines"]
    malformed = sum(f["malformed"] for f in files.values())
    examples = []
    if malformed:
        bad = lines.filter("malformed").orderBy(SOURCE, "block", "eid").limit(MAX_MALFORMED_EXAMPLES)
        examples = [
            {"file": relative(str(sources.paths[r[SOURCE]]), root), "line": r["_line"][:MALFORMED_TEXT_CHARS]}
            for r in bad.select(SOURCE, "_line").collect()
        ]
    summary = {
        "event_files": sum(p.name == EVENTS_FILE for p in sources.paths),
        "history_files": sum(p.name == HISTORY_FILE for p in sources.paths),
        "lines": sum(f["lines"] for f in files.values()),
        "malformed_lines": malformed,
        "malformed_by_file": {
            relative(name, root): f["malformed"] for name, f in sorted(files.items()) if f["malformed"]
        },
        "malformed_examples": examples,
        "mistyped_lines": sum(f["mistyped"] for f in files.values()),
    }
    topics = sorted({r["topic"] for r in rows if r["topic"] is not None})
    return summary, topics, kinds, spans


def relative(path: str, root: Path) -> str:
    """An input's path relative to the audited directory, as the report shows it."""
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path
