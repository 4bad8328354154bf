"""Fencing audits: one leader per leader epoch, leader epochs that only grow, and no broker obeying a
controller older than one it already obeyed.

A zombie leader keeps the epoch it was given; a new leader always gets a higher one. So two brokers
taking leadership of one partition in the same epoch, or a controller writing a lower epoch than
one already written, means fencing failed somewhere. Spark transformations only, as in
``pipeline.checks``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.batch import Batched, Steps
from pipeline.load import ORDER
from pipeline.result import from_violations, skipped

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

ONE_LEADER = "one_leader_per_leader_epoch"
EPOCHS_GROW = "leader_epochs_grow"


@Batched
def one_leader_per_leader_epoch(events: DataFrame) -> Steps:
    """No two brokers became leader of one partition in one leader epoch."""
    from pyspark.sql import functions as F

    became = events.filter(F.col("kind") == "become_leader")
    per_epoch = became.groupBy("cluster", "topic", "partition", "leader_epoch").agg(
        F.min("ts").alias("ts"), F.sort_array(F.collect_set("node")).alias("nodes")
    )
    violations = per_epoch.filter(F.size("nodes") > 1)
    counts = yield {"leaderships": per_epoch, "violations": violations}
    if not counts["leaderships"]:
        return skipped(ONE_LEADER, "no become_leader event")
    return from_violations(ONE_LEADER, counts["leaderships"], violations, ["ts"], count=counts["violations"])


def incarnations(events: DataFrame, *kinds: str) -> DataFrame:
    """The events of ``kinds``, each with the ``incarnation`` of its topic: how many ``topic_deleted``
    of that topic came before it. A topic created again under the same name starts at epoch 0, so
    epochs are compared within one incarnation only. Kinds without a topic (``broker_started``) keep
    a null incarnation."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = events.filter(F.col("kind").isin(*kinds, "topic_deleted")).withColumn(
        "deleted", (F.col("kind") == "topic_deleted").cast("int")
    )
    so_far = Window.partitionBy("cluster", "topic").orderBy(*ORDER).rowsBetween(Window.unboundedPreceding, 0)
    counted = rows.withColumn(
        "incarnation", F.when(F.col("topic").isNotNull(), F.sum("deleted").over(so_far))
    )
    return counted.filter(F.col("kind").isin(*kinds)).drop("deleted")


@Batched
def leader_epochs_grow(events: DataFrame) -> Steps:
    """Per partition, the leader epochs controllers write never go below one written before (a topic
    deleted and created again starts over: each deletion begins a new incarnation of the name)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    changes = incarnations(events, "leader_and_isr_change")
    before = (
        Window.partitionBy("cluster", "topic", "partition", "incarnation")
        .orderBy(*ORDER)
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    violations = (
        changes.withColumn("highest_before", F.max("leader_epoch").over(before))
        .filter(F.col("leader_epoch") < F.col("highest_before"))
        .select(
            "ts",
            "cluster",
            "node",
            "topic",
            "partition",
            "leader_epoch",
            "highest_before",
            "controller_epoch",
        )
    )
    counts = yield {"changes": changes, "violations": violations}
    if not counts["changes"]:
        return skipped(EPOCHS_GROW, "no leader_and_isr_change event")
    return from_violations(EPOCHS_GROW, counts["changes"], violations, ["ts"], count=counts["violations"])


OLDER_CONTROLLER = "no_older_controller_obeyed"


@Batched
def no_older_controller_obeyed(events: DataFrame) -> Steps:
    """No broker process applied a control request from a controller epoch older than one it had
    already applied: a deposed controller's requests must find every broker that heard from its
    successor closed to them. A broker that starts again (``broker_started``) knows no epoch yet."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = events.filter(
        (F.col("kind") == "broker_started")
        | (
            (F.col("kind") == "control_request_handled")
            & (F.col("error") == "NONE")
            & F.col("controller_epoch").isNotNull()
        )
    ).withColumn("started", (F.col("kind") == "broker_started").cast("int"))
    so_far = Window.partitionBy("cluster", "node").orderBy(*ORDER).rowsBetween(Window.unboundedPreceding, 0)
    applied = rows.withColumn("generation", F.sum("started").over(so_far)).filter(F.col("started") == 0)
    before = (
        Window.partitionBy("cluster", "node", "generation")
        .orderBy(*ORDER)
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    violations = (
        applied.withColumn("highest_before", F.max("controller_epoch").over(before))
        .filter(F.col("controller_epoch") < F.col("highest_before"))
        .select(
            "ts",
            "cluster",
            "node",
            "api",
            "correlation_id",
            "controller_id",
            "controller_epoch",
            "highest_before",
        )
    )
    counts = yield {"applied": applied, "violations": violations}
    if not counts["applied"]:
        return skipped(OLDER_CONTROLLER, "no applied control request")
    return from_violations(
        OLDER_CONTROLLER, counts["applied"], violations, ["ts", "node"], count=counts["violations"]
    )
