"""pipeline.overlap: a record's span overlaps one of its run's fault windows exactly when a test of
every window says so, at bin edges, across merged windows and for runs without any."""

from __future__ import annotations

import random

import pytest
from pyspark.sql import SparkSession

from pipeline.jvm import SMALL_INPUT_BYTES
from pipeline.overlap import MIN_BIN_US, bin_width, merged, with_overlap
from pipeline.session import fit_to


def test_overlapping_and_touching_windows_merge() -> None:
    assert merged([(5, 9), (1, 3), (3, 4), (8, 12), (20, 21)]) == [(1, 4), (5, 12), (20, 21)]


def test_a_long_run_gets_wider_bins() -> None:
    assert bin_width({"r": [(0, 10)]}) == MIN_BIN_US
    assert bin_width({"r": [(0, 100 * 4096 * MIN_BIN_US)], "s": []}) == 100 * MIN_BIN_US


def brute(run: str, sent: int | None, acked: int, windows: list[tuple[str, int, int]]) -> bool:
    return sent is not None and any(r == run and s <= acked and e >= sent for r, s, e in windows)


@pytest.mark.parametrize("input_bytes", [0, SMALL_INPUT_BYTES], ids=["small", "large"])
def test_every_record_is_judged_as_a_test_of_every_window_would(
    spark: SparkSession, input_bytes: int
) -> None:
    """In a small audit's session (joins without broadcasts) and a large one's."""
    fit_to(spark, input_bytes)
    try:
        judged_as_every_window_would(spark)
    finally:
        fit_to(spark, SMALL_INPUT_BYTES)  # the tests' session as it started


def judged_as_every_window_would(spark: SparkSession) -> None:
    rng = random.Random(7)
    second = MIN_BIN_US
    windows = [("a", 3 * second, 5 * second), ("a", 5 * second, 5 * second + 1)]  # touching
    windows += [("a", 9 * second - 1, 9 * second), ("b", 2 * second + 17, 40 * second)]
    for _ in range(40):
        start = rng.randrange(0, 60 * second)
        windows.append((rng.choice("ab"), start, start + rng.choice([0, 1, 999, second, 7 * second])))
    edges = sorted({t for _, s, e in windows for t in (s, e)})
    records: list[tuple[str, int | None, int]] = []
    for t in edges:  # on, just before and just after every window's edge
        for run in "abc":
            records += [(run, t - 1, t - 1), (run, t, t), (run, t + 1, t + 1), (run, t - 3, t + 3)]
    for _ in range(2000):
        acked = rng.randrange(-5 * second, 70 * second)
        records.append((rng.choice("abc"), acked - rng.choice([0, 1, 500, 3 * second]), acked))
    records += [("a", None, 4 * second), ("c", 0, 4 * second)]
    df = spark.createDataFrame(
        [(i, *r) for i, r in enumerate(records)], "i bigint, run string, sent bigint, acked bigint"
    )
    got = {row["i"]: row["during"] for row in with_overlap(df, windows, "during").collect()}
    expected = {i: brute(run, sent, acked, windows) for i, (run, sent, acked) in enumerate(records)}
    assert got == expected
    assert 0 < sum(expected.values()) < len(records)


def test_no_window_means_no_overlap(spark: SparkSession) -> None:
    df = spark.createDataFrame([("a", 1, 2)], "run string, sent bigint, acked bigint")
    assert [r["during"] for r in with_overlap(df, [], "during").collect()] == [False]
