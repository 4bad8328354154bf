"""Golden cases of the control-plane versions Apache Kafka 3.9 speaks (IBP 3.9): the controller's
LeaderAndIsr v7, UpdateMetadata v8 and StopReplica v4 (Kafka's layout), each body beside its bytes built
field by field from Kafka's JSON specs (:mod:`tests.protocol.golden`), plus two whole frames in commented
hex. The brokers' AlterPartition v3 and ControlledShutdown v3 are in
:mod:`tests.protocol.golden_kafka39_broker`; ``KAFKA_39_*_CASES`` gather all five.

All five are flexible: request header v2 / response header v1, compact strings and arrays (unsigned
varint length+1, 0 for null) and a tagged-field section (``TAGS``, 0x00 when empty) closing every struct.
UpdateMetadata v8's ``type`` is tagged field 0 of the top-level struct: written, as Kafka writes it,
only when it is not its default 0 (``01`` one field, ``00`` tag 0, ``01`` one byte, the value).
"""

from __future__ import annotations

import pytest

from tests.protocol.golden import (
    LEADER_AND_ISR,
    LONG_TOPIC,
    STOP_REPLICA,
    TAGS,
    TID1,
    TID2,
    TOPIC_UTF8,
    UPDATE_METADATA,
    boolean,
    carr,
    ci32s,
    cns,
    cs,
    hx,
    i8,
    i16,
    i32,
    i64,
    uid,
)
from tests.protocol.golden_kafka39_broker import (
    AP3_REQUEST_CASES,
    AP3_RESPONSE_CASES,
    CS3_REQUEST_CASES,
    CS3_RESPONSE_CASES,
)

# --------------------------------------------------------------------------------------------------------
# LeaderAndIsr v7
#   controller_id i32, is_kraft_controller bool, controller_epoch i32, broker_epoch i64, type i8,
#   topic_states [topic_name cstr, topic_id uuid,
#                 partition_states [partition_index i32, controller_epoch i32, leader i32, leader_epoch i32,
#                                   isr [i32], partition_epoch i32, replicas [i32], adding_replicas [i32],
#                                   removing_replicas [i32], is_new bool, leader_recovery_state i8, TAGS],
#                 TAGS],
#   live_leaders [broker_id i32, host_name cstr, port i32, TAGS], TAGS
# Response v7: error_code i16, topics [topic_id uuid, partition_errors [partition_index i32, error_code i16,
#              TAGS], TAGS], TAGS
# --------------------------------------------------------------------------------------------------------


def lai7_partition(index, cepoch, leader, lepoch, isr, pepoch, replicas, adding, removing, is_new, lrs):
    d = {
        "partition_index": index,
        "controller_epoch": cepoch,
        "leader": leader,
        "leader_epoch": lepoch,
        "isr": isr,
        "partition_epoch": pepoch,
        "replicas": replicas,
        "adding_replicas": adding,
        "removing_replicas": removing,
        "is_new": is_new,
        "leader_recovery_state": lrs,
    }
    b = i32(index) + i32(cepoch) + i32(leader) + i32(lepoch) + ci32s(isr) + i32(pepoch) + ci32s(replicas)
    return d, b + ci32s(adding) + ci32s(removing) + boolean(is_new) + i8(lrs) + TAGS


def lai7_request(controller_id, kraft, controller_epoch, broker_epoch, kind, topics, leaders):
    """topics: [(name, topic_id, [lai7_partition(...)])], leaders: [(broker_id, host, port)]"""
    body = {
        "controller_id": controller_id,
        "is_kraft_controller": kraft,
        "controller_epoch": controller_epoch,
        "broker_epoch": broker_epoch,
        "type": kind,
        "topic_states": [
            {"topic_name": name, "topic_id": tid, "partition_states": [d for d, _ in parts]}
            for name, tid, parts in topics
        ],
        "live_leaders": [{"broker_id": b, "host_name": h, "port": p} for b, h, p in leaders],
    }
    raw = (
        i32(controller_id)
        + boolean(kraft)
        + i32(controller_epoch)
        + i64(broker_epoch)
        + i8(kind)
        + carr([cs(name) + uid(tid) + carr([b for _, b in parts]) + TAGS for name, tid, parts in topics])
        + carr([i32(b) + cs(h) + i32(p) + TAGS for b, h, p in leaders])
        + TAGS
    )
    return body, raw


def lai7_response(error_code, topics):
    """topics: [(topic_id, [(partition_index, error_code)])]"""
    body = {
        "error_code": error_code,
        "topics": [
            {
                "topic_id": tid,
                "partition_errors": [{"partition_index": p, "error_code": e} for p, e in errors],
            }
            for tid, errors in topics
        ],
    }
    raw = i16(error_code) + carr(
        [uid(tid) + carr([i32(p) + i16(e) + TAGS for p, e in errors]) + TAGS for tid, errors in topics]
    )
    return body, raw + TAGS


