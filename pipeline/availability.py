"""How fast the control plane reacts, from the logs: figures, not verdicts.

* ``bounce_detection_ms``, keyed ``bounced`` or ``new``: from a broker's ``registered`` line to the
  first controller ``broker_change`` that lists it (bounced or new) with that epoch: how long the
  controller took to see a (re)registration (KIP-380's fast bounce is the ``bounced`` key);
* ``failover_ms``: a controller's own ``failover_complete.duration_ms``, from its election to its first
  requests queued;
* ``failover_to_last_broker_ms``: from a ``controller_elected`` to the last broker's first control
  request applied from that controller epoch (``control_request_handled`` with error NONE): when every
  broker that heard from the new controller at all had heard from it;
* ``fault_to_first_election_s``, keyed by fault kind: from a chaos ``fault_injected`` on a broker to
  the first partition leader election after it (a ``leader_and_isr_change`` whose reason ends in
  ``election``), and on a controller to the next ``controller_elected``; within
  ``ELECTION_HORIZON_S``, else the fault caused none (a follower's bounce moves no leader);
* windows, each keyed by the kind of the latest fault whose window (``pipeline.stats.fault_windows``)
  holds its start, ``no_fault`` when none does: ``leaderless_window_s``, a partition without a working
  leader, as ``chaos/availability.py`` has it: from a write that named none (-1), or from a fault that
  took its leader down or cut it off, until a newer leader epoch is written, a broker takes its
  leadership again (``become_leader``), or a holding fault (pause, isolate) is healed with that leader
  still in place; spells that end at the same moment are one; ``under_min_isr_window_s``, its ISR
  below ``min.insync.replicas`` (the largest the brokers' ``broker_started`` lines give, else Kafka's
  default 1; topic overrides are not in the logs); ``controller_gap_s``, the cluster without a
  controller (``pipeline.stats.controller_gaps``). A window still open when the log ends is not one;
* ``fault_to_full_recovery_s``, keyed by fault kind: from a fault to the end of the last spell it
  started in which some partition was *degraded*: without a working leader, or with an ISR smaller
  than the largest that partition ever had (its replicas). A fault that degraded nothing has no figure; one
  whose spell never ended (the log stops first) neither.

Each is reported per scope (the cluster, and each chaos run by the time of the figure's start) as
count, p50, p99 and max. All joins are on small tables (registrations, elections, faults).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline.load import ORDER
from pipeline.session import small_side
from pipeline.stats import CLUSTER, LATENCY_QUANTILES, controller_gaps, scoped, several

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

ELECTION_HORIZON_S = 120
BROKER_NODE = r"^broker-(\d+)$"
NO_FAULT = "no_fault"
DEFAULT_MIN_ISR = 1
"""Kafka's default ``min.insync.replicas``, for logs whose brokers do not say theirs."""
BY_FAULT = (
    "fault_to_first_election_s",
    "fault_to_full_recovery_s",
    "leaderless_window_s",
    "under_min_isr_window_s",
    "controller_gap_s",
)
"""Figures keyed by fault kind, which the summary across runs lists per kind."""
HOLDING = ("pause", "isolate", "isolate-zookeeper")
"""Faults that hold a broker down or cut it off until healed (``chaos.availability.HOLDING``; the
pipeline ships to a Spark cluster on its own, so the names are repeated here)."""
DISABLING = ("kill", "bounce", "restart", *HOLDING)
"""Faults after which a broker cannot serve as leader (``chaos.availability.DISABLING``)."""


def availability(
    events: DataFrame, windows: DataFrame, faults: DataFrame, clusters: list[str] | None = None
) -> dict[str, dict[str, Any]]:
    """Scope (``cluster``, a run of ``windows``, :func:`pipeline.stats.run_windows`, or with several
    ``clusters`` each one's :func:`pipeline.stats.cluster_scope`) -> figure -> key -> {count, p50,
    p99, max}; ``faults`` is :func:`pipeline.stats.fault_windows`."""
    from functools import reduce

    from pyspark.sql import functions as F

    states = partition_states(events)
    parts = [_bounce_detection(events), _failover(events), _failover_to_last_broker(events)]
    leaderless = leaderless_spells(events, states, faults)
    parts += [_fault_to_first_election(events), _windows(states, leaderless, controller_gaps(events), faults)]
    parts.append(_full_recovery(states, leaderless, faults))
    measured = scoped(reduce(lambda a, b: a.unionByName(b), parts), windows, several(clusters))
    rows = (
        measured.groupBy("scope", "figure", "key")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.percentile_approx("value", list(LATENCY_QUANTILES), 10000).alias("q"),
            F.max("value").alias("max"),
        )
        .collect()
    )
    out: dict[str, dict[str, Any]] = {CLUSTER: {}}
    for row in rows:
        figures = out.setdefault(row["scope"], {})
        figures.setdefault(row["figure"], {})[row["key"]] = {
            "count": row["count"],
            "p50": round(row["q"][0], 3),
            "p99": round(row["q"][1], 3),
            "max": round(row["max"], 3),
        }
    return out


