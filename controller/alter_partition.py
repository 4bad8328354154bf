"""AlterPartition validation with Kafka's checks in Kafka's order, plus KIP-841's eligibility check.

Pure: :func:`validate` decides every partition's answer, or the ISR change to write; the controller
commits the changes and :func:`response` assembles the reply in the request's order.

From v3 (KIP-903) each proposed ISR member comes with its broker epoch: a member whose epoch is not the
one its registration has (an earlier incarnation, or one the controller has not seen yet) is ineligible,
as KRaft's controller rules; -1, the epoch Kafka's ZooKeeper-mode brokers send for every member, says
nothing and is accepted, as Kafka's ZooKeeper-mode controller accepts every epoch.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from controller.context import ControllerContext
from controller.model import LeaderAndIsr, LeaderRecoveryState, TopicPartition
from controller.partition_changes import LeadershipChange
from protocol import ErrorCode

FIRST_TOPIC_ID_VERSION = 2
FIRST_INELIGIBLE_REPLICA_VERSION = 2
FIRST_ISR_EPOCHS_VERSION = 3
UNKNOWN_MEMBER_EPOCH = -1
"""A v3 ISR member's epoch when the leader does not know it (Kafka's ZooKeeper-mode brokers, always)."""

TopicKey = str | uuid.UUID
PartitionKey = tuple[TopicKey, int]
Outcome = ErrorCode | LeaderAndIsr
"""A partition's answer: an error, or the leadership now in force."""


@dataclass
class AlterPartitionPlan:
    error: ErrorCode = ErrorCode.NONE
    order: list[PartitionKey] = field(default_factory=list)
    outcomes: dict[PartitionKey, Outcome] = field(default_factory=dict)
    changes: dict[PartitionKey, LeadershipChange] = field(default_factory=dict)
    """ISR changes to write; their outcome is the write's."""
    rejected: dict[PartitionKey, ErrorCode] = field(default_factory=dict)
    """The subset of ``outcomes`` that are errors, for the event log."""
    partitions: dict[PartitionKey, TopicPartition] = field(default_factory=dict)
    """The partitions the request names whose topic is known, in request order."""

    def known_partitions(self, context: ControllerContext) -> list[TopicPartition]:
        """The requested partitions that have leadership: those brokers are told about afterwards."""
        return [tp for tp in self.partitions.values() if tp in context.leadership]


def _check_partition(
    context: ControllerContext, tp: TopicPartition, broker_id: int, entry: dict[str, Any], version: int
) -> Outcome | LeadershipChange:
    info = context.leadership.get(tp)
    if info is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    current = info.leader_and_isr
    new_isr, epochs = proposed_isr(entry, version)
    recovery = entry.get("leader_recovery_state", LeaderRecoveryState.RECOVERED)
    error = _sender_error(current, broker_id, entry["leader_epoch"], entry["partition_epoch"])
    if error is not None:
        return error
    if new_isr == current.isr and recovery == current.leader_recovery_state:
        return current  # a retry of a change already made: answer with what is in force
    error = _proposal_error(context, current, entry["partition_epoch"], (new_isr, epochs), recovery, version)
    if error is not None:
        return error
    new = LeaderAndIsr(
        leader=current.leader,
        leader_epoch=current.leader_epoch,
        isr=new_isr,
        partition_epoch=current.partition_epoch,
        leader_recovery_state=recovery,
    )
    return LeadershipChange(tp, new, (), f"AlterPartition from broker {broker_id}")


def proposed_isr(entry: dict[str, Any], version: int) -> tuple[tuple[int, ...], dict[int, int]]:
    """A partition entry's proposed ISR, and from v3 each member's broker epoch."""
    if version < FIRST_ISR_EPOCHS_VERSION:
        return tuple(entry["new_isr"]), {}
    members = entry["new_isr_with_epochs"]
    return tuple(m["broker_id"] for m in members), {m["broker_id"]: m["broker_epoch"] for m in members}


def _current_epoch(context: ControllerContext, broker_id: int, epoch: int) -> bool:
    """KIP-903: whether a proposed member's epoch is its registration's (or unknown, -1)."""
    broker = context.brokers.get(broker_id)
    return epoch == UNKNOWN_MEMBER_EPOCH or (broker is not None and broker.epoch == epoch)


