"""Statistics (not verdicts): for the whole log and for each chaos run's time window.

Every figure is a Spark aggregation grouped by *scope*: ``cluster`` (all daemon events) and each chaos
run, whose window runs from its first to its last line (events and history). Daemon events count in
every scope whose window holds them. All counts and durations come out of one aggregation of
(scope, metric, key, value) rows, and the produce latencies out of a second; only their few result rows
are collected. ``docs/pipeline.md`` explains how each figure is computed.
"""

from __future__ import annotations

from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.isr import OFFLINE_REPLICA
from pipeline.load import HISTORY_FILE, ORDER, Inputs
from pipeline.overlap import with_overlap
from pipeline.quantiles import COUNT, histogram, quantiles
from pipeline.session import small_side

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

CLUSTER = "cluster"
LASTING_FAULTS = ("kill", "pause")
"""Faults that last until their fault_healed (or the end of the run when never healed)."""
INSTANT_FAULT_WINDOW_S = 10.0
"""How long a bounce or restart counts as active when no fault_healed ends it: a broker's 6 s session
timeout, then re-registration and leader moves."""
CONTROLLER_FAULTS = ("kill", "bounce", "restart")
"""Faults that leave the controller node without a controller until the next election; a pause ends
sooner when the node is resumed in time."""
LATENCY_QUANTILES = (0.5, 0.99)
HISTORY_COUNTS = {"produce_acked": "acked", "produce_failed": "failed", "consumed": "consumed"}
SECONDS = ("time_without_controller_s", "fault_time_s")
"""Metrics summed as durations; every other metric is a count."""
CONTROL = (
    "controller_elections",
    "controller_gaps",
    "time_without_controller_s",
    "leader_elections",
    "unclean_elections",
    "control_request_errors",
    "rpc_rejections",
    "isr_expands",
    "isr_shrinks",
    "replicas_removed_offline",
)
KEYED = ("leader_elections", "control_request_errors", "rpc_rejections", "faults")
"""Metrics reported as a map from key (reason, error, fault) to count."""


def statistics(
    events: DataFrame,
    history: DataFrame,
    windows: DataFrame,
    faults: DataFrame,
    clusters: list[str] | None = None,
    history_counts: DataFrame | None = None,
) -> dict[str, Any]:
    """``{"cluster": control stats, "runs": {run: workload stats with their "control" stats}}``, and
    with more than one of ``clusters``, ``"clusters": {cluster: control stats}`` (``cluster`` is then
    all of them together); ``windows`` is :func:`run_windows` and ``faults`` :func:`fault_windows`
    (cached by the caller, which uses them for more than this); ``history_counts``, the workload's
    counts if known already (:func:`counted_history`), saves a pass over the history."""
    runs = sorted(r["scope"] for r in windows.collect())
    in_runs = windows if runs else None
    each = several(clusters)
    daemons = events.filter(events["run"].isNull())
    parts = [
        control_metrics(scoped(daemons, in_runs, each)),
        gap_metrics(scoped(controller_gaps(events), in_runs, each)),
    ]
    if runs:
        parts += [
            history_metrics(history) if history_counts is None else history_counts,
            fault_metrics(faults),
        ]
    measured = reduce(lambda a, b: a.unionByName(b), parts)
    scopes: dict[str, dict[str, Any]] = {CLUSTER: empty_control()}
    for cluster in each or []:
        scopes[cluster_scope(cluster)] = empty_control()
    for run in runs:
        scopes[run] = empty_workload() | {"control": empty_control()}
    for row in measured.groupBy("scope", "metric", "key").agg({"value": "sum"}).collect():
        stats = scopes[row["scope"]]
        target = stats if row["metric"] not in CONTROL or "control" not in stats else stats["control"]
        value = round(row["sum(value)"], 3) if row["metric"] in SECONDS else int(row["sum(value)"])
        if row["metric"] in KEYED:
            target[row["metric"]][row["key"]] = value
        else:
            target[row["metric"]] = value
    if runs:
        for row in latencies(history, faults):
            scopes[row["run"]]["produce_latency_ms"][row["phase"]] = {
                "count": row["count"],
                "p50": row["q"][0],
                "p99": row["q"][1],
                "max": row["max"],
            }
    for row in control_latencies(scoped(handled_by_plane(events), in_runs, each)):
        target = scopes[row["scope"]]
        target = target.get("control", target)
        target["control_latency_ms"].setdefault(row["plane"], {})[row["api"]] = {
            "count": row["count"],
            **{
                part: {"p50": row[f"{part}_q"][0], "p99": row[f"{part}_q"][1], "max": row[f"{part}_max"]}
                for part in ("queue", "handle")
            },
        }
    out: dict[str, Any] = {CLUSTER: scopes.pop(CLUSTER)}
    if each:
        out["clusters"] = {cluster: scopes.pop(cluster_scope(cluster)) for cluster in each}
    return out | {"runs": scopes}


