"""The controller on Apache Kafka 3.9's wire (IBP 3.9): its requests byte for byte against bodies built
field by field from Kafka's JSON specs (``tests/protocol/golden_kafka39.py``), and its reading of the
answers Kafka's brokers give (LeaderAndIsr v7 by topic id, StopReplica v4 by name).

The cluster: brokers 1 and 2 live with epochs 10 and 20, broker 3 dead; the controller is 100.
"""

from __future__ import annotations

import uuid
from typing import Any

from controller.channel import refused_partitions
from controller.context import ControllerContext, LiveBroker
from controller.handlers.responses import leader_and_isr_errors
from controller.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, Reassignment, TopicPartition
from controller.phantom_replicas import without_controller
from controller.request_batch import (
    OutgoingRequest,
    RequestBatch,
    controller_as_live_broker,
    deletion_errors,
)
from protocol import (
    ApiKey,
    ErrorCode,
    WireDialect,
    decode_request,
    decode_response,
    encode_request_header,
    encode_response,
)
from protocol.ibp import control_wire
from tests.controller.builders import context
from tests.protocol.golden_kafka39 import (
    lai7_partition,
    lai7_request,
    lai7_response,
    sr4_request,
    sr4_response,
    um8_broker,
    um8_partition,
    um8_request,
)
from zkstore.znodes import BrokerRegistration, Endpoint

KAFKA_39 = control_wire("3.9")
TID = uuid.UUID("5f0e7a4c-27d1-4c1e-9a33-0d2b1f6c8e01")
GONE_ID = uuid.UUID("00000000-0000-4000-8000-00000000000a")
T0, GONE0 = TopicPartition("t", 0), TopicPartition("gone", 0)
RPC = Endpoint("RPC", "controller-100", 9091)


def cluster() -> ControllerContext:
    ctx = context({1: 10, 2: 20}, {"t": [[1, 2, 3]], "gone": [[1, 2]]})
    ctx.topic_ids.update(t=TID, gone=GONE_ID)
    return ctx


def batch(ctx: ControllerContext, *, listed: bool = False, ibp: str = "3.9") -> RequestBatch:
    entry = (
        controller_as_live_broker(100, RPC, "PLAINTEXT", ["CONTROL_PLANE", "PLAINTEXT"]) if listed else None
    )
    return RequestBatch(ctx, control_wire(ibp), "PLAINTEXT", entry)


def of(requests: list[OutgoingRequest], api_key: ApiKey) -> dict[int, OutgoingRequest]:
    return {r.broker_id: r for r in requests if r.api_key == api_key}


def test_the_wire_of_ibp_39_is_kafkas_v7_v8_v4_in_the_kafka_dialect() -> None:
    b = batch(cluster())
    assert (b.version(ApiKey.LEADER_AND_ISR), b.version(ApiKey.UPDATE_METADATA)) == (7, 8)
    assert b.version(ApiKey.STOP_REPLICA) == 4 and KAFKA_39.dialect is WireDialect.KAFKA


def test_leader_and_isr_v7_is_kafkas_body_with_topic_id_reassignment_and_recovery_state() -> None:
    ctx = cluster()
    ctx.assignments["t"][0] = (1, 3, 2)  # RS of a move from [1, 2] to [1, 3]
    ctx.reassignments[T0] = Reassignment(origin=(1, 2), target=(1, 3))
    recovering = LeaderAndIsr(leader=1, leader_epoch=6, isr=(1,), partition_epoch=9, leader_recovery_state=1)
    ctx.leadership[T0] = LeaderIsrAndControllerEpoch(recovering, 2)
    b = batch(ctx)
    b.add_leader_and_isr([2], T0, is_new=True)
    requests = b.build()
    (lai,) = of(requests, ApiKey.LEADER_AND_ISR).values()
    partition = lai7_partition(0, 2, 1, 6, [1], 9, [1, 3, 2], [3], [2], True, 1)
    _, expected = lai7_request(100, False, 3, 20, 0, [("t", TID, [partition])], [(1, "broker-1", 9092)])
    assert (lai.broker_id, lai.api_version, lai.dialect) == (2, 7, WireDialect.KAFKA)
    assert lai.body == expected
    assert lai.summary == {"partitions": 1, "controller_epoch": 3, "broker_epoch": 20}


