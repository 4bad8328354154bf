"""What the live view picks out of the event logs, and how it says it in one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cluster import live_view
from tests.support.event_logs import emitted

REPO = Path(__file__).resolve().parents[2]


def documented_examples() -> dict[str, dict]:
    """The JSON example of each kind in docs/events.md, by kind."""
    text = (REPO / "docs" / "events.md").read_text()
    examples = {}
    for line in re.findall(r"^(\{.*\})$", text, re.M):
        event = json.loads(line)
        examples.setdefault(event["kind"], event)
    return examples


def test_every_kind_the_view_shows_is_one_the_daemons_emit() -> None:
    assert sorted(live_view.INTERESTING - (emitted("broker") | emitted("controller"))) == []


@pytest.mark.parametrize("kind", sorted(live_view._SUMMARIES))
def test_summaries_read_the_documented_fields(kind: str) -> None:
    example = documented_examples().get(kind)
    assert example is not None, f"docs/events.md has no JSON example of {kind}"
    text = live_view.summary(example)
    assert "None" not in text and "=" not in text, text


def test_elections_and_stale_rejections_are_picked_out() -> None:
    election = {"kind": "leader_and_isr_change", "reason": "offline election", "topic": "t", "partition": 0}
    created = {**election, "reason": "new partition"}
    stale = {"kind": "control_request_handled", "error": "STALE_BROKER_EPOCH"}
    fine = {"kind": "control_request_handled", "error": "NONE"}
    assert live_view.interesting(election) and not live_view.interesting(created)
    assert live_view.interesting(stale) and not live_view.interesting(fine)
    assert not live_view.interesting({"kind": "control_request_handled", "error": None})


def test_a_follower_that_cut_nothing_is_not_news() -> None:
    same = {"kind": "follower_truncated", "log_end_offset_before": 4, "log_end_offset": 4}
    assert not live_view.interesting(same)
    assert live_view.interesting({**same, "log_end_offset": 2})


def test_the_tail_reads_whole_lines_only_and_keeps_the_newest(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    state = {"processes": [{"events": str(log)}]}
    tail = live_view.EventTail(state)
    line = {"ts": "2026-01-01T00:00:00.000001Z", "node": "controller-1", "kind": "controller_elected"}
    log.write_text(json.dumps(line) + "\n" + '{"ts": "2026-01-01T00:00:01Z", "kind": "broker_ch')
    tail.poll()
    assert [e["kind"] for e in tail.recent] == ["controller_elected"]
    with log.open("a") as f:
        f.write('ange", "new": [1]}\nnot json\n')
        for i in range(live_view.EVENTS_SHOWN + 3):
            later = {**line, "ts": f"2026-01-01T00:00:02.{i:06d}Z", "kind": "registered", "broker_epoch": i}
            f.write(json.dumps(later) + "\n")
    tail.poll()
    assert len(tail.recent) == live_view.EVENTS_SHOWN
    assert "broker_change" not in [e["kind"] for e in tail.recent], "pushed out by newer lines"
    assert tail.recent[-1]["broker_epoch"] == live_view.EVENTS_SHOWN + 2
