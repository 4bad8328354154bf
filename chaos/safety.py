"""Control-plane safety, judged from the daemons' event logs over a run.

The rules a ZooKeeper-era control plane exists to keep, whatever the faults:

- **one leader per leader epoch**: no two brokers became leader of one partition in the same leader
  epoch (a zombie leader keeps its old epoch, and a new one always gets a higher one);
- **leader epochs only grow**: the controllers' writes give each partition a leader epoch that never
  goes back (until the topic is deleted);
- **no older controller obeyed**: no broker process applied a control request from a controller
  epoch older than one it had already applied;
- **one active controller after healing**: 30 s after each fault was healed, exactly one
  controller considers itself active.

Pure: it takes the lines of the daemons' ``events.jsonl`` files and of the run's ``events.jsonl`` as
dicts, in any order (they are sorted by time here).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

SETTLE_S = 30.0
"""How long after a fault is healed the cluster may take to have exactly one active controller."""


def _time(line: Mapping[str, Any]) -> datetime:
    return datetime.fromisoformat(str(line["ts"]).replace("Z", "+00:00"))


def violations(
    daemon_lines: Iterable[Mapping[str, Any]], run_lines: Iterable[Mapping[str, Any]]
) -> list[str]:
    """Every broken rule, one sentence each (empty when the run was safe)."""
    lines = sorted(daemon_lines, key=_time)
    return [
        *one_leader_per_epoch(lines),
        *leader_epochs_grow(lines),
        *no_older_controller_obeyed(lines),
        *one_active_controller_after_healing(lines, list(run_lines)),
    ]


def one_leader_per_epoch(lines: Iterable[Mapping[str, Any]]) -> list[str]:
    leaders: dict[tuple[str, int, int], set[str]] = defaultdict(set)
    for line in lines:
        if line.get("kind") == "become_leader":
            leaders[(line["topic"], line["partition"], line["leader_epoch"])].add(line["node"])
    return [
        f"{topic}-{partition}: {', '.join(sorted(nodes))} all led leader epoch {epoch}"
        for (topic, partition, epoch), nodes in sorted(leaders.items())
        if len(nodes) > 1
    ]


def leader_epochs_grow(lines: Iterable[Mapping[str, Any]]) -> list[str]:
    latest: dict[tuple[str, int], tuple[int, str]] = {}
    found = []
    for line in lines:
        kind = line.get("kind")
        if kind == "topic_deleted":
            for key in [k for k in latest if k[0] == line.get("topic")]:
                del latest[key]
        elif kind == "leader_and_isr_change":
            key = (line["topic"], line["partition"])
            epoch = line["leader_epoch"]
            previous = latest.get(key)
            if previous is not None and epoch < previous[0]:
                found.append(
                    f"{key[0]}-{key[1]}: {line['node']} wrote leader epoch {epoch} after "
                    f"{previous[1]} had written {previous[0]}"
                )
            latest[key] = (max(epoch, previous[0]) if previous else epoch, line["node"])
    return found


def no_older_controller_obeyed(lines: Iterable[Mapping[str, Any]]) -> list[str]:
    """Per broker process (reset when it starts again): applied requests' controller epochs never go
    back."""
    seen: dict[str, int] = {}
    found = []
    for line in lines:
        kind, node = line.get("kind"), line.get("node", "")
        if kind == "broker_started":
            seen.pop(node, None)
        elif kind == "control_request_handled" and line.get("error") == "NONE":
            epoch = line["controller_epoch"]
            if epoch < seen.get(node, epoch):
                found.append(
                    f"{node} applied {line['api']} from controller epoch {epoch} after one from "
                    f"epoch {seen[node]}"
                )
            seen[node] = max(epoch, seen.get(node, epoch))
    return found


def one_active_controller_after_healing(
    lines: Iterable[Mapping[str, Any]], run_lines: Iterable[Mapping[str, Any]]
) -> list[str]:
    """At each fault's healing time plus ``SETTLE_S``, exactly one controller is active in its own
    view: elected, and neither resigned nor started again (a killed process) since."""
    lines = list(lines)
    changes = [
        (_time(line), line["node"], line["kind"] == "controller_elected")
        for line in lines
        if line.get("kind") in ("controller_elected", "controller_resigned", "controller_started")
    ]
    end = max((_time(line) for line in lines), default=None)
    found = []
    for healed in (line for line in run_lines if line.get("kind") == "fault_healed"):
        at = _time(healed) + timedelta(seconds=SETTLE_S)
        if end is not None and at > end:  # the logs stop sooner: judge the last moment they show
            at = end
        active: dict[str, bool] = {}
        for when, node, elected in changes:
            if when > at:
                break
            active[node] = elected
        count = sum(active.values())
        if count != 1:
            found.append(
                f"{SETTLE_S:g} s after {healed['fault']} of {healed['target']} was healed, "
                f"{count} controllers were active ({', '.join(n for n, a in active.items() if a) or 'none'})"
            )
    return found
