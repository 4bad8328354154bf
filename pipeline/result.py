"""What a check returns, and how example rows become plain JSON-ready dicts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

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
    the first few in ``order`` kept as examples."""
    if count is None:
        count = violations.count() if checked else 0
    examples = rows(violations.orderBy(*order).limit(MAX_EXAMPLES)) if count else []
    examples = [{k: v for k, v in example.items() if v is not None} for example in examples]
    return CheckResult(
        name, "failed" if count else "passed", checked, count, examples, details=dict(details or {})
    )


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