CLUSTER_SCOPE = CLUSTER + ":"
"""Prefix of one cluster's scope (``cluster:seed-1``) when the directory holds several."""


def cluster_scope(cluster: str) -> str:
    return CLUSTER_SCOPE + cluster


def several(clusters: list[str] | None) -> list[str] | None:
    """The clusters that get a scope each: all of them when there are several, else none (the one
    cluster's figures are the ``cluster`` scope's)."""
    return clusters if clusters is not None and len(clusters) > 1 else None


def empty_control() -> dict[str, Any]:
    counts: dict[str, Any] = {
        name: {} if name in KEYED else 0.0 if name in SECONDS else 0 for name in CONTROL
    }
    return counts | {"control_latency_ms": {}}


def empty_workload() -> dict[str, Any]:
    empty = {"count": 0, "p50": None, "p99": None, "max": None}
    return {
        "acked": 0,
        "failed": 0,
        "consumed": 0,
        "faults": {},
        "fault_time_s": 0.0,
        "produce_latency_ms": {"all": dict(empty), "during_fault": dict(empty), "no_fault": dict(empty)},
    }


def run_windows(events: DataFrame, history: DataFrame) -> DataFrame:
    """(scope, scope_cluster, start, end) per chaos run: its cluster, and its first and last line in
    either of its files."""
    from pyspark.sql import functions as F

    chaos = events.filter(F.col("run").isNotNull()).select("run", "cluster", "ts")
    lines = chaos.unionByName(history.select("run", "cluster", "ts"))
    return lines.groupBy(F.col("run").alias("scope"), F.col("cluster").alias("scope_cluster")).agg(
        F.min("ts").alias("start"), F.max("ts").alias("end")
    )


def windows_of(spark: SparkSession, inputs: Inputs, spans: dict[str, tuple[int, int]]) -> DataFrame:
    """:func:`run_windows` from the first and last ``ts`` of each file (``Logs.spans``), with no pass
    over the lines: a run's window is that of its files."""
    from pyspark.sql import functions as F

    runs: dict[tuple[str, str], tuple[int, int]] = {}
    for file, (first, last) in spans.items():
        placement = inputs.placement(Path(file))
        if placement.run is not None:
            key = (placement.run, placement.cluster)
            start, end = runs.get(key, (first, last))
            runs[key] = (min(start, first), max(end, last))
    rows = [(run, cluster, start, end) for (run, cluster), (start, end) in sorted(runs.items())]
    table = spark.createDataFrame(rows, "scope string, scope_cluster string, start bigint, end bigint")
    return table.select(
        "scope",
        "scope_cluster",
        F.timestamp_micros("start").alias("start"),
        F.timestamp_micros("end").alias("end"),
    )


def counted_history(spark: SparkSession, inputs: Inputs, kinds: dict[tuple[str, str], int]) -> DataFrame:
    """:func:`history_metrics`' sums from the lines of each kind per file (``Logs.kinds``)."""
    rows: dict[tuple[str, str], int] = {}
    for (file, kind), lines in kinds.items():
        path = Path(file)
        run = inputs.placement(path).run
        if path.name == HISTORY_FILE and run is not None and kind in HISTORY_COUNTS:
            rows[(run, HISTORY_COUNTS[kind])] = rows.get((run, HISTORY_COUNTS[kind]), 0) + lines
    measured = [(run, metric, "", float(count)) for (run, metric), count in sorted(rows.items())]
    return spark.createDataFrame(measured, "scope string, metric string, key string, value double")


