"""Words for people: a violation as a short phrase, and counts with their plurals."""

from __future__ import annotations

import json
from typing import Any

EXAMPLE_CHARS = 120


def phrase(example: dict[str, Any] | str, limit: int = EXAMPLE_CHARS) -> str:
    """An example violation as a short phrase: its time of day first, then ``field value`` pairs in the
    report's order (lists compact), cut at ``limit`` characters."""
    if isinstance(example, str):
        return example
    parts = []
    ts = example.get("ts")
    if isinstance(ts, str) and "T" in ts:
        parts.append(ts.split("T", 1)[1].rstrip("Z")[:12])
    for key, value in example.items():
        if key == "ts" or value is None:
            continue
        shown = json.dumps(value, separators=(",", ":")) if isinstance(value, (list, dict)) else value
        parts.append(f"{key} {shown}")
    text = ", ".join(parts)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 event log``, ``2 event logs``; ``many`` for irregular plurals."""
    return f"{count} {word if count == 1 else many or word + 's'}"