LAI7_REQUEST_CASES = [
    pytest.param(LEADER_AND_ISR, 7, 0, None, *lai7_request(1, False, 2, 3, 0, [], []), id="lai-v7-empty"),
    pytest.param(
        LEADER_AND_ISR,
        7,
        2**31 - 1,
        "controller-0",
        *lai7_request(
            0,
            True,
            17,
            -1,
            1,  # type 1: incremental
            [
                (
                    "orders",
                    TID1,
                    [
                        lai7_partition(0, 17, 1, 4, [1, 2], 9, [1, 2, 3], [3], [], False, 0),
                        lai7_partition(1, 16, -1, 0, [], 0, [3], [], [2], True, 1),
                    ],
                ),
                (
                    TOPIC_UTF8,
                    TID2,
                    [lai7_partition(2**31 - 1, 1, 2, 3, [2], 2**31 - 1, [2, 1], [], [], True, 0)],
                ),
            ],
            [(1, "broker-1.example", 9092), (3, "10.0.0.3", 19093)],
        ),
        id="lai-v7-two-topics-utf8",
    ),
    pytest.param(
        LEADER_AND_ISR,
        7,
        -5,
        "",
        # a 200-byte topic name: compact length 201 -> uvarint c9 01
        *lai7_request(-1, False, 0, 2**63 - 1, 2, [(LONG_TOPIC, TID1, [])], [(7, "", 0)]),
        id="lai-v7-long-name-no-partitions",
    ),
]

LAI7_RESPONSE_CASES = [
    pytest.param(LEADER_AND_ISR, 7, 0, *lai7_response(0, []), id="lai-v7-resp-empty"),
    pytest.param(
        LEADER_AND_ISR, 7, 77, *lai7_response(0, [(TID1, [(0, 0), (1, 6)]), (TID2, [])]), id="lai-v7-resp-two"
    ),
    pytest.param(LEADER_AND_ISR, 7, -1, *lai7_response(77, []), id="lai-v7-resp-stale-epoch"),
]


# --------------------------------------------------------------------------------------------------------
# UpdateMetadata v8
#   controller_id i32, is_kraft_controller bool, controller_epoch i32, broker_epoch i64,
#   topic_states [topic_name cstr, topic_id uuid,
#                 partition_states [partition_index i32, controller_epoch i32, leader i32, leader_epoch i32,
#                                   isr [i32], zk_version i32, replicas [i32], offline_replicas [i32], TAGS],
#                 TAGS],
#   live_brokers [id i32, endpoints [port i32, host cstr, listener cstr, security_protocol i16, TAGS],
#                 rack cstr?, TAGS],
#   TAGS holding type i8 as tag 0 unless it is 0
# Response v8: error_code i16, TAGS
# --------------------------------------------------------------------------------------------------------


def um8_partition(index, cepoch, leader, lepoch, isr, zk_version, replicas, offline):
    d = {
        "partition_index": index,
        "controller_epoch": cepoch,
        "leader": leader,
        "leader_epoch": lepoch,
        "isr": isr,
        "zk_version": zk_version,
        "replicas": replicas,
        "offline_replicas": offline,
    }
    b = i32(index) + i32(cepoch) + i32(leader) + i32(lepoch) + ci32s(isr) + i32(zk_version) + ci32s(replicas)
    return d, b + ci32s(offline) + TAGS


def um8_broker(broker_id, endpoints, rack):
    """endpoints: [(port, host, listener, security_protocol)]"""
    d = {
        "id": broker_id,
        "endpoints": [
            {"port": p, "host": h, "listener": ln, "security_protocol": sp} for p, h, ln, sp in endpoints
        ],
        "rack": rack,
    }
    raw_endpoints = carr([i32(p) + cs(h) + cs(ln) + i16(sp) + TAGS for p, h, ln, sp in endpoints])
    return d, i32(broker_id) + raw_endpoints + cns(rack) + TAGS


def um8_tags(kind):
    """The top-level tagged fields: ``type`` (tag 0, one byte) unless it is its default 0."""
    return TAGS if kind == 0 else hx("01 00 01") + i8(kind)


