"""Workload audits over the chaos runs' histories: nothing acknowledged is lost or duplicated.

Values are unique per run, and a value acknowledged with acks=all must show up in the run's final read
exactly once, at the offset its acknowledgement named. Values acknowledged with acks=1 (a run's second
topic) may be lost with a fenced leader, as Kafka allows: their losses are counted in the details,
not failed. The final read happens after the
faults are healed; a run without ``run_finished`` (it stopped, or its read-back failed part way) is
reported as incomplete and left out of the loss check, since what it did not read would look lost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.batch import Batched, Rows, Steps
from pipeline.result import from_violations, skipped
from pipeline.suspects import BROADCAST_KEYS, Suspects

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

NO_LOSS = "workload_no_loss"
NO_DUPLICATES = "workload_no_duplicates"
PLACE = ["topic", "partition", "offset"]


def _suspect_lines(suspects: Suspects, counts: dict[str, int]) -> DataFrame:
    few = counts["suspect_values"] + counts["suspect_places"] + counts["suspect_acked"] <= BROADCAST_KEYS
    return suspects.lines(broadcast=few, acked_values=counts["suspect_acked"])


def _suspect_counts(suspects: Suspects) -> dict[str, DataFrame | Rows]:
    values, places = suspects.keys()
    return {"suspect_values": values, "suspect_places": places, "suspect_acked": values.filter("acks > 0")}


@Batched
def workload_no_loss(history: DataFrame, events: DataFrame, suspects: Suspects | None = None) -> Steps:
    """Every produce_acked value of a completed run was consumed. The lost ones are looked for among
    the suspects' lines (``pipeline.suspects``; ``suspects`` shares them with workload_no_duplicates)."""
    from pyspark.sql import functions as F

    suspects = suspects or Suspects(history)
    finished = events.filter(F.col("run").isNotNull() & (F.col("kind") == "run_finished"))
    per_run = history.groupBy("run").agg(F.count(F.when(F.col("kind") == "consumed", True)).alias("consumed"))
    runs = per_run.join(finished.select("run").distinct().withColumn("finished", F.lit(True)), "run", "left")
    complete: list[str] = []
    incomplete: list[str] = []
    first = yield {"runs": Rows(runs), **_suspect_counts(suspects)}
    for row in first["runs"]:
        (complete if row["finished"] else incomplete).append(row["run"])
    if not complete and not incomplete:
        return skipped(NO_LOSS, "no chaos run history")
    details: dict[str, object] = {"runs": sorted(complete + incomplete)}
    if incomplete:
        details["incomplete_runs"] = sorted(incomplete)
    if not complete:
        return skipped(NO_LOSS, "no run reached its final read", details)
    lines = _suspect_lines(suspects, first)
    must_survive = F.coalesce(F.col("acks"), F.lit("all")) == "all"

    def acknowledged(among: DataFrame, survive: bool) -> DataFrame:
        every_acked = among.filter((F.col("kind") == "produce_acked") & F.col("run").isin(*complete))
        return every_acked.filter(must_survive if survive else ~must_survive)

    consumed = lines.filter(F.col("kind") == "consumed").select("run", "value")
    acked, acks1 = acknowledged(history, True), acknowledged(history, False)
    lost = (
        acknowledged(lines, True)
        .join(consumed, ["run", "value"], "left_anti")
        .select("run", "value", *PLACE, F.col("ts").alias("acked_at"), "latency_ms")
    )
    acks1_lost = acknowledged(lines, False).join(consumed, ["run", "value"], "left_anti")
    counts = yield {"acked": acked, "lost": lost, "acks1": acks1, "acks1_lost": acks1_lost}
    if counts["acks1"]:
        details["acks1_acked"], details["acks1_lost"] = counts["acks1"], counts["acks1_lost"]
    result = from_violations(
        NO_LOSS, counts["acked"], lost, ["run", "acked_at"], details, count=counts["lost"]
    )
    if result.violations:
        result.details["lost_by_run"] = {r["run"]: r["count"] for r in lost.groupBy("run").count().collect()}
    return result


