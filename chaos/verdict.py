"""The run's own verdict over its history: was every acknowledged record read back, once, where it was
acknowledged? A quick check for the command's exit status; the full audit is the pipeline's.

One kind of duplicate is the client's doing, not the cluster's. librdkafka (2.10 and later) drops a
broker that is no longer in the metadata, and hands the messages of its unanswered requests back to
their partitions, to be sent again to the new leader without counting a retry. A leader that was
paused past its session timeout is such a broker: a batch it had appended, and a follower had
copied, survives in the new leader's log, and the resent copy lands after it. Such duplicates are
reported as ``resent`` and do not fail the verdict; any other duplicate does.

Pure: it takes the lines of ``history.jsonl`` (and, to count faults, of ``events.jsonl``) as dicts.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Place = tuple[str, int, int]
"""(topic, partition, offset)"""


@dataclass(frozen=True)
class Verdict:
    acked: int
    failed: int
    consumed: int
    faults: int
    """Faults injected; a ``resume`` ends a pause and is not counted."""
    lost: list[str]
    """Acknowledged values the read-back did not find."""
    duplicated: list[str]
    """Values read back at more than one place."""
    resent: list[str]
    """The duplicated values a producer resend explains: every copy in one partition, and, when the
    value was acknowledged, the acknowledged copy the last one."""
    misplaced: list[str]
    """Acknowledged values whose acknowledged place holds another value, or that were read back only
    elsewhere. A value lost with another one in its place is both lost and misplaced."""
    divergent: list[Place]
    """Places read back with two different values (two reads that disagree)."""
    acked_acks1: int = 0
    """Values acknowledged with acks=1 (the second topic): the leader alone had them."""
    lost_acks1: list[str] = field(default_factory=list)
    """acks=1 values not read back where they were acknowledged: lost with a fenced leader, as acks=1
    allows. Reported, never failing the run."""
    group_consumed: int = 0
    """Records the run's consumer group consumed (0: the run had no group)."""
    group_missed: list[str] = field(default_factory=list)
    """Acknowledged acks=all values the consumer group never consumed."""
    commits_backwards: list[str] = field(default_factory=list)
    """Commits the coordinator acknowledged below an earlier acknowledged commit of that partition."""

    @property
    def unexplained_duplicates(self) -> list[str]:
        resent = set(self.resent)
        return [v for v in self.duplicated if v not in resent]

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.unexplained_duplicates
            or self.misplaced
            or self.divergent
            or self.group_missed
            or self.commits_backwards
        )


def judge(lines: Iterable[Mapping[str, Any]]) -> Verdict:
    acked: dict[str, Place] = {}
    loose: dict[str, Place] = {}
    idempotent: set[str] = set()
    failed = consumed = faults = 0
    found: dict[str, set[Place]] = defaultdict(set)
    at: dict[Place, set[str]] = defaultdict(set)
    group = _GroupHistory()
    for line in lines:
        kind = line.get("kind")
        group.add(line)
        if kind == "produce_acked":
            place = (line["topic"], line["partition"], line["offset"])
            (acked if line.get("acks", "all") == "all" else loose)[line["value"]] = place
            if line.get("idempotent"):
                idempotent.add(line["value"])
        elif kind == "produce_failed":
            failed += 1
        elif kind == "consumed":
            consumed += 1
            place = (line["topic"], line["partition"], line["offset"])
            found[line["value"]].add(place)
            at[place].add(line["value"])
        elif kind == "fault_injected" and line.get("fault") != "resume":
            faults += 1
    lost = sorted(v for v in acked if v not in found)
    misplaced = sorted(
        v for v, place in acked.items() if v not in at.get(place, ()) and (at.get(place) or v in found)
    )
    duplicated = sorted(v for v, places in found.items() if len(places) > 1)
    return Verdict(
        acked=len(acked),
        failed=failed,
        consumed=consumed,
        faults=faults,
        lost=lost,
        duplicated=duplicated,
        # an idempotent producer's resends are deduplicated by the leader: no copy is explained
        resent=[v for v in duplicated if v not in idempotent and _resent(found[v], acked.get(v))],
        misplaced=misplaced,
        divergent=sorted(p for p, values in at.items() if len(values) > 1),
        acked_acks1=len(loose),
        lost_acks1=sorted(v for v, place in loose.items() if v not in at.get(place, ())),
        group_consumed=group.consumed,
        group_missed=sorted(v for v in acked if v not in group.values) if group.active else [],
        commits_backwards=group.backwards,
    )


class _GroupHistory:
    """The consumer group's lines: what it consumed, and its acknowledged commits in order."""

    def __init__(self) -> None:
        self.active = False
        self.consumed = 0
        self.values: set[str] = set()
        self.committed: dict[tuple[str, int], int] = {}
        self.backwards: list[str] = []

    def add(self, line: Mapping[str, Any]) -> None:
        kind = line.get("kind")
        if kind == "group_assigned":
            self.active = True
        elif kind == "group_consumed":
            self.active = True
            self.consumed += 1
            if line.get("value") is not None:
                self.values.add(line["value"])
        elif kind == "group_committed":
            key = (line["topic"], line["partition"])
            previous = self.committed.get(key, -1)
            if line["offset"] < previous:
                self.backwards.append(
                    f"{key[0]}-{key[1]}: {line['offset']} committed by {line['member']} after {previous}"
                )
            self.committed[key] = max(previous, line["offset"])


def _resent(places: set[Place], acked_at: Place | None) -> bool:
    if len({(topic, partition) for topic, partition, _ in places}) > 1:
        return False
    return acked_at is None or acked_at == max(places)


def read_lines(*paths: Path) -> Iterator[dict[str, Any]]:
    """The JSON lines of each existing file; a torn last line (a killed writer) is skipped."""
    for path in paths:
        if not path.exists():
            continue
        with path.open(encoding="utf-8") as f:
            for line in f:
                try:
                    yield json.loads(line)
                except ValueError:
                    continue
