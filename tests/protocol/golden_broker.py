"""Golden cases of the brokers' requests to the controller: ControlledShutdown v2 and AlterPartition
v0-v2 (flexible), each body beside its bytes built field by field (:mod:`tests.protocol.golden`)."""

from __future__ import annotations

import pytest

from tests.protocol.golden import (
    ALTER_PARTITION,
    CONTROLLED_SHUTDOWN,
    LONG_TOPIC,
    TAGS,
    TID1,
    TID2,
    TOPIC_UTF8,
    arr,
    carr,
    ci32s,
    cs,
    hx,
    i8,
    i16,
    i32,
    i64,
    s,
    uid,
)

# --------------------------------------------------------------------------------------------------------
# ControlledShutdown v2: broker_id i32, broker_epoch i64
# Response: error_code i16, remaining_partitions [topic_name str, partition_index i32]
# --------------------------------------------------------------------------------------------------------


def cs_response(error_code, remaining):
    body = {
        "error_code": error_code,
        "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining],
    }
    return body, i16(error_code) + arr([s(t) + i32(p) for t, p in remaining])


CS_REQUEST_CASES = [
    pytest.param(
        CONTROLLED_SHUTDOWN,
        2,
        1,
        "broker-3",
        {"broker_id": 3, "broker_epoch": 4294967338},
        i32(3) + i64(4294967338),
        id="cs-v2-basic",
    ),
    pytest.param(
        CONTROLLED_SHUTDOWN,
        2,
        -1,
        None,
        {"broker_id": -1, "broker_epoch": -1},
        i32(-1) + i64(-1),
        id="cs-v2-minus-one",
    ),
]

CS_RESPONSE_CASES = [
    pytest.param(CONTROLLED_SHUTDOWN, 2, 1, *cs_response(0, []), id="cs-v2-resp-done"),
    pytest.param(
        CONTROLLED_SHUTDOWN,
        2,
        2,
        *cs_response(0, [("orders", 0), (TOPIC_UTF8, 5)]),
        id="cs-v2-resp-remaining",
    ),
    pytest.param(CONTROLLED_SHUTDOWN, 2, 3, *cs_response(77, []), id="cs-v2-resp-stale"),
]


# --------------------------------------------------------------------------------------------------------
# AlterPartition v0-v2 (flexible)
#   broker_id i32, broker_epoch i64,
#   topics [topic_name cstr (v0-1) | topic_id uuid (v2),
#           partitions [partition_index i32, leader_epoch i32, new_isr [i32], leader_recovery_state i8 (v1+),
#                       partition_epoch i32, TAGS], TAGS], TAGS
# Response: throttle_time_ms i32, error_code i16,
#   topics [topic_name | topic_id, partitions [partition_index i32, error_code i16, leader_id i32,
#           leader_epoch i32, isr [i32], leader_recovery_state i8 (v1+), partition_epoch i32, TAGS],
#    TAGS], TAGS
# --------------------------------------------------------------------------------------------------------


def ap_topic_key(version, topic):
    if version >= 2:
        return {"topic_id": topic}, uid(topic)
    return {"topic_name": topic}, cs(topic)


def ap_request(version, broker_id, broker_epoch, topics):
    """topics: [(name_or_id, [(partition_index, leader_epoch, new_isr, lrs, partition_epoch)])]"""
    body_topics, raw_topics = [], []
    for topic, parts in topics:
        kd, kb = ap_topic_key(version, topic)
        dparts, bparts = [], []
        for index, lepoch, isr, lrs, pepoch in parts:
            d = {"partition_index": index, "leader_epoch": lepoch, "new_isr": isr}
            b = i32(index) + i32(lepoch) + ci32s(isr)
            if version >= 1:
                d["leader_recovery_state"] = lrs
                b += i8(lrs)
            d["partition_epoch"] = pepoch
            dparts.append(d)
            bparts.append(b + i32(pepoch) + TAGS)
        body_topics.append({**kd, "partitions": dparts})
        raw_topics.append(kb + carr(bparts) + TAGS)
    body = {"broker_id": broker_id, "broker_epoch": broker_epoch, "topics": body_topics}
    return body, i32(broker_id) + i64(broker_epoch) + carr(raw_topics) + TAGS


