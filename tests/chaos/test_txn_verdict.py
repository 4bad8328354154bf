"""The transactional verdict (``chaos.txn_verdict``): a clean history passes, and each rule fails on
the one violation planted for it."""

from __future__ import annotations

from typing import Any

import pytest

from chaos.txn_verdict import judge_transactions

TX = "chaos-r1-txn"


def ended(n: int, outcome: str, values: list[str]) -> dict[str, Any]:
    return {"kind": "txn_ended", "transactional_id": TX, "topic": "chaos-txn", "txn": n, "values": values,
            "outcome": outcome, "intended": "commit", "error": None}  # fmt: skip


def seen(value: str, isolation: str, topic: str = "chaos-txn") -> dict[str, Any]:
    return {"kind": "txn_consumed", "topic": topic, "isolation": isolation, "partition": 0, "offset": 0,
            "value": value}  # fmt: skip


def clean() -> list[dict[str, Any]]:
    """Two committed transactions, one aborted, one unknown that did commit; a source topic of four
    acknowledged records all transformed once, its offsets committed at 2 and 2."""
    lines: list[dict[str, Any]] = [
        ended(0, "committed", ["a", "b"]),
        ended(1, "aborted", ["c", "d"]),
        ended(2, "committed", ["e"]),
        ended(3, "unknown", ["f", "g"]),
    ]
    for value in "abefg":
        lines.append(seen(value, "read_committed"))
    for value in "abcdefg":
        lines.append(seen(value, "read_uncommitted"))
    for i, (partition, offset) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)]):
        value = f"s{i}"
        lines.append({"kind": "produce_acked", "topic": "chaos", "acks": "all", "partition": partition,
                      "offset": offset, "value": value})  # fmt: skip
        lines.append({"kind": "consumed", "topic": "chaos", "partition": partition, "offset": offset,
                      "value": value})  # fmt: skip
        lines.append(seen(f"eos:{value}", "read_committed", "chaos-eos"))
    lines.append({"kind": "eos_ended", "group": "g", "inputs": [], "outcome": "committed", "error": None})
    lines.append({"kind": "eos_group_committed", "group": "g", "offsets": {"0": 2, "1": 2}})
    return lines


def test_a_clean_history_passes() -> None:
    verdict = judge_transactions(clean())
    assert verdict.ok and verdict.ran
    assert verdict.outcomes == {"committed": 2, "aborted": 1, "unknown": 1}
    assert verdict.transformed == 1


def test_no_transactional_lines_is_a_run_without_the_workload() -> None:
    verdict = judge_transactions([{"kind": "produce_acked", "topic": "chaos", "acks": "all", "value": "x"}])
    assert verdict.ok and not verdict.ran


@pytest.mark.parametrize(
    ("plant", "field", "expected"),
    [
        (lambda ls: ls.append(seen("c", "read_committed")), "aborted_visible", ["c"]),
        (lambda ls: ls.remove(seen("e", "read_committed")), "committed_missing", ["e"]),
        (lambda ls: ls.remove(seen("e", "read_uncommitted")), "committed_lost", ["e"]),
        (lambda ls: ls.remove(seen("g", "read_committed")), "partial", [f"{TX}#3"]),
        (lambda ls: ls.append(seen("eos:s1", "read_committed", "chaos-eos")), "duplicated", ["s1"]),
        (lambda ls: ls.remove(seen("eos:s3", "read_committed", "chaos-eos")), "untransformed", ["s3"]),
    ],
    ids=["aborted-visible", "committed-missing", "committed-lost", "partial", "duplicated", "untransformed"],
)
def test_each_rule_fails_on_its_planted_violation(plant: Any, field: str, expected: list[str]) -> None:
    lines = clean()
    plant(lines)
    verdict = judge_transactions(lines)
    assert not verdict.ok
    assert getattr(verdict, field)[: len(expected)] == expected


def test_offsets_committed_past_an_untransformed_input_or_short_of_a_transformed_one_fail() -> None:
    lines = clean()
    lines[-1] = {"kind": "eos_group_committed", "group": "g", "offsets": {"0": 1, "1": 2}}
    verdict = judge_transactions(lines)
    assert verdict.offsets_wrong == ["s1@0:1 (committed 1)"]


def test_an_earlier_runs_outputs_in_a_kept_topic_are_not_this_runs_duplicates() -> None:
    lines = clean()
    lines += [seen("eos:earlier-000001", "read_committed", "chaos-eos")] * 2
    assert judge_transactions(lines).ok


def test_a_loop_that_never_committed_leaves_its_inputs_untransformed() -> None:
    lines = [line for line in clean() if not str(line.get("value", "")).startswith("eos:")]
    lines = [line for line in lines if line["kind"] != "eos_ended"]
    lines[-1] = {"kind": "eos_group_committed", "group": "g", "offsets": {}}
    verdict = judge_transactions(lines)
    assert verdict.untransformed == ["s0", "s1", "s2", "s3"] and not verdict.ok
