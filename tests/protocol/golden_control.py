"""Golden cases of the controller's requests to brokers: LeaderAndIsr v2 / seed v5, UpdateMetadata v5 /
seed v7 and StopReplica v1 / seed v4, each body beside its bytes built field by field
(:mod:`tests.protocol.golden`)."""

from __future__ import annotations

import pytest

from tests.protocol.golden import (
    LEADER_AND_ISR,
    STOP_REPLICA,
    TOPIC_UTF8,
    UPDATE_METADATA,
    arr,
    boolean,
    i16,
    i32,
    i32s,
    i64,
    ns,
    s,
)

# --------------------------------------------------------------------------------------------------------
# LeaderAndIsr v2 / seed v5
#   controller_id i32, controller_epoch i32, broker_epoch|max_broker_epoch i64,
#   topic_states [topic_name str, partition_states [partition_index i32, controller_epoch i32, leader i32,
#                 leader_epoch i32, isr [i32], partition_epoch i32, replicas [i32], is_new bool]],
#   live_leaders [broker_id i32, host_name str, port i32]
# Response v2 (= seed v5): error_code i16,
#   partition_errors [topic_name str, partition_index i32, error_code i16]
# --------------------------------------------------------------------------------------------------------


def lai_partition(index, cepoch, leader, lepoch, isr, pepoch, replicas, is_new):
    d = {
        "partition_index": index,
        "controller_epoch": cepoch,
        "leader": leader,
        "leader_epoch": lepoch,
        "isr": isr,
        "partition_epoch": pepoch,
        "replicas": replicas,
        "is_new": is_new,
    }
    b = i32(index) + i32(cepoch) + i32(leader) + i32(lepoch) + i32s(isr) + i32(pepoch) + i32s(replicas)
    return d, b + boolean(is_new)


def lai_request(epoch_key, controller_id, controller_epoch, epoch, topics, leaders):
    """topics: [(name, [lai_partition(...)])], leaders: [(broker_id, host, port)]"""
    body = {
        "controller_id": controller_id,
        "controller_epoch": controller_epoch,
        epoch_key: epoch,
        "topic_states": [
            {"topic_name": name, "partition_states": [d for d, _ in parts]} for name, parts in topics
        ],
        "live_leaders": [{"broker_id": b, "host_name": h, "port": p} for b, h, p in leaders],
    }
    raw = (
        i32(controller_id)
        + i32(controller_epoch)
        + i64(epoch)
        + arr([s(name) + arr([b for _, b in parts]) for name, parts in topics])
        + arr([i32(b) + s(h) + i32(p) for b, h, p in leaders])
    )
    return body, raw


def lai_request_cases(version, epoch_key):
    tag = f"lai-v{version}"
    return [
        pytest.param(
            LEADER_AND_ISR, version, 0, None, *lai_request(epoch_key, 1, 2, 3, [], []), id=f"{tag}-empty"
        ),
        pytest.param(
            LEADER_AND_ISR,
            version,
            2**31 - 1,
            "controller-0",
            *lai_request(
                epoch_key,
                0,
                17,
                -1,  # "unknown" epoch: ff ff ff ff ff ff ff ff
                [
                    (
                        "orders",
                        [
                            lai_partition(0, 17, 1, 4, [1, 2], 9, [1, 2, 3], False),
                            lai_partition(1, 16, -1, 0, [], 0, [3], True),
                        ],
                    ),
                    (TOPIC_UTF8, [lai_partition(2**31 - 1, 1, 2, 3, [2], 2**31 - 1, [2, 1], True)]),
                ],
                [(1, "broker-1.example", 9092), (3, "10.0.0.3", 19093)],
            ),
            id=f"{tag}-two-topics-utf8",
        ),
        pytest.param(
            LEADER_AND_ISR,
            version,
            -5,
            "",
            *lai_request(epoch_key, -1, 0, 2**63 - 1, [("empty-parts", [])], [(7, "", 0)]),
            id=f"{tag}-topic-without-partitions",
        ),
    ]


def lai_response(errors, error_code=0):
    body = {
        "error_code": error_code,
        "partition_errors": [{"topic_name": t, "partition_index": p, "error_code": e} for t, p, e in errors],
    }
    return body, i16(error_code) + arr([s(t) + i32(p) + i16(e) for t, p, e in errors])


def lai_response_cases(version):
    tag = f"lai-v{version}-resp"
    return [
        pytest.param(LEADER_AND_ISR, version, 0, *lai_response([]), id=f"{tag}-empty"),
        pytest.param(
            LEADER_AND_ISR,
            version,
            77,
            *lai_response([("orders", 0, 0), ("orders", 1, 6), (TOPIC_UTF8, 3, -1)]),
            id=f"{tag}-three",
        ),
        pytest.param(LEADER_AND_ISR, version, -1, *lai_response([], error_code=77), id=f"{tag}-stale-epoch"),
    ]


# --------------------------------------------------------------------------------------------------------
# UpdateMetadata v5 / seed v7
#   controller_id i32, controller_epoch i32, broker_epoch|max_broker_epoch i64,
#   topic_states [topic_name str, partition_states [partition_index i32, controller_epoch i32, leader i32,
#                 leader_epoch i32, isr [i32], zk_version i32, replicas [i32], offline_replicas [i32]]],
#   live_brokers [id i32, endpoints [port i32, host str, listener str, security_protocol i16], rack str?]
# Response: error_code i16
# --------------------------------------------------------------------------------------------------------


def um_partition(index, cepoch, leader, lepoch, isr, zk_version, replicas, offline):
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
    b = i32(index) + i32(cepoch) + i32(leader) + i32(lepoch) + i32s(isr) + i32(zk_version) + i32s(replicas)
    return d, b + i32s(offline)