def scoped(df: DataFrame, windows: DataFrame | None, clusters: list[str] | None = None) -> DataFrame:
    """Each row once under ``cluster``, once more under every run of its cluster whose window holds its
    ``ts``, and with ``clusters``, once more under its own cluster's scope (:func:`cluster_scope`)."""
    from pyspark.sql import functions as F

    everything = df.withColumn("scope", F.lit(CLUSTER))
    if clusters:
        everything = everything.unionByName(df.withColumn("scope", F.concat(F.lit(CLUSTER_SCOPE), "cluster")))
    if windows is None:
        return everything
    inside = df.join(
        small_side(windows),
        (F.col("cluster") == F.col("scope_cluster"))
        & (F.col("ts") >= F.col("start"))
        & (F.col("ts") <= F.col("end")),
    )
    return everything.unionByName(inside.drop("scope_cluster", "start", "end"))


def measurement(
    condition: Column, name: str, key: Column | None = None, value: Column | None = None
) -> Column:
    from pyspark.sql import functions as F

    return F.when(
        condition,
        F.struct(
            F.lit(name).alias("metric"),
            (key if key is not None else F.lit("")).alias("key"),
            (value if value is not None else F.lit(1.0)).cast("double").alias("value"),
        ),
    )


def exploded(df: DataFrame, measurements: list[Column]) -> DataFrame:
    """(scope, metric, key, value) rows: each row of ``df`` yields the measurements whose condition holds
    (an unclean election counts as an election and as unclean)."""
    from pyspark.sql import functions as F

    chosen = F.filter(F.array(*measurements), lambda m: m.isNotNull())
    return df.select("scope", F.explode(chosen).alias("m")).select("scope", "m.metric", "m.key", "m.value")


def control_metrics(events: DataFrame) -> DataFrame:
    """Elections, leader elections by reason, unclean elections, refused control requests and RPCs by
    error, ISR expansions and shrinks the brokers saw committed, and replicas the controller took out of
    an ISR when they went offline."""
    from pyspark.sql import functions as F

    kind, reason, error = F.col("kind"), F.col("reason"), F.col("error")
    write = kind == "leader_and_isr_change"
    isr_changed = kind == "isr_changed"
    removed = F.regexp_extract(reason, OFFLINE_REPLICA, 1)
    return exploded(
        events,
        [
            measurement(kind == "controller_elected", "controller_elections"),
            measurement(write & reason.endswith(" election"), "leader_elections", reason),
            measurement(write & F.coalesce(F.col("unclean"), F.lit(False)), "unclean_elections"),
            measurement(
                (kind == "control_request_handled") & (error != "NONE"), "control_request_errors", error
            ),
            measurement(kind == "rpc_rejected", "rpc_rejections", F.concat_ws(" ", "api", "error")),
            measurement(isr_changed & (F.size("isr") > F.size("previous_isr")), "isr_expands"),
            measurement(isr_changed & (F.size("isr") < F.size("previous_isr")), "isr_shrinks"),
            measurement(
                write & (removed != "") & ~F.array_contains("isr", removed.cast("bigint")),
                "replicas_removed_offline",
            ),
        ],
    )


