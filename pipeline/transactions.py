"""Transactional audits over the chaos runs' histories: what read_committed may see, that committed
transactions last, and that the consume-transform-produce loop is exactly once.

The rules are the run's own verdict's (``chaos/txn_verdict.py``), judged here from the lines the
transactional workload writes (docs/events.md, "Transactions"): ``txn_ended`` (each transaction of the
producer, its values and its outcome as the client saw it), ``eos_ended`` and ``eos_group_committed``
(the transform loop's transactions, and the input offsets it committed with them) and ``txn_consumed``
(the read-backs: the producer's topic in both isolation levels, the loop's output with read_committed).
The read-backs come last in a run, so only runs with ``run_finished`` are judged; what an interrupted
run did not read would look lost. A run without these lines (older than the workload, or run with
``--no-transactions`` or Kafka's own clients) gives nothing to judge, and the check is skipped.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipeline.batch import Answer, Batched, Request, Rows, Steps
from pipeline.load import ORDER, POSITION
from pipeline.result import CheckResult, from_violations, skipped

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

TXN_ISOLATION = "txn_isolation"
TXN_DURABILITY = "txn_durability"
EOS_EXACTLY_ONCE = "eos_exactly_once"
OUTPUT_PREFIX = "eos:"
"""The transform loop writes ``eos:<value>`` for each input value (chaos/txn_workload.py)."""
OUTCOMES = ("committed", "aborted", "unknown")
RUN = ["cluster", "run"]
NO_TRANSACTIONS = "no transactional history (a run before the transactional workload, or --no-transactions)"
NO_LOOP = "no transform-loop history (a run before the transactional workload, or --no-transactions)"
TRANSFORMED_ABOVE = "transformed input at or above the committed offset"
PAST_UNTRANSFORMED = "committed offset past an untransformed input"
OFFSETS_TYPE = "map<string,bigint>"
"""``eos_group_committed``'s ``offsets``: loaded as JSON text, since other kinds log a count there."""


@dataclass
class _Scope:
    """The runs a transactional check judges (those with its lines and ``run_finished``), what the report
    says of them, or the skipped result when there are none."""

    runs: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    kinds: dict[str, set[str]] = field(default_factory=dict)
    """Run -> the kinds of the check's lines it holds."""
    skip: CheckResult | None = None


def _scope(
    name: str, lines: DataFrame, events: DataFrame, missing: str
) -> Generator[Request, Answer, _Scope]:
    """Which runs hold ``lines``, and which of them finished (collected: the runs are few)."""
    from pyspark.sql import functions as F

    finished = (
        events.filter(F.col("run").isNotNull() & (F.col("kind") == "run_finished"))
        .select("run")
        .distinct()
        .withColumn("finished", F.lit(True))
    )
    present = lines.groupBy("run").agg(F.collect_set("kind").alias("kinds"))
    rows = (yield {"runs": Rows(present.join(finished, "run", "left"))})["runs"]
    if not rows:
        return _Scope(skip=skipped(name, missing))
    complete = sorted(r["run"] for r in rows if r["finished"])
    incomplete = sorted(r["run"] for r in rows if not r["finished"])
    details: dict[str, Any] = {"runs": sorted(complete + incomplete)}
    if incomplete:
        details["incomplete_runs"] = incomplete
    if not complete:
        return _Scope(details=details, skip=skipped(name, "no run reached its final read", details))
    return _Scope(complete, details, {r["run"]: set(r["kinds"]) for r in rows})


def _kind(*kinds: str) -> Column:
    from pyspark.sql import functions as F

    return F.col("kind").isin(*kinds)


def _read_back(history: DataFrame, isolation: str) -> DataFrame:
    """(cluster, run, value) of every record of the producer's topic a read-back with ``isolation`` saw
    (the loop's ``eos:`` outputs are judged by :func:`eos_exactly_once`)."""
    from pyspark.sql import functions as F

    return (
        history.filter(
            _kind("txn_consumed")
            & (F.col("isolation") == isolation)
            & ~F.col("value").startswith(OUTPUT_PREFIX)
        )
        .select(*RUN, "value")
        .distinct()
    )


def _visibility(ended: DataFrame, view: DataFrame) -> DataFrame:
    """Each ``txn_ended`` line with ``visible`` (its values ``view`` holds, in the transaction's order)
    and ``missing`` (the others). A line is keyed by its position in its file: unique, never null."""
    from pyspark.sql import functions as F

    keys = [*RUN, *POSITION]
    seen = (
        ended.select(*keys, F.explode("values").alias("value"))
        .join(view, [*RUN, "value"])
        .groupBy(*keys)
        .agg(F.collect_set("value").alias("seen"))
    )
    nothing = F.array().cast("array<string>")
    return (
        ended.join(seen, keys, "left")
        .withColumn("visible", F.array_intersect("values", F.coalesce("seen", nothing)))
        .withColumn("missing", F.array_except(F.coalesce("values", nothing), "visible"))
    )


