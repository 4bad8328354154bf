"""How long the cluster was without a controller, and partitions without a working leader, per fault.

From the daemons' event logs and the run's faults (pure: lines as dicts):

- **without a controller**: no controller is active. A controller is active from its
  ``controller_elected`` until it resigns or starts again, and also stops counting as active the moment
  a fault takes it down or cuts it off (kill, bounce, restart, pause, isolate, isolate-zookeeper),
  since from then on it cannot act, though it does not know it yet;
- **leaderless**: a partition whose state names no leader (-1), or whose leader a fault took down or
  cut off, until a controller writes a newer leader epoch for it (or names a leader again).

Each interval is put down to the fault in force when it began (``none`` when no fault was), and the
longest per fault kind is reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from chaos.safety import event_time, fault_intervals

Faults = list[tuple[datetime, datetime, str, str]]
"""(injected, healed, fault, target), as ``chaos.safety.fault_intervals`` reads them."""

DISABLING = frozenset({"kill", "bounce", "restart", "pause", "isolate", "isolate-zookeeper"})
"""Faults after which the target cannot act as controller or serve as leader."""


def _cause(at: datetime, faults: Faults) -> str:
    in_force = [f for s, e, f, _ in faults if s <= at <= e]
    return in_force[-1] if in_force else "none"


def availability(
    daemon_lines: Iterable[Mapping[str, Any]], run_lines: Iterable[Mapping[str, Any]]
) -> dict[str, dict[str, float]]:
    """Fault kind -> {"without_controller_s", "leaderless_s"}: the longest of each put down to it."""
    runs = sorted(run_lines, key=event_time)
    faults = fault_intervals(runs)
    start = next((event_time(r) for r in runs if r.get("kind") == "run_started"), None)
    lines = sorted(daemon_lines, key=event_time)
    end = next((event_time(r) for r in runs if r.get("kind") == "run_finished"), None)
    if end is None:  # still running: up to the latest line
        end = max((event_time(x) for x in (*lines, *runs)), default=None)
    report: dict[str, dict[str, float]] = {
        fault: {"without_controller_s": 0.0, "leaderless_s": 0.0} for _, _, fault, _ in faults
    }

    def note(key: str, began: datetime, ended: datetime) -> None:
        seconds = round((ended - began).total_seconds(), 3)
        entry = report.setdefault(_cause(began, faults), {"without_controller_s": 0.0, "leaderless_s": 0.0})
        entry[key] = max(entry[key], seconds)

    for began, ended in _controller_gaps(lines, faults, start, end):
        note("without_controller_s", began, ended)
    for began, ended in _leaderless(lines, faults, end):
        note("leaderless_s", began, ended)
    return report


def _controller_gaps(
    lines: list[Mapping[str, Any]],
    faults: Faults,
    start: datetime | None,
    end: datetime | None,
) -> list[tuple[datetime, datetime]]:
    changes: list[tuple[datetime, str, bool]] = [
        (event_time(line), line["node"], line["kind"] == "controller_elected")
        for line in lines
        if line.get("kind") in ("controller_elected", "controller_resigned", "controller_started")
    ]
    controllers = {node for _, node, _ in changes}
    changes += [
        (s, target, False) for s, _, fault, target in faults if fault in DISABLING and target in controllers
    ]
    changes.sort(key=lambda c: c[0])
    active: dict[str, bool] = {}
    gaps: list[tuple[datetime, datetime]] = []
    gap_began: datetime | None = None
    for when, node, elected in changes:
        active[node] = elected
        none = not any(active.values())
        if none and gap_began is None:
            gap_began = when
        elif not none and gap_began is not None:
            gaps.append((gap_began, when))
            gap_began = None
    if gap_began is not None and end is not None:
        gaps.append((gap_began, end))
    if start is not None:  # the cluster's start-up, before the run, is not the faults' doing
        gaps = [(max(began, start), ended) for began, ended in gaps if ended > start]
    return gaps


def _leaderless(
    lines: list[Mapping[str, Any]],
    faults: Faults,
    end: datetime | None,
) -> list[tuple[datetime, datetime]]:
    """Intervals from a partition losing a working leader to a newer leader epoch being written."""
    events: list[tuple[datetime, int, Mapping[str, Any]]] = [
        (event_time(line), 1, line) for line in lines if line.get("kind") == "leader_and_isr_change"
    ]
    events += [
        (s, 0, {"fault": fault, "target": target}) for s, _, fault, target in faults if fault in DISABLING
    ]
    events.sort(key=lambda e: (e[0], e[1]))
    state: dict[tuple[str, int], tuple[int, int]] = {}
    """partition -> (leader broker id, leader epoch) as last written."""
    lost: dict[tuple[str, int], tuple[datetime, int]] = {}
    """partition -> (since when, the leader epoch in force then) for partitions without a working leader."""
    out: list[tuple[datetime, datetime]] = []
    for when, order, item in events:
        if order == 0:  # a fault: partitions led by its target lose their leader now
            target = str(item["target"])
            if target.startswith("broker-"):
                victim = int(target.rsplit("-", 1)[1])
                for tp, (leader, epoch) in state.items():
                    if leader == victim and tp not in lost:
                        lost[tp] = (when, epoch)
            continue
        tp = (item["topic"], item["partition"])
        leader, epoch = item["leader"], item["leader_epoch"]
        if tp in lost and leader >= 0 and epoch > lost[tp][1]:
            out.append((lost.pop(tp)[0], when))
        if leader < 0 and tp not in lost:
            lost[tp] = (when, epoch)
        state[tp] = (leader, epoch)
    if end is not None:
        out += [(since, end) for since, _ in lost.values()]
    return out
