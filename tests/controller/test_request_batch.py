"""Request batches: Kafka's per-broker requests, and seed 002's single shared UpdateMetadata."""

from __future__ import annotations

from typing import Any

from controller.model import TopicPartition
from controller.request_batch import EpochProtocol, OutgoingRequest, RequestBatch
from protocol import LEADER_DURING_DELETE, ApiKey, decode_request, encode_request_header
from tests.controller.builders import context

PER_BROKER, MAX_EPOCH = EpochProtocol.PER_BROKER, EpochProtocol.MAX_BROKER_EPOCH


def decoded(request: OutgoingRequest) -> dict[str, Any]:
    header = encode_request_header(request.api_key, request.api_version, 1, "t", len(request.body))
    return decode_request(header + request.body)[1]


def batch(ctx, protocol=MAX_EPOCH) -> RequestBatch:
    return RequestBatch(ctx, protocol.wire, inter_broker_listener="PLAINTEXT")


def test_max_epoch_mode_encodes_the_update_metadata_once_for_200_brokers() -> None:
    epochs = {b: 1000 + b for b in range(200)}
    ctx = context(epochs, {"t": [[b, (b + 1) % 200, (b + 2) % 200] for b in range(50)]})
    b = batch(ctx, MAX_EPOCH)
    b.add_update_metadata(ctx.live_or_shutting_down_ids, ctx.all_partitions())
    requests = b.build()
    assert len(requests) == 200 and b.encodes == 1
    assert all(r.body is requests[0].body for r in requests)  # the same bytes object, not a copy
    body = decoded(requests[0])
    assert body["max_broker_epoch"] == 1199 and "broker_epoch" not in body
    assert requests[0].api_version == 7 and len(body["live_brokers"]) == 200


def test_per_broker_mode_encodes_one_update_metadata_per_broker_with_its_epoch() -> None:
    epochs = {b: 1000 + b for b in range(20)}
    ctx = context(epochs, {"t": [[0, 1, 2]]})
    b = batch(ctx, PER_BROKER)
    b.add_update_metadata(ctx.live_or_shutting_down_ids, ctx.all_partitions())
    requests = b.build()
    assert b.encodes == 20 and requests[0].api_version == 5
    assert {r.broker_id: decoded(r)["broker_epoch"] for r in requests} == epochs


def test_leader_and_isr_also_announces_the_partition_to_every_broker() -> None:
    ctx = context({1: 10, 2: 20, 3: 30, 4: 40}, {"t": [[1, 2, 3]]})
    b = batch(ctx)
    b.add_leader_and_isr([1, 2, 3], TopicPartition("t", 0), is_new=True)
    requests = b.build()
    kinds = [(r.api_key, r.broker_id) for r in requests]
    assert kinds == [(ApiKey.LEADER_AND_ISR, b) for b in (1, 2, 3)] + [
        (ApiKey.UPDATE_METADATA, b) for b in (1, 2, 3, 4)
    ]
    lai = decoded(requests[0])
    state = lai["topic_states"][0]["partition_states"][0]
    assert state == {
        "partition_index": 0,
        "controller_epoch": 3,
        "leader": 1,
        "leader_epoch": 1,
        "isr": [1, 2, 3],
        "partition_epoch": 4,
        "replicas": [1, 2, 3],
        "is_new": True,
    }
    assert lai["live_leaders"] == [{"broker_id": 1, "host_name": "broker-1", "port": 9092}]
    assert lai["controller_epoch"] == 3 and lai["max_broker_epoch"] == 40


def test_max_epoch_mode_encodes_a_leader_and_isr_once_for_brokers_given_the_same_partitions() -> None:
    """A controlled shutdown tells every replica of every partition: on the seeds' wire their
    LeaderAndIsr bodies are the same bytes, encoded once; a broker given other partitions gets its own."""
    ctx = context({1: 10, 2: 20, 3: 30, 4: 40}, {"t": [[1, 2, 3], [2, 3, 1], [4, 1]]})
    b = batch(ctx, MAX_EPOCH)
    for p in (0, 1):
        b.add_leader_and_isr([1, 2, 3], TopicPartition("t", p))
    b.add_leader_and_isr([4, 1], TopicPartition("t", 2))
    requests = [r for r in b.build() if r.api_key == ApiKey.LEADER_AND_ISR]
    bodies = {r.broker_id: r.body for r in requests}
    assert bodies[2] is bodies[3] and bodies[1] is not bodies[2] and bodies[4] is not bodies[2]
    assert b.encodes == 3 + 1  # brokers 1, 2 (and 3), 4, then the UpdateMetadata
    states = decoded(requests[2])["topic_states"][0]["partition_states"]
    assert {s["partition_index"] for s in states} == {0, 1}