@Batched
def txn_isolation(history: DataFrame, events: DataFrame) -> Steps:
    """read_committed sees no value of an aborted transaction, every committed transaction whole, and no
    transaction in part, whatever its outcome: one whose outcome the client never learned (``unknown``)
    was committed or aborted by its coordinator, all of it or none."""
    from pyspark.sql import functions as F

    every_ended = history.filter(_kind("txn_ended"))
    scope = yield from _scope(TXN_ISOLATION, every_ended, events, NO_TRANSACTIONS)
    if scope.skip is not None:
        return scope.skip
    ended = every_ended.filter(F.col("run").isin(*scope.runs))
    txns = _visibility(ended, _read_back(history, "read_committed"))
    outcome, seen, size = F.col("outcome"), F.size("visible"), F.size("values")
    rule = (
        F.when((outcome == "aborted") & (seen > 0), F.lit("aborted transaction visible to read_committed"))
        .when(
            (outcome == "committed") & (seen < size),
            F.when(seen == 0, F.lit("committed transaction not visible")).otherwise(
                F.lit("committed transaction visible in part")
            ),
        )
        .when((seen > 0) & (seen < size), F.lit("transaction visible in part"))
    )
    violations = (
        txns.withColumn("rule", rule)
        .filter(F.col("rule").isNotNull())
        .select(
            "ts",
            *RUN,
            "rule",
            "transactional_id",
            "txn",
            "outcome",
            "values",
            # what read_committed wrongly saw, or what it wrongly missed of a committed one
            F.when(outcome != "committed", F.col("visible")).alias("visible"),
            F.when(outcome == "committed", F.col("missing")).alias("missing"),
        )
    )
    parts = {"transactions": ended, "violations": violations}
    parts |= {o: ended.filter(outcome == o) for o in OUTCOMES}
    counts = yield parts
    details = {**scope.details, "outcomes": {o: counts[o] for o in OUTCOMES if counts[o]}}
    return from_violations(
        TXN_ISOLATION,
        counts["transactions"],
        violations,
        ["ts", "run", "txn"],
        details,
        count=counts["violations"],
    )


@Batched
def txn_durability(history: DataFrame, events: DataFrame) -> Steps:
    """Every value of a committed transaction is in the read_uncommitted read-back: a value read_committed
    misses may still await its marker, but one that is not even in the log was lost."""
    from pyspark.sql import functions as F

    every_ended = history.filter(_kind("txn_ended"))
    scope = yield from _scope(TXN_DURABILITY, every_ended, events, NO_TRANSACTIONS)
    if scope.skip is not None:
        return scope.skip
    committed = every_ended.filter(F.col("run").isin(*scope.runs) & (F.col("outcome") == "committed")).select(
        "ts", *RUN, "transactional_id", "txn", F.explode("values").alias("value")
    )
    lost = committed.join(_read_back(history, "read_uncommitted"), [*RUN, "value"], "left_anti")
    counts = yield {"values": committed, "lost": lost}
    if not counts["values"]:
        return skipped(TXN_DURABILITY, "no committed transaction", scope.details)
    return from_violations(
        TXN_DURABILITY,
        counts["values"],
        lost.select("ts", *RUN, "value", "transactional_id", "txn"),
        ["ts", "run", "txn", "value"],
        scope.details,
        count=counts["lost"],
    )


@Batched
def eos_exactly_once(history: DataFrame, events: DataFrame) -> Steps:
    """Every acknowledged acks=all input of the transform loop has exactly one output in the read_committed
    read-back of its output topic, and the offsets the loop last committed cover exactly the inputs it
    transformed: an input read back below its partition's committed offset has an output, none at or
    above it has one. Kafka's exactly-once rests on both: outputs and offsets commit together."""
    from pyspark.sql import functions as F

    scope = yield from _scope(
        EOS_EXACTLY_ONCE, history.filter(_kind("eos_ended", "eos_group_committed")), events, NO_LOOP
    )
    if scope.skip is not None:
        return scope.skip
    judged = history.filter(F.col("run").isin(*scope.runs))
    acked = judged.filter(_kind("produce_acked") & (F.coalesce(F.col("acks"), F.lit("all")) == "all"))
    sources = acked.select(*RUN, "topic").distinct()
    copies = _outputs(judged)
    violations = (
        _transformed_twice(judged, sources, copies)
        .unionByName(_never_transformed(acked, copies), allowMissingColumns=True)
        .unionByName(_offsets_wrong(judged, sources, copies), allowMissingColumns=True)
    )
    counts = yield {
        "acked": acked,
        "violations": violations,
        "transactions": judged.filter(_kind("eos_ended") & (F.col("outcome") == "committed")),
    }
    details = {**scope.details, "transactions": counts["transactions"]}
    unjudged = sorted(r for r in scope.runs if "eos_group_committed" not in scope.kinds.get(r, set()))
    if unjudged:
        details["runs_without_committed_offsets"] = unjudged
    if not counts["acked"] and not counts["violations"]:
        return skipped(EOS_EXACTLY_ONCE, "no acknowledged input", details)
    return from_violations(
        EOS_EXACTLY_ONCE,
        counts["acked"],
        violations,
        ["ts", "rule", "value"],
        details,
        count=counts["violations"],
    )


