"""KIP-841 audit: no ISR a controller writes lets in a broker that is not registered or is shutting down.

The judge is the writing controller's own view, rebuilt from its log per (controller node, controller
epoch) with as-of lookups (window functions ordered by time):

* registered brokers: the ``epochs`` keys of the latest ``brokers_loaded`` (failover's view, written
  before any failover decision), ``broker_change`` (plus its dead brokers, which the controller, as
  Kafka's, keeps live until the change's new and bounced brokers are handled) or ``brokers_removed``
  (the dead ones gone) of that controller epoch. Logs from before
  ``brokers_loaded`` existed lack the failover view, so until their first ``broker_change`` of an
  epoch registration is unknown and only shutting down is judged;
* shutting down: from a ``controlled_shutdown_started`` for the broker until a ``broker_change`` of the
  same epoch lists it as dead, bounced or new. A new epoch starts with nobody shutting down, as the
  controller clears the set at failover.

Rules for each ``leader_and_isr_change`` (AlterPartition commits are among them, with reason
``AlterPartition from broker <id>``):

1. an ineligible broker that was not in the partition's previous ISR was added: a violation. The
   previous ISR is the logged write with the znode version just before (``partition_epoch`` - 1);
   when that line is missing (a controller killed between its commit and its log line), the write
   is not judged by this rule and is counted instead;
2. a write that filters the ISR kept a member it filters out: an offline election keeps only live
   members, a controlled-shutdown election drops those shutting down, and an AlterPartition naming
   any ineligible broker is refused with INELIGIBLE_REPLICA, so its committed ISR has none;
3. ``replica <id> offline`` removes that replica unless it is the only member (Kafka keeps the last ISR
   member of a leaderless partition, so that it alone can be elected cleanly when it returns).

Other ineligible members carried over from the previous ISR are allowed and counted: the last member of
a leaderless partition, a broker that died with others (each replica is removed by its own write), and a
shutting-down leader that no other replica could replace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.batch import Batched, Steps
from pipeline.load import ORDER, POSITION
from pipeline.result import from_violations, skipped

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

INELIGIBLE_NEVER_IN_ISR = "ineligible_never_in_isr"
ALTER_PARTITION = "AlterPartition from broker "
OFFLINE_REPLICA = r"^replica (\d+) offline$"


FINDING_COLUMNS = [
    "ts",
    "cluster",
    "node",
    "controller_epoch",
    "topic",
    "partition",
    "rule",
    "broker",
    "why",
    "leader",
    "isr",
    "previous_isr",
    "reason",
    "registered",
]
"""A finding's columns: the write, the rule it broke (null if the member may stay), the member, and why."""


@Batched
def ineligible_never_in_isr(events: DataFrame) -> Steps:
    """The three rules of the module docstring over every leader_and_isr_change."""
    from pyspark.sql import functions as F

    writes = _writes(events)
    changes = _registration_changes(events)
    viewed = _as_registered(writes, changes)
    ineligible = _with_rule(_ineligible_members(viewed, changes, events))
    kept = _offline_replicas_kept(writes)
    # One row per ineligible member (rule null when it was allowed to stay) and per kept offline replica.
    findings = ineligible.select(*FINDING_COLUMNS).unionByName(
        kept.select(*[c for c in FINDING_COLUMNS if c != "registered"]), allowMissingColumns=True
    )
    violations = findings.filter(F.col("rule").isNotNull())
    counts = yield {
        "writes": writes,
        "unviewed": viewed.filter(F.col("registered").isNull()),
        "unknown_previous": writes.filter(F.col("previous_isr").isNull()),
        "carried": findings.filter(F.col("rule").isNull()),
        "violations": violations,
    }
    if not counts["writes"]:
        return skipped(INELIGIBLE_NEVER_IN_ISR, "no leader_and_isr_change event")
    details = {
        "writes_before_registration_view": counts["unviewed"],
        "ineligible_members_carried_over": counts["carried"],
    }
    if counts["unknown_previous"]:
        details["writes_with_unknown_previous_isr"] = counts["unknown_previous"]
    return from_violations(
        INELIGIBLE_NEVER_IN_ISR,
        counts["writes"],
        violations,
        ["ts", "topic", "partition"],
        details,
        count=counts["violations"],
    )


def _ids(name: str) -> Column:
    """The broker ids in column ``name``, an empty array where there are none."""
    from pyspark.sql import functions as F

    return F.coalesce(F.col(name), F.array().cast("array<bigint>"))


