"""The JSON-lines event log both daemons write: one object per line with ``ts``, ``node`` and ``kind``.

It is the input of the PySpark audit (``pipeline/``) and of the live view, and chaos runs write their
faults and workload histories with it too. So every line is flushed as it is written (a killed daemon
loses nothing it already reported), and writes from several threads never interleave.
``docs/events.md`` lists the kinds and their fields.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

__all__ = ["EventLog", "format_ts"]


def format_ts(seconds: float) -> str:
    """UTC ISO-8601 with microseconds and a ``Z``: sortable as text and parsed by Spark as a timestamp."""
    whole = int(seconds)
    micros = round((seconds - whole) * 1_000_000)
    if micros == 1_000_000:
        whole, micros = whole + 1, 0
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{micros:06d}Z"


def _default(value: Any) -> Any:
    """Sets, tuples and enums become lists and names; anything else its string."""
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, tuple):
        return list(value)
    name = getattr(value, "name", None)
    return name if isinstance(name, str) else str(value)


_ENCODER = json.JSONEncoder(default=_default, separators=(",", ":"))
"""Shared: ``json.dumps`` with options builds an encoder per call."""


class EventLog:
    """Appends events for one node (``controller-1``, ``broker-2``); without a path it only counts them.

    ``recent`` keeps the last few events in memory for status views and tests.
    """

    def __init__(self, path: str | Path | None, node: str, *, keep_recent: int = 200) -> None:
        self.node = node
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")
        self.count = 0
        self._keep = keep_recent
        self.recent: list[dict[str, Any]] = []

    def emit(self, kind: str, /, **fields: Any) -> dict[str, Any]:
        event = {"ts": format_ts(time.time()), "node": self.node, "kind": kind, **fields}
        line = _ENCODER.encode(event)
        with self._lock:
            self.count += 1
            self.recent.append(event)
            if len(self.recent) > self._keep:
                del self.recent[: len(self.recent) - self._keep]
            if self._file is not None:
                self._file.write(line + "\n")
                self._file.flush()
        return event

    def emit_many(self, kind: str, rows: Iterable[dict[str, Any]]) -> int:
        """``emit`` of many events of one kind, written to the file at once (a controlled shutdown
        records a hundred thousand partition changes: one write, not one flush each); how many."""
        head = {"ts": format_ts(time.time()), "node": self.node, "kind": kind}  # written at once: one time
        rows = list(rows)
        if not rows:
            return 0
        encode = _ENCODER.encode
        # Each line is the head's JSON with the row's fields appended: the same bytes as encoding the
        # merged dict (the head's keys come first, as ``emit`` writes them), without building it.
        prefix = encode(head)[:-1]
        lines = [prefix + ("," + body[1:] if len(body) > 2 else "}") for body in map(encode, rows)]
        kept = [{**head, **fields} for fields in rows[-self._keep :]]
        with self._lock:
            self.count += len(rows)
            self.recent.extend(kept)
            if len(self.recent) > self._keep:
                del self.recent[: len(self.recent) - self._keep]
            if self._file is not None:
                self._file.write("\n".join(lines) + "\n")
                self._file.flush()
        return len(rows)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