def test_the_same_partitions_in_another_order_are_encoded_apart() -> None:
    ctx = context({1: 10, 2: 20}, {"t": [[1, 2], [1, 2]]})
    b = batch(ctx, MAX_EPOCH)
    b.add_leader_and_isr([1, 2], TopicPartition("t", 0))
    b.add_leader_and_isr([2], TopicPartition("t", 1))
    b.add_leader_and_isr([1], TopicPartition("t", 1))
    b.leader_and_isr[2] = dict(reversed(b.leader_and_isr[2].items()))
    requests = [r for r in b.build() if r.api_key == ApiKey.LEADER_AND_ISR]
    assert requests[0].body != requests[1].body and b.encodes == 2 + 1


def test_per_broker_mode_encodes_each_leader_and_isr_with_its_broker_epoch() -> None:
    ctx = context({1: 10, 2: 20}, {"t": [[1, 2]]})
    b = batch(ctx, PER_BROKER)
    b.add_leader_and_isr([1, 2], TopicPartition("t", 0))
    requests = [r for r in b.build() if r.api_key == ApiKey.LEADER_AND_ISR]
    assert [decoded(r)["broker_epoch"] for r in requests] == [10, 20]


def test_is_new_and_delete_flags_are_or_ed_within_a_batch() -> None:
    ctx = context({1: 10, 2: 20}, {"t": [[1, 2]]})
    tp = TopicPartition("t", 0)
    b = batch(ctx)
    b.add_leader_and_isr([2], tp, is_new=True)
    b.add_leader_and_isr([2], tp, is_new=False)
    b.add_stop_replica([1], tp, delete=True)
    b.add_stop_replica([1], tp, delete=False)
    requests = b.build()
    assert decoded(requests[0])["topic_states"][0]["partition_states"][0]["is_new"] is True
    stop = [r for r in requests if r.api_key == ApiKey.STOP_REPLICA]
    assert len(stop) == 1 and decoded(stop[0])["delete_partitions"] is True


def test_stop_replica_splits_by_delete_flag_and_comes_last() -> None:
    ctx = context({1: 10, 2: 20}, {"t": [[1, 2], [1, 2]], "u": [[1]]})
    b = batch(ctx, PER_BROKER)
    b.add_stop_replica([1], TopicPartition("t", 0), delete=False)
    b.add_stop_replica([1], TopicPartition("u", 0), delete=True)
    b.add_leader_and_isr([2], TopicPartition("t", 1))
    requests = b.build()
    assert [r.api_key for r in requests][-2:] == [ApiKey.STOP_REPLICA, ApiKey.STOP_REPLICA]
    delete, keep = (decoded(r) for r in requests[-2:])
    assert (delete["delete_partitions"], delete["topics"]) == (
        True,
        [{"name": "u", "partition_indexes": [0]}],
    )
    assert (keep["delete_partitions"], keep["topics"]) == (False, [{"name": "t", "partition_indexes": [0]}])
    assert keep["broker_epoch"] == 10


def test_partitions_of_topics_being_deleted_carry_leader_minus_two_and_offline_replicas() -> None:
    ctx = context({1: 10, 2: 20}, {"gone": [[1, 2, 3]]})
    ctx.topics_to_delete.add("gone")
    b = batch(ctx)
    b.add_update_metadata([1], ctx.all_partitions())
    state = decoded(b.build()[0])["topic_states"][0]["partition_states"][0]
    assert state["leader"] == LEADER_DURING_DELETE and state["offline_replicas"] == [3]


def test_requests_for_brokers_that_are_gone_are_dropped() -> None:
    ctx = context({1: 10}, {"t": [[1, 2]]})
    b = batch(ctx)
    b.add_leader_and_isr([1, 2], TopicPartition("t", 0))
    b.add_stop_replica([2], TopicPartition("t", 0), delete=False)
    assert {r.broker_id for r in b.build()} == {1}
    assert b.empty
