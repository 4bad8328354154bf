"""AlterPartition validation: every check of Kafka's controller, in Kafka's order, and the response shape.

The base cluster: brokers 1-3 live with epochs 101-103; partition t-0 has replicas [1, 2, 3], leader 1,
leader epoch 1, ISR [1, 2, 3] and partition epoch (state znode version) 4. Broker 1, the leader, sends
every request unless a case says otherwise.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest

from controller import alter_partition
from controller.alter_partition import AlterPartitionPlan
from controller.context import ControllerContext
from controller.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, LeaderRecoveryState, TopicPartition
from controller.partition_changes import LeadershipChange
from protocol import ApiKey, ErrorCode, decode_response, encode_response
from tests.controller.builders import context

TOPIC = "t"
TOPIC_ID = uuid.UUID("5f0e7a4c-27d1-4c1e-9a33-0d2b1f6c8e01")
TP = TopicPartition(TOPIC, 0)
RECOVERED, RECOVERING = LeaderRecoveryState.RECOVERED, LeaderRecoveryState.RECOVERING
CURRENT = LeaderAndIsr(leader=1, leader_epoch=1, isr=(1, 2, 3), partition_epoch=4)


def cluster() -> ControllerContext:
    ctx = context({1: 101, 2: 102, 3: 103}, {TOPIC: [[1, 2, 3]]})
    ctx.topic_ids[TOPIC] = TOPIC_ID
    assert ctx.leadership[TP].leader_and_isr == CURRENT
    return ctx


def set_current(ctx: ControllerContext, **changes: Any) -> None:
    """Replace fields of t-0's leadership in force."""
    info = ctx.leadership[TP]
    ctx.leadership[TP] = LeaderIsrAndControllerEpoch(
        replace(info.leader_and_isr, **changes), info.controller_epoch
    )


def partition(
    new_isr: Sequence[int] = (1, 2),
    *,
    index: int = 0,
    leader_epoch: int = 1,
    partition_epoch: int = 4,
    recovery: int | None = None,
) -> dict[str, Any]:
    """One partition entry; ``recovery`` None leaves the field out, as a v0 request does."""
    entry: dict[str, Any] = {
        "partition_index": index,
        "leader_epoch": leader_epoch,
        "new_isr": list(new_isr),
        "partition_epoch": partition_epoch,
    }
    if recovery is not None:
        entry["leader_recovery_state"] = recovery
    return entry


def request(
    *partitions: dict[str, Any],
    version: int = 2,
    broker_id: int = 1,
    broker_epoch: int = 101,
    topic: str | uuid.UUID | None = None,
) -> dict[str, Any]:
    """A request naming t by id (v2+) or by name (v0/v1), unless ``topic`` says otherwise."""
    key = "topic_id" if version >= 2 else "topic_name"
    name = topic if topic is not None else (TOPIC_ID if version >= 2 else TOPIC)
    return {
        "broker_id": broker_id,
        "broker_epoch": broker_epoch,
        "topics": [{key: name, "partitions": list(partitions or [partition()])}],
    }


def outcome(plan: AlterPartitionPlan, index: int = 0) -> ErrorCode | LeaderAndIsr | LeadershipChange:
    """The single decision ``validate`` made for one partition of t."""
    key = plan.order[index]
    if key in plan.changes:
        assert key not in plan.outcomes
        return plan.changes[key]
    return plan.outcomes[key]


# -- top level: the broker epoch must match exactly


@pytest.mark.parametrize(
    ("broker_id", "broker_epoch"),
    [(1, 100), (1, 102), (9, 101), (1, -1)],
    ids=["lower epoch", "higher epoch", "unknown broker", "epoch -1"],
)
@pytest.mark.parametrize("version", [0, 1, 2])
def test_broker_epoch_must_match_the_registered_one_exactly(
    broker_id: int, broker_epoch: int, version: int
) -> None:
    plan = alter_partition.validate(
        cluster(), request(version=version, broker_id=broker_id, broker_epoch=broker_epoch), version
    )
    assert plan.error == ErrorCode.STALE_BROKER_EPOCH
    assert plan.order == [] and plan.outcomes == {} and plan.changes == {}


