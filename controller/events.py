"""Controller events and the controller states they run in (Kafka's ``ControllerState`` values).

ZooKeeper watches, RPCs, timers and broker responses only create one of these and put it on the
event queue; the single consumer task does the work. Events that carry a reply future are answered
with an error when they are dropped at resignation (``preempt``) and when their processing fails
(``fail``), so no caller waits forever.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from controller.model import TopicPartition
from protocol import ErrorCode


class ControllerState(enum.IntEnum):
    """What the controller is doing; the value is Kafka's byte, exported as the ControllerState gauge."""

    IDLE = 0
    CONTROLLER_CHANGE = 1
    BROKER_CHANGE = 2
    TOPIC_CHANGE = 3
    TOPIC_DELETION = 4
    ALTER_PARTITION_REASSIGNMENT = 5
    AUTO_LEADER_BALANCE = 6
    MANUAL_LEADER_BALANCE = 7
    CONTROLLED_SHUTDOWN = 8
    ISR_CHANGE = 9
    LEADER_AND_ISR_RESPONSE_RECEIVED = 10
    LOG_DIR_CHANGE = 11
    CONTROLLER_SHUTDOWN = 12
    UNCLEAN_LEADER_ELECTION_ENABLE = 13
    TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE = 14
    LIST_PARTITION_REASSIGNMENT = 15
    UPDATE_METADATA_RESPONSE_RECEIVED = 16
    UPDATE_FEATURES = 17

    @property
    def kafka_name(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))

    @property
    def timer_name(self) -> str | None:
        """The ControllerStats timer for this state; Kafka keeps a few historical names."""
        if self in (ControllerState.IDLE, ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED):
            return None
        legacy = {
            ControllerState.BROKER_CHANGE: "LeaderElection",
            ControllerState.ALTER_PARTITION_REASSIGNMENT: "PartitionReassignment",
        }
        return legacy.get(self, self.kafka_name) + "RateAndTimeMs"


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerEvent:
    state: ControllerState = ControllerState.IDLE

    def preempt(self) -> None:
        """Called instead of processing when the queue is cleared (session expiry, shutdown)."""

    def fail(self, *, moved: bool) -> None:
        """Called after processing that left a caller unanswered (the handler raised, or a write was
        fenced: ``moved``): answer with the error Kafka gives for that exception. Nothing for events
        nobody waits on, or already answered."""


# -- controller election


@dataclass(frozen=True, slots=True, kw_only=True)
class Startup(ControllerEvent):
    state: ControllerState = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerChange(ControllerEvent):
    """``/controller`` was created or changed: resign if it no longer names us."""

    state: ControllerState = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True, slots=True, kw_only=True)
class Reelect(ControllerEvent):
    """``/controller`` disappeared, or our session came back: resign if needed and try to win."""

    state: ControllerState = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True, slots=True, kw_only=True)
class Expire(ControllerEvent):
    """Our ZooKeeper session expired: whatever we were, we are no longer active."""

    state: ControllerState = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True, slots=True, kw_only=True)
class Resync(ControllerEvent):
    """The ZooKeeper connection came back: re-read everything watched and re-arm the watches."""

    state: ControllerState = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True, slots=True, kw_only=True)
class Shutdown(ControllerEvent):
    """Resign (deleting ``/controller`` if ours) before the process stops; ``done`` is resolved after."""

    done: asyncio.Future[None] | None = field(default=None, compare=False)
    state: ControllerState = ControllerState.CONTROLLER_SHUTDOWN

    def finished(self) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_result(None)

    def preempt(self) -> None:
        self.finished()

    def fail(self, *, moved: bool) -> None:
        self.finished()


# -- brokers and topics


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerChange(ControllerEvent):
    state: ControllerState = ControllerState.BROKER_CHANGE


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerModifications(ControllerEvent):
    broker_id: int
    state: ControllerState = ControllerState.BROKER_CHANGE


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicChange(ControllerEvent):
    state: ControllerState = ControllerState.TOPIC_CHANGE


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionModifications(ControllerEvent):
    topic: str
    state: ControllerState = ControllerState.TOPIC_CHANGE


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicDeletion(ControllerEvent):
    state: ControllerState = ControllerState.TOPIC_DELETION


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicDeletionStopReplicaResponse(ControllerEvent):
    broker_id: int
    error: int
    partition_errors: dict[TopicPartition, int]
    state: ControllerState = ControllerState.TOPIC_DELETION