def um8_request(controller_id, kraft, kind, controller_epoch, broker_epoch, topics, brokers):
    """topics: [(name, topic_id, [um8_partition(...)])], brokers: [um8_broker(...)]"""
    body = {
        "controller_id": controller_id,
        "is_kraft_controller": kraft,
        "type": kind,
        "controller_epoch": controller_epoch,
        "broker_epoch": broker_epoch,
        "topic_states": [
            {"topic_name": name, "topic_id": tid, "partition_states": [d for d, _ in parts]}
            for name, tid, parts in topics
        ],
        "live_brokers": [d for d, _ in brokers],
    }
    raw = (
        i32(controller_id)
        + boolean(kraft)
        + i32(controller_epoch)
        + i64(broker_epoch)
        + carr([cs(name) + uid(tid) + carr([b for _, b in parts]) + TAGS for name, tid, parts in topics])
        + carr([b for _, b in brokers])
        + um8_tags(kind)
    )
    return body, raw


UM8_REQUEST_CASES = [
    pytest.param(
        UPDATE_METADATA, 8, 1, None, *um8_request(0, False, 0, 1, 0, [], []), id="um-v8-empty-type-unknown"
    ),
    pytest.param(
        UPDATE_METADATA,
        8,
        99,
        "c",
        *um8_request(
            2,
            True,
            2,  # type 2: a full snapshot -> tagged field 0 present
            8,
            0x0123456789ABCDEF,
            [
                (
                    "orders",
                    TID1,
                    [
                        um8_partition(0, 8, 1, 3, [1, 2], 5, [1, 2, 3], [3]),
                        um8_partition(1, 7, -1, 2, [], 0, [2, 3], []),
                    ],
                ),
                (TOPIC_UTF8, TID2, [um8_partition(0, 8, 2, 0, [2], 1, [2], [])]),
            ],
            [
                um8_broker(1, [(9092, "b1", "PLAINTEXT", 0), (9093, "b1", "CONTROLLER", 1)], "rack-a"),
                um8_broker(2, [(9092, "b2", "PLAINTEXT", 0)], None),  # null rack: 00
                um8_broker(3, [], ""),  # empty (not null) rack: 01
            ],
        ),
        id="um-v8-full-snapshot-null-rack",
    ),
    pytest.param(
        UPDATE_METADATA,
        8,
        100,
        "c",
        *um8_request(-1, False, -1, 0, -1, [(LONG_TOPIC, TID2, [])], []),  # type -1: one byte ff
        id="um-v8-negative-type-long-name",
    ),
]

UM8_RESPONSE_CASES = [
    pytest.param(UPDATE_METADATA, 8, 5, {"error_code": 0}, i16(0) + TAGS, id="um-v8-resp-ok"),
    pytest.param(UPDATE_METADATA, 8, 6, {"error_code": 77}, i16(77) + TAGS, id="um-v8-resp-stale"),
]


# --------------------------------------------------------------------------------------------------------
# StopReplica v4 (Kafka's layout)
#   controller_id i32, is_kraft_controller bool, controller_epoch i32, broker_epoch i64,
#   topic_states [topic_name cstr, partition_states [partition_index i32, leader_epoch i32,
#                 delete_partition bool, TAGS], TAGS], TAGS
# Response v4: error_code i16, partition_errors [topic_name cstr, partition_index i32, error_code i16, TAGS],
#              TAGS
# --------------------------------------------------------------------------------------------------------


def sr4_request(controller_id, kraft, controller_epoch, broker_epoch, topics):
    """topics: [(name, [(partition_index, leader_epoch, delete_partition)])]"""
    body = {
        "controller_id": controller_id,
        "is_kraft_controller": kraft,
        "controller_epoch": controller_epoch,
        "broker_epoch": broker_epoch,
        "topic_states": [
            {
                "topic_name": name,
                "partition_states": [
                    {"partition_index": p, "leader_epoch": e, "delete_partition": d} for p, e, d in parts
                ],
            }
            for name, parts in topics
        ],
    }
    raw_topics = carr(
        [
            cs(name) + carr([i32(p) + i32(e) + boolean(d) + TAGS for p, e, d in parts]) + TAGS
            for name, parts in topics
        ]
    )
    return body, i32(controller_id) + boolean(kraft) + i32(controller_epoch) + i64(
        broker_epoch
    ) + raw_topics + TAGS


def sr4_response(error_code, errors):
    body = {
        "error_code": error_code,
        "partition_errors": [{"topic_name": t, "partition_index": p, "error_code": e} for t, p, e in errors],
    }
    return body, i16(error_code) + carr([cs(t) + i32(p) + i16(e) + TAGS for t, p, e in errors]) + TAGS


SR4_REQUEST_CASES = [
    pytest.param(STOP_REPLICA, 4, 0, None, *sr4_request(0, False, 0, 0, []), id="sr-v4-kafka-empty"),
    pytest.param(
        STOP_REPLICA,
        4,
        12,
        "ctl",
        *sr4_request(1, True, 3, 4294967296, [("orders", [(0, 5, True), (1, -1, False)]), (TOPIC_UTF8, [])]),
        id="sr-v4-kafka-delete-one-keep-one",
    ),
    pytest.param(
        STOP_REPLICA,
        4,
        13,
        "ctl",
        *sr4_request(1, False, 3, -1, [(LONG_TOPIC, [(2**31 - 1, -2, False)])]),  # -2: delete the topic
        id="sr-v4-kafka-long-name",
    ),
]

