"""The run's verdict on its transactional workload, from ``history.jsonl`` alone.

* **isolation**: no value of an aborted transaction is visible to read_committed; every committed
  transaction is visible whole; a transaction whose outcome the client never learned (``unknown``) is
  visible whole or not at all;
* **durability**: no value of a committed transaction is missing from the read_uncommitted read-back;
* **exactly once**: every acknowledged input of the transform loop is in its committed output once,
  and the offsets the loop committed with its transactions cover exactly the inputs it transformed
  (each input below the committed offset of its partition has its output, none at or above it).

Pure: it takes the lines as dicts, as :func:`chaos.verdict.judge` does.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TxnVerdict", "judge_transactions"]

OUTPUT_PREFIX = "eos:"


@dataclass(frozen=True)
class TxnVerdict:
    outcomes: dict[str, int] = field(default_factory=dict)
    """Outcome (committed, aborted, unknown) -> transactions of the producer with it."""
    aborted_visible: list[str] = field(default_factory=list)
    committed_missing: list[str] = field(default_factory=list)
    """Values of committed transactions read_committed did not see."""
    committed_lost: list[str] = field(default_factory=list)
    """Values of committed transactions not even in the read_uncommitted read-back."""
    partial: list[str] = field(default_factory=list)
    """Transactions (``<id>#<n>``) read_committed saw in part."""
    transformed: int = 0
    """Transactions the transform loop committed."""
    duplicated: list[str] = field(default_factory=list)
    """Inputs whose output read_committed saw more than once."""
    untransformed: list[str] = field(default_factory=list)
    """Acknowledged inputs with no committed output."""
    offsets_wrong: list[str] = field(default_factory=list)
    """Inputs on the wrong side of the offset the loop committed for their partition."""

    @property
    def ran(self) -> bool:
        return bool(self.outcomes) or self.transformed > 0

    @property
    def ok(self) -> bool:
        return not (
            self.aborted_visible
            or self.committed_missing
            or self.committed_lost
            or self.partial
            or self.duplicated
            or self.untransformed
            or self.offsets_wrong
        )


def judge_transactions(lines: Iterable[Mapping[str, Any]]) -> TxnVerdict:
    ended: list[Mapping[str, Any]] = []
    visible: dict[str, set[str]] = defaultdict(set)
    """isolation -> values read from the producer's topic"""
    outputs: Counter[str] = Counter()
    sources: dict[str, tuple[int, int]] = {}
    """input value -> (partition, offset), from the read-back of the source topic"""
    acked: dict[str, str] = {}
    """input value -> its topic"""
    committed_offsets: dict[int, int] | None = None
    source_topic = None
    transformed = 0
    looped = False
    """Whether the transform loop ran at all (it must then have transformed every acknowledged input)."""
    for line in lines:
        kind = line.get("kind")
        if kind == "txn_ended":
            ended.append(line)
        elif kind == "eos_ended":
            looped = True
            transformed += line["outcome"] == "committed"
        elif kind == "eos_group_committed":
            looped = True
            committed_offsets = {int(p): o for p, o in line["offsets"].items()}
        elif kind == "txn_consumed":
            value = line["value"]
            if value.startswith(OUTPUT_PREFIX):
                if line["isolation"] == "read_committed":
                    outputs[value.removeprefix(OUTPUT_PREFIX)] += 1
            else:
                visible[line["isolation"]].add(value)
        elif kind == "produce_acked" and line.get("acks") == "all":
            acked[line["value"]] = line["topic"]
            source_topic = line["topic"]
        elif kind == "consumed" and line.get("topic") == source_topic:
            sources[line["value"]] = (line["partition"], line["offset"])
    verdict = _isolation(ended, visible)
    eos: dict[str, Any] = _exactly_once(outputs, acked, sources, committed_offsets) if looped else {}
    return TxnVerdict(**verdict, transformed=transformed, **eos)


def _isolation(ended: list[Mapping[str, Any]], visible: Mapping[str, set[str]]) -> dict[str, Any]:
    committed_view, uncommitted_view = (
        visible.get("read_committed", set()),
        visible.get("read_uncommitted", set()),
    )
    out: dict[str, Any] = {
        "outcomes": dict(Counter(line["outcome"] for line in ended)),
        "aborted_visible": [],
        "committed_missing": [],
        "committed_lost": [],
        "partial": [],
    }
    for line in ended:
        values = line["values"]
        seen = [v for v in values if v in committed_view]
        if 0 < len(seen) < len(values):
            out["partial"].append(f"{line['transactional_id']}#{line['txn']}")
        if line["outcome"] == "aborted":
            out["aborted_visible"] += seen
        elif line["outcome"] == "committed":
            out["committed_missing"] += [v for v in values if v not in committed_view]
            out["committed_lost"] += [v for v in values if v not in uncommitted_view]
    return out


def _exactly_once(
    outputs: Counter[str],
    acked: Mapping[str, str],
    sources: Mapping[str, tuple[int, int]],
    committed: Mapping[int, int] | None,
) -> dict[str, list[str]]:
    # this run's inputs only: on a cluster kept from an earlier run, the topics hold that run's too, and
    # this run's loop (a new group) transforms them again
    duplicated = sorted(v for v in acked if outputs[v] > 1)
    untransformed = sorted(v for v in acked if v not in outputs)
    wrong: list[str] = []
    if committed is not None:
        for value, (partition, offset) in sources.items():
            below = offset < committed.get(partition, 0)
            if below != (value in outputs):
                wrong.append(f"{value}@{partition}:{offset} (committed {committed.get(partition, 0)})")
    return {"duplicated": duplicated, "untransformed": untransformed, "offsets_wrong": sorted(wrong)}