@Batched
def workload_no_duplicates(history: DataFrame, suspects: Suspects | None = None) -> Steps:
    """No value consumed at two places, no place consumed with two values, no acknowledged place
    holding another value, and no acknowledged value read back only at another place.

    One duplicate is the client's, not the cluster's: librdkafka resends the unanswered requests of a
    broker that left the metadata (a leader paused past its session timeout) to the new leader, even
    with retries off, and a batch the old leader had appended and replicated survives beside the
    resent copy. Such a value has every copy in one partition and, when acknowledged, the
    acknowledged copy last; it is counted as ``resent`` in the details, as ``chaos/verdict.py``
    does, and is not a violation, unless the producer was idempotent (its leader drops resends).

    The rules are judged on the suspects' lines (``pipeline.suspects``), the records read back on all."""
    from pyspark.sql import functions as F

    suspects = suspects or Suspects(history)
    lines = _suspect_lines(suspects, (yield _suspect_counts(suspects)))
    every_read = history.filter(F.col("kind") == "consumed")
    consumed = lines.filter(F.col("kind") == "consumed")
    # An acks=1 value's place may hold another value after its leader was fenced: that is its loss,
    # allowed and counted by workload_no_loss, not a misplaced value.
    acked_all = lines.filter(
        (F.col("kind") == "produce_acked") & (F.coalesce(F.col("acks"), F.lit("all")) == "all")
    )
    acked = acked_all.select("run", *PLACE, F.col("value").alias("acked_value"))
    judged = _copies_judged(consumed, acked_all)
    resent = judged.filter(F.col("resent"))
    twice = (
        judged.filter(~F.col("resent"))
        .drop("resent", "acked", "partitions", "idempotent")
        .withColumn("rule", F.lit("value consumed at more than one place"))
    )
    violations = (
        twice.unionByName(_divergent(consumed), allowMissingColumns=True)
        .unionByName(_acked_place_elsewhere(acked, consumed), allowMissingColumns=True)
        .unionByName(_acked_value_only_elsewhere(acked, consumed), allowMissingColumns=True)
    )
    counts = yield {"consumed": every_read, "violations": violations, "resent": resent}
    if not counts["consumed"]:
        return skipped(NO_DUPLICATES, "no consumed record")
    return from_violations(
        NO_DUPLICATES,
        counts["consumed"],
        violations,
        ["run", "rule", "value", "topic", "partition"],
        {"resent": counts["resent"]},
        count=counts["violations"],
    )


def _copies_judged(consumed: DataFrame, acked_all: DataFrame) -> DataFrame:
    """Each value consumed at more than one place, with its places, its acknowledged place if any, and
    whether the producer's resend explains the copies (``resent``)."""
    from pyspark.sql import functions as F

    place = F.struct(*PLACE)
    copies = (
        consumed.filter(F.col("value").isNotNull())  # a record without a value is no produced value
        .groupBy("run", "value")
        .agg(
            F.sort_array(F.collect_set(place)).alias("places"),
            F.countDistinct("topic", "partition").alias("partitions"),
        )
        .filter(F.size("places") > 1)
    )
    acked_place = acked_all.select(
        "run",
        "value",
        F.struct(*PLACE).alias("acked"),
        F.coalesce(F.col("idempotent"), F.lit(False)).alias("idempotent"),
    )
    # an idempotent producer's resends are dropped by the leader: none of its copies is explained
    resent_rule = (
        (F.col("partitions") == 1)
        & ~F.coalesce(F.col("idempotent"), F.lit(False))
        & (F.col("acked").isNull() | (F.col("acked") == F.element_at("places", -1)))
    )
    return copies.join(acked_place, ["run", "value"], "left").withColumn("resent", resent_rule)


def _divergent(consumed: DataFrame) -> DataFrame:
    """Each place consumed with several values."""
    from pyspark.sql import functions as F

    return (
        consumed.groupBy("run", *PLACE)
        .agg(F.sort_array(F.collect_set("value")).alias("values"))
        .filter(F.size("values") > 1)
        .withColumn("rule", F.lit("one place consumed with several values"))
    )


def _acked_place_elsewhere(acked: DataFrame, consumed: DataFrame) -> DataFrame:
    """Each acknowledged place read back holding another value."""
    from pyspark.sql import functions as F

    return (
        acked.join(consumed.select("run", *PLACE, "value"), ["run", *PLACE])
        .filter(F.col("acked_value") != F.col("value"))
        .withColumn("rule", F.lit("acknowledged place holds another value"))
    )


def _acked_value_only_elsewhere(acked: DataFrame, consumed: DataFrame) -> DataFrame:
    """Each acknowledged value whose place was never read back, read back at another place (``read_at``)."""
    from pyspark.sql import functions as F

    return (
        acked.join(consumed.select("run", *PLACE), ["run", *PLACE], "left_anti")
        .join(
            consumed.select("run", F.col("value").alias("acked_value"), F.struct(*PLACE).alias("read_at")),
            ["run", "acked_value"],
        )
        .withColumn("rule", F.lit("acknowledged value read back only at another place"))
    )


REPLICAS = "replicas_consistent"


@Batched
def replicas_consistent(events: DataFrame) -> Steps:
    """Every replica held its leader's batches up to the high watermark when a chaos run compared them
    at its end, or ``python -m cluster verify-replicas`` did (``replicas_verified``: both read the
    replicas' disks, which the logs do not hold)."""
    from pyspark.sql import functions as F

    verified = events.filter(F.col("kind") == "replicas_verified")
    violations = verified.filter(F.size("divergences") > 0).select(
        "ts", "cluster", "run", "node", F.explode("divergences").alias("divergence")
    )
    total = verified.agg(F.sum("partitions").alias("partitions"))
    counts = yield {"runs": verified, "violations": violations, "partitions": Rows(total)}
    if not counts["runs"]:
        return skipped(REPLICAS, "no chaos run or verify-replicas compared the replicas")
    checked = counts["partitions"][0]["partitions"] or 0
    return from_violations(REPLICAS, int(checked), violations, ["ts"], count=counts["violations"])
