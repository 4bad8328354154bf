"""A PySpark audit of a cluster directory: the daemons' event logs and the chaos runs' workload histories.

``python -m pipeline audit --dir DIR`` checks the control plane's safety properties (one controller per
epoch, rising broker epochs, stale requests refused, no ineligible replica in an ISR) and the workload's
(no acknowledged record lost or duplicated), computes statistics, and writes ``DIR/audit.json``.
``docs/pipeline.md`` describes every check. PySpark is imported only when an audit runs.
"""

from __future__ import annotations

__all__ = ["CheckResult"]

from pipeline.result import CheckResult