def test_update_metadata_v8_carries_topic_ids_endpoints_with_protocol_ids_and_each_brokers_epoch() -> None:
    ctx = cluster()
    tls = BrokerRegistration(
        broker_id=2,
        endpoints=(Endpoint("INTERNAL", "b2", 9093), Endpoint("CLIENTS", "b2", 9094)),
        listener_security_protocol_map={"INTERNAL": "SSL", "CLIENTS": "SASL_SSL"},
        timestamp=0,
        rack="r2",
    )
    ctx.brokers[2] = LiveBroker(tls, 20)
    b = batch(ctx, listed=True)
    b.add_update_metadata([1, 2], [T0])
    requests = of(b.build(), ApiKey.UPDATE_METADATA)
    assert b.encodes == 2  # one per broker: each carries its own epoch
    brokers = [
        um8_broker(1, [(9092, "broker-1", "PLAINTEXT", 0), (9093, "broker-1", "CONTROL_PLANE", 0)], None),
        um8_broker(2, [(9093, "b2", "INTERNAL", 1), (9094, "b2", "CLIENTS", 3)], "r2"),
        um8_broker(
            100,
            [(9091, "controller-100", "CONTROL_PLANE", 0), (9091, "controller-100", "PLAINTEXT", 0)],
            None,
        ),
    ]
    state = um8_partition(0, 3, 1, 1, [1, 2], 4, [1, 2, 3], [3])
    for broker_id, epoch in ((1, 10), (2, 20)):
        _, expected = um8_request(100, False, 0, 3, epoch, [("t", TID, [state])], brokers)
        assert (requests[broker_id].api_version, requests[broker_id].dialect) == (8, WireDialect.KAFKA)
        assert requests[broker_id].body == expected


def test_the_controller_is_listed_once_and_only_when_asked() -> None:
    entry = controller_as_live_broker(100, RPC, "SSL", ["PLAINTEXT", "PLAINTEXT"])
    assert entry == {
        "id": 100,
        "endpoints": [
            {"port": 9091, "host": "controller-100", "listener": "PLAINTEXT", "security_protocol": 1}
        ],
        "rack": None,
    }
    for listed in (False, True):
        b = batch(cluster(), listed=listed)
        b.add_update_metadata([1])
        (um,) = b.build()
        live = decode(um)["live_brokers"]
        assert [broker["id"] for broker in live] == ([1, 2, 100] if listed else [1, 2])


def test_stop_replica_v4_sends_one_request_per_broker_with_an_epoch_and_a_delete_flag_per_partition() -> None:
    ctx = cluster()
    ctx.topics_to_delete.add("gone")
    b = batch(ctx)
    b.add_stop_replica([1], T0, delete=False)
    b.add_stop_replica([1, 2], GONE0, delete=False)
    b.add_stop_replica([1], GONE0, delete=True)  # OR-ed with the earlier flag, as Kafka does
    ctx.leadership[T0] = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 7, (1,), 5), 3)  # after the add
    requests = of(b.build(), ApiKey.STOP_REPLICA)
    _, to_1 = sr4_request(100, False, 3, 10, [("gone", [(0, -2, True)]), ("t", [(0, 1, False)])])
    _, to_2 = sr4_request(100, False, 3, 20, [("gone", [(0, -2, False)])])
    assert requests[1].body == to_1 and requests[2].body == to_2
    assert (requests[1].api_version, requests[1].dialect) == (4, WireDialect.KAFKA)
    assert requests[1].deleting == {GONE0} and requests[2].deleting == frozenset()
    assert requests[1].summary["delete"] is True and requests[1].summary["deleted"] == 1


def test_a_stop_replica_answer_moves_deletion_only_for_the_partitions_it_deleted() -> None:
    ctx = cluster()
    ctx.topics_to_delete.add("gone")
    b = batch(ctx)
    b.add_stop_replica([1], T0, delete=False)
    b.add_stop_replica([1], GONE0, delete=True)
    (request,) = b.build()
    body, raw = sr4_response(0, [("gone", 0, ErrorCode.NONE), ("t", 0, ErrorCode.FENCED_LEADER_EPOCH)])
    answer = read_response(ApiKey.STOP_REPLICA, 4, raw)
    assert answer == body
    assert deletion_errors(request, answer) == {GONE0: ErrorCode.NONE}
    assert refused_partitions(answer) == 1


