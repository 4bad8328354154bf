"""Replicas a Kafka broker placed on this controller, handed to brokers: the controller hosts nothing.

On Kafka 3.9's wire the controller lists itself among UpdateMetadata's live brokers, the only place
Kafka's brokers look for a controller. A Kafka broker that creates a topic itself (auto-creation, and
``__consumer_offsets`` or ``__transaction_state`` on the first FindCoordinator) spreads its replicas
over those live brokers (``ZkAdminManager.createTopics``), the controller among them. Before such a
topic's partitions are created, each replica on the controller is given to a live broker the
partition lacks, in turn from the partition's index as Kafka spreads replicas, or dropped when every
live broker already holds one. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["without_controller"]


def without_controller(
    partitions: Mapping[int, tuple[int, ...]], controller_id: int, brokers: Iterable[int]
) -> dict[int, tuple[int, ...]] | None:
    """``partitions`` (index -> replicas) with ``controller_id`` replaced by one of ``brokers``; None when
    no partition names the controller. A partition the controller alone would hold, with no broker to
    take its place, keeps its replicas (it stays offline, as any partition without a live replica)."""
    if not any(controller_id in replicas for replicas in partitions.values()):
        return None
    pool = sorted(set(brokers) - {controller_id})
    fixed: dict[int, tuple[int, ...]] = {}
    for index, replicas in sorted(partitions.items()):
        if controller_id not in replicas:
            fixed[index] = replicas
            continue
        spare = [b for b in pool if b not in replicas]
        if spare:
            taker = spare[index % len(spare)]
            fixed[index] = tuple(taker if r == controller_id else r for r in replicas)
        else:
            kept = tuple(r for r in replicas if r != controller_id)
            fixed[index] = kept or replicas
    return fixed