def _sender_error(
    current: LeaderAndIsr, broker_id: int, leader_epoch: int, partition_epoch: int
) -> ErrorCode | None:
    """Whether the request comes from this partition's current leader, as the controller knows it."""
    if partition_epoch > current.partition_epoch or leader_epoch > current.leader_epoch:
        return ErrorCode.NOT_CONTROLLER  # the broker knows a newer state than we do
    if leader_epoch < current.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if broker_id != current.leader:
        return ErrorCode.INVALID_REQUEST  # only the leader manages the ISR (as KRaft's controller checks)
    return None


def _proposal_error(
    context: ControllerContext,
    current: LeaderAndIsr,
    partition_epoch: int,
    proposal: tuple[tuple[int, ...], dict[int, int]],
    recovery: LeaderRecoveryState,
    version: int,
) -> ErrorCode | None:
    """Whether the proposed ISR (with its members' epochs from v3) may replace the current one;
    KIP-841's eligibility check, with KIP-903's epochs, is the last."""
    new_isr, epochs = proposal
    if partition_epoch < current.partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION
    if recovery == LeaderRecoveryState.RECOVERING and len(new_isr) > 1:
        return ErrorCode.INVALID_REQUEST
    if (
        current.leader_recovery_state == LeaderRecoveryState.RECOVERED
        and recovery == LeaderRecoveryState.RECOVERING
    ):
        return ErrorCode.INVALID_REQUEST
    live = context.live_broker_ids
    if any(
        r not in live or not _current_epoch(context, r, epochs.get(r, UNKNOWN_MEMBER_EPOCH)) for r in new_isr
    ):
        if version >= FIRST_INELIGIBLE_REPLICA_VERSION:
            return ErrorCode.INELIGIBLE_REPLICA
        return ErrorCode.OPERATION_NOT_ATTEMPTED
    return None


def validate(context: ControllerContext, request: dict[str, Any], version: int) -> AlterPartitionPlan:
    """Every check except "are we active", which the caller answers with NOT_CONTROLLER first."""
    plan = AlterPartitionPlan()
    broker_id, broker_epoch = request["broker_id"], request["broker_epoch"]
    broker = context.brokers.get(broker_id)
    if broker is None or broker.epoch != broker_epoch:
        plan.error = ErrorCode.STALE_BROKER_EPOCH
        return plan
    by_id = {tid: t for t, tid in context.topic_ids.items() if tid is not None}
    for topic_entry in request["topics"]:
        key: TopicKey
        topic: str | None
        if version >= FIRST_TOPIC_ID_VERSION:
            topic_id: uuid.UUID = topic_entry["topic_id"]
            key, topic = topic_id, by_id.get(topic_id)
        else:
            key = topic = topic_entry["topic_name"]
        for entry in topic_entry["partitions"]:
            pkey = (key, entry["partition_index"])
            plan.order.append(pkey)
            if topic is None:
                outcome: Outcome | LeadershipChange = ErrorCode.UNKNOWN_TOPIC_ID
            else:
                tp = plan.partitions[pkey] = TopicPartition(topic, entry["partition_index"])
                outcome = _check_partition(context, tp, broker_id, entry, version)
            if isinstance(outcome, LeadershipChange):
                plan.changes[pkey] = outcome
            else:
                plan.outcomes[pkey] = outcome
                if isinstance(outcome, ErrorCode):
                    plan.rejected[pkey] = outcome
    return plan


def response(plan: AlterPartitionPlan, version: int) -> dict[str, Any]:
    """The AlterPartition response for ``plan``, whose ``outcomes`` now cover every partition."""
    topics: dict[TopicKey, list[dict[str, Any]]] = {}
    for key, partition in plan.order:
        outcome = plan.outcomes[key, partition]
        entry: dict[str, Any] = {"partition_index": partition}
        if isinstance(outcome, ErrorCode):
            entry |= {
                "error_code": outcome,
                "leader_id": -1,
                "leader_epoch": -1,
                "isr": [],
                "partition_epoch": -1,
            }
            if version >= 1:
                entry["leader_recovery_state"] = 0
        else:
            entry |= {
                "error_code": ErrorCode.NONE,
                "leader_id": outcome.leader,
                "leader_epoch": outcome.leader_epoch,
                "isr": list(outcome.isr),
                "partition_epoch": outcome.partition_epoch,
            }
            if version >= 1:
                entry["leader_recovery_state"] = outcome.leader_recovery_state
        topics.setdefault(key, []).append(entry)
    name = "topic_id" if version >= FIRST_TOPIC_ID_VERSION else "topic_name"
    return {
        "throttle_time_ms": 0,
        "error_code": plan.error,
        "topics": [{name: key, "partitions": parts} for key, parts in topics.items()],
    }
