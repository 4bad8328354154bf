"""Control-plane audits over the daemons' events: controller epochs, broker epochs and stale requests.

Each check is a function of the events DataFrame (``pipeline.load``) made of Spark transformations
only, returning a CheckResult whose examples are the first violations in time order. The ISR check,
which needs as-of joins, lives in ``pipeline.isr``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.batch import Batched, Steps
from pipeline.load import ORDER, POSITION
from pipeline.result import by_cluster, from_violations, skipped

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

ONE_CONTROLLER = "one_controller_per_epoch"
BROKER_EPOCHS = "broker_epochs_increase"
STALE_REQUESTS = "stale_requests_rejected"

ACTIVE_CONTROLLER_KINDS = (
    "brokers_loaded",
    "brokers_removed",
    "failover_complete",
    "broker_change",
    "leader_and_isr_change",
    "controlled_shutdown_started",
    "controller_resigned",
)
"""Controller kinds written only by the active controller, with the epoch it won."""

STALE_BROKER_EPOCH = "STALE_BROKER_EPOCH"


@Batched
def one_controller_per_epoch(events: DataFrame) -> Steps:
    """Controller epoch fencing: an epoch is won once, epochs rise over time, and a controller acts only
    with an epoch it won. Two controllers with one epoch could both write ZooKeeper."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    elected = events.filter(F.col("kind") == "controller_elected")
    twice = (
        elected.groupBy("cluster", "controller_epoch")
        .agg(
            F.min("ts").alias("ts"),
            F.count(F.lit(1)).alias("elections"),
            F.sort_array(F.collect_list("node")).alias("nodes"),
        )
        .filter("elections > 1")
        .withColumn("rule", F.lit("epoch won more than once"))
    )
    in_time = Window.partitionBy("cluster").orderBy(*ORDER)
    backwards = (
        elected.select(
            "ts",
            *POSITION,
            "cluster",
            "node",
            "controller_epoch",
            F.lag("controller_epoch").over(in_time).alias("previous_epoch"),
            F.lag("node").over(in_time).alias("previous_node"),
        )
        .filter(F.col("controller_epoch") < F.col("previous_epoch"))
        .select("ts", "cluster", "node", "controller_epoch", "previous_epoch", "previous_node")
        .withColumn("rule", F.lit("epoch lower than the previous election's"))
    )
    winners = elected.groupBy("cluster", "controller_epoch").agg(F.collect_set("node").alias("winners"))
    acting = events.filter(
        F.col("kind").isin(*ACTIVE_CONTROLLER_KINDS) & F.col("controller_epoch").isNotNull()
    )
    usurped = (
        acting.join(winners, ["cluster", "controller_epoch"], "left")
        .groupBy("cluster", "node", "controller_epoch", "winners")
        .agg(F.min("ts").alias("ts"), F.sort_array(F.collect_set("kind")).alias("kinds"))
    )
    foreign = (
        usurped.filter(F.col("winners").isNotNull() & ~F.array_contains("winners", F.col("node")))
        .withColumn("rule", F.lit("acted with an epoch another controller won"))
        .withColumnRenamed("winners", "nodes")
    )
    unseen = usurped.filter(F.col("winners").isNull()).select("cluster", "controller_epoch").distinct()
    violations = twice.unionByName(backwards, allowMissingColumns=True).unionByName(
        foreign, allowMissingColumns=True
    )
    counts = yield {"elections": elected, "violations": violations, "unseen": unseen}
    if not counts["elections"]:
        return skipped(ONE_CONTROLLER, "no controller_elected event")
    details = {}
    if counts["unseen"]:
        details["epochs_without_election_in_log"] = by_cluster(
            (r["cluster"], r["controller_epoch"]) for r in unseen.collect()
        )
    return from_violations(
        ONE_CONTROLLER, counts["elections"], violations, ["ts", "rule"], details, count=counts["violations"]
    )


