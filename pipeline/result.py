"""What a check returns, and how example rows become plain JSON-ready dicts."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pipeline.load import ROOT_CLUSTER

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

Verdict = Literal["passed", "failed", "skipped"]
MAX_EXAMPLES = 10
TS_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'"
"""How timestamps appear in the report: like the event logs' own ``ts``."""


@dataclass
class CheckResult:
    """One audit's outcome: ``checked`` counts what was examined, ``examples`` shows some violations."""

    name: str
    verdict: Verdict
    checked: int = 0
    violations: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """Skipped counts as passed: a check without input found nothing wrong."""
        return self.verdict != "failed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "verdict": self.verdict,
            "checked": self.checked,
            "violations": self.violations,
            "examples": self.examples,
            "details": self.details,
        }


def skipped(name: str, why: str, details: dict[str, Any] | None = None) -> CheckResult:
    return CheckResult(name, "skipped", details={"skipped": why, **(details or {})})


def from_violations(
    name: str,
    checked: int,
    violations: DataFrame,
    order: list[str],
    details: dict[str, Any] | None = None,
    *,
    count: int | None = None,
) -> CheckResult:
    """A result from a DataFrame holding one row per violation: counted (unless ``count`` is given), and
    the first few in ``order`` kept as examples. Violations in more than one cluster are also counted
    per cluster (``violations_by_cluster``); an example names its cluster unless it is the directory's
    own."""
    if count is None:
        count = violations.count() if checked else 0
    examples = rows(violations.orderBy(*order).limit(MAX_EXAMPLES)) if count else []
    examples = [
        {k: v for k, v in example.items() if v is not None and not (k == "cluster" and v == ROOT_CLUSTER)}
        for example in examples
    ]
    details = dict(details or {})
    if count and "cluster" in violations.columns:
        per_cluster = {r["cluster"]: r["count"] for r in violations.groupBy("cluster").count().collect()}
        if set(per_cluster) != {ROOT_CLUSTER}:
            details["violations_by_cluster"] = dict(sorted(per_cluster.items()))
    return CheckResult(name, "failed" if count else "passed", checked, count, examples, details=details)


def by_cluster(pairs: Iterable[tuple[str, Any]]) -> list[Any] | dict[str, list[Any]]:
    """(cluster, value) pairs as a sorted list of values when all are the directory's own cluster,
    else as cluster -> sorted values."""
    grouped: dict[str, list[Any]] = {}
    for cluster, value in pairs:
        grouped.setdefault(cluster, []).append(value)
    if set(grouped) <= {ROOT_CLUSTER}:
        return sorted(grouped.get(ROOT_CLUSTER, []))
    return {cluster: sorted(values) for cluster, values in sorted(grouped.items())}


def tally(parts: dict[str, DataFrame]) -> dict[str, int]:
    """The row counts of several DataFrames in one Spark job: on small logs every job costs a few hundred
    milliseconds of scheduling, so a check counts its input and its violations together."""
    from functools import reduce

    from pyspark.sql import functions as F

    labelled = [df.select(F.lit(name).alias("part")) for name, df in parts.items()]
    union = reduce(lambda a, b: a.unionByName(b), labelled)
    counts = {r["part"]: r["count"] for r in union.groupBy("part").count().collect()}
    return {name: counts.get(name, 0) for name in parts}


def rows(df: DataFrame) -> list[dict[str, Any]]:
    """Collected rows as JSON-ready dicts. Timestamps are formatted by Spark in the session's time zone
    (pinned to UTC), because PySpark would turn them into the Python process's local time."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType

    columns = [
        F.date_format(f.name, TS_FORMAT).alias(f.name) if isinstance(f.dataType, TimestampType) else f.name
        for f in df.schema.fields
    ]
    return [plain(row.asDict(recursive=True)) for row in df.select(*columns).collect()]


def plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
