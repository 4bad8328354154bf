"""Golden cases of the brokers' requests to the controller in the versions Apache Kafka 3.9 sends:
AlterPartition v3 (KIP-903's ISR with broker epochs) and ControlledShutdown v3 (v2 made flexible), each
body beside its bytes built field by field from Kafka's JSON specs (:mod:`tests.protocol.golden`)."""

from __future__ import annotations

import pytest

from tests.protocol.golden import (
    ALTER_PARTITION,
    CONTROLLED_SHUTDOWN,
    TAGS,
    TID1,
    TID2,
    TOPIC_UTF8,
    carr,
    ci32s,
    cs,
    i8,
    i16,
    i32,
    i64,
    uid,
)

# --------------------------------------------------------------------------------------------------------
# AlterPartition v3 (KIP-903)
#   broker_id i32, broker_epoch i64,
#   topics [topic_id uuid, partitions [partition_index i32, leader_epoch i32,
#           new_isr_with_epochs [broker_id i32, broker_epoch i64, TAGS], leader_recovery_state i8,
#           partition_epoch i32, TAGS], TAGS], TAGS
# Response v3 (= v2): throttle_time_ms i32, error_code i16,
#   topics [topic_id uuid, partitions [partition_index i32, error_code i16, leader_id i32, leader_epoch i32,
#           isr [i32], leader_recovery_state i8, partition_epoch i32, TAGS], TAGS], TAGS
# --------------------------------------------------------------------------------------------------------


def ap3_request(broker_id, broker_epoch, topics):
    """topics: [(topic_id, [(partition_index, leader_epoch, [(broker_id, broker_epoch)], lrs, pepoch)])]"""
    body_topics, raw_topics = [], []
    for tid, parts in topics:
        dparts, bparts = [], []
        for index, lepoch, isr, lrs, pepoch in parts:
            dparts.append(
                {
                    "partition_index": index,
                    "leader_epoch": lepoch,
                    "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": e} for b, e in isr],
                    "leader_recovery_state": lrs,
                    "partition_epoch": pepoch,
                }
            )
            raw_isr = carr([i32(b) + i64(e) + TAGS for b, e in isr])
            bparts.append(i32(index) + i32(lepoch) + raw_isr + i8(lrs) + i32(pepoch) + TAGS)
        body_topics.append({"topic_id": tid, "partitions": dparts})
        raw_topics.append(uid(tid) + carr(bparts) + TAGS)
    body = {"broker_id": broker_id, "broker_epoch": broker_epoch, "topics": body_topics}
    return body, i32(broker_id) + i64(broker_epoch) + carr(raw_topics) + TAGS


def ap3_response(throttle, error_code, topics):
    """topics: [(topic_id, [(partition_index, error_code, leader_id, leader_epoch, isr, lrs, pepoch)])]"""
    body_topics, raw_topics = [], []
    for tid, parts in topics:
        dparts, bparts = [], []
        for index, err, leader, lepoch, isr, lrs, pepoch in parts:
            dparts.append(
                {
                    "partition_index": index,
                    "error_code": err,
                    "leader_id": leader,
                    "leader_epoch": lepoch,
                    "isr": isr,
                    "leader_recovery_state": lrs,
                    "partition_epoch": pepoch,
                }
            )
            b = i32(index) + i16(err) + i32(leader) + i32(lepoch) + ci32s(isr) + i8(lrs) + i32(pepoch)
            bparts.append(b + TAGS)
        body_topics.append({"topic_id": tid, "partitions": dparts})
        raw_topics.append(uid(tid) + carr(bparts) + TAGS)
    body = {"throttle_time_ms": throttle, "error_code": error_code, "topics": body_topics}
    return body, i32(throttle) + i16(error_code) + carr(raw_topics) + TAGS


AP3_REQUEST_CASES = [
    pytest.param(ALTER_PARTITION, 3, 0, None, *ap3_request(1, 2, []), id="ap-v3-empty"),
    pytest.param(
        ALTER_PARTITION,
        3,
        31,
        "broker-1",
        *ap3_request(
            1,
            4294967296,
            [
                (TID1, [(0, 5, [(1, 4294967296), (2, -1)], 0, 10), (3, 2, [], 1, 0)]),
                (TID2, [(1, 0, [(1, 0x7FFFFFFFFFFFFFFF)], 1, -1)]),
            ],
        ),
        id="ap-v3-two-topics-isr-epochs",
    ),
]

AP3_RESPONSE_CASES = [
    pytest.param(ALTER_PARTITION, 3, 0, *ap3_response(0, 0, []), id="ap-v3-resp-empty"),
    pytest.param(
        ALTER_PARTITION,
        3,
        44,
        *ap3_response(
            100, 0, [(TID1, [(0, 0, 1, 6, [1, 2, 3], 0, 11), (1, 107, -1, -1, [], 1, -1)]), (TID2, [])]
        ),
        id="ap-v3-resp-ineligible-replica",
    ),
]


# --------------------------------------------------------------------------------------------------------
# ControlledShutdown v3: broker_id i32, broker_epoch i64, TAGS
# Response v3: error_code i16, remaining_partitions [topic_name cstr, partition_index i32, TAGS], TAGS
# --------------------------------------------------------------------------------------------------------


def cs3_response(error_code, remaining):
    body = {
        "error_code": error_code,
        "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining],
    }
    return body, i16(error_code) + carr([cs(t) + i32(p) + TAGS for t, p in remaining]) + TAGS


CS3_REQUEST_CASES = [
    pytest.param(
        CONTROLLED_SHUTDOWN,
        3,
        1,
        "broker-3",
        {"broker_id": 3, "broker_epoch": 4294967338},
        i32(3) + i64(4294967338) + TAGS,
        id="cs-v3-basic",
    ),
    pytest.param(
        CONTROLLED_SHUTDOWN,
        3,
        -1,
        None,
        {"broker_id": -1, "broker_epoch": -1},
        i32(-1) + i64(-1) + TAGS,
        id="cs-v3-minus-one",
    ),
]

CS3_RESPONSE_CASES = [
    pytest.param(CONTROLLED_SHUTDOWN, 3, 1, *cs3_response(0, []), id="cs-v3-resp-done"),
    pytest.param(
        CONTROLLED_SHUTDOWN,
        3,
        2,
        *cs3_response(0, [("orders", 0), (TOPIC_UTF8, 5)]),
        id="cs-v3-resp-remaining",
    ),
    pytest.param(CONTROLLED_SHUTDOWN, 3, 3, *cs3_response(77, []), id="cs-v3-resp-stale"),
]
