"""The Admin API requests that need the controller's state, forwarded by a broker: ElectLeaders
(preferred and unclean, KIP-460) and AlterPartitionReassignments / ListPartitionReassignments
(KIP-455). In ZooKeeper-mode Kafka the controller broker runs them as controller events; here the
active controller daemon does, on its event task, and the broker relays the answer.

Each partition is judged as Kafka's ``processReplicaLeaderElection`` and
``onApiPartitionReassignment`` judge it, with Kafka's error codes and messages.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from controller import events
from controller import state_machines as machines
from controller.handlers.reassignment import Reassignments, invalid_target
from controller.model import Reassignment, TopicPartition
from controller.partition_changes import ElectionStrategy
from controller.services import ControllerServices
from controller.state_machines import Unclean
from controller.state_tables import PartitionState
from protocol import ErrorCode
from protocol.messages.elect_leaders import PREFERRED, UNCLEAN

log = logging.getLogger("controller")

Body = dict[str, Any]
Outcome = tuple[ErrorCode, str | None]


def _by_topic(
    outcomes: dict[TopicPartition, Outcome],
    topic_key: str = "name",
    partitions_key: str = "partitions",
    index_key: str = "partition_index",
) -> list[Body]:
    """Per-partition outcomes grouped by topic (AlterPartitionReassignments' field names by default)."""
    topics: dict[str, list[Body]] = {}
    for tp, (code, message) in sorted(outcomes.items()):
        topics.setdefault(tp.topic, []).append(
            {index_key: tp.partition, "error_code": code, "error_message": message}
        )
    return [{topic_key: t, partitions_key: ps} for t, ps in topics.items()]


class AdminRequests:
    def __init__(self, services: ControllerServices, reassignments: Reassignments) -> None:
        self.services = services
        self.context = services.context
        self.reassignments = reassignments

    def _missing(self, tp: TopicPartition) -> Outcome | None:
        if self.context.is_topic_queued_for_deletion(tp.topic):
            return ErrorCode.INVALID_TOPIC_EXCEPTION, f"Deletion of topic {tp.topic} is in progress"
        if not self.context.replicas(tp) or tp not in self.context.leadership:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
        return None

    # -- ElectLeaders

    async def on_elect_leaders(self, event: events.ElectLeadersReceived) -> None:
        ctx, svc = self.context, self.services
        request, version = event.request, event.version
        if not svc.is_active:
            event.preempt()
            return
        election_type = request.get("election_type", PREFERRED)
        if election_type not in (PREFERRED, UNCLEAN):
            event.reply.set_result(
                event.refusal(ErrorCode.INVALID_REQUEST, f"unknown election type {election_type}")
            )
            return
        asked = request.get("topic_partitions")
        every = asked is None
        partitions = sorted(
            ctx.leadership
            if asked is None
            else {TopicPartition(t["topic"], p) for t in asked for p in t["partitions"]}
        )
        outcomes = await self.elect(partitions, unclean=election_type == UNCLEAN)
        if every:  # Kafka leaves out what needed no election when asked for everything
            outcomes = {tp: o for tp, o in outcomes.items() if o[0] != ErrorCode.ELECTION_NOT_NEEDED}
        results = _by_topic(outcomes, "topic", "partition_result", "partition_id")
        body: Body = {"throttle_time_ms": 0, "replica_election_results": results}
        if version >= 1:
            body["error_code"] = ErrorCode.NONE
        event.reply.set_result(body)

    async def elect(
        self, partitions: Iterable[TopicPartition], *, unclean: bool
    ) -> dict[TopicPartition, Outcome]:
        """Preferred or unclean elections for ``partitions``; each one's error code and message."""
        ctx, svc = self.context, self.services
        outcomes: dict[TopicPartition, Outcome] = {}
        candidates = []
        for tp in partitions:
            missing = self._missing(tp)
            if missing is not None:
                outcomes[tp] = missing
                continue
            leader = ctx.leadership[tp].leader_and_isr.leader
            # unclean: needed only without a live leader; preferred: only away from the first replica
            if ctx.is_replica_online(leader) if unclean else leader == ctx.replicas(tp)[0]:
                outcomes[tp] = ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition"
            else:
                candidates.append(tp)
        if not candidates:
            return outcomes
        kind = "unclean" if unclean else "preferred"
        log.info("%s leader election asked for %d partitions", kind, len(candidates))
        batch = svc.new_batch()
        refused = await svc.apply(
            machines.partitions_to(
                ctx,
                batch,
                candidates,
                PartitionState.ONLINE,
                ElectionStrategy.OFFLINE if unclean else ElectionStrategy.PREFERRED,
                unclean=Unclean.ALWAYS if unclean else Unclean.NEVER,
            )
        )
        svc.send(batch)
        failed = {r.tp: r.reason for r in refused}
        code = (
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE if unclean else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        )
        for tp in candidates:
            if tp in failed:
                outcomes[tp] = (
                    code,
                    f"Failed to elect leader for partition {tp.topic}-{tp.partition}: {failed[tp]}",
                )
            elif ctx.partition_states.get(tp) is not PartitionState.ONLINE:
                outcomes[tp] = (
                    code,
                    f"partition {tp.topic}-{tp.partition} is not in a state to elect a leader",
                )
            else:
                outcomes[tp] = ErrorCode.NONE, None
        return outcomes

    # -- reassignments

    async def on_alter_reassignments(self, event: events.AlterReassignmentsReceived) -> None:
        if not self.services.is_active:
            event.preempt()
            return
        outcomes: dict[TopicPartition, Outcome] = {}
        for topic in event.request["topics"]:
            for p in topic["partitions"]:
                tp = TopicPartition(topic["name"], p["partition_index"])
                replicas = p["replicas"]
                outcomes[tp] = await (
                    self._cancel(tp) if replicas is None else self._reassign(tp, tuple(replicas))
                )
        event.reply.set_result(
            {
                "throttle_time_ms": 0,
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "responses": _by_topic(outcomes),
            }
        )

    async def _reassign(self, tp: TopicPartition, target: tuple[int, ...]) -> Outcome:
        ctx = self.context
        if self._missing(tp) is not None:  # a topic being deleted too, as Kafka answers reassignments
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
        reason = invalid_target(target)
        if reason is not None:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid replica list: {reason}"
        current = ctx.reassignments.get(tp)
        origin = current.origin if current is not None else ctx.replicas(tp)
        moving = Reassignment(origin, target)
        dead = [r for r in moving.adding if r not in ctx.live_broker_ids]
        if dead:
            return (
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Replica assignment has brokers that are not alive. Replica list: {list(moving.adding)}, "
                f"live broker list: {sorted(ctx.live_broker_ids)}",
            )
        if current is not None and current.target == target:
            return ErrorCode.NONE, None
        if current is None and target == origin:
            return ErrorCode.NONE, None  # already there
        await self.reassignments.start(tp, moving)
        return ErrorCode.NONE, None

    async def _cancel(self, tp: TopicPartition) -> Outcome:
        if self._missing(tp) is not None:  # a topic being deleted too, as Kafka answers reassignments
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
        current = self.context.reassignments.get(tp)
        if current is None:
            return (
                ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                f"Unable to cancel reassignment for partition {tp.topic}-{tp.partition}: "
                "no reassignment is in progress",
            )
        self.services.event_log.emit(
            "reassignment_cancelled",
            topic=tp.topic,
            partition=tp.partition,
            origin=current.origin,
            target=current.target,
        )
        await self.reassignments.start(tp, Reassignment(current.origin, current.origin))
        return ErrorCode.NONE, None

    async def on_list_reassignments(self, event: events.ListReassignmentsReceived) -> None:
        ctx = self.context
        if not self.services.is_active:
            event.preempt()
            return
        asked = event.request.get("topics")
        wanted = (
            None
            if asked is None
            else {TopicPartition(t["name"], p) for t in asked for p in t["partition_indexes"]}
        )
        by_topic: dict[str, list[Body]] = {}
        for tp, moving in sorted(ctx.reassignments.items()):
            if wanted is not None and tp not in wanted:
                continue
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "replicas": list(moving.replicas),
                    "adding_replicas": list(moving.adding),
                    "removing_replicas": list(moving.removing),
                }
            )
        event.reply.set_result(
            {
                "throttle_time_ms": 0,
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            }
        )