def test_stale_broker_epoch_is_answered_before_any_partition_is_looked_at() -> None:
    unknown_topic = request(partition(index=7), broker_epoch=100, topic=uuid.uuid4())
    plan = alter_partition.validate(cluster(), unknown_topic, 2)
    assert plan.error == ErrorCode.STALE_BROKER_EPOCH and plan.order == []
    assert alter_partition.response(plan, 2) == {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.STALE_BROKER_EPOCH,
        "topics": [],
    }


def test_a_shutting_down_broker_with_the_right_epoch_passes_the_broker_check() -> None:
    ctx = cluster()
    ctx.shutting_down.add(1)
    plan = alter_partition.validate(ctx, request(partition((1, 2, 3), partition_epoch=3)), 2)
    assert plan.error == ErrorCode.NONE and outcome(plan) == CURRENT


# -- per partition: one table, each case failing exactly one check (or none)

Setup = Callable[[ControllerContext], None]


def no_setup(ctx: ControllerContext) -> None:
    return None


def broker_3_dead(ctx: ControllerContext) -> None:
    del ctx.brokers[3]


def broker_3_shutting_down(ctx: ControllerContext) -> None:
    ctx.shutting_down.add(3)


def recovering_leader_alone(ctx: ControllerContext) -> None:
    set_current(ctx, isr=(1,), leader_recovery_state=RECOVERING)


def recovering_leader_alone_and_broker_3_dead(ctx: ControllerContext) -> None:
    recovering_leader_alone(ctx)
    broker_3_dead(ctx)