def test_leader_and_isr_v7_answers_are_read_by_topic_id() -> None:
    unknown = uuid.UUID(int=7)
    _, raw = lai7_response(
        0,
        [
            (TID, [(0, 0), (1, ErrorCode.KAFKA_STORAGE_ERROR)]),
            (unknown, [(3, ErrorCode.FENCED_LEADER_EPOCH)]),
        ],
    )
    answer = read_response(ApiKey.LEADER_AND_ISR, 7, raw)
    assert leader_and_isr_errors(answer, {TID: "t"}) == [
        ("t", 1, ErrorCode.KAFKA_STORAGE_ERROR),
        (str(unknown), 3, ErrorCode.FENCED_LEADER_EPOCH),
    ]
    assert refused_partitions(answer) == 2
    by_name = {
        "error_code": 0,
        "partition_errors": [{"topic_name": "t", "partition_index": 2, "error_code": 11}],
    }
    assert leader_and_isr_errors(by_name, {}) == [("t", 2, 11)]
    assert refused_partitions({"error_code": 0}) is None


def test_the_seeds_wire_is_unchanged_by_kafkas() -> None:
    """The default IBP keeps seed 002's layouts: no topic ids, max_broker_epoch, split StopReplicas."""
    ctx = cluster()
    b = batch(ctx, ibp="2.3-IV2", listed=True)
    b.add_leader_and_isr([1], T0)
    b.add_stop_replica([1], T0, delete=False)
    requests = b.build()
    lai, um = decode(requests[0]), decode(requests[1])
    assert "topic_id" not in lai["topic_states"][0] and lai["max_broker_epoch"] == 20
    assert "adding_replicas" not in lai["topic_states"][0]["partition_states"][0]
    assert "topic_id" not in um["topic_states"][0]
    assert decode(requests[-1])["delete_partitions"] is False
    assert {r.dialect for r in requests} == {WireDialect.SEED}


def decode(request: OutgoingRequest) -> dict[str, Any]:
    header = encode_request_header(
        request.api_key, request.api_version, 1, "t", len(request.body), dialect=request.dialect
    )
    return decode_request(header + request.body, dialect=request.dialect)[1]


def read_response(api_key: ApiKey, version: int, raw_body: bytes) -> dict[str, Any]:
    """A broker's answer as the channel reads it, from its body's bytes."""
    body = decode_response(api_key, version, frame(api_key, version, raw_body), dialect=WireDialect.KAFKA)[1]
    assert encode_response(api_key, version, 1, body, dialect=WireDialect.KAFKA) == frame(
        api_key, version, raw_body
    )
    return body


def frame(api_key: ApiKey, version: int, raw_body: bytes) -> bytes:
    """Size prefix, response header v1 (correlation id 1, no tags), body."""
    payload = (1).to_bytes(4, "big") + b"\x00" + raw_body
    return len(payload).to_bytes(4, "big") + payload


# -- replicas a Kafka broker placed on the controller (listed among its live brokers)


def test_replicas_on_the_controller_go_to_brokers_the_partition_lacks_in_turn() -> None:
    placed = {0: (1001,), 1: (0,), 2: (1,), 3: (1001,), 4: (1001, 0), 5: (1, 1001)}
    assert without_controller(placed, 1001, [0, 1, 1001]) == {
        0: (0,),  # spare [0, 1], index 0
        1: (0,),
        2: (1,),
        3: (1,),  # spare [0, 1], index 3
        4: (1, 0),  # the slot keeps its place: the first replica is the preferred leader
        5: (1, 0),
    }


def test_nothing_to_hand_over_or_no_one_to_take_it() -> None:
    assert without_controller({0: (0, 1)}, 1001, [0, 1]) is None
    assert without_controller({0: (0, 1001), 1: (1001,)}, 1001, [0]) == {0: (0,), 1: (0,)}
    assert without_controller({0: (1001,)}, 1001, []) == {0: (1001,)}  # stays offline, as before
