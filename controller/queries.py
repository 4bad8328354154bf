"""Questions asked of the controller's context: by the metrics after each event, and by the handlers
that act on the answers (preferred leader election, controlled shutdown). Pure reads."""

from __future__ import annotations

from collections.abc import Iterable

from controller.context import ControllerContext
from controller.model import TopicPartition
from controller.state_tables import PartitionState


def offline_partitions_count(ctx: ControllerContext) -> int:
    """Partitions without a live leader, not counting topics being deleted (Kafka's gauge)."""
    return sum(
        1
        for tp, state in ctx.partition_states.items()
        if state is PartitionState.OFFLINE and not ctx.is_topic_queued_for_deletion(tp.topic)
    )


def imbalanced_partitions(ctx: ControllerContext) -> dict[int, tuple[int, int]]:
    """Per preferred broker: (partitions it should lead but does not, partitions it should lead)."""
    counts: dict[int, list[int]] = {}
    for tp, info in ctx.leadership.items():
        replicas = ctx.replicas(tp)
        if not replicas or ctx.is_topic_queued_for_deletion(tp.topic):
            continue
        entry = counts.setdefault(replicas[0], [0, 0])
        entry[1] += 1
        if info.leader_and_isr.leader != replicas[0]:
            entry[0] += 1
    return {b: (c[0], c[1]) for b, c in counts.items()}


def preferred_election_candidates(
    ctx: ControllerContext, partitions: Iterable[TopicPartition]
) -> list[TopicPartition]:
    """Those of ``partitions`` with leadership that are not led by their first replica."""
    return [
        tp
        for tp in partitions
        if tp in ctx.leadership
        and not ctx.is_topic_queued_for_deletion(tp.topic)
        and ctx.replicas(tp)
        and ctx.leadership[tp].leader_and_isr.leader != ctx.replicas(tp)[0]
    ]


def partitions_to_move_off(ctx: ControllerContext, broker_id: int) -> list[TopicPartition]:
    """Partitions on ``broker_id`` that another replica can take over during its controlled shutdown."""
    return [
        tp
        for tp in ctx.partitions_on_brokers([broker_id])
        if len(ctx.replicas(tp)) > 1
        and tp in ctx.leadership
        and not ctx.is_topic_queued_for_deletion(tp.topic)
    ]


def auto_rebalance_candidates(ctx: ControllerContext, broker_id: int) -> list[TopicPartition]:
    """Partitions ``broker_id`` should lead, does not, and could: it is online and in their ISR."""
    if not ctx.is_replica_online(broker_id):
        return []
    return [
        tp
        for tp, info in ctx.leadership.items()
        if ctx.replicas(tp)
        and ctx.replicas(tp)[0] == broker_id
        and info.leader_and_isr.leader != broker_id
        and broker_id in info.leader_and_isr.isr
    ]
