"""What the benchmarks measure with: percentiles and ratios, a process's CPU and memory, a scrape.

One copy of each helper the benchmarks share: statistics over samples (:func:`percentile`,
:func:`summary`, :func:`ratio`), CPU and memory figures from Linux's ``/proc`` (:func:`cpu_seconds`,
:func:`machine_busy_seconds`, :func:`cpu_stall_us`, :func:`status_kib`, :func:`peak_rss_mib`), and a
daemon's Prometheus endpoint read into numbers (:func:`scrape`).
"""

from __future__ import annotations

import contextlib
import math
import os
import urllib.request
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "cpu_seconds",
    "cpu_stall_us",
    "machine_busy_seconds",
    "peak_rss_mib",
    "percentile",
    "ratio",
    "scrape",
    "stall_share",
    "status_kib",
    "summary",
]

# -- statistics


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(values: Sequence[float]) -> dict[str, float | int | None]:
    """Count, p50, p99, max and mean, to 3 decimals; None for each figure of no values."""
    if not values:
        return {"n": 0, "p50": None, "p99": None, "max": None, "mean": None}
    return {
        "n": len(values),
        "p50": round(percentile(values, 0.5), 3),
        "p99": round(percentile(values, 0.99), 3),
        "max": round(max(values), 3),
        "mean": round(sum(values) / len(values), 3),
    }


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator`` to 2 decimals, or None when either is missing (or zero below)."""
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, 2)


# -- CPU and memory, from /proc


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU a process has used so far: unlike wall time, not inflated by other load.
    None once the process is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float | None:
    """CPU time all cores spent not idle (from /proc/stat)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + fields[4]
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def cpu_stall_us() -> int | None:
    """Microseconds some runnable task waited for a CPU (PSI), to tell how contended a run was."""
    try:
        some = Path("/proc/pressure/cpu").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    return int(some.rsplit("total=", 1)[1])


def stall_share(before: int | None, after: int | None, seconds: float) -> float | None:
    """The share of ``seconds`` during which some task was waiting for a CPU."""
    if before is None or after is None or seconds <= 0:
        return None
    return round((after - before) / 1e6 / seconds, 2)


def status_kib(field: str, pid: int | str = "self") -> int:
    """A memory figure of ``/proc/PID/status`` in KiB (``VmRSS``, ``VmHWM``, ...).

    Raises ``OSError`` when the process is gone and ``KeyError`` when the field is absent."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def peak_rss_mib(pid: int) -> float | None:
    """A process's peak resident memory (VmHWM) in MiB, or None once it is gone."""
    try:
        return round(status_kib("VmHWM", pid) / 1024, 1)
    except (OSError, KeyError):
        return None


# -- Prometheus


def scrape(port: int) -> dict[str, float]:
    """A daemon's unlabelled Prometheus samples on ``port`` (``/metrics``): name -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, _, value = line.rpartition(" ")
            with contextlib.suppress(ValueError):
                values[name] = float(value)
    return values
