"""The run's own verdict over a synthetic history: lost, duplicated, misplaced, divergent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chaos.verdict import judge, read_lines

TOPIC = "chaos"


def acked(value: str, partition: int, offset: int) -> dict[str, Any]:
    return {"kind": "produce_acked", "topic": TOPIC, "partition": partition, "offset": offset, "value": value}


def consumed(value: str, partition: int, offset: int) -> dict[str, Any]:
    return {"kind": "consumed", "topic": TOPIC, "partition": partition, "offset": offset, "value": value}


def failed(value: str) -> dict[str, Any]:
    return {
        "kind": "produce_failed",
        "topic": TOPIC,
        "partition": None,
        "value": value,
        "error": "_MSG_TIMED_OUT",
    }


def fault(kind: str) -> dict[str, Any]:
    return {"kind": "fault_injected", "fault": kind, "target": "broker-1", "role": "broker", "detail": None}


def test_a_clean_history_is_ok_and_failed_records_may_or_may_not_be_there() -> None:
    lines = [
        fault("pause"),
        acked("v0", 0, 0),
        acked("v1", 1, 0),
        failed("v2"),
        failed("v3"),
        fault("resume"),
        consumed("v0", 0, 0),
        consumed("v2", 0, 1),
        consumed("v1", 1, 0),
        consumed("earlier-run", 2, 0),
    ]
    verdict = judge(lines)
    assert verdict.ok
    assert (verdict.acked, verdict.failed, verdict.consumed, verdict.faults) == (2, 2, 4, 1)


def test_lost_duplicated_and_misplaced_records_are_found() -> None:
    lines = [
        acked("kept", 0, 0),
        acked("lost", 0, 1),
        acked("twice", 0, 2),
        acked("moved", 1, 0),
        acked("overwritten", 2, 0),
        failed("retried"),
        consumed("kept", 0, 0),
        consumed("twice", 0, 2),
        consumed("twice", 0, 3),
        consumed("moved", 1, 5),
        consumed("retried", 1, 6),
        consumed("retried", 1, 7),
        consumed("other", 2, 0),
    ]
    verdict = judge(lines)
    assert not verdict.ok
    assert verdict.lost == ["lost", "overwritten"]
    assert verdict.duplicated == ["retried", "twice"]
    assert verdict.resent == ["retried"], "a failed record stored twice by a resend is no fault"
    assert verdict.unexplained_duplicates == ["twice"], "the acknowledged copy came first"
    assert verdict.misplaced == ["moved", "overwritten"]
    assert verdict.divergent == []


def test_a_resend_after_a_fenced_leader_is_not_held_against_the_cluster() -> None:
    resend = [acked("v", 0, 8), consumed("v", 0, 7), consumed("v", 0, 8)]
    verdict = judge(resend)
    assert verdict.duplicated == verdict.resent == ["v"] and verdict.ok
    elsewhere = [acked("v", 0, 8), consumed("v", 1, 3), consumed("v", 0, 8)]
    assert judge(elsewhere).resent == [] and not judge(elsewhere).ok


def test_two_reads_that_disagree_on_a_place_are_divergent() -> None:
    verdict = judge([acked("a", 0, 0), consumed("a", 0, 0), consumed("b", 0, 0)])
    assert verdict.divergent == [(TOPIC, 0, 0)]
    assert not verdict.ok


def test_read_lines_skips_missing_files_and_a_torn_last_line(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    history.write_text('{"kind":"produce_acked"}\n{"kind":"consu')
    assert list(read_lines(history, tmp_path / "missing.jsonl")) == [{"kind": "produce_acked"}]


def test_an_acks1_record_lost_with_its_leader_is_reported_and_does_not_fail_the_run() -> None:
    loose = [
        {**acked("r-acks1-000000", 0, 0), "acks": "1", "topic": "chaos-acks1"},
        {**acked("r-acks1-000001", 0, 1), "acks": "1", "topic": "chaos-acks1"},
        {**consumed("r-acks1-000000", 0, 0), "topic": "chaos-acks1"},
        {**consumed("other", 0, 1), "topic": "chaos-acks1"},  # the new leader wrote its own offset 1
    ]
    verdict = judge([acked("a", 0, 0), consumed("a", 0, 0), *loose])
    assert verdict.ok
    assert (verdict.acked, verdict.acked_acks1, verdict.lost_acks1) == (1, 2, ["r-acks1-000001"])


def group_line(kind: str, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "member": "member-0", "group": "chaos-run", "topic": TOPIC, **fields}


def test_the_group_must_consume_every_acknowledged_record_and_never_commit_backwards() -> None:
    lines = [
        acked("v0", 0, 0),
        acked("v1", 0, 1),
        group_line("group_assigned", partitions=[0]),
        group_line("group_consumed", partition=0, offset=0, value="v0"),
        group_line("group_committed", partition=0, offset=1),
        group_line("group_committed", partition=0, offset=1),
        consumed("v0", 0, 0),
        consumed("v1", 0, 1),
    ]
    verdict = judge(lines)
    assert verdict.group_missed == ["v1"] and not verdict.ok
    lines += [
        group_line("group_consumed", partition=0, offset=1, value="v1"),
        group_line("group_committed", partition=0, offset=2),
    ]
    assert judge(lines).ok
    backwards = judge([*lines, group_line("group_committed", partition=0, offset=1)])
    assert backwards.commits_backwards == ["chaos-0: 1 committed by member-0 after 2"]
    assert not backwards.ok


def test_a_run_without_a_group_judges_no_group() -> None:
    verdict = judge([acked("v0", 0, 0), consumed("v0", 0, 0)])
    assert verdict.ok and verdict.group_missed == [] and verdict.group_consumed == 0


def test_an_idempotent_producers_duplicates_are_never_explained_as_resends() -> None:
    lines = [
        {**acked("v0", 0, 1), "idempotent": True},
        consumed("v0", 0, 0),
        consumed("v0", 0, 1),
    ]
    verdict = judge(lines)
    assert verdict.duplicated == ["v0"] and verdict.resent == [] and not verdict.ok
    plain = judge([acked("v0", 0, 1), consumed("v0", 0, 0), consumed("v0", 0, 1)])
    assert plain.resent == ["v0"] and plain.ok