@Batched
def broker_epochs_increase(events: DataFrame) -> Steps:
    """KIP-380: a broker's registrations get strictly rising epochs (czxids), and a controller takes a
    broker for bounced only when its epoch rose, and never sees a broker's epoch go back."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    registered = events.filter((F.col("kind") == "registered") & F.col("broker_epoch").isNotNull())
    per_node = Window.partitionBy("cluster", "node").orderBy(*ORDER)
    repeated = (
        registered.select(
            "ts",
            "cluster",
            "node",
            "broker_epoch",
            F.lag("broker_epoch").over(per_node).alias("previous_registration_epoch"),
            F.lag("ts").over(per_node).alias("previous_registration_ts"),
        )
        .filter(F.col("broker_epoch") <= F.col("previous_registration_epoch"))
        .withColumn("rule", F.lit("registered without a higher epoch"))
    )
    changes = events.filter(F.col("kind") == "broker_change")
    bounces = changes.select(
        "ts",
        "cluster",
        "node",
        "controller_epoch",
        "epochs",
        "previous_epochs",
        F.explode("bounced").alias("broker"),
    ).select(
        "ts",
        "cluster",
        "node",
        "controller_epoch",
        "broker",
        F.try_element_at("epochs", F.col("broker").cast("string")).alias("broker_epoch"),
        F.try_element_at("previous_epochs", F.col("broker").cast("string")).alias("previous_epoch"),
    )
    false_bounces = bounces.filter(
        F.col("broker_epoch").isNull()
        | F.col("previous_epoch").isNull()
        | (F.col("broker_epoch") <= F.col("previous_epoch"))
    ).withColumn("rule", F.lit("bounce without a higher epoch"))
    seen = changes.select(
        "ts",
        *POSITION,
        "cluster",
        "node",
        "controller_epoch",
        F.explode("epochs").alias("id", "broker_epoch"),
    )
    per_broker = Window.partitionBy("cluster", "node", "id").orderBy(*ORDER)
    regressions = (
        seen.select(
            "ts",
            "cluster",
            "node",
            "controller_epoch",
            F.col("id").cast("bigint").alias("broker"),
            "broker_epoch",
            F.lag("broker_epoch").over(per_broker).alias("previous_epoch"),
        )
        .filter(F.col("broker_epoch") < F.col("previous_epoch"))
        .withColumn("rule", F.lit("a controller saw the epoch go back"))
    )
    violations = repeated.unionByName(false_bounces, allowMissingColumns=True).unionByName(
        regressions, allowMissingColumns=True
    )
    counts = yield {"registrations": registered, "bounces": bounces, "violations": violations}
    checked = counts["registrations"] + counts["bounces"]
    if not checked:
        return skipped(BROKER_EPOCHS, "no registered event and no bounce")
    return from_violations(
        BROKER_EPOCHS, checked, violations, ["ts", "node", "rule"], count=counts["violations"]
    )


def stale_epoch_expected() -> Column:
    """protocol/control_requests.py broker_epoch_is_stale on the logged fields: ``max_broker_epoch``
    below the broker's own epoch is stale, -1 included; ``broker_epoch`` below it is, except -1
    (unknown). Null when the line carries neither field."""
    from pyspark.sql import functions as F

    now = F.col("broker_epoch_now")
    return F.when(F.col("max_broker_epoch").isNotNull(), F.col("max_broker_epoch") < now).when(
        F.col("broker_epoch").isNotNull(), (F.col("broker_epoch") != -1) & (F.col("broker_epoch") < now)
    )


@Batched
def stale_requests_rejected(events: DataFrame) -> Steps:
    """KIP-380 and seed 002 on the broker side: every control request from an older generation is
    refused with STALE_BROKER_EPOCH, and no current request is."""
    from pyspark.sql import functions as F

    handled = events.filter(F.col("kind") == "control_request_handled").withColumns(
        {
            "stale": stale_epoch_expected(),
            "refused": F.coalesce(F.col("error") == STALE_BROKER_EPOCH, F.lit(False)),
        }
    )
    judged = handled.filter(F.col("stale").isNotNull() & F.col("broker_epoch_now").isNotNull())
    violations = (
        judged.filter(F.col("stale") != F.col("refused"))
        .withColumn(
            "rule",
            F.when(F.col("stale"), F.lit("stale request accepted")).otherwise(
                F.lit("current request refused as stale")
            ),
        )
        .select(
            "ts",
            "cluster",
            "node",
            "rule",
            "api",
            "api_version",
            "correlation_id",
            "controller_id",
            "controller_epoch",
            "broker_epoch",
            "max_broker_epoch",
            "broker_epoch_now",
            "error",
        )
    )
    counts = yield {
        "handled": handled,
        "judged": judged,
        "stale_refused": judged.filter(F.col("stale") & F.col("refused")),
        "violations": violations,
    }
    if not counts["judged"]:
        return skipped(STALE_REQUESTS, "no control_request_handled event with epochs")
    details = {
        "stale_refused": counts["stale_refused"],
        "without_epochs": counts["handled"] - counts["judged"],
    }
    return from_violations(
        STALE_REQUESTS, counts["judged"], violations, ["ts", "node"], details, count=counts["violations"]
    )
