"""Reading a launcher-made local cluster's event logs in tests (the ``directory`` fixture that brings
such a cluster down is in ``tests/conftest.py``)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EMIT = re.compile(r"""\bemit\(\s*"([a-z_]+)"(?:\s+if\s+[^,]+?\s+else\s+"([a-z_]+)")?""")


def events(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The event log of a ``cluster.json`` process entry (empty before the daemon wrote one)."""
    path = Path(entry["events"])
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def emitted(package: str) -> set[str]:
    """The event kinds the sources of ``package`` emit, read off their ``emit("kind")`` calls."""
    kinds: set[str] = set()
    for path in (REPO / package).rglob("*.py"):
        for match in EMIT.finditer(path.read_text()):
            kinds.update(k for k in match.groups() if k)
    return kinds
