"""The event log: one JSON object per line, and many events of a kind written at once alike."""

from __future__ import annotations

import json
from pathlib import Path

from daemon.eventlog import EventLog


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_emit_many_writes_the_lines_emit_would(tmp_path: Path) -> None:
    rows = [{"topic": "t", "partition": p, "isr": (1, 2), "unclean": False} for p in range(5)] + [{}]
    one, many = (
        EventLog(tmp_path / "one.jsonl", "controller-1"),
        EventLog(tmp_path / "many.jsonl", "controller-1"),
    )
    for row in rows:
        one.emit("leader_and_isr_change", **row)
    assert many.emit_many("leader_and_isr_change", rows) == len(rows)
    one.close()
    many.close()
    written_one, written_many = _lines(tmp_path / "one.jsonl"), _lines(tmp_path / "many.jsonl")
    for line in (*written_one, *written_many):
        assert isinstance(line.pop("ts"), str)
    assert written_many == written_one
    assert [list(line)[:2] for line in written_many] == [["node", "kind"]] * len(rows)
    assert many.count == len(rows) and many.recent[-2]["partition"] == 4


def test_recent_keeps_the_last_events_of_a_big_batch() -> None:
    log = EventLog(None, "broker-1", keep_recent=3)
    log.emit("first")
    assert log.emit_many("change", ({"n": n} for n in range(10))) == 10
    assert [event.get("n") for event in log.recent] == [7, 8, 9]
    assert log.emit_many("change", []) == 0
