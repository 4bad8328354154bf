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
  ``ELECTION_HORIZON_S``, else the fault caused none (a follower's bounce moves no leader).

Each is reported per scope (the cluster, and each chaos run by the time of the figure's start) as
count, p50, p99 and max. All joins are on small tables (registrations, elections, faults).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline.stats import CLUSTER, LATENCY_QUANTILES, scoped

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

ELECTION_HORIZON_S = 120
BROKER_NODE = r"^broker-(\d+)$"


def availability(events: DataFrame, windows: DataFrame) -> dict[str, dict[str, Any]]:
    """Scope (``cluster`` or a run of ``windows``, :func:`pipeline.stats.run_windows`) -> figure ->
    key -> {count, p50, p99, max}."""
    from functools import reduce

    from pyspark.sql import functions as F

    parts = [_bounce_detection(events), _failover(events), _failover_to_last_broker(events)]
    parts.append(_fault_to_first_election(events))
    measured = scoped(reduce(lambda a, b: a.unionByName(b), parts), windows)
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
        "ts", F.lit(figure).alias("figure"), key.alias("key"), value.cast("double").alias("value")
    )


def _millis(later: str, earlier: str) -> Any:
    from pyspark.sql import functions as F

    return (F.unix_micros(later) - F.unix_micros(earlier)) / 1000


def _bounce_detection(events: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    registered = events.filter(F.col("kind") == "registered").select(
        "ts",
        F.regexp_extract("node", BROKER_NODE, 1).cast("bigint").alias("broker"),
        F.col("broker_epoch").alias("epoch"),
    )
    changes = events.filter(F.col("kind") == "broker_change").select(
        F.col("ts").alias("seen"),
        F.explode(
            F.concat(
                F.transform("bounced", lambda b: F.struct(b.alias("id"), F.lit("bounced").alias("how"))),
                F.transform("new", lambda b: F.struct(b.alias("id"), F.lit("new").alias("how"))),
            )
        ).alias("b"),
        "epochs",
    )
    listed = changes.select(
        "seen", F.col("b.id").alias("id"), F.col("b.how").alias("how"),
        F.element_at("epochs", F.col("b.id").cast("string")).alias("listed_epoch"),
    )  # fmt: skip
    same = (
        (listed["id"] == registered["broker"])
        & (listed["listed_epoch"] == registered["epoch"])
        & (listed["seen"] >= registered["ts"])
    )
    first = (
        registered.join(listed, same)
        .groupBy("ts", "broker", "epoch")
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
        "ts", F.col("controller_epoch").alias("epoch")
    )
    applied = (
        events.filter((F.col("kind") == "control_request_handled") & (F.col("error") == "NONE"))
        .groupBy("node", F.col("controller_epoch").alias("applied_epoch"))
        .agg(F.min("ts").alias("first"))
    )
    last = (
        elected.join(applied, applied["applied_epoch"] == elected["epoch"])
        .groupBy("ts", "epoch")
        .agg(F.max("first").alias("last"))
    )
    return _figure(last, "failover_to_last_broker_ms", F.lit("all"), _millis("last", "ts"))


def _fault_to_first_election(events: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    faults = events.filter(
        (F.col("kind") == "fault_injected")
        & (F.col("fault") != "resume")
        & F.col("role").isin("broker", "controller")
    ).select("ts", "fault", "role")
    reason = F.col("reason")
    leader_elections = events.filter(
        (F.col("kind") == "leader_and_isr_change") & reason.endswith(" election")
    )
    elections = leader_elections.select(
        F.col("ts").alias("at"), F.lit("broker").alias("for_role")
    ).unionByName(
        events.filter(F.col("kind") == "controller_elected").select(
            F.col("ts").alias("at"), F.lit("controller").alias("for_role")
        )
    )
    horizon = F.timestamp_micros(F.unix_micros("ts") + ELECTION_HORIZON_S * 1_000_000)
    caused = (
        (faults["role"] == elections["for_role"])
        & (elections["at"] >= faults["ts"])
        & (elections["at"] <= horizon)
    )
    first = faults.join(elections, caused).groupBy("ts", "fault").agg(F.min("at").alias("at"))
    return _figure(first, "fault_to_first_election_s", F.col("fault"), _millis("at", "ts") / 1000)