def controller_gaps(events: DataFrame) -> DataFrame:
    """Spans without an active controller: (ts = start, closed = end).

    A span starts when the active controller (the node of the latest controller_elected) resigns, or
    when a chaos fault kills, bounces, restarts or pauses its node. It ends at the next election, or,
    for a pause, when the node is resumed if that comes first: a controller resumed within its session
    timeout is still the controller. Starts with the same end are merged into one span. Without chaos
    events, a controller that is killed leaves no start in the log, and its span is not counted.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    kind, fault = F.col("kind"), F.col("fault")
    on_controller = F.col("role") == "controller"
    marks = F.when(kind == "controller_elected", "elected").when(kind == "controller_resigned", "resigned")
    marks = marks.when((kind == "fault_injected") & on_controller & (fault == "pause"), "paused")
    marks = marks.when((kind == "fault_injected") & on_controller & fault.isin(*CONTROLLER_FAULTS), "fault")
    marks = marks.when((kind == "fault_healed") & on_controller & (fault == "pause"), "resumed")
    node = F.when(kind.startswith("fault_"), F.col("target")).otherwise(F.col("node"))
    timeline = events.select("ts", "cluster", node.alias("node"), marks.alias("mark")).filter(
        F.col("mark").isNotNull()
    )
    mark = F.col("mark")
    in_cluster = Window.partitionBy("cluster").orderBy("ts")
    before = in_cluster.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    after = in_cluster.rowsBetween(Window.currentRow, Window.unboundedFollowing)
    node_after = (
        Window.partitionBy("cluster", "node")
        .orderBy("ts")
        .rowsBetween(Window.currentRow, Window.unboundedFollowing)
    )
    marked = timeline.select(
        "ts",
        "cluster",
        "node",
        "mark",
        F.last(F.when(mark == "elected", F.col("node")), ignorenulls=True).over(before).alias("active"),
        F.first(F.when(mark == "elected", F.col("ts")), ignorenulls=True).over(after).alias("elected"),
        F.first(F.when(mark == "resumed", F.col("ts")), ignorenulls=True).over(node_after).alias("resumed"),
    )
    starts = marked.filter(mark.isin("resigned", "fault", "paused") & (F.col("node") == F.col("active")))
    closed = F.when(mark == "paused", F.least("elected", "resumed")).otherwise(F.col("elected"))
    return starts.groupBy("cluster", closed.alias("closed")).agg(F.min("ts").alias("ts"))


def gap_metrics(gaps: DataFrame) -> DataFrame:
    """Closed spans, by the scope of their start; a span still open at the end (a stopped cluster) is
    not counted."""
    from pyspark.sql import functions as F

    seconds = (F.unix_micros("closed") - F.unix_micros("ts")) / 1e6
    return exploded(
        gaps.filter(F.col("closed").isNotNull()),
        [
            measurement(F.lit(True), "controller_gaps"),
            measurement(F.lit(True), "time_without_controller_s", value=seconds),
        ],
    )


def history_metrics(history: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    kinds = list(HISTORY_COUNTS.items())
    return exploded(
        history.withColumn("scope", F.col("run")),
        [measurement(F.col("kind") == kind, name) for kind, name in kinds],
    )


def fault_windows(events: DataFrame, windows: DataFrame) -> DataFrame:
    """(run, cluster, fault, target, start, end) per injected fault: until the first fault_healed of the same
    fault on the same target; a kill or pause never healed lasts to the run's end, a bounce or restart
    INSTANT_FAULT_WINDOW_S. ``resume`` undoes a pause and opens no window."""
    from pyspark.sql import functions as F

    chaos = events.filter(F.col("run").isNotNull())
    injected = chaos.filter((F.col("kind") == "fault_injected") & (F.col("fault") != "resume")).select(
        "run", "cluster", "target", "fault", F.col("ts").alias("start")
    )
    healed = chaos.filter(F.col("kind") == "fault_healed").select(
        F.col("run").alias("h_run"),
        F.col("target").alias("h_target"),
        F.col("fault").alias("h_fault"),
        F.col("ts").alias("healed"),
    )
    same = (
        (F.col("run") == F.col("h_run"))
        & (F.col("target") == F.col("h_target"))
        & (F.col("fault") == F.col("h_fault"))
        & (F.col("healed") >= F.col("start"))
    )
    matched = (
        injected.join(healed, same, "left")
        .groupBy("run", "cluster", "target", "fault", "start")
        .agg(F.min("healed").alias("healed"))
    )
    run_end = windows.select(F.col("scope").alias("run"), F.col("end").alias("run_end"))
    instant_end = F.timestamp_micros(F.unix_micros("start") + int(INSTANT_FAULT_WINDOW_S * 1e6))
    lasting_end = F.when(F.col("fault").isin(*LASTING_FAULTS), F.col("run_end")).otherwise(instant_end)
    return matched.join(run_end, "run", "left").select(
        "run", "cluster", "fault", "target", "start", F.coalesce("healed", lasting_end).alias("end")
    )


def fault_metrics(faults: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    seconds = (F.unix_micros("end") - F.unix_micros("start")) / 1e6
    return exploded(
        faults.withColumn("scope", F.col("run")),
        [
            measurement(F.lit(True), "faults", F.col("fault")),
            measurement(F.lit(True), "fault_time_s", value=seconds),
        ],
    )


def latencies(history: DataFrame, faults: DataFrame) -> list[Any]:
    """Produce latency per run: overall, while a fault was active and while none was. A record counts as
    sent during a fault when its produce call (ack time minus latency) to its acknowledgement overlaps a
    fault window (``pipeline.overlap``: the windows are few, collected, and looked up per record in the
    one pass that also counts the latencies, whose quantiles come from those counts,
    ``pipeline.quantiles``)."""
    from pyspark.sql import functions as F

    acked = history.filter(F.col("kind") == "produce_acked").select(
        "run",
        "latency_ms",
        F.unix_micros("ts").alias("acked"),
        (F.unix_micros("ts") - (F.col("latency_ms") * 1000).cast("bigint")).alias("sent"),
    )
    edges = faults.select("run", F.unix_micros("start").alias("start"), F.unix_micros("end").alias("end"))
    windows = [(w["run"], w["start"], w["end"]) for w in edges.distinct().collect()]
    judged = with_overlap(acked, windows, "during")
    counted = histogram(judged, ["run", "during"], "latency_ms")
    phase = F.when(F.col("during"), "during_fault").otherwise("no_fault")
    both = counted.select("run", "latency_ms", COUNT, F.explode(F.array(F.lit("all"), phase)).alias("phase"))
    phases = both.groupBy("run", "phase", "latency_ms").agg(F.sum(COUNT).alias(COUNT))
    return quantiles(phases, ["run", "phase"], "latency_ms", LATENCY_QUANTILES).collect()


def handled_by_plane(events: DataFrame) -> DataFrame:
    """The brokers' ``control_request_handled`` lines, each with the ``plane`` it was served on:
    ``control`` when it came in on the control-plane listener that the broker process's latest
    ``broker_started`` names (KIP-291: its own queue and handler thread), ``data`` when it shared the
    data plane's, ``unknown`` for a line that names no listener."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    kind = F.col("kind")
    rows = events.filter(kind.isin("broker_started", "control_request_handled"))
    # "" marks a process without a control-plane listener, so that it is not skipped as a null.
    declared = F.when(kind == "broker_started", F.coalesce("control_plane_listener", F.lit("")))
    so_far = Window.partitionBy("cluster", "node").orderBy(*ORDER).rowsBetween(Window.unboundedPreceding, 0)
    control_listener = F.last(declared, ignorenulls=True).over(so_far)
    plane = (
        F.when(F.col("listener").isNull(), F.lit("unknown"))
        .when(F.col("listener") == control_listener, F.lit("control"))
        .otherwise(F.lit("data"))
    )
    return (
        rows.withColumn("plane", plane)
        .filter(kind == "control_request_handled")
        .select("ts", "cluster", "api", "plane", "queue_ms", "handle_ms")
    )


def control_latencies(handled: DataFrame) -> list[Any]:
    """Queue and handling time of control requests, per scope, plane and API: the p50, p99 and max of
    ``queue_ms`` (from the last byte read to a handler taking it) and ``handle_ms``."""
    from pyspark.sql import functions as F

    return (
        handled.filter(F.col("queue_ms").isNotNull())
        .groupBy("scope", "plane", "api")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.percentile_approx("queue_ms", list(LATENCY_QUANTILES), 10000).alias("queue_q"),
            F.max("queue_ms").alias("queue_max"),
            F.percentile_approx("handle_ms", list(LATENCY_QUANTILES), 10000).alias("handle_q"),
            F.max("handle_ms").alias("handle_max"),
        )
        .collect()
    )
