"""Whether each record's span overlaps one of its run's fault windows, in two table lookups per record.

A record sent at ``sent`` and acknowledged at ``acked`` (microseconds) overlaps a window [start, end]
when ``start <= acked`` and ``end >= sent``. Tested window by window, that is a comparison per record
and window: ten million records against a long run's 250 windows kept both cores busy for over a
minute. Instead the windows of each run are merged into disjoint ones, and then the record overlaps
one of them exactly when more of them start at or before ``acked`` than end before ``sent`` (a window
that ends before ``sent`` also starts before ``acked``, so the difference counts the windows that
overlap). Both counts are step functions of time: a small table, cut into fixed bins, gives each
bin's count at its start and the steps inside it, so a record needs one lookup per count, whatever
the number of windows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

MIN_BIN_US = 1_000_000
MAX_BINS = 4096
"""Bins per run at most: a longer run gets wider bins (the steps inside a bin are listed anyway)."""


def merged(windows: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of closed intervals, as sorted disjoint ones."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(windows):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def bin_width(runs: dict[str, list[tuple[int, int]]]) -> int:
    """One width for every run's bins: at least a second, and at most :data:`MAX_BINS` per run."""
    spans = [spans[-1][1] - spans[0][0] for spans in runs.values() if spans]
    return max(MIN_BIN_US, -(-max(spans, default=0) // MAX_BINS))


def tables(
    runs: dict[str, list[tuple[int, int]]], width: int
) -> tuple[list[tuple[str, int, int, int]], list[tuple[str, int, int, list[int], int, list[int]]]]:
    """Per run (run, first bin, last bin, windows); per bin of a run's steps (run, bin, windows started
    before it, starts in it, windows ended before it, ends in it)."""
    per_run, per_bin = [], []
    for run, spans in sorted(runs.items()):
        if not spans:
            continue
        starts, ends = [s for s, _ in spans], [e for _, e in spans]
        first, last = starts[0] // width, ends[-1] // width
        per_run.append((run, first, last, len(spans)))
        for b in range(first, last + 1):
            low, high = b * width, (b + 1) * width
            per_bin.append(
                (
                    run,
                    b,
                    sum(s < low for s in starts),
                    [s for s in starts if low <= s < high],
                    sum(e < low for e in ends),
                    [e for e in ends if low <= e < high],
                )
            )
    return per_run, per_bin


def with_overlap(records: DataFrame, windows: Iterable[tuple[str, int, int]], name: str) -> DataFrame:
    """``records`` (``run``, ``sent``, ``acked``) with a boolean column ``name``: whether the span
    overlaps one of the ``windows`` (run, start, end) of its run; false where ``sent`` is null."""
    from pyspark.sql import functions as F

    from pipeline.session import small_side

    runs: dict[str, list[tuple[int, int]]] = {}
    for run, start, end in windows:
        if start is not None and end is not None:
            runs.setdefault(run, []).append((start, end))
    runs = {run: merged(spans) for run, spans in runs.items()}
    if not runs:
        return records.withColumn(name, F.lit(False))
    width = bin_width(runs)
    per_run, per_bin = tables(runs, width)
    spark = records.sparkSession
    bounds = spark.createDataFrame(per_run, "run string, _first bigint, _last bigint, _total bigint")
    steps = spark.createDataFrame(
        per_bin,
        "run string, bin bigint, s_base bigint, s_in array<bigint>, e_base bigint, e_in array<bigint>",
    )
    at_acked = steps.select("run", F.col("bin").alias("_bin_a"), "s_base", "s_in")
    at_sent = steps.select("run", F.col("bin").alias("_bin_s"), "e_base", "e_in")
    binned = records.join(small_side(bounds), "run", "left").withColumns(
        {"_bin_a": F.expr(f"acked div {width}"), "_bin_s": F.expr(f"sent div {width}")}
    )
    looked = binned.join(small_side(at_acked), ["run", "_bin_a"], "left").join(
        small_side(at_sent), ["run", "_bin_s"], "left"
    )

    def count_at(bin_: str, base: str, steps: str, passed: Callable[[Column], Column]) -> Column:
        """The step function at the record's time: none before its run's first bin, every window
        after its last, else the bin's count at its start and its ``steps`` the time has ``passed``."""
        before, after = F.col(bin_) < F.col("_first"), F.col(bin_) > F.col("_last")
        inside = F.col(base) + F.size(F.filter(steps, passed))
        return F.when(before, 0).when(after, F.col("_total")).otherwise(inside)

    started = count_at("_bin_a", "s_base", "s_in", lambda s: s <= F.col("acked"))
    ended = count_at("_bin_s", "e_base", "e_in", lambda e: e < F.col("sent"))
    overlap = F.coalesce(F.col("_total").isNotNull() & (started > ended), F.lit(False))
    return looked.withColumn(name, overlap).select(*records.columns, name)
