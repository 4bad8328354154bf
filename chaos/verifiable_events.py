"""Kafka's VerifiableProducer and VerifiableConsumer stdout lines turned into the run's history events.

Pure: each function takes one line (text, or the JSON object it holds) and what the run knows of the
tool that printed it, and returns the ``history.jsonl`` events it means, as ``(kind, fields)`` pairs
with the fields ``docs/events.md`` documents. :mod:`chaos.verifiable` runs the tools and writes the
events. A line that is not one of the tools' JSON objects, or lacks a field its kind needs, raises
:class:`MalformedLine`; the caller logs it and goes on.

What the tools do not say is filled in as follows (``docs/chaos.md`` has the table):

- a record's value is ``<prefix>.<n>``: the n-th record of a producer started with ``--value-prefix``;
- VerifiableProducer prints no send time, so ``latency_ms`` runs from the record's due time under the
  tool's ``--throughput`` pacing (its ``startup_complete`` time plus n/rate) to the acknowledgement:
  the true latency when the tool kept its pace, an upper bound when it fell behind;
- a failed send names a Java exception, not an error code: ``error`` is its class's simple name
  (``TimeoutException``, ``NotEnoughReplicasException``), and its partition is unknown (null);
- a failed commit names only the exception's message: that is ``error``, and the whole commit failed
  (``partition`` null).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Event",
    "MalformedLine",
    "ProducerView",
    "consumer_events",
    "parse",
    "producer_event",
    "sent_count",
    "startup_ms",
    "unreported",
]

Event = tuple[str, dict[str, Any]]
"""A history line to write: its kind and its fields after ``ts``, ``node`` and ``kind``."""

STARTUP = "startup_complete"
TOOL_DATA = "tool_data"
NO_DELIVERY_REPORT = "NO_DELIVERY_REPORT"
"""The ``error`` of a record the producer sent and never reported on (it was killed, or crashed)."""


class MalformedLine(ValueError):
    """A stdout line that is not one of the tools' JSON events, or one without a field its kind needs."""


@dataclass(frozen=True)
class ProducerView:
    """What the run knows of one VerifiableProducer: where it writes, how, and how its values read."""

    topic: str
    acks: str
    """``all`` (``--acks -1``) or ``1``, as ``produce_acked`` spells it."""
    idempotent: bool
    rate: int
    """``--throughput``: records per second."""
    prefix: int
    """``--value-prefix``: the n-th record's value is ``<prefix>.<n>``."""

    def value(self, n: int) -> str:
        return f"{self.prefix}.{n}"

    def number(self, value: str) -> int | None:
        """n of a value ``<prefix>.<n>`` of this producer; None for any other value."""
        head, dot, tail = value.rpartition(".")
        if not dot or head != str(self.prefix) or not tail.isdigit():
            return None
        return int(tail)

    def latency_ms(self, value: str, at_ms: float, started_ms: float | None) -> float | None:
        """From the record's due time under the pacing to ``at_ms``; None when either is unknown."""
        n = self.number(value)
        if n is None or started_ms is None:
            return None
        return round(max(0.0, at_ms - (started_ms + n * 1000.0 / self.rate)), 3)


def parse(text: str) -> dict[str, Any]:
    """One stdout line as the JSON object with a ``name`` it should be."""
    try:
        line = json.loads(text)
    except ValueError:
        raise MalformedLine(f"not JSON: {text[:200]!r}") from None
    if not isinstance(line, dict) or not isinstance(line.get("name"), str):
        raise MalformedLine(f"not a JSON object with a name: {text[:200]!r}")
    return line


def _field(line: Mapping[str, Any], key: str, kind: type) -> Any:
    value = line.get(key)
    # bool is an int to Python, never to the tools
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise MalformedLine(f"{line.get('name')} without a valid {key}: {dict(line)!r:.200}")
    return value


def startup_ms(line: Mapping[str, Any]) -> int | None:
    """The ``timestamp`` of a ``startup_complete`` line; None for any other line."""
    if line.get("name") != STARTUP:
        return None
    return int(_field(line, "timestamp", int))


