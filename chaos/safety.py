"""Control-plane safety, judged from the daemons' event logs over a run.

The rules a ZooKeeper-era control plane exists to keep, whatever the faults:

- **one leader per leader epoch**: no two brokers became leader of one partition in the same leader
  epoch (a zombie leader keeps its old epoch, and a new one always gets a higher one);
- **leader epochs only grow**: the controllers' writes give each partition a leader epoch that never
  goes back (until the topic is deleted);
- **no older controller obeyed**: no broker process applied a control request from a controller
  epoch older than one it had already applied;
- **one active controller after healing**: 30 s after a fault was healed, exactly one controller
  considers itself active, provided no fault was in force in those 30 s (in a mixed run, faults
  overlap, and another fault may rightly keep the cluster unsettled). In a cluster shared with Kafka
  brokers, whose controllers keep no log of ours, the run's own samples of ``/controller``
  (``controller_seen``) stand for them: while a Kafka broker holds it, none of ours may be active.

Pure: it takes the lines of the daemons' ``events.jsonl`` files and of the run's ``events.jsonl`` as
dicts, in any order (they are sorted by time here).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

NEVER = datetime.max.replace(tzinfo=UTC)
SELF_HEALING = frozenset({"bounce", "restart"})
SETTLE_S = 30.0
"""How long after a fault is healed the cluster may take to have exactly one active controller."""


def event_time(line: Mapping[str, Any]) -> datetime:
    """A log line's ``ts`` as an aware datetime."""
    return datetime.fromisoformat(str(line["ts"]).replace("Z", "+00:00"))


def violations(
    daemon_lines: Iterable[Mapping[str, Any]],
    run_lines: Iterable[Mapping[str, Any]],
    now: datetime | None = None,
) -> list[str]:
    """Every broken rule, one sentence each (empty when the run was safe). ``now``: when the logs
    were read (the latest line's time if not given)."""
    lines = sorted(daemon_lines, key=event_time)
    return [
        *one_leader_per_epoch(lines),
        *leader_epochs_grow(lines),
        *no_older_controller_obeyed(lines),
        *one_active_controller_after_healing(lines, list(run_lines), now),
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


def fault_intervals(run_lines: Iterable[Mapping[str, Any]]) -> list[tuple[datetime, datetime, str, str]]:
    """(injected, healed, fault, target) for every fault of a run, in order. Faults that undo
    themselves (bounce, restart) last an instant; others not healed in these lines, ``NEVER``."""
    out: list[tuple[datetime, datetime | None, str, str]] = []
    for line in sorted(run_lines, key=event_time):
        if line.get("kind") == "fault_injected" and line.get("fault") != "resume":
            out.append((event_time(line), None, line["fault"], line["target"]))
        elif line.get("kind") == "fault_healed":
            for i in range(len(out) - 1, -1, -1):
                start, end, fault, target = out[i]
                if end is None and fault == line["fault"] and target == line["target"]:
                    out[i] = (start, event_time(line), fault, target)
                    break
            else:  # its injection is not in these lines: known from its healing only
                out.append((event_time(line), event_time(line), line["fault"], line["target"]))
    return [
        (start, end or (start if fault in SELF_HEALING else NEVER), fault, target)
        for start, end, fault, target in out
    ]


def one_active_controller_after_healing(
    lines: Iterable[Mapping[str, Any]], run_lines: Iterable[Mapping[str, Any]], now: datetime | None = None
) -> list[str]:
    """At each quiet heal plus ``SETTLE_S``, exactly one controller is active in its own view:
    elected, and neither resigned nor started again (a killed process) since. A heal is quiet when
    no fault is in force in the ``SETTLE_S`` after it and the logs go on that long."""
    lines = list(lines)
    run_lines = list(run_lines)
    seen = [
        (event_time(line), line)
        for line in sorted(run_lines, key=event_time)
        if line.get("kind") == "controller_seen"
    ]
    changes = [
        (event_time(line), line["node"], line["kind"] == "controller_elected")
        for line in lines
        if line.get("kind") in ("controller_elected", "controller_resigned", "controller_started")
    ]
    end = now or max((event_time(line) for line in lines), default=None)
    faults = fault_intervals(run_lines)
    settle = timedelta(seconds=SETTLE_S)
    found = []
    for healed, _, fault, target in ((e, s, f, t) for s, e, f, t in faults if e != NEVER):
        at = healed + settle
        quiet = not any(start <= at and stop > healed for start, stop, _, _ in faults if stop != healed)
        if not quiet or end is None or at > end:
            continue
        active: dict[str, bool] = {}
        for when, node, elected in changes:
            if when > at:
                break
            active[node] = elected
        holder = next((line for when, line in reversed(seen) if when <= at), None)
        kafka = holder["controller_id"] if holder and holder.get("implementation") == "kafka" else None
        count = sum(active.values()) + (kafka is not None)
        if kafka is not None and count > 1:
            found.append(
                f"{SETTLE_S:g} s after {fault} of {target} was healed, Kafka broker "
                f"{kafka} held /controller while ours considered themselves active "
                f"({', '.join(n for n, a in active.items() if a)})"
            )
        elif count != 1:
            found.append(
                f"{SETTLE_S:g} s after {fault} of {target} was healed, {count} controllers were active "
                f"({', '.join(n for n, a in active.items() if a) or 'none'})"
            )
    return found
