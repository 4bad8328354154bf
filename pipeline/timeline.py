"""What the HTML report plots, aggregated by Spark into a few small tables per chaos run.

Nothing here collects a whole table: faults, elections and partition-state writes are a handful per
fault; produce latency and throughput are one row per run and second; control-request latency is a
histogram of log-spaced bins. So the collected data stays small whatever the size of the history.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipeline.load import ORDER
from pipeline.quantiles import histogram, quantiles
from pipeline.session import small_side
from pipeline.stats import handled_by_plane

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

BINS_PER_DECADE = 10
"""Control-latency histogram resolution: ten bins per power of ten of milliseconds."""
FLOOR_MS = 0.001
"""Latencies below a microsecond fall in the lowest bin."""


@dataclass
class RunTimeline:
    run: str
    start: dt.datetime
    end: dt.datetime
    faults: list[dict[str, Any]] = field(default_factory=list)
    """``fault``, ``target``, ``start``, ``end``."""
    elections: list[dict[str, Any]] = field(default_factory=list)
    """``ts``, ``node``, ``controller_epoch``: every election up to the run's end (the latest before
    it says who was active at its start)."""
    partitions: list[dict[str, Any]] = field(default_factory=list)
    """``ts``, ``topic``, ``partition``, ``leader``, ``isr_size``: the partition-state writes in the
    run, and each partition's latest before it."""
    produce: list[dict[str, Any]] = field(default_factory=list)
    """``second`` (since the epoch), ``acked``, ``p50``, ``p99`` of the acks=all and acks=1 records."""


@dataclass
class Timelines:
    runs: list[RunTimeline]
    control_latency: list[dict[str, Any]]
    """``plane``, ``api``, ``bin_ms`` (the bin's lower edge) and ``count``: queue plus handling time."""


def timelines(events: DataFrame, history: DataFrame, windows: DataFrame, faults: DataFrame) -> Timelines:
    """``windows``: :func:`pipeline.stats.run_windows`; ``faults``: :func:`pipeline.stats.fault_windows`."""
    from pyspark.sql import functions as F

    runs = {
        r["scope"]: RunTimeline(r["scope"], r["start"], r["end"]) for r in windows.orderBy("start").collect()
    }
    if runs:
        for row in faults.orderBy("start").collect():
            runs[row["run"]].faults.append(row.asDict())
        for row in _until_end(events.filter(F.col("kind") == "controller_elected"), windows).collect():
            runs[row["run"]].elections.append(row.asDict())
        for row in _partition_states(events, windows).collect():
            runs[row["run"]].partitions.append(row.asDict())
        for row in _produce_per_second(history).collect():
            runs[row["run"]].produce.append(row.asDict())
    return Timelines(list(runs.values()), [r.asDict() for r in _control_histogram(events).collect()])


def _until_end(elections: DataFrame, windows: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    chosen = elections.select("ts", "cluster", "node", "controller_epoch")
    w = windows.select(F.col("scope").alias("run"), "scope_cluster", "end")
    joined = chosen.join(
        small_side(w), (chosen["cluster"] == w["scope_cluster"]) & (chosen["ts"] <= w["end"])
    )
    return joined.select("run", "ts", "node", "controller_epoch").orderBy("run", "ts")


def _partition_states(events: DataFrame, windows: DataFrame) -> DataFrame:
    """Per run: its partition-state writes, and for each partition the latest write before it."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    writes = events.filter(F.col("kind") == "leader_and_isr_change").select(
        "ts", "cluster", "topic", "partition", "leader", F.size("isr").alias("isr_size"), *ORDER[1:]
    )
    w = windows.select(F.col("scope").alias("run"), "scope_cluster", "start", "end")
    joined = writes.join(
        small_side(w), (writes["cluster"] == w["scope_cluster"]) & (writes["ts"] <= w["end"])
    )
    latest_first = Window.partitionBy("run", "topic", "partition", F.col("ts") < F.col("start")).orderBy(
        F.col("ts").desc(), F.col("eid").desc()
    )
    ranked = joined.withColumn("rank", F.row_number().over(latest_first))
    kept = ranked.filter((F.col("ts") >= F.col("start")) | (F.col("rank") == 1))
    return kept.select("run", "ts", "topic", "partition", "leader", "isr_size").orderBy("run", "ts")


def _produce_per_second(history: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    acked = history.filter(F.col("kind") == "produce_acked")
    second = F.floor(F.unix_micros("ts") / 1_000_000).alias("second")
    counted = histogram(acked.select("run", second, "latency_ms"), ["run", "second"], "latency_ms")
    per_second = quantiles(counted, ["run", "second"], "latency_ms", [0.5, 0.99])
    return per_second.select(
        "run", "second", F.col("count").alias("acked"), F.col("q")[0].alias("p50"), F.col("q")[1].alias("p99")
    ).orderBy("run", "second")


def _control_histogram(events: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    handled = handled_by_plane(events).filter(F.col("queue_ms").isNotNull())
    total = F.greatest(F.col("queue_ms") + F.coalesce(F.col("handle_ms"), F.lit(0.0)), F.lit(FLOOR_MS))
    step = F.floor(F.log10(total) * BINS_PER_DECADE)
    binned = handled.select("plane", "api", F.pow(F.lit(10.0), step / BINS_PER_DECADE).alias("bin_ms"))
    return binned.groupBy("plane", "api", "bin_ms").count().orderBy("plane", "api", "bin_ms")