def _figure(df: DataFrame, figure: str, key: Any, value: Any) -> DataFrame:
    from pyspark.sql import functions as F

    return df.select(
        "ts",
        "cluster",
        F.lit(figure).alias("figure"),
        key.alias("key"),
        value.cast("double").alias("value"),
    )


def _millis(later: str, earlier: str) -> Any:
    from pyspark.sql import functions as F

    return (F.unix_micros(later) - F.unix_micros(earlier)) / 1000


def _bounce_detection(events: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    registered = events.filter(F.col("kind") == "registered").select(
        "ts",
        "cluster",
        F.regexp_extract("node", BROKER_NODE, 1).cast("bigint").alias("broker"),
        F.col("broker_epoch").alias("epoch"),
    )
    changes = events.filter(F.col("kind") == "broker_change").select(
        F.col("ts").alias("seen"),
        F.col("cluster").alias("seen_in"),
        F.explode(
            F.concat(
                F.transform("bounced", lambda b: F.struct(b.alias("id"), F.lit("bounced").alias("how"))),
                F.transform("new", lambda b: F.struct(b.alias("id"), F.lit("new").alias("how"))),
            )
        ).alias("b"),
        "epochs",
    )
    listed = changes.select(
        "seen", "seen_in", F.col("b.id").alias("id"), F.col("b.how").alias("how"),
        F.element_at("epochs", F.col("b.id").cast("string")).alias("listed_epoch"),
    )  # fmt: skip
    same = (
        (listed["seen_in"] == registered["cluster"])
        & (listed["id"] == registered["broker"])
        & (listed["listed_epoch"] == registered["epoch"])
        & (listed["seen"] >= registered["ts"])
    )
    first = (
        registered.join(listed, same)
        .groupBy("ts", "cluster", "broker", "epoch")
        .agg(F.min("seen").alias("seen"), F.first("how").alias("how"))
    )
    return _figure(first, "bounce_detection_ms", F.col("how"), _millis("seen", "ts"))


def _failover(events: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    done = events.filter((F.col("kind") == "failover_complete") & F.col("duration_ms").isNotNull())
    return _figure(done, "failover_ms", F.lit("all"), F.col("duration_ms"))


def _failover_to_last_broker(events: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    elected = events.filter(F.col("kind") == "controller_elected").select(
        "ts", "cluster", F.col("controller_epoch").alias("epoch")
    )
    applied = (
        events.filter((F.col("kind") == "control_request_handled") & (F.col("error") == "NONE"))
        .groupBy(
            F.col("cluster").alias("applied_in"), "node", F.col("controller_epoch").alias("applied_epoch")
        )
        .agg(F.min("ts").alias("first"))
    )
    same = (applied["applied_in"] == elected["cluster"]) & (applied["applied_epoch"] == elected["epoch"])
    last = elected.join(applied, same).groupBy("ts", "cluster", "epoch").agg(F.max("first").alias("last"))
    return _figure(last, "failover_to_last_broker_ms", F.lit("all"), _millis("last", "ts"))


def _fault_to_first_election(events: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    faults = events.filter(
        (F.col("kind") == "fault_injected")
        & (F.col("fault") != "resume")
        & F.col("role").isin("broker", "controller")
    ).select("ts", "cluster", "fault", "role")
    reason = F.col("reason")
    leader_elections = events.filter(
        (F.col("kind") == "leader_and_isr_change") & reason.endswith(" election")
    )
    elections = leader_elections.select(
        F.col("ts").alias("at"), F.col("cluster").alias("in"), F.lit("broker").alias("for_role")
    ).unionByName(
        events.filter(F.col("kind") == "controller_elected").select(
            F.col("ts").alias("at"), F.col("cluster").alias("in"), F.lit("controller").alias("for_role")
        )
    )
    horizon = F.timestamp_micros(F.unix_micros("ts") + ELECTION_HORIZON_S * 1_000_000)
    caused = (
        (faults["cluster"] == elections["in"])
        & (faults["role"] == elections["for_role"])
        & (elections["at"] >= faults["ts"])
        & (elections["at"] <= horizon)
    )
    first = faults.join(elections, caused).groupBy("ts", "cluster", "fault").agg(F.min("at").alias("at"))
    return _figure(first, "fault_to_first_election_s", F.col("fault"), _millis("at", "ts") / 1000)


def partition_states(events: DataFrame) -> DataFrame:
    """Every partition-state write, as (cluster, topic, partition, ts, leaderless, under_min_isr,
    degraded) with ``*_until``: the first later write of the partition where that no longer held."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    min_isr = (
        events.filter(F.col("kind") == "broker_started")
        .groupBy(F.col("cluster").alias("min_isr_cluster"))
        .agg(F.max("min_insync_replicas").alias("min_isr"))
    )
    writes = events.filter((F.col("kind") == "leader_and_isr_change") & F.col("topic").isNotNull()).select(
        *ORDER, "cluster", "topic", "partition", "leader", F.size("isr").alias("isr_size")
    )
    writes = writes.join(small_side(min_isr), writes["cluster"] == min_isr["min_isr_cluster"], "left")
    partition = Window.partitionBy("cluster", "topic", "partition")
    states = writes.select(
        *ORDER,
        "cluster",
        "topic",
        "partition",
        (F.col("leader") == -1).alias("leaderless"),
        (F.col("isr_size") < F.coalesce("min_isr", F.lit(DEFAULT_MIN_ISR))).alias("under_min_isr"),
        ((F.col("leader") == -1) | (F.col("isr_size") < F.max("isr_size").over(partition))).alias("degraded"),
    )
    later = partition.orderBy(*ORDER).rowsBetween(1, Window.unboundedFollowing)
    earlier = partition.orderBy(*ORDER)
    conditions = ("leaderless", "under_min_isr", "degraded")
    return states.select(
        "*",
        *[
            F.first(F.when(~F.col(c), F.col("ts")), ignorenulls=True).over(later).alias(f"{c}_until")
            for c in conditions
        ],
        *[F.coalesce(F.lag(c).over(earlier), F.lit(False)).alias(f"{c}_before") for c in conditions],
    )


SPELL = ("cluster", "topic", "partition", "start", "end")


def partition_windows(states: DataFrame, condition: str) -> DataFrame:
    """(cluster, topic, partition, start, end) of each spell of ``condition``; ``end`` null while open."""
    from pyspark.sql import functions as F

    return states.filter(F.col(condition) & ~F.col(f"{condition}_before")).select(
        "cluster", "topic", "partition", F.col("ts").alias("start"), F.col(f"{condition}_until").alias("end")
    )


def _attributed(spells: DataFrame, faults: DataFrame) -> DataFrame:
    """Each spell with ``cause``: the kind of the latest fault of its cluster whose window holds its
    start, or ``no_fault``."""
    from pyspark.sql import functions as F

    f = faults.select(
        F.col("cluster").alias("f_cluster"),
        "fault",
        F.col("start").alias("f_start"),
        F.col("end").alias("f_end"),
    )
    inside = (
        (spells["cluster"] == f["f_cluster"])
        & (spells["start"] >= f["f_start"])
        & (spells["start"] <= f["f_end"])
    )
    # Spells that look alike (two partitions led by one broker) stay two: each has an id of its own.
    spells = spells.withColumn("spell", F.monotonically_increasing_id())
    return (
        spells.join(small_side(f), inside, "left")
        .groupBy(*spells.columns)
        .agg(F.coalesce(F.max_by("fault", "f_start"), F.lit(NO_FAULT)).alias("cause"))
        .drop("spell")
    )


def leaderless_spells(events: DataFrame, states: DataFrame, faults: DataFrame) -> DataFrame:
    """(cluster, topic, partition, start, end) of each spell without a working leader (the module
    docstring): the writes' leader -1 spells with those that a disabling fault on the leader began;
    spells of one partition ending at the same moment are one, from its earliest start."""
    from pyspark.sql import functions as F

    writes = events.filter((F.col("kind") == "leader_and_isr_change") & F.col("topic").isNotNull())
    written = writes.select("ts", "cluster", "topic", "partition", "leader", "leader_epoch")
    down = faults.filter(F.col("fault").isin(*DISABLING) & F.col("target").startswith("broker-")).select(
        F.col("cluster").alias("f_cluster"),
        F.regexp_extract("target", BROKER_NODE, 1).cast("bigint").alias("victim"),
        F.col("start").alias("down"),
        F.when(F.col("fault").isin(*HOLDING), F.col("end")).alias("healed"),
    )
    # Each partition's state as of each fault: the latest write before it.
    before = written.join(
        small_side(down), (written["cluster"] == down["f_cluster"]) & (written["ts"] <= down["down"])
    )
    led = (
        before.groupBy("cluster", "topic", "partition", "victim", "down", "healed")
        .agg(F.max_by(F.struct("leader", "leader_epoch"), "ts").alias("state"))
        .filter(F.col("state.leader") == F.col("victim"))
        .select("cluster", "topic", "partition", "down", "healed", F.col("state.leader_epoch").alias("epoch"))
    )
    later = written.select(
        F.col("cluster").alias("l_cluster"),
        F.col("topic").alias("l_topic"),
        F.col("partition").alias("l_partition"),
        F.col("ts").alias("l_ts"),
        F.when(F.col("leader") >= 0, F.col("leader_epoch")).alias("newer"),
        F.lit(None).cast("bigint").alias("retaken"),
    ).unionByName(
        events.filter(F.col("kind") == "become_leader").select(
            F.col("cluster").alias("l_cluster"),
            F.col("topic").alias("l_topic"),
            F.col("partition").alias("l_partition"),
            F.col("ts").alias("l_ts"),
            F.lit(None).cast("bigint").alias("newer"),
            F.col("leader_epoch").alias("retaken"),
        )
    )
    ends = (F.col("l_ts") > F.col("down")) & (
        (F.col("newer") > F.col("epoch")) | (F.col("retaken") >= F.col("epoch"))
    )
    same = (
        (led["cluster"] == later["l_cluster"])
        & (led["topic"] == later["l_topic"])
        & (led["partition"] == later["l_partition"])
    )
    taken_down = (
        led.join(later, same & ends, "left")
        .groupBy("cluster", "topic", "partition", "down", "healed")
        .agg(F.min("l_ts").alias("ended"))
        .select(
            "cluster",
            "topic",
            "partition",
            F.col("down").alias("start"),
            F.least("ended", "healed").alias("end"),
        )
    )
    spells = partition_windows(states, "leaderless").unionByName(taken_down)
    return spells.groupBy("cluster", "topic", "partition", "end").agg(F.min("start").alias("start"))


def _windows(states: DataFrame, leaderless: DataFrame, gaps: DataFrame, faults: DataFrame) -> DataFrame:
    from functools import reduce

    from pyspark.sql import functions as F

    spells = [
        leaderless.select("cluster", "start", "end", F.lit("leaderless_window_s").alias("figure")),
        partition_windows(states, "under_min_isr").select(
            "cluster", "start", "end", F.lit("under_min_isr_window_s").alias("figure")
        ),
        gaps.select(
            "cluster",
            F.col("ts").alias("start"),
            F.col("closed").alias("end"),
            F.lit("controller_gap_s").alias("figure"),
        ),
    ]
    closed = reduce(lambda a, b: a.unionByName(b), spells).filter(F.col("end").isNotNull())
    judged = _attributed(closed.withColumn("ts", F.col("start")), faults)
    return judged.select(
        "ts",
        "cluster",
        "figure",
        F.col("cause").alias("key"),
        (_millis("end", "start") / 1000).cast("double").alias("value"),
    )


def _full_recovery(states: DataFrame, leaderless: DataFrame, faults: DataFrame) -> DataFrame:
    """Degraded spells of whole clusters (some partition degraded), and each fault's last one."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    spells = partition_windows(states, "degraded").unionByName(leaderless.select(*SPELL))
    # +1 when a partition's spell starts, -1 when it ends: the running sum is how many are degraded.
    steps = spells.select("cluster", F.col("start").alias("at"), F.lit(1).alias("step")).unionByName(
        spells.filter(F.col("end").isNotNull()).select(
            "cluster", F.col("end").alias("at"), F.lit(-1).alias("step")
        )
    )
    in_cluster = Window.partitionBy("cluster").orderBy("at", "step")
    counted = steps.withColumn(
        "degraded", F.sum("step").over(in_cluster.rowsBetween(Window.unboundedPreceding, 0))
    )
    counted = counted.withColumn("before", F.coalesce(F.lag("degraded").over(in_cluster), F.lit(0)))
    following = in_cluster.rowsBetween(0, Window.unboundedFollowing)
    cluster_spells = counted.withColumn(
        "end", F.first(F.when(F.col("degraded") == 0, F.col("at")), ignorenulls=True).over(following)
    ).filter((F.col("before") == 0) & (F.col("degraded") > 0))
    f = faults.select(
        F.col("cluster").alias("f_cluster"), "fault", F.col("start").alias("ts"), F.col("end").alias("f_end")
    )
    started = (
        (cluster_spells["cluster"] == f["f_cluster"])
        & (cluster_spells["at"] >= f["ts"])
        & (cluster_spells["at"] <= f["f_end"])
    )
    recovered = (
        f.join(cluster_spells, started)
        .groupBy("ts", F.col("f_cluster").alias("cluster"), "fault")
        .agg(F.max("end").alias("end"), F.count(F.when(F.col("end").isNull(), True)).alias("open"))
        .filter(F.col("open") == 0)
    )
    return _figure(recovered, "fault_to_full_recovery_s", F.col("fault"), _millis("end", "ts") / 1000)