def ap_response(version, throttle, error_code, topics):
    """topics: [(name_or_id, [(partition_index, error_code, leader_id, leader_epoch, isr, lrs, pepoch)])]"""
    body_topics, raw_topics = [], []
    for topic, parts in topics:
        kd, kb = ap_topic_key(version, topic)
        dparts, bparts = [], []
        for index, err, leader, lepoch, isr, lrs, pepoch in parts:
            d = {
                "partition_index": index,
                "error_code": err,
                "leader_id": leader,
                "leader_epoch": lepoch,
                "isr": isr,
            }
            b = i32(index) + i16(err) + i32(leader) + i32(lepoch) + ci32s(isr)
            if version >= 1:
                d["leader_recovery_state"] = lrs
                b += i8(lrs)
            d["partition_epoch"] = pepoch
            dparts.append(d)
            bparts.append(b + i32(pepoch) + TAGS)
        body_topics.append({**kd, "partitions": dparts})
        raw_topics.append(kb + carr(bparts) + TAGS)
    body = {"throttle_time_ms": throttle, "error_code": error_code, "topics": body_topics}
    return body, i32(throttle) + i16(error_code) + carr(raw_topics) + TAGS


def ap_request_cases(version):
    tag = f"ap-v{version}"
    t1, t2 = (TID1, TID2) if version >= 2 else ("orders", TOPIC_UTF8)
    return [
        pytest.param(ALTER_PARTITION, version, 0, None, *ap_request(version, 1, 2, []), id=f"{tag}-empty"),
        pytest.param(
            ALTER_PARTITION,
            version,
            31,
            "broker-1",
            *ap_request(
                version,
                1,
                4294967296,
                [(t1, [(0, 5, [1, 2], 0, 10), (3, 2, [], 1, 0)]), (t2, [(1, 0, [1], 1, -1)])],
            ),
            id=f"{tag}-two-topics",
        ),
        pytest.param(
            ALTER_PARTITION,
            version,
            32,
            "",
            # 127 ISR entries -> compact count 128 -> uvarint 80 01
            *ap_request(version, 2, -1, [(t1, [(0, 1, list(range(127)), 0, 3)]), (t2, [])]),
            id=f"{tag}-long-isr-empty-partitions",
        ),
    ]


def ap_response_cases(version):
    tag = f"ap-v{version}-resp"
    t1, t2 = (TID1, TID2) if version >= 2 else ("orders", TOPIC_UTF8)
    err = 107 if version >= 2 else 55
    return [
        pytest.param(ALTER_PARTITION, version, 0, *ap_response(version, 0, 0, []), id=f"{tag}-empty"),
        pytest.param(
            ALTER_PARTITION,
            version,
            44,
            *ap_response(
                version,
                100,
                0,
                [(t1, [(0, 0, 1, 6, [1, 2, 3], 0, 11), (1, err, -1, -1, [], 1, -1)]), (t2, [])],
            ),
            id=f"{tag}-two-topics",
        ),
        pytest.param(
            ALTER_PARTITION, version, 45, *ap_response(version, 0, 41, []), id=f"{tag}-top-level-error"
        ),
    ]


# A 200-byte topic name needs a two-byte varint length (only named-topic versions).
LONG_NAME_CASES = [
    pytest.param(
        ALTER_PARTITION,
        v,
        46,
        None,
        *ap_request(v, 1, 1, [(LONG_TOPIC, [(0, 0, [1], 0, 0)])]),
        id=f"ap-v{v}-200-byte-topic-name",
    )
    for v in (0, 1)
]


# Bodies small enough to frame by hand (headers, malformed input)
CS_BODY = {"broker_id": 1, "broker_epoch": 256}
CS_BODY_BYTES = hx("00000001 0000000000000100")
AP_EMPTY_BODY = {"broker_id": 1, "broker_epoch": 2, "topics": []}
AP_EMPTY_BODY_BYTES = hx("00000001 0000000000000002 01 00")  # broker_id, broker_epoch, topics [] , tags
