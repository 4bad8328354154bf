"""How long the cluster was without a controller, and partitions without a working leader, per fault.

From the daemons' event logs and the run's faults (pure: lines as dicts):

- **without a controller**: no controller is active. A controller is active from its
  ``controller_elected`` until it resigns or starts again, except while a fault holds it down or cuts
  it off (kill, bounce, restart, pause, isolate, isolate-zookeeper): then it cannot act, though it
  does not know it yet;
- **leaderless**: a partition whose state names no leader (-1), or whose leader a fault took down or
  cut off, until a controller writes a newer leader epoch for it, a broker takes its leadership again
  (``become_leader``), or the fault is healed with that leader still in place.

Each interval is put down to the fault in force when it began (``none`` when no fault was), and the
longest per fault kind is reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from chaos.safety import event_time, fault_intervals
from chaos.schedule import ENDING

Faults = list[tuple[datetime, datetime, str, str]]
"""(injected, healed, fault, target), as ``chaos.safety.fault_intervals`` reads them."""

HOLDING = frozenset({"pause", "isolate", "isolate-zookeeper"})
"""Faults that hold the target down or cut it off until healed; its session may outlive them."""
DISABLING = ENDING | HOLDING
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

    for began, ended in _controller_gaps(lines, faults, start, end, _kafka_holders(runs)):
        note("without_controller_s", began, ended)
    for began, ended in _leaderless(lines, faults, end):
        note("leaderless_s", began, ended)
    return report


def _kafka_holders(runs: list[Mapping[str, Any]]) -> list[tuple[datetime, str, str]]:
    """The run's samples of ``/controller`` as a Kafka broker's belief (it keeps no log of ours): it
    believes itself active from the sample that found it until the next sample of another holder. Named
    as the run names its node (``kafka-<id>``), so faults on it count as on any controller."""
    out: list[tuple[datetime, str, str]] = []
    holder: str | None = None
    for line in runs:
        if line.get("kind") != "controller_seen":
            continue
        if holder is not None:
            out.append((event_time(line), holder, "doubts"))
            holder = None
        if line.get("implementation") == "kafka":
            holder = f"kafka-{line['controller_id']}"
            out.append((event_time(line), holder, "believes"))
    return out


def _controller_gaps(
    lines: list[Mapping[str, Any]],
    faults: Faults,
    start: datetime | None,
    end: datetime | None,
    kafka: Sequence[tuple[datetime, str, str]] = (),
) -> list[tuple[datetime, datetime]]:
    """Intervals in which no controller was active: one that believes itself active (elected, and
    not resigned or started again since) and that no fault holds down or cuts off right then. A
    controller whose session outlived the fault (a cut shorter than the session, or a quorum loss
    meanwhile) counts again once the fault is healed."""
    changes: list[tuple[datetime, str, str]] = [
        (event_time(line), line["node"], "believes" if line["kind"] == "controller_elected" else "doubts")
        for line in lines
        if line.get("kind") in ("controller_elected", "controller_resigned", "controller_started")
    ]
    changes += kafka
    controllers = {node for _, node, _ in changes}
    for began, healed, fault, target in faults:
        if fault in ENDING and target in controllers:
            changes.append((began, target, "doubts"))
        elif fault in HOLDING and target in controllers:
            changes += [(began, target, "held"), (healed, target, "freed")]
    changes.sort(key=lambda c: c[0])
    believes: dict[str, bool] = {}
    held: dict[str, bool] = {}
    gaps: list[tuple[datetime, datetime]] = []
    gap_began: datetime | None = None
    for when, node, change in changes:
        if change in ("believes", "doubts"):
            believes[node] = change == "believes"
        else:
            held[node] = change == "held"
        none = not any(b and not held.get(n, False) for n, b in believes.items())
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
    """Intervals from a partition losing a working leader to a newer leader epoch being written, or
    to a holding fault being healed with the same leader still in place (its session outlived it)."""
    tracker = _Leadership()
    for when, order, item in _leadership_events(lines, faults):
        if order == 0:
            tracker.taken_down(item["victim"], when)
        elif order == 1:
            tracker.back(item["back"], when)
        elif item["kind"] == "become_leader":
            tracker.led((item["topic"], item["partition"]), item["leader_epoch"], when)
        else:
            tracker.written((item["topic"], item["partition"]), item["leader"], item["leader_epoch"], when)
    if end is not None:
        tracker.out += [(since, end) for since, _ in tracker.lost.values()]
    return tracker.out


def _leadership_events(
    lines: list[Mapping[str, Any]], faults: Faults
) -> list[tuple[datetime, int, Mapping[str, Any]]]:
    """Writes and brokers taking leadership (order 2), brokers taken down (0) and brokers back from a
    holding fault (1), in time."""
    events: list[tuple[datetime, int, Mapping[str, Any]]] = [
        (event_time(line), 2, line)
        for line in lines
        if line.get("kind") in ("leader_and_isr_change", "become_leader")
    ]
    for began, healed, fault, target in faults:
        if fault in DISABLING and target.startswith("broker-"):
            victim = int(target.rsplit("-", 1)[1])
            events.append((began, 0, {"victim": victim}))
            if fault in HOLDING:
                events.append((healed, 1, {"back": victim}))
    return sorted(events, key=lambda e: (e[0], e[1]))


class _Leadership:
    def __init__(self) -> None:
        self.state: dict[tuple[str, int], tuple[int, int]] = {}
        """partition -> (leader broker id, leader epoch) as last written."""
        self.lost: dict[tuple[str, int], tuple[datetime, int]] = {}
        """partition -> (since when, the leader epoch then), for partitions without a working leader."""
        self.out: list[tuple[datetime, datetime]] = []

    def taken_down(self, victim: int, when: datetime) -> None:
        for tp, (leader, epoch) in self.state.items():
            if leader == victim and tp not in self.lost:
                self.lost[tp] = (when, epoch)

    def back(self, broker: int, when: datetime) -> None:
        for tp in [tp for tp, (_, epoch) in self.lost.items() if self.state.get(tp) == (broker, epoch)]:
            self.out.append((self.lost.pop(tp)[0], when))

    def led(self, tp: tuple[str, int], epoch: int, when: datetime) -> None:
        """A broker took leadership of ``tp`` in ``epoch``: a new controller's failover hands a
        restarted leader its partitions back in the epoch they had, with no newer one written."""
        if tp in self.lost and epoch >= self.lost[tp][1] and when > self.lost[tp][0]:
            self.out.append((self.lost.pop(tp)[0], when))

    def written(self, tp: tuple[str, int], leader: int, epoch: int, when: datetime) -> None:
        if tp in self.lost and leader >= 0 and epoch > self.lost[tp][1]:
            self.out.append((self.lost.pop(tp)[0], when))
        if leader < 0 and tp not in self.lost:
            self.lost[tp] = (when, epoch)
        self.state[tp] = (leader, epoch)