SR4_RESPONSE_CASES = [
    pytest.param(STOP_REPLICA, 4, 0, *sr4_response(0, []), id="sr-v4-kafka-resp-empty"),
    pytest.param(
        STOP_REPLICA,
        4,
        3,
        *sr4_response(0, [("orders", 0, 0), (TOPIC_UTF8, 1, 3)]),
        id="sr-v4-kafka-resp-two",
    ),
    pytest.param(STOP_REPLICA, 4, 4, *sr4_response(11, []), id="sr-v4-kafka-resp-stale-controller"),
]


KAFKA_39_REQUEST_CASES = [
    *LAI7_REQUEST_CASES,
    *UM8_REQUEST_CASES,
    *SR4_REQUEST_CASES,
    *AP3_REQUEST_CASES,
    *CS3_REQUEST_CASES,
]
KAFKA_39_RESPONSE_CASES = [
    *LAI7_RESPONSE_CASES,
    *UM8_RESPONSE_CASES,
    *SR4_RESPONSE_CASES,
    *AP3_RESPONSE_CASES,
    *CS3_RESPONSE_CASES,
]


# --------------------------------------------------------------------------------------------------------
# Whole frames in hand-written hex
# --------------------------------------------------------------------------------------------------------

HEX_UM_V8 = hx(
    "00000050",  # size = 80
    "0006",  # api_key 6 (UpdateMetadata)
    "0008",  # api_version 8
    "00000003",  # correlation_id 3
    "ffff",  # client_id null (int16 length, even in header v2)
    "00",  # header tagged fields: none
    "00000000",  # controller_id 0
    "01",  # is_kraft_controller true
    "00000001",  # controller_epoch 1
    "00000000000000ff",  # broker_epoch 255
    "02",  # topic_states: 1 (compact: count + 1)
    "02 74",  # topic_name "t"
    "0123456789abcdef0123456789abcdef",  # topic_id TID1
    "01",  # partition_states: 0
    "00",  # topic state's tagged fields
    "02",  # live_brokers: 1
    "00000004",  # id 4
    "02",  # endpoints: 1
    "0000238c",  # port 9100
    "02 68",  # host "h"
    "0a 504c41494e54455854",  # listener "PLAINTEXT"
    "0000",  # security_protocol 0
    "00",  # endpoint's tagged fields
    "00",  # rack null
    "00",  # broker's tagged fields
    "01",  # top-level tagged fields: 1
    "00 01 01",  # tag 0 (type), 1 byte: 1 (incremental)
)
HEX_UM_V8_BODY = {
    "controller_id": 0,
    "is_kraft_controller": True,
    "type": 1,
    "controller_epoch": 1,
    "broker_epoch": 255,
    "topic_states": [{"topic_name": "t", "topic_id": TID1, "partition_states": []}],
    "live_brokers": [
        {
            "id": 4,
            "endpoints": [{"port": 9100, "host": "h", "listener": "PLAINTEXT", "security_protocol": 0}],
            "rack": None,
        }
    ],
}

HEX_SR_V4_KAFKA = hx(
    "00000036",  # size = 54
    "0005",  # api_key 5 (StopReplica)
    "0004",  # api_version 4
    "00000009",  # correlation_id 9
    "0000",  # client_id ""
    "00",  # header tagged fields: none
    "00000001",  # controller_id 1
    "00",  # is_kraft_controller false
    "00000002",  # controller_epoch 2
    "fffffffffffffffe",  # broker_epoch -2
    "02",  # topic_states: 1
    "02 74",  # topic_name "t"
    "03",  # partition_states: 2
    "00000000 00000007 01 00",  # partition 0, leader_epoch 7, delete_partition true, tags
    "00000001 ffffffff 00 00",  # partition 1, leader_epoch -1, delete_partition false, tags
    "00",  # topic state's tagged fields
    "00",  # top-level tagged fields
)
HEX_SR_V4_KAFKA_BODY = {
    "controller_id": 1,
    "is_kraft_controller": False,
    "controller_epoch": 2,
    "broker_epoch": -2,
    "topic_states": [
        {
            "topic_name": "t",
            "partition_states": [
                {"partition_index": 0, "leader_epoch": 7, "delete_partition": True},
                {"partition_index": 1, "leader_epoch": -1, "delete_partition": False},
            ],
        }
    ],
}