def um_broker(broker_id, endpoints, rack):
    """endpoints: [(port, host, listener, security_protocol)]"""
    d = {
        "id": broker_id,
        "endpoints": [
            {"port": p, "host": h, "listener": ln, "security_protocol": sp} for p, h, ln, sp in endpoints
        ],
        "rack": rack,
    }
    b = i32(broker_id) + arr([i32(p) + s(h) + s(ln) + i16(sp) for p, h, ln, sp in endpoints]) + ns(rack)
    return d, b


def um_request(epoch_key, controller_id, controller_epoch, epoch, topics, brokers):
    body = {
        "controller_id": controller_id,
        "controller_epoch": controller_epoch,
        epoch_key: epoch,
        "topic_states": [
            {"topic_name": name, "partition_states": [d for d, _ in parts]} for name, parts in topics
        ],
        "live_brokers": [d for d, _ in brokers],
    }
    raw = (
        i32(controller_id)
        + i32(controller_epoch)
        + i64(epoch)
        + arr([s(name) + arr([b for _, b in parts]) for name, parts in topics])
        + arr([b for _, b in brokers])
    )
    return body, raw


def um_request_cases(version, epoch_key):
    tag = f"um-v{version}"
    return [
        pytest.param(
            UPDATE_METADATA, version, 1, None, *um_request(epoch_key, 0, 1, 0, [], []), id=f"{tag}-empty"
        ),
        pytest.param(
            UPDATE_METADATA,
            version,
            99,
            "c",
            *um_request(
                epoch_key,
                2,
                8,
                0x0123456789ABCDEF,
                [
                    (
                        "orders",
                        [
                            um_partition(0, 8, 1, 3, [1, 2], 5, [1, 2, 3], [3]),
                            um_partition(1, 7, -1, 2, [], 0, [2, 3], []),
                        ],
                    ),
                    (TOPIC_UTF8, [um_partition(0, 8, 2, 0, [2], 1, [2], [])]),
                ],
                [
                    um_broker(1, [(9092, "b1", "PLAINTEXT", 0), (9093, "b1", "CONTROLLER", 1)], "rack-a"),
                    um_broker(2, [(9092, "b2", "PLAINTEXT", 0)], None),  # null rack: ff ff
                    um_broker(3, [], ""),  # empty (not null) rack: 00 00
                ],
            ),
            id=f"{tag}-two-topics-null-rack",
        ),
    ]


def um_response_cases(version):
    tag = f"um-v{version}-resp"
    return [
        pytest.param(UPDATE_METADATA, version, 5, {"error_code": 0}, i16(0), id=f"{tag}-ok"),
        pytest.param(UPDATE_METADATA, version, 6, {"error_code": 77}, i16(77), id=f"{tag}-stale"),
        pytest.param(UPDATE_METADATA, version, 7, {"error_code": -1}, i16(-1), id=f"{tag}-unknown"),
    ]


# --------------------------------------------------------------------------------------------------------
# StopReplica v1 / seed v4
#   controller_id i32, controller_epoch i32, broker_epoch|max_broker_epoch i64, delete_partitions bool,
#   topics [name str, partition_indexes [i32]]
# Response v1 (= seed v4): error_code i16,
#   partition_errors [topic_name str, partition_index i32, error_code i16]
# --------------------------------------------------------------------------------------------------------


def sr_request(epoch_key, controller_id, controller_epoch, epoch, delete, topics):
    body = {
        "controller_id": controller_id,
        "controller_epoch": controller_epoch,
        epoch_key: epoch,
        "delete_partitions": delete,
        "topics": [{"name": n, "partition_indexes": ps} for n, ps in topics],
    }
    raw = (
        i32(controller_id)
        + i32(controller_epoch)
        + i64(epoch)
        + boolean(delete)
        + arr([s(n) + i32s(ps) for n, ps in topics])
    )
    return body, raw


def sr_request_cases(version, epoch_key):
    tag = f"sr-v{version}"
    return [
        pytest.param(
            STOP_REPLICA, version, 0, None, *sr_request(epoch_key, 0, 0, 0, False, []), id=f"{tag}-empty"
        ),
        pytest.param(
            STOP_REPLICA,
            version,
            12,
            "ctl",
            *sr_request(epoch_key, 1, 3, 4294967296, True, [("orders", [0, 1, 2]), (TOPIC_UTF8, [])]),
            id=f"{tag}-delete-two-topics",
        ),
        pytest.param(
            STOP_REPLICA,
            version,
            13,
            "ctl",
            *sr_request(epoch_key, 1, 3, -1, False, [("x", [7])]),
            id=f"{tag}-no-delete",
        ),
    ]


def sr_response(errors, error_code=0):
    body = {
        "error_code": error_code,
        "partition_errors": [{"topic_name": t, "partition_index": p, "error_code": e} for t, p, e in errors],
    }
    return body, i16(error_code) + arr([s(t) + i32(p) + i16(e) for t, p, e in errors])


def sr_response_cases(version):
    tag = f"sr-v{version}-resp"
    return [
        pytest.param(STOP_REPLICA, version, 0, *sr_response([]), id=f"{tag}-empty"),
        pytest.param(
            STOP_REPLICA, version, 3, *sr_response([("orders", 0, 0), (TOPIC_UTF8, 1, 3)]), id=f"{tag}-two"
        ),
        pytest.param(STOP_REPLICA, version, 4, *sr_response([], error_code=11), id=f"{tag}-stale-controller"),
    ]
