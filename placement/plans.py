"""Reassignment plans: Kafka's JSON plan read strictly, a plan's checks, and proposals over new brokers.

What ``kafka-reassign-partitions`` decides without ZooKeeper: ``zkstore.controller_requests`` reads the
current replicas and the live brokers, calls these, and writes the plan. A partition is keyed by the
caller's type (``zkstore.znodes.TopicPartition``, a ``(topic, partition)`` tuple that prints as ``t-0``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TypeVar

from placement.assignment import ReplicaMap, assign_replicas
from placement.errors import AdminError

__all__ = [
    "check_plan",
    "check_plan_brokers",
    "check_reassignment_targets",
    "parse_reassignment_plan",
    "propose_replicas",
]

K = TypeVar("K", bound=tuple[str, int])
"""A partition's key: a ``(topic, partition)`` tuple, whose ``str`` names it in messages."""


def _int_field(entry: Mapping[str, object], key: str, where: str) -> int:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AdminError(f"{where}: {key!r} must be a non-negative integer, got {value!r}")
    return value


def _plan_entry(entry: object, where: str, key: Callable[[str, int], K]) -> tuple[K, tuple[int, ...]]:
    """One ``{"topic", "partition", "replicas"[, "log_dirs"]}`` entry of a plan, checked strictly."""
    if not isinstance(entry, dict):
        raise AdminError(f"{where} must be an object with 'topic', 'partition' and 'replicas'")
    topic = entry.get("topic")
    if not isinstance(topic, str):
        raise AdminError(f"{where}: 'topic' must be a string")
    tp = key(topic, _int_field(entry, "partition", where))
    replicas = entry.get("replicas")
    if not isinstance(replicas, list):
        raise AdminError(f"{where}: 'replicas' must be a list of broker ids")
    target = tuple(_int_field({"replicas": r}, "replicas", where) for r in replicas)
    log_dirs = entry.get("log_dirs")
    if log_dirs is not None and (not isinstance(log_dirs, list) or any(d != "any" for d in log_dirs)):
        raise AdminError(f"{where}: only 'any' log directories are supported")
    return tp, target


def parse_reassignment_plan(text: str, key: Callable[[str, int], K]) -> dict[K, tuple[int, ...]]:
    """A reassignment plan in Kafka's JSON (``{"version":1,"partitions":[...]}``), checked strictly.

    zkstore's decoder is lenient (it skips bad entries, as a daemon must); a plan typed by a person is
    refused as a whole instead, with the reason, as kafka-reassign-partitions does. ``key`` makes each
    partition's key from its topic and number.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise AdminError(f"the plan is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise AdminError("the plan must be a JSON object with 'version' and 'partitions'")
    if data.get("version", 1) != 1:
        raise AdminError(f"Not supported version field value {data.get('version')!r}")
    entries = data.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise AdminError("Partition reassignment list cannot be empty")
    plan: dict[K, tuple[int, ...]] = {}
    duplicates: list[str] = []
    for number, entry in enumerate(entries):
        tp, target = _plan_entry(entry, f"partitions[{number}]", key)
        if tp in plan:
            duplicates.append(str(tp))
        plan[tp] = target
    if duplicates:
        raise AdminError(
            f"Partition reassignment contains duplicate topic partitions: {', '.join(duplicates)}"
        )
    return plan


def check_plan(plan: Mapping[K, Sequence[int]], existing: Collection[K]) -> None:
    """A plan to execute: not empty, only ``existing`` partitions, each with a non-empty list of distinct
    replicas; refused with kafka-reassign-partitions' messages."""
    if not plan:
        raise AdminError("Partition reassignment list cannot be empty")
    missing = [str(tp) for tp in sorted(plan) if tp not in existing]
    if missing:
        raise AdminError(f"The proposed assignment contains non-existent partitions: {', '.join(missing)}")
    for tp, replicas in sorted(plan.items()):
        if not replicas:
            raise AdminError(
                f"Partition replica list cannot be empty: {tp} (the replication factor must be > 0)"
            )
        repeated = sorted({r for r in replicas if list(replicas).count(r) > 1})
        if repeated:
            raise AdminError(
                f"Partition replica lists may not contain duplicate entries: {tp} contains "
                f"{', '.join(map(str, repeated))}"
            )


def check_plan_brokers(plan: Mapping[K, Sequence[int]], live: Collection[int]) -> None:
    """Every broker the plan names is ``live``."""
    unknown = sorted({r for replicas in plan.values() for r in replicas} - set(live))
    if unknown:
        raise AdminError(
            f"The proposed assignment contains non-existent brokerIDs: {', '.join(map(str, unknown))}"
        )


def check_reassignment_targets(topics: Sequence[str], brokers: Sequence[int], live: Collection[int]) -> None:
    """``--generate``'s lists: neither empty nor with repeats, and every broker ``live``."""
    for what, values in (("Topic", topics), ("Broker", brokers)):
        if not values:
            raise AdminError(f"{what} list cannot be empty")
        repeated = sorted({str(v) for v in values if list(values).count(v) > 1})
        if repeated:
            raise AdminError(f"{what} list contains duplicate entries: {', '.join(repeated)}")
    unavailable = sorted(set(brokers) - set(live))
    if unavailable:
        raise AdminError(f"Some brokers are not available: {', '.join(map(str, unavailable))}")


def propose_replicas(
    topics: Sequence[str],
    brokers: Sequence[int],
    current: Mapping[str, Mapping[int, tuple[int, ...]]],
    *,
    rng: random.Random | None = None,
) -> dict[str, ReplicaMap]:
    """``kafka-reassign-partitions --generate``: each topic spread over ``brokers`` by Kafka's assignment.

    Each topic keeps its partition count and its replication factor (that of partition 0); a topic
    missing from ``current`` (the replicas of those that exist) is refused.
    """
    missing = sorted(set(topics) - set(current))
    if missing:
        raise AdminError(f"Topic '{missing[0]}' does not exist", kind="UNKNOWN_TOPIC_OR_PARTITION")
    proposed: dict[str, ReplicaMap] = {}
    for topic in sorted(set(topics)):
        partitions = current[topic]
        factor = len(partitions.get(0) or next(iter(partitions.values()), ()))
        proposed[topic] = assign_replicas(brokers, len(partitions), factor, rng=rng)
    return proposed