def sent_count(line: Mapping[str, Any]) -> int | None:
    """The ``sent`` of the ``tool_data`` line a stopped producer prints last; None for any other line."""
    if line.get("name") != TOOL_DATA:
        return None
    return int(_field(line, "sent", int))


def producer_event(line: Mapping[str, Any], view: ProducerView, started_ms: float | None) -> Event | None:
    """``producer_send_success`` -> ``produce_acked``, ``producer_send_error`` -> ``produce_failed``;
    None for the tool's other lines (``startup_complete``, ``tool_data``, ``shutdown_complete``)."""
    name = line.get("name")
    if name not in ("producer_send_success", "producer_send_error"):
        return None
    value = _field(line, "value", str)
    latency = view.latency_ms(value, _field(line, "timestamp", int), started_ms)
    common = {"topic": _field(line, "topic", str), "acks": view.acks}
    if name == "producer_send_success":
        return "produce_acked", {
            **common,
            "idempotent": view.idempotent,
            "partition": _field(line, "partition", int),
            "offset": _field(line, "offset", int),
            "value": value,
            "latency_ms": latency,
        }
    error = _field(line, "exception", str).removeprefix("class ").rpartition(".")[2]
    return "produce_failed", {
        **common,
        "partition": None,
        "value": value,
        "error": error or "unknown",
        "latency_ms": latency,
    }


def unreported(view: ProducerView, sent: int, reported: set[int]) -> list[str]:
    """The values of the first ``sent`` records that no success or error line reported, in order."""
    return [view.value(n) for n in range(sent) if n not in reported]


def _partitions(line: Mapping[str, Any]) -> list[int]:
    entries = _field(line, "partitions", list)
    if not all(isinstance(e, dict) for e in entries):
        raise MalformedLine(f"{line.get('name')} with partitions that are not objects: {entries!r:.200}")
    return sorted(_field(e, "partition", int) for e in entries)


def consumer_events(line: Mapping[str, Any], member: str, group: str) -> list[Event]:
    """One VerifiableConsumer line (run with ``--verbose``) as the group's history lines: an assignment
    change, one record, or a commit (one line per partition committed, or one for a failed commit).
    ``records_consumed`` adds nothing its ``record_data`` lines did not say, and the start and
    shutdown lines are the workload's own bookkeeping: no events."""
    name = line.get("name")
    if name in ("partitions_assigned", "partitions_revoked"):
        kind = "group_assigned" if name == "partitions_assigned" else "group_revoked"
        return [(kind, {"member": member, "group": group, "partitions": _partitions(line)})]
    if name == "record_data":
        value = line.get("value")
        if value is not None and not isinstance(value, str):
            raise MalformedLine(f"record_data with a value that is not a string: {value!r:.200}")
        fields = {
            "member": member,
            "topic": _field(line, "topic", str),
            "partition": _field(line, "partition", int),
            "offset": _field(line, "offset", int),
            "value": value,
        }
        return [("group_consumed", fields)]
    if name == "offsets_committed":
        return _commit_events(line, member, group)
    return []


def _commit_events(line: Mapping[str, Any], member: str, group: str) -> list[Event]:
    offsets = _field(line, "offsets", list)
    if not _field(line, "success", bool):
        error = line.get("error")
        return [
            (
                "group_commit_failed",
                {"member": member, "group": group, "error": str(error or "unknown"), "partition": None},
            )
        ]
    events: list[Event] = []
    for entry in offsets:
        if not isinstance(entry, dict):
            raise MalformedLine(f"offsets_committed with an offset that is not an object: {entry!r:.200}")
        events.append(
            (
                "group_committed",
                {
                    "member": member,
                    "group": group,
                    "topic": _field(entry, "topic", str),
                    "partition": _field(entry, "partition", int),
                    "offset": _field(entry, "offset", int),
                },
            )
        )
    return events
