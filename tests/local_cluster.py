"""Reading a launcher-made local cluster's event logs in tests (the ``directory`` fixture that brings
such a cluster down is in ``tests/conftest.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def events(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The event log of a ``cluster.json`` process entry (empty before the daemon wrote one)."""
    path = Path(entry["events"])
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
