"""Split-brain audits on partition state: every partition epoch written once, and every broker's
view of a partition moving only forward.

A partition's state znode is written with a conditional set, so its version (the partition epoch)
names exactly one write: two controllers that both logged the same version for one partition both
believed their conditional write succeeded, which only a split brain explains. A broker applies a
LeaderAndIsr only with a newer leader epoch, so in one broker's ``become_leader``/``become_follower``
sequence for a partition the epochs only grow; a restarted broker starts with no state and may apply
the epoch it had before, but never an older one.

A topic deleted and created again starts over at epoch 0 (``pipeline.leadership.incarnations``).
Spark transformations only, as in ``pipeline.checks``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.batch import Batched, Steps
from pipeline.leadership import incarnations
from pipeline.load import ORDER
from pipeline.result import from_violations, skipped

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

WRITTEN_ONCE = "partition_epochs_written_once"
BROKERS_FORWARD = "broker_epochs_move_forward"
BECOME = ("become_leader", "become_follower")


@Batched
def partition_epochs_written_once(events: DataFrame) -> Steps:
    """No (partition, partition epoch) appears in two controllers' ``leader_and_isr_change`` lines,
    nor twice in one controller's."""
    from pyspark.sql import functions as F

    writes = incarnations(events, "leader_and_isr_change").filter(F.col("partition_epoch").isNotNull())
    per_version = writes.groupBy("cluster", "topic", "partition", "incarnation", "partition_epoch").agg(
        F.min("ts").alias("ts"),
        F.count(F.lit(1)).alias("writes"),
        F.sort_array(F.collect_set("node")).alias("nodes"),
        F.sort_array(F.collect_set("controller_epoch")).alias("controller_epochs"),
        F.sort_array(F.collect_set("reason")).alias("reasons"),
    )
    violations = per_version.filter(F.col("writes") > 1).drop("incarnation")
    counts = yield {"versions": per_version, "violations": violations}
    if not counts["versions"]:
        return skipped(WRITTEN_ONCE, "no leader_and_isr_change event")
    return from_violations(WRITTEN_ONCE, counts["versions"], violations, ["ts"], count=counts["violations"])


@Batched
def broker_epochs_move_forward(events: DataFrame) -> Steps:
    """In each broker's ``become_*`` sequence of a partition: a leader epoch or partition epoch below
    one it applied before (`went back`), or one process applying a leader epoch twice (`applied twice
    by one process`, which its own rule forbids)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = incarnations(events, *BECOME, "broker_started")
    starts = Window.partitionBy("cluster", "node").orderBy(*ORDER).rowsBetween(Window.unboundedPreceding, 0)
    applied = (
        rows.withColumn("generation", F.sum((F.col("kind") == "broker_started").cast("int")).over(starts))
        .filter(F.col("kind").isin(*BECOME))
        .filter(F.col("topic").isNotNull() & F.col("leader_epoch").isNotNull())
    )
    before = (
        Window.partitionBy("cluster", "node", "topic", "partition", "incarnation")
        .orderBy(*ORDER)
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    in_process = (
        Window.partitionBy("cluster", "node", "generation", "topic", "partition", "incarnation")
        .orderBy(*ORDER)
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    judged = applied.select(
        "ts",
        "cluster",
        "node",
        "kind",
        "topic",
        "partition",
        "leader_epoch",
        "partition_epoch",
        F.max("leader_epoch").over(before).alias("highest_leader_epoch_before"),
        F.max("partition_epoch").over(before).alias("highest_partition_epoch_before"),
        F.max("leader_epoch").over(in_process).alias("highest_in_process"),
    )
    why = (
        F.when(F.col("leader_epoch") < F.col("highest_leader_epoch_before"), F.lit("leader epoch went back"))
        .when(
            F.col("partition_epoch") < F.col("highest_partition_epoch_before"),
            F.lit("partition epoch went back"),
        )
        .when(F.col("leader_epoch") <= F.col("highest_in_process"), F.lit("applied twice by one process"))
    )
    violations = judged.withColumn("why", why).filter(F.col("why").isNotNull()).drop("highest_in_process")
    counts = yield {"applied": applied, "violations": violations}
    if not counts["applied"]:
        return skipped(BROKERS_FORWARD, "no become_leader or become_follower event")
    return from_violations(
        BROKERS_FORWARD, counts["applied"], violations, ["ts", "node"], count=counts["violations"]
    )