@dataclass(frozen=True, slots=True, kw_only=True)
class ZkPartitionReassignment(ControllerEvent):
    state: ControllerState = ControllerState.ALTER_PARTITION_REASSIGNMENT


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoPreferredReplicaLeaderElection(ControllerEvent):
    state: ControllerState = ControllerState.AUTO_LEADER_BALANCE


@dataclass(frozen=True, slots=True, kw_only=True)
class ZkPreferredReplicaElection(ControllerEvent):
    """``/admin/preferred_replica_election`` was created."""

    state: ControllerState = ControllerState.MANUAL_LEADER_BALANCE


@dataclass(frozen=True, slots=True, kw_only=True)
class IsrChangeNotification(ControllerEvent):
    state: ControllerState = ControllerState.ISR_CHANGE


# -- responses from brokers


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrResponseReceived(ControllerEvent):
    broker_id: int
    response: dict[str, Any]
    state: ControllerState = ControllerState.LEADER_AND_ISR_RESPONSE_RECEIVED


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataResponseReceived(ControllerEvent):
    broker_id: int
    response: dict[str, Any]
    state: ControllerState = ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED


# -- RPCs from brokers


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdown(ControllerEvent):
    broker_id: int
    broker_epoch: int
    version: int = 2
    """The request's version (Kafka 3.9's brokers send v3)."""
    reply: asyncio.Future[dict[str, Any]] = field(compare=False)
    state: ControllerState = ControllerState.CONTROLLED_SHUTDOWN

    def preempt(self) -> None:
        # Kafka fails the callback with ControllerMovedException, sent as STALE_CONTROLLER_EPOCH.
        if not self.reply.done():
            self.reply.set_result(
                {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH, "remaining_partitions": []}
            )

    def fail(self, *, moved: bool) -> None:
        if moved:
            self.preempt()
        elif not self.reply.done():
            self.reply.set_result({"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "remaining_partitions": []})


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionReceived(ControllerEvent):
    request: dict[str, Any]
    version: int
    reply: asyncio.Future[dict[str, Any]] = field(compare=False)
    state: ControllerState = ControllerState.ISR_CHANGE

    def preempt(self) -> None:
        if not self.reply.done():
            self.reply.set_result(
                {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "topics": []}
            )

    def fail(self, *, moved: bool) -> None:
        """NOT_CONTROLLER when deposed, so the broker sends it again to the next controller."""
        if moved:
            self.preempt()
        elif not self.reply.done():
            self.reply.set_result(
                {"throttle_time_ms": 0, "error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "topics": []}
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class AdminRequestReceived(ControllerEvent):
    """An Admin API request a broker forwarded to the active controller (ElectLeaders and the
    reassignment APIs, which need the controller's state). ``refusal(code, message)`` builds the
    response that refuses the whole request."""

    request: dict[str, Any]
    version: int
    reply: asyncio.Future[dict[str, Any]] = field(compare=False)
    refusal: Callable[[ErrorCode, str], dict[str, Any]] = field(compare=False)

    def preempt(self) -> None:
        if not self.reply.done():
            self.reply.set_result(self.refusal(ErrorCode.NOT_CONTROLLER, "the controller moved"))

    def fail(self, *, moved: bool) -> None:
        """NOT_CONTROLLER when deposed, so the broker asks the next controller."""
        if moved:
            self.preempt()
        elif not self.reply.done():
            self.reply.set_result(self.refusal(ErrorCode.UNKNOWN_SERVER_ERROR, "the controller failed"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectLeadersReceived(AdminRequestReceived):
    state: ControllerState = ControllerState.MANUAL_LEADER_BALANCE


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterReassignmentsReceived(AdminRequestReceived):
    state: ControllerState = ControllerState.ALTER_PARTITION_REASSIGNMENT


@dataclass(frozen=True, slots=True, kw_only=True)
class ListReassignmentsReceived(AdminRequestReceived):
    state: ControllerState = ControllerState.LIST_PARTITION_REASSIGNMENT
