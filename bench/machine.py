"""The machine a benchmark ran on, recorded with every result so figures can be compared honestly."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def write_report(out: Path, report: dict[str, Any]) -> None:
    """Write one benchmark's JSON results (creating ``bench/results/`` if needed) and say where."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")
