"""The history lines a workload rule could find broken, found with two cheap groupings.

The workload checks (``pipeline.workload``) join the acknowledged records with the consumed ones by
value and by place, some ten shuffles of every record. In a healthy run nearly every value is read
back once, where it was acknowledged, and nearly every place holds one value: no rule can break
there. Two groupings of plain counts find the rest, the *suspects*:

* a value is in order when it was read back exactly once, acknowledged at most once (either acks),
  and read back where it was acknowledged;
* a place is in order when it was read back exactly once, with a value, and acknowledged (acks=all)
  at most once.

Every line of a value in order lies at one place. A place in order holds one value too, unless the
value acknowledged there is a suspect: had it been in order, the one read of the place would be its
own. So the suspects' lines are the lines of the suspect values and places, and those at the places
where a suspect value was acknowledged; they hold every line that any rule's violation is made of
(each rule joins lines sharing a value or a place), and the checks run their joins on those lines
alone and find exactly the violations they would find on all of them. They count what they examined
over all lines, with no shuffle.

Both groupings keep only numbers (a topic by its rank among the topics the audit read), so Spark
aggregates them in a hash table: a string in an aggregate (the least place or value) makes it sort
every record instead, twice, which took most of the audit's time at ten million rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import reduce
from operator import and_
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

PLACE = ["topic", "partition", "offset"]
BROADCAST_KEYS = 200_000
"""Up to this many suspect keys are sent to every task (no shuffle of the history); more, and the
lines are joined with them the usual way."""


def _acks_all() -> Column:
    from pyspark.sql import functions as F

    return F.coalesce(F.col("acks"), F.lit("all")) == "all"


@dataclass
class Suspects:
    """The suspect values and places of ``history``, cached once computed: both workload checks read
    them (``release`` frees them). ``topics`` are those the history may name (``Logs.topics``); None
    looks them up."""

    history: DataFrame
    topics: list[str] | None = None
    _keys: tuple[DataFrame, DataFrame] | None = field(default=None, repr=False)
    _lines: DataFrame | None = field(default=None, repr=False)
    _parts: list[DataFrame] = field(default_factory=list, repr=False)

    def keys(self) -> tuple[DataFrame, DataFrame]:
        """(run, value, acks) of the suspect values and (run, topic, partition, offset) of the suspect
        places (counted: not yet those where a suspect value was acknowledged)."""
        if self._keys is None:
            topics = self.topics
            if topics is None:
                topics = sorted(
                    r["topic"] for r in self.history.select("topic").distinct().collect() if r["topic"]
                )
            with _one_step_aggregation(self.history.sparkSession):
                self._keys = (_values(self.history, topics).cache(), _places(self.history).cache())
        return self._keys

    def lines(self, broadcast: bool, acked_values: int = 1) -> DataFrame:
        """The consumed and acknowledged lines of the suspect values and places, and of the places where
        a suspect value was acknowledged, cached: each check reads them several times. ``broadcast``
        when the keys are few (their counts, from :meth:`keys`, say so); ``acked_values``, how many
        suspect values were acknowledged (none: no place to add)."""
        if self._lines is None:
            self._lines = self._find(broadcast, acked_values).cache()
        return self._lines

    def _find(self, broadcast: bool, acked_values: int) -> DataFrame:
        from pyspark.sql import functions as F

        values, places = self.keys()
        values = values.select("run", "value")
        if broadcast:
            values, places = F.broadcast(values), F.broadcast(places)
        kind = F.col("kind")
        lines = self.history.filter(kind.isin("consumed", "produce_acked"))
        flagged = lines.join(values.withColumn("_by_value", F.lit(True)), ["run", "value"], "left").join(
            places.withColumn("_by_place", F.lit(True)), ["run", *PLACE], "left"
        )
        found = flagged.filter(F.col("_by_value") | F.col("_by_place"))
        if not acked_values:
            return found.select(*lines.columns)
        found = found.cache()
        self._parts.append(found)
        # The places where a suspect value was acknowledged, not yet suspect: the value read there may
        # be another (it is in order on its own), and its lines are not among those found.
        acked_at = found.filter(F.col("_by_value") & (kind == "produce_acked") & F.col("_by_place").isNull())
        more = acked_at.select("run", *PLACE).distinct()
        at_more = lines.join(F.broadcast(more) if broadcast else more, ["run", *PLACE], "left_semi")
        return found.select(*lines.columns).unionByName(at_more.join(values, ["run", "value"], "left_anti"))

    def release(self) -> None:
        for cached in (
            *(self._keys or ()),
            *self._parts,
            *([self._lines] if self._lines is not None else []),
        ):
            cached.unpersist()


BYPASS_PARTIAL = "spark.sql.execution.bypassPartialAggregation"


@contextlib.contextmanager
def _one_step_aggregation(spark: SparkSession) -> Iterator[None]:
    """Groupings planned meanwhile aggregate once, after their shuffle. Nearly every value and place is
    a group of two lines, which sit in different splits (acknowledged during the run, read back at
    its end): aggregating each split first only adds a pass, a third of the groupings' time at ten
    million rows. ``cache`` plans its query at once, so the setting applies to what is cached; a
    query another thread plans meanwhile may take it too, which changes its speed, not its result."""
    before = spark.conf.get(BYPASS_PARTIAL, None)
    spark.conf.set(BYPASS_PARTIAL, "true")
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(BYPASS_PARTIAL)
        else:
            spark.conf.set(BYPASS_PARTIAL, before)


def _values(history: DataFrame, topics: list[str]) -> DataFrame:
    from pyspark.sql import functions as F

    kind = F.col("kind")
    read = kind == "consumed"
    acked = kind == "produce_acked"
    ranks = [x for rank, topic in enumerate(topics) for x in (F.lit(topic), F.lit(rank))]
    topic = F.create_map(*ranks)[F.col("topic")] if ranks else F.lit(None).cast("int")
    place = {"topic": topic, "partition": F.col("partition"), "offset": F.col("offset")}
    grouped = history.filter((read & F.col("value").isNotNull()) | acked).groupBy("run", "value")
    counted = grouped.agg(
        F.count(F.when(read, True)).alias("reads"),
        F.count(F.when(acked, True)).alias("acks"),
        *(F.min(F.when(read, column)).alias(f"read_{name}") for name, column in place.items()),
        *(F.min(F.when(acked, column)).alias(f"acked_{name}") for name, column in place.items()),
    )
    same_place = reduce(and_, [F.col(f"read_{name}") == F.col(f"acked_{name}") for name in place])
    in_order = (F.col("reads") == 1) & (F.col("acks") <= 1) & ((F.col("acks") == 0) | same_place)
    return counted.filter(~F.coalesce(in_order, F.lit(False))).select("run", "value", "acks")


def _places(history: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    kind = F.col("kind")
    read = kind == "consumed"
    acked = (kind == "produce_acked") & _acks_all()
    grouped = history.filter(read | acked).groupBy("run", *PLACE)
    counted = grouped.agg(
        F.count(F.when(read, True)).alias("reads"),
        F.count(F.when(read & F.col("value").isNull(), True)).alias("empty_reads"),
        F.count(F.when(acked, True)).alias("acks"),
    )
    in_order = (F.col("reads") == 1) & (F.col("empty_reads") == 0) & (F.col("acks") <= 1)
    return counted.filter(~F.coalesce(in_order, F.lit(False))).select("run", *PLACE)
