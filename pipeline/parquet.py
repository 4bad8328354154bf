"""``--parquet DIR``: what the audit read and found, as Parquet tables for Spark SQL or pandas.

* ``DIR/events``: every daemon and chaos-runner line, parsed with the audit's schema (``pipeline.load``):
  one column per field the audit uses, ``file`` (where the line came from), ``cluster`` and ``run``
  (the chaos run it belongs to, null for the daemons' logs; ``pipeline.load`` names both);
* ``DIR/history``: the chaos runs' workload lines, with the same columns;
* ``DIR/findings``: one row per check and example violation (a check without one has a row with a null
  example): ``check``, ``verdict``, ``checked``, ``violations``, ``example`` and ``details`` (both as
  JSON text, since each check's examples have fields of their own).

Each table is replaced as a whole, so a directory always holds one audit's output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.result import CheckResult

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FINDINGS_SCHEMA = (
    "`check` string, verdict string, checked bigint, violations bigint, example string, details string"
)
INTERNAL = ("block", "eid")
"""Read positions of the loader (``pipeline.load.POSITION``): meaningless outside one read."""


def write_parquet(
    spark: SparkSession, directory: Path, events: DataFrame, history: DataFrame, checks: list[CheckResult]
) -> dict[str, str]:
    """Write the three tables under ``directory``; returns table name -> path."""
    directory.mkdir(parents=True, exist_ok=True)
    tables = {
        "events": events.drop(*INTERNAL),
        "history": history.drop(*INTERNAL),
        "findings": spark.createDataFrame(findings(checks), FINDINGS_SCHEMA).coalesce(1),
    }
    written = {}
    for name, table in tables.items():
        path = directory / name
        table.write.mode("overwrite").parquet(str(path))
        written[name] = str(path)
    return written


def findings(checks: list[CheckResult]) -> list[tuple[Any, ...]]:
    rows = []
    for check in checks:
        details = json.dumps(check.details, sort_keys=True)
        examples: list[str | None] = [json.dumps(e, sort_keys=True) for e in check.examples] or [None]
        rows += [(check.name, check.verdict, check.checked, check.violations, e, details) for e in examples]
    return rows
