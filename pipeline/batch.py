"""Running many checks' Spark work together: every check's counts and small collects in one job per round.

A check is written as a generator (``Steps``): it yields a dict of requests, a DataFrame to count or
``Rows(df)`` to collect, and is sent back a dict of the same keys holding the counts and the rows;
it returns its CheckResult. :func:`drive` advances every check to its next request, answers all of
them with one Spark job, and repeats. One job per round, instead of one or more per check, matters
twice: a small directory's audit pays a few hundred milliseconds of scheduling per job, and within
one job Spark computes a shuffle that several checks share (the same grouping of the histories) once.

Collected rows travel as JSON text (one column fits every request's schema) and come back as dicts;
a count is the number of rows of its DataFrame. :class:`Batched` keeps each check callable on its
own, as the tests call them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any, Generic, ParamSpec

from pipeline.result import TS_FORMAT, CheckResult

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class Rows:
    """A request to collect ``df`` (small: a few rows per run or cluster), as dicts."""

    df: DataFrame


Request = Mapping[str, "DataFrame | Rows"]
Answer = dict[str, Any]
Steps = Generator[Request, Answer, CheckResult]
P = ParamSpec("P")
SEP = "\x00"


class Batched(Generic[P]):
    """A check whose Spark work :func:`drive` batches with others' (``steps``); called directly, it
    runs alone and returns its result."""

    def __init__(self, steps: Callable[P, Steps]) -> None:
        self.steps = steps
        self.__name__ = steps.__name__
        self.__doc__ = steps.__doc__

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> CheckResult:
        return drive([self.steps(*args, **kwargs)])[0]


def drive(checks: list[Steps]) -> list[CheckResult]:
    """Every check's result, in order, answering each round of requests with one Spark job."""
    results: dict[int, CheckResult] = {}
    pending: dict[int, Request] = {}

    def advance(index: int, answer: Answer | None) -> None:
        try:
            pending[index] = checks[index].send(answer)  # type: ignore[arg-type]
        except StopIteration as done:
            results[index] = done.value

    for index in range(len(checks)):
        advance(index, None)
    while pending:
        asked, pending = pending, {}
        flat = {f"{i}{SEP}{key}": req for i, request in asked.items() for key, req in request.items()}
        answers = answer_all(flat)
        for index, request in asked.items():
            advance(index, {key: answers[f"{index}{SEP}{key}"] for key in request})
    return [results[i] for i in range(len(checks))]


def answer_all(requests: Mapping[str, DataFrame | Rows]) -> dict[str, Any]:
    """Counts and rows of every request, from one job: a count is its DataFrame's count (one row, with
    a null row text), a collect its rows as JSON text, each row once with how many times it came."""
    from pyspark.sql import functions as F

    if not requests:
        return {}
    parts = []
    for part, request in requests.items():
        if isinstance(request, Rows):
            df = request.df
            json_row = F.to_json(F.struct(*[F.col(c) for c in df.columns]), JSON_OPTIONS)
            parts.append(
                df.groupBy(json_row.alias("row"))
                .agg(F.count(F.lit(1)).alias("n"))
                .select(F.lit(part).alias("part"), "row", "n")
            )
        else:
            counted = request.agg(F.count(F.lit(1)).alias("n"))
            no_row = F.lit(None).cast("string").alias("row")
            parts.append(counted.select(F.lit(part).alias("part"), no_row, "n"))
    union = union_all(parts)
    answers: dict[str, Any] = {
        part: [] if isinstance(request, Rows) else 0 for part, request in requests.items()
    }
    for row in union.collect():
        if row["row"] is None:
            answers[row["part"]] = row["n"]
        else:
            answers[row["part"]] += [json.loads(row["row"])] * row["n"]
    return answers


def union_all(parts: list[DataFrame]) -> DataFrame:
    """The union of ``parts`` (same columns, same order), built as a balanced tree: PySpark analyses
    each union's whole plan as it is made, so a chain of n unions costs n analyses of a growing plan.
    A round of 28 requests spent 4 s in that chain, 2 s as a tree."""
    while len(parts) > 1:
        parts = [reduce(lambda a, b: a.union(b), parts[i : i + 2]) for i in range(0, len(parts), 2)]
    return parts[0]


JSON_OPTIONS = {"ignoreNullFields": "false", "timestampFormat": TS_FORMAT}
"""Collected rows keep their null fields, and timestamps read as the report writes them."""
