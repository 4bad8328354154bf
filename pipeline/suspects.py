"""The history lines a workload rule could find broken, found with two cheap groupings.

The workload checks (``pipeline.workload``) join the acknowledged records with the consumed ones by
value and by place, some ten shuffles of every record. In a healthy run nearly every value is read
back once, where it was acknowledged, and nearly every place holds one value: no rule can break
there. Two groupings of plain counts find the rest, the *suspects*:

* a value is in order when it was read back exactly once, acknowledged at most once (either acks),
  and read back where it was acknowledged;
* a place is in order when it was read back exactly once, with a value, and acknowledged (acks=all) at
  most once, with that value.

Every line of a value in order lies at one place, and every line of a place in order has one value,
so the lines of the suspect values and places hold every line that any rule's violation is made of
(each rule joins lines sharing a value or a place): the checks run their joins on those lines alone
and find exactly the violations they would find on all of them. They count what they examined over
all lines, with no shuffle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

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
    them (``release`` frees them)."""

    history: DataFrame
    _keys: tuple[DataFrame, DataFrame] | None = field(default=None, repr=False)
    _lines: DataFrame | None = field(default=None, repr=False)

    def keys(self) -> tuple[DataFrame, DataFrame]:
        """(run, value) of the suspect values and (run, topic, partition, offset) of the suspect places."""
        if self._keys is None:
            self._keys = (_values(self.history).cache(), _places(self.history).cache())
        return self._keys

    def lines(self, broadcast: bool) -> DataFrame:
        """The consumed and acknowledged lines of the suspect values and places, cached: each check
        reads them several times. ``broadcast`` when the keys are few (their counts, from
        :meth:`keys`, say so)."""
        if self._lines is None:
            self._lines = self._find(broadcast).cache()
        return self._lines

    def _find(self, broadcast: bool) -> DataFrame:
        from pyspark.sql import functions as F

        values, places = self.keys()
        if broadcast:
            values, places = F.broadcast(values), F.broadcast(places)
        kind = F.col("kind")
        lines = self.history.filter(kind.isin("consumed", "produce_acked"))
        flagged = lines.join(values.withColumn("_by_value", F.lit(True)), ["run", "value"], "left").join(
            places.withColumn("_by_place", F.lit(True)), ["run", *PLACE], "left"
        )
        return flagged.filter(F.col("_by_value") | F.col("_by_place")).select(*lines.columns)

    def release(self) -> None:
        for cached in (*(self._keys or ()), *([self._lines] if self._lines is not None else [])):
            cached.unpersist()


def _values(history: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    kind = F.col("kind")
    read = kind == "consumed"
    acked = kind == "produce_acked"
    place = F.struct(*PLACE)
    grouped = history.filter((read & F.col("value").isNotNull()) | acked).groupBy("run", "value")
    counted = grouped.agg(
        F.count(F.when(read, True)).alias("reads"),
        F.count(F.when(acked, True)).alias("acks"),
        F.min(F.when(read, place)).alias("read_at"),
        F.min(F.when(acked, place)).alias("acked_at"),
    )
    in_order = (
        (F.col("reads") == 1)
        & (F.col("acks") <= 1)
        & ((F.col("acks") == 0) | (F.col("read_at") == F.col("acked_at")))
    )
    return counted.filter(~F.coalesce(in_order, F.lit(False))).select("run", "value")


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
        F.min(F.when(read, F.col("value"))).alias("read_value"),
        F.min(F.when(acked, F.col("value"))).alias("acked_value"),
    )
    in_order = (
        (F.col("reads") == 1)
        & (F.col("empty_reads") == 0)
        & (F.col("acks") <= 1)
        & ((F.col("acks") == 0) | (F.col("read_value") == F.col("acked_value")))
    )
    return counted.filter(~F.coalesce(in_order, F.lit(False))).select("run", *PLACE)