# id, setup, partition entry, version -> the error expected
SINGLE_CHECK_CASES: list[tuple[str, Setup, dict[str, Any], int, ErrorCode]] = [
    ("partition epoch ahead", no_setup, partition(partition_epoch=5), 2, ErrorCode.NOT_CONTROLLER),
    ("leader epoch ahead", no_setup, partition(leader_epoch=2), 2, ErrorCode.NOT_CONTROLLER),
    ("leader epoch behind", no_setup, partition(leader_epoch=0), 2, ErrorCode.FENCED_LEADER_EPOCH),
    ("stale partition epoch", no_setup, partition(partition_epoch=3), 2, ErrorCode.INVALID_UPDATE_VERSION),
    (
        "recovering with two ISR members",
        recovering_leader_alone,
        partition((1, 2), recovery=RECOVERING),
        2,
        ErrorCode.INVALID_REQUEST,
    ),
    (
        "recovered to recovering",
        no_setup,
        partition((1,), recovery=RECOVERING),
        2,
        ErrorCode.INVALID_REQUEST,
    ),
    ("dead broker in the ISR, v2", broker_3_dead, partition((1, 3)), 2, ErrorCode.INELIGIBLE_REPLICA),
    ("dead broker in the ISR, v1", broker_3_dead, partition((1, 3)), 1, ErrorCode.OPERATION_NOT_ATTEMPTED),
    ("dead broker in the ISR, v0", broker_3_dead, partition((1, 3)), 0, ErrorCode.OPERATION_NOT_ATTEMPTED),
    (
        "shutting-down broker in the ISR, v2",
        broker_3_shutting_down,
        partition((1, 3)),
        2,
        ErrorCode.INELIGIBLE_REPLICA,
    ),
    (
        "shutting-down broker in the ISR, v1",
        broker_3_shutting_down,
        partition((1, 3)),
        1,
        ErrorCode.OPERATION_NOT_ATTEMPTED,
    ),
    (
        "shutting-down broker in the ISR, v0",
        broker_3_shutting_down,
        partition((1, 3)),
        0,
        ErrorCode.OPERATION_NOT_ATTEMPTED,
    ),
    ("unknown partition, v2", no_setup, partition(index=7), 2, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ("unknown partition, v0", no_setup, partition(index=7), 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
]


@pytest.mark.parametrize(
    ("setup", "entry", "version", "expected"),
    [c[1:] for c in SINGLE_CHECK_CASES],
    ids=[c[0] for c in SINGLE_CHECK_CASES],
)
def test_each_check_rejects_with_kafkas_error(
    setup: Setup, entry: dict[str, Any], version: int, expected: ErrorCode
) -> None:
    ctx = cluster()
    setup(ctx)
    plan = alter_partition.validate(ctx, request(entry, version=version), version)
    assert plan.error == ErrorCode.NONE
    assert outcome(plan) == expected
    assert plan.rejected == {plan.order[0]: expected}
    assert plan.changes == {}


def test_unknown_topic_id_is_a_per_partition_error_in_v2() -> None:
    plan = alter_partition.validate(
        cluster(), request(partition(), partition(index=1), topic=uuid.uuid4()), 2
    )
    assert plan.error == ErrorCode.NONE
    assert [outcome(plan, i) for i in range(2)] == [ErrorCode.UNKNOWN_TOPIC_ID] * 2


def test_unknown_topic_name_before_v2_is_an_unknown_partition() -> None:
    plan = alter_partition.validate(cluster(), request(partition(), version=1, topic="nope"), 1)
    assert outcome(plan) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("version", [0, 1, 2])
def test_accepted_change_keeps_leader_and_leader_epoch_and_expects_the_current_partition_epoch(
    version: int,
) -> None:
    recovery = None if version == 0 else RECOVERED
    plan = alter_partition.validate(
        cluster(), request(partition((1, 2), recovery=recovery), version=version), version
    )
    change = outcome(plan)
    assert isinstance(change, LeadershipChange)
    assert change.tp == TP and not change.create and not change.unclean
    assert change.new == LeaderAndIsr(
        leader=1, leader_epoch=1, isr=(1, 2), partition_epoch=4, leader_recovery_state=RECOVERED
    )
    assert change.recipients == ()  # the leader learns the result from the response
    assert plan.outcomes == {} and plan.rejected == {}


def test_isr_expansion_out_of_recovery_is_accepted() -> None:
    ctx = cluster()
    set_current(ctx, isr=(1,), leader_recovery_state=RECOVERING)
    change = outcome(alter_partition.validate(ctx, request(partition((1, 2), recovery=RECOVERED)), 2))
    assert isinstance(change, LeadershipChange)
    assert change.new.isr == (1, 2) and change.new.leader_recovery_state == RECOVERED


def test_retry_of_the_change_in_force_succeeds_with_the_current_state_despite_a_stale_partition_epoch() -> (
    None
):
    plan = alter_partition.validate(cluster(), request(partition((1, 2, 3), partition_epoch=3)), 2)
    assert outcome(plan) == CURRENT and plan.changes == {} and plan.rejected == {}


def test_a_broker_that_does_not_lead_cannot_change_the_isr_even_with_current_epochs() -> None:
    ctx = cluster()
    for isr in ((1, 2, 3), (2, 3)):
        plan = alter_partition.validate(
            ctx, request(partition(isr, partition_epoch=3), broker_id=2, broker_epoch=102), 2
        )
        assert outcome(plan) == ErrorCode.INVALID_REQUEST


def test_same_isr_with_another_recovery_state_is_not_a_retry() -> None:
    ctx = cluster()
    set_current(ctx, isr=(1,), leader_recovery_state=RECOVERING)
    plan = alter_partition.validate(ctx, request(partition((1,), partition_epoch=3, recovery=RECOVERED)), 2)
    assert outcome(plan) == ErrorCode.INVALID_UPDATE_VERSION


# -- order: each case fails two checks; the earlier one in Kafka's order must win

ORDER_CASES: list[tuple[str, Setup, dict[str, Any], ErrorCode | LeaderAndIsr]] = [
    (
        "partition epoch ahead beats leader epoch behind",
        no_setup,
        partition(partition_epoch=5, leader_epoch=0),
        ErrorCode.NOT_CONTROLLER,
    ),
    (
        "leader epoch ahead beats stale partition epoch",
        no_setup,
        partition(partition_epoch=3, leader_epoch=2),
        ErrorCode.NOT_CONTROLLER,
    ),
    (
        "leader epoch behind beats stale partition epoch",
        no_setup,
        partition(partition_epoch=3, leader_epoch=0),
        ErrorCode.FENCED_LEADER_EPOCH,
    ),
    (
        "leader epoch behind beats an otherwise idempotent retry",
        no_setup,
        partition((1, 2, 3), leader_epoch=0),
        ErrorCode.FENCED_LEADER_EPOCH,
    ),
    (
        "idempotent retry beats stale partition epoch",
        no_setup,
        partition((1, 2, 3), partition_epoch=3),
        CURRENT,
    ),
    (
        "idempotent retry beats an ineligible ISR member",
        broker_3_dead,
        partition((1, 2, 3)),
        CURRENT,
    ),
    (
        "stale partition epoch beats recovering with two ISR members",
        no_setup,
        partition((1, 2), partition_epoch=3, recovery=RECOVERING),
        ErrorCode.INVALID_UPDATE_VERSION,
    ),
    (
        "stale partition epoch beats an ineligible ISR member",
        broker_3_dead,
        partition((1, 3), partition_epoch=3),
        ErrorCode.INVALID_UPDATE_VERSION,
    ),
    (
        "recovered to recovering beats an ineligible ISR member",
        broker_3_dead,
        partition((3,), recovery=RECOVERING),
        ErrorCode.INVALID_REQUEST,
    ),
    (
        "recovering with two ISR members beats an ineligible ISR member",
        recovering_leader_alone_and_broker_3_dead,
        partition((1, 3), recovery=RECOVERING),
        ErrorCode.INVALID_REQUEST,
    ),
]


@pytest.mark.parametrize(
    ("setup", "entry", "expected"), [c[1:] for c in ORDER_CASES], ids=[c[0] for c in ORDER_CASES]
)
def test_checks_run_in_kafkas_order(
    setup: Setup, entry: dict[str, Any], expected: ErrorCode | LeaderAndIsr
) -> None:
    ctx = cluster()
    setup(ctx)
    assert outcome(alter_partition.validate(ctx, request(entry), 2)) == expected


def test_partitions_are_decided_independently_and_kept_in_request_order() -> None:
    ctx = context({1: 101, 2: 102, 3: 103}, {TOPIC: [[1, 2, 3], [1, 2], [1, 3]]})
    ctx.topic_ids[TOPIC] = TOPIC_ID
    entries = [partition(index=2, new_isr=(1,)), partition(index=7), partition(index=0, leader_epoch=0)]
    plan = alter_partition.validate(ctx, request(*entries), 2)
    assert plan.order == [(TOPIC_ID, 2), (TOPIC_ID, 7), (TOPIC_ID, 0)]
    assert set(plan.changes) == {(TOPIC_ID, 2)}
    assert plan.rejected == {
        (TOPIC_ID, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        (TOPIC_ID, 0): ErrorCode.FENCED_LEADER_EPOCH,
    }


# -- the response


def committed(plan: AlterPartitionPlan, new_version: int) -> None:
    """What the controller does after the write: each change's outcome is the state now in force."""
    for key, change in plan.changes.items():
        plan.outcomes[key] = change.new.with_partition_epoch(new_version)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_response_answers_in_request_order_and_survives_the_wire(version: int) -> None:
    ctx = context({1: 101, 2: 102, 3: 103}, {TOPIC: [[1, 2, 3], [1, 2]]})
    ctx.topic_ids[TOPIC] = TOPIC_ID
    recovery = None if version == 0 else RECOVERED
    entries = [
        partition((1, 2), index=0, recovery=recovery),
        partition(index=5, recovery=recovery),
        partition((1, 2), index=1, partition_epoch=3, recovery=recovery),
    ]
    plan = alter_partition.validate(ctx, request(*entries, version=version), version)
    committed(plan, new_version=5)
    body = alter_partition.response(plan, version)

    key = "topic_id" if version >= 2 else "topic_name"
    assert body["error_code"] == ErrorCode.NONE and body["throttle_time_ms"] == 0
    assert [t[key] for t in body["topics"]] == [TOPIC_ID if version >= 2 else TOPIC]
    parts = body["topics"][0]["partitions"]
    assert [p["partition_index"] for p in parts] == [0, 5, 1]
    accepted, unknown, retry = parts
    assert accepted["error_code"] == ErrorCode.NONE
    assert (accepted["leader_id"], accepted["leader_epoch"], accepted["isr"]) == (1, 1, [1, 2])
    assert accepted["partition_epoch"] == 5  # the state znode's new version
    assert unknown["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert retry["error_code"] == ErrorCode.NONE and retry["partition_epoch"] == 4  # already in force
    assert ("leader_recovery_state" in accepted) is (version >= 1)

    correlation_id, decoded = decode_response(
        ApiKey.ALTER_PARTITION, version, encode_response(ApiKey.ALTER_PARTITION, version, 1, body)
    )
    assert correlation_id == 1 and decoded == body


@pytest.mark.parametrize("version", [0, 1, 2])
def test_top_level_error_response_survives_the_wire(version: int) -> None:
    plan = alter_partition.validate(cluster(), request(version=version, broker_epoch=7), version)
    body = alter_partition.response(plan, version)
    _, decoded = decode_response(
        ApiKey.ALTER_PARTITION, version, encode_response(ApiKey.ALTER_PARTITION, version, 1, body)
    )
    assert decoded == {"throttle_time_ms": 0, "error_code": ErrorCode.STALE_BROKER_EPOCH, "topics": []}


def test_partitions_of_one_topic_share_one_topic_entry_in_the_response() -> None:
    ctx = context({1: 101, 2: 102}, {TOPIC: [[1, 2], [1, 2]], "u": [[1, 2]]})
    ctx.topic_ids |= {TOPIC: TOPIC_ID, "u": None}
    req = request(partition(index=0), partition(index=1), version=1)
    req["topics"].append({"topic_name": "u", "partitions": [partition(index=0, recovery=RECOVERED)]})
    plan = alter_partition.validate(ctx, req, 1)
    committed(plan, new_version=5)
    body = alter_partition.response(plan, 1)
    assert [(t["topic_name"], [p["partition_index"] for p in t["partitions"]]) for t in body["topics"]] == [
        (TOPIC, [0, 1]),
        ("u", [0]),
    ]


# -- v3 (KIP-903): each proposed ISR member with its broker epoch


def with_epochs(entry: dict[str, Any], epochs: dict[int, int]) -> dict[str, Any]:
    """``entry`` in v3's form: ``new_isr`` replaced by ``new_isr_with_epochs``."""
    members = [{"broker_id": r, "broker_epoch": epochs.get(r, -1)} for r in entry["new_isr"]]
    return {k: v for k, v in entry.items() if k != "new_isr"} | {"new_isr_with_epochs": members}


@pytest.mark.parametrize(
    ("epochs", "expected"),
    [
        ({}, None),
        ({1: 101, 2: 102}, None),
        ({2: 100}, ErrorCode.INELIGIBLE_REPLICA),
        ({2: 999}, ErrorCode.INELIGIBLE_REPLICA),
        ({1: 100}, ErrorCode.INELIGIBLE_REPLICA),
    ],
    ids=[
        "every epoch -1, as Kafka's ZooKeeper-mode brokers send",
        "registered epochs",
        "a member's stale epoch",
        "a member's epoch the controller has not seen",
        "the leader's own stale epoch",
    ],
)
def test_v3_refuses_a_member_whose_epoch_is_not_its_registrations(
    epochs: dict[int, int], expected: ErrorCode | None
) -> None:
    entry = with_epochs(partition((1, 2), recovery=RECOVERED), epochs)
    plan = alter_partition.validate(cluster(), request(entry, version=3), 3)
    decided = outcome(plan)
    if expected is None:
        assert isinstance(decided, LeadershipChange) and decided.new.isr == (1, 2)
    else:
        assert decided == expected and plan.rejected == {(TOPIC_ID, 0): expected}


def test_v3_still_refuses_a_dead_member_whatever_its_epoch() -> None:
    ctx = cluster()
    broker_3_dead(ctx)
    entry = with_epochs(partition((1, 3), recovery=RECOVERED), {3: 103})
    assert (
        outcome(alter_partition.validate(ctx, request(entry, version=3), 3)) == ErrorCode.INELIGIBLE_REPLICA
    )


def test_v3_retry_of_the_isr_in_force_is_answered_before_the_epochs_are_looked_at() -> None:
    entry = with_epochs(partition((1, 2, 3), partition_epoch=3, recovery=RECOVERED), {2: 1})
    assert outcome(alter_partition.validate(cluster(), request(entry, version=3), 3)) == CURRENT


def test_v3_response_survives_the_wire() -> None:
    entry = with_epochs(partition((1, 2), recovery=RECOVERED), {2: 100})
    plan = alter_partition.validate(cluster(), request(entry, version=3), 3)
    body = alter_partition.response(plan, 3)
    _, decoded = decode_response(
        ApiKey.ALTER_PARTITION, 3, encode_response(ApiKey.ALTER_PARTITION, 3, 1, body)
    )
    assert decoded == body
    assert decoded["topics"][0]["topic_id"] == TOPIC_ID
    assert decoded["topics"][0]["partitions"][0]["error_code"] == ErrorCode.INELIGIBLE_REPLICA