def _writes(events: DataFrame) -> DataFrame:
    """Every leader_and_isr_change, with the ISR it replaced (``previous_isr``)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    writes = events.filter(F.col("kind") == "leader_and_isr_change")
    per_partition = Window.partitionBy("cluster", "topic", "partition").orderBy(*ORDER)
    return writes.select(
        "ts",
        *POSITION,
        "cluster",
        "node",
        "controller_epoch",
        "topic",
        "partition",
        "leader",
        "isr",
        "reason",
        # The ISR this write replaced: nothing for a new partition; the previous logged write's when it
        # is the znode version just before (a controller killed between its commit and its log line
        # leaves a gap); else unknown (null), and rule 1 cannot judge the write.
        F.when(F.col("reason") == "new partition", F.array().cast("array<bigint>"))
        .when(
            F.lag("partition_epoch").over(per_partition) == F.col("partition_epoch") - 1,
            F.lag("isr").over(per_partition),
        )
        .alias("previous_isr"),
    )


def _registration_changes(events: DataFrame) -> DataFrame:
    """Each view a controller logged of the registered brokers (``registered``), and the brokers a
    broker_change ends the shutdown of (``gone``: its dead, bounced and new ones)."""
    from pyspark.sql import functions as F

    live = F.transform(F.map_keys("epochs"), lambda k: k.cast("bigint"))
    return events.filter(F.col("kind").isin("brokers_loaded", "broker_change", "brokers_removed")).select(
        "ts",
        *POSITION,
        "cluster",
        "node",
        "controller_epoch",
        # A broker_change's dead brokers stay live for the controller until its brokers_removed.
        F.when(F.col("kind") == "broker_change", F.array_union(live, _ids("dead")))
        .otherwise(live)
        .alias("registered"),
        F.when(
            F.col("kind") == "broker_change",
            F.array_union(F.array_union(_ids("dead"), _ids("bounced")), _ids("new")),
        )
        .otherwise(F.array().cast("array<bigint>"))
        .alias("gone"),
    )


def _as_registered(writes: DataFrame, changes: DataFrame) -> DataFrame:
    """Each write with the brokers registered as of it: the last view of the same controller and
    epoch (null before its first)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    so_far = (
        Window.partitionBy("cluster", "node", "controller_epoch")
        .orderBy(*ORDER)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return (
        writes.withColumn("write", F.lit(True))
        .unionByName(changes.withColumn("write", F.lit(False)), allowMissingColumns=True)
        .withColumn("registered", F.last("registered", ignorenulls=True).over(so_far))
        .filter("write")
        .drop("write", "gone")
    )


def _ineligible_members(viewed: DataFrame, changes: DataFrame, events: DataFrame) -> DataFrame:
    """One row per member of a written ISR that was not registered or was shutting down (as of the
    write: the last start or end mark for that broker), with ``carried`` (in the previous ISR, or
    that ISR unknown) and ``why``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    members = viewed.select("*", F.explode("isr").alias("broker"), F.lit(None).cast("string").alias("mark"))
    starts = events.filter(F.col("kind") == "controlled_shutdown_started").select(
        "ts", *POSITION, "cluster", "node", "controller_epoch", "broker", F.lit("start").alias("mark")
    )
    ends = changes.select(
        "ts",
        *POSITION,
        "cluster",
        "node",
        "controller_epoch",
        F.explode("gone").alias("broker"),
        F.lit("end").alias("mark"),
    )
    per_broker = (
        Window.partitionBy("cluster", "node", "controller_epoch", "broker")
        .orderBy(*ORDER)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return (
        members.unionByName(starts, allowMissingColumns=True)
        .unionByName(ends, allowMissingColumns=True)
        .withColumn(
            "shutting_down",
            F.coalesce(F.last("mark", ignorenulls=True).over(per_broker) == "start", F.lit(False)),
        )
        .filter(F.col("mark").isNull())
        .withColumns(
            {
                "unregistered": F.col("registered").isNotNull()
                & ~F.array_contains("registered", F.col("broker")),
                "carried": F.coalesce(F.array_contains("previous_isr", F.col("broker")), F.lit(True)),
            }
        )
        .filter(F.col("unregistered") | F.col("shutting_down"))
        .withColumn("why", F.when(F.col("unregistered"), "not registered").otherwise("shutting down"))
    )


def _with_rule(judged: DataFrame) -> DataFrame:
    """Rules 1 and 2: the rule each ineligible member breaks (``rule``), null when it may stay."""
    from pyspark.sql import functions as F

    # What each writer filters out: an offline election keeps only live ISR members; a controlled
    # shutdown election drops the brokers shutting down (a dead one stays, as in Kafka); an
    # AlterPartition naming any ineligible broker is refused (INELIGIBLE_REPLICA), so none may pass.
    filtered = (
        (F.col("reason") == "offline election")
        | ((F.col("reason") == "controlled_shutdown election") & F.col("shutting_down"))
        | F.col("reason").startswith(ALTER_PARTITION)
    )
    return judged.withColumn(
        "rule",
        F.when(~F.col("carried"), F.lit("ineligible broker added to the ISR")).when(
            filtered, F.lit("write kept an ineligible broker in the ISR")
        ),
    )


def _offline_replicas_kept(writes: DataFrame) -> DataFrame:
    """Rule 3: each ``replica <id> offline`` write that kept that replica beside other members."""
    from pyspark.sql import functions as F

    offline = F.regexp_extract("reason", OFFLINE_REPLICA, 1)
    return (
        writes.filter(F.col("reason").rlike(OFFLINE_REPLICA))
        .withColumn("broker", offline.cast("bigint"))
        .filter(F.array_contains("isr", F.col("broker")) & (F.size("isr") > 1))
        .withColumns({"rule": F.lit("offline replica kept in the ISR"), "why": F.lit("offline")})
    )