def _outputs(judged: DataFrame) -> DataFrame:
    """Per run and input value (``value``), its outputs read back with read_committed: how many
    (``copies``), where (``outputs``), and when the first was read (``ts``)."""
    from pyspark.sql import functions as F

    return (
        judged.filter(
            _kind("txn_consumed")
            & (F.col("isolation") == "read_committed")
            & F.col("value").startswith(OUTPUT_PREFIX)
        )
        .withColumn("value", F.regexp_replace("value", f"^{OUTPUT_PREFIX}", ""))
        .groupBy(*RUN, "value")
        .agg(
            F.count(F.lit(1)).alias("copies"),
            F.min("ts").alias("ts"),
            F.sort_array(F.collect_list(F.struct("topic", "partition", "offset"))).alias("outputs"),
        )
    )


def _transformed_twice(judged: DataFrame, sources: DataFrame, copies: DataFrame) -> DataFrame:
    """Each input the run's producer sent (acknowledged or not) whose output was read more than once.
    Only the run's own inputs: the output topic keeps earlier runs' outputs, and a later run's loop (a
    new group) transforms the earlier runs' inputs again."""
    from pyspark.sql import functions as F

    own = (
        judged.filter(_kind("produce_acked", "produce_failed"))
        .join(sources, [*RUN, "topic"], "left_semi")
        .select(*RUN, "value")
        .distinct()
    )
    return (
        copies.filter(F.col("copies") > 1)
        .join(own, [*RUN, "value"], "left_semi")
        .withColumn("rule", F.lit("input transformed more than once"))
    )


def _never_transformed(acked: DataFrame, copies: DataFrame) -> DataFrame:
    """Each acknowledged input without an output (``ts``: its acknowledgement)."""
    from pyspark.sql import functions as F

    return (
        acked.join(copies.select(*RUN, "value"), [*RUN, "value"], "left_anti")
        .select("ts", *RUN, "value", "topic", "partition", "offset")
        .withColumn("rule", F.lit("acknowledged input never transformed"))
    )


def _offsets_wrong(judged: DataFrame, sources: DataFrame, copies: DataFrame) -> DataFrame:
    """Each record read back from the source topic on the wrong side of the offset the loop last
    committed for its partition (``committed_offset``, 0 for a partition it committed none for). A run
    without ``eos_group_committed`` (its loop never stopped) is not judged by this rule."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    latest = Window.partitionBy(*RUN).orderBy(*[F.col(c).desc() for c in ORDER])
    committed = (
        judged.filter(_kind("eos_group_committed"))
        .withColumn("n", F.row_number().over(latest))
        .filter(F.col("n") == 1)
        .select(*RUN, F.from_json("offsets", OFFSETS_TYPE).alias("committed"))
    )
    transformed = copies.select(*RUN, "value", F.lit(True).alias("transformed"))
    offset_of_partition = F.try_element_at("committed", F.col("partition").cast("string"))
    reads = (
        judged.filter(_kind("consumed") & F.col("value").isNotNull())  # no value: not the producer's
        .join(sources, [*RUN, "topic"], "left_semi")
        .join(committed, RUN)
        .join(transformed, [*RUN, "value"], "left")
        .select(
            "ts",
            *RUN,
            "value",
            "topic",
            "partition",
            "offset",
            F.coalesce(offset_of_partition, F.lit(0)).alias("committed_offset"),
            F.coalesce(F.col("transformed"), F.lit(False)).alias("transformed"),
        )
    )
    below = F.col("offset") < F.col("committed_offset")
    return (
        reads.filter(below != F.col("transformed"))
        .withColumn(
            "rule",
            F.when(F.col("transformed"), F.lit(TRANSFORMED_ABOVE)).otherwise(F.lit(PAST_UNTRANSFORMED)),
        )
        .drop("transformed")
    )
