"""Completely hand-written hex goldens, size prefix included: one frame per control-plane message,
each commented field by field. They are golden cases themselves and check the field-by-field
helpers of :mod:`tests.protocol.golden`."""

from __future__ import annotations

import pytest

from tests.protocol.golden import (
    ALTER_PARTITION,
    CONTROLLED_SHUTDOWN,
    LEADER_AND_ISR,
    STOP_REPLICA,
    TID1,
    UPDATE_METADATA,
    hx,
)

# --------------------------------------------------------------------------------------------------------
# Completely hand-written hex goldens (also used to check the helpers above)
# --------------------------------------------------------------------------------------------------------

HEX_LAI_V2 = hx(
    "0000006d",  # size = 109
    "0004",  # api_key 4 (LeaderAndIsr)
    "0002",  # api_version 2
    "0000002a",  # correlation_id 42
    "0003 63746c",  # client_id "ctl"
    "00000001",  # controller_id 1
    "00000005",  # controller_epoch 5
    "0000000100000000",  # broker_epoch 2**32
    "00000001",  # topic_states: 1
    "0005 74c3ab7374",  # topic_name "tëst" (5 UTF-8 bytes)
    "00000001",  # partition_states: 1
    "00000000",  # partition_index 0
    "00000005",  # controller_epoch 5
    "00000002",  # leader 2
    "00000007",  # leader_epoch 7
    "00000002 00000002 00000003",  # isr [2, 3]
    "00000009",  # partition_epoch 9
    "00000003 00000002 00000003 00000004",  # replicas [2, 3, 4]
    "01",  # is_new true
    "00000001",  # live_leaders: 1
    "00000002",  # broker_id 2
    "0002 6832",  # host_name "h2"
    "00002384",  # port 9092
)
HEX_LAI_V2_BODY = {
    "controller_id": 1,
    "controller_epoch": 5,
    "broker_epoch": 2**32,
    "topic_states": [
        {
            "topic_name": "tëst",
            "partition_states": [
                {
                    "partition_index": 0,
                    "controller_epoch": 5,
                    "leader": 2,
                    "leader_epoch": 7,
                    "isr": [2, 3],
                    "partition_epoch": 9,
                    "replicas": [2, 3, 4],
                    "is_new": True,
                }
            ],
        }
    ],
    "live_leaders": [{"broker_id": 2, "host_name": "h2", "port": 9092}],
}

HEX_UM_V7 = hx(
    "00000040",  # size = 64
    "0006 0007 00000003",  # UpdateMetadata, v7 (seed), correlation_id 3
    "ffff",  # client_id null
    "00000000",  # controller_id 0
    "00000001",  # controller_epoch 1
    "00000000000000ff",  # max_broker_epoch 255
    "00000000",  # topic_states: 0
    "00000001",  # live_brokers: 1
    "00000004",  # id 4
    "00000001",  # endpoints: 1
    "0000238c",  # port 9100
    "0001 68",  # host "h"
    "0009 504c41494e54455854",  # listener "PLAINTEXT"
    "0000",  # security_protocol 0
    "ffff",  # rack null
)
HEX_UM_V7_BODY = {
    "controller_id": 0,
    "controller_epoch": 1,
    "max_broker_epoch": 255,
    "topic_states": [],
    "live_brokers": [
        {
            "id": 4,
            "endpoints": [{"port": 9100, "host": "h", "listener": "PLAINTEXT", "security_protocol": 0}],
            "rack": None,
        }
    ],
}

HEX_SR_V4 = hx(
    "0000002e",  # size = 46
    "0005 0004 00000009",  # StopReplica, v4 (seed), correlation_id 9
    "0000",  # client_id ""
    "00000001 00000002",  # controller_id 1, controller_epoch 2
    "fffffffffffffffe",  # max_broker_epoch -2
    "01",  # delete_partitions true
    "00000001",  # topics: 1
    "0001 74",  # name "t"
    "00000002 00000000 00000001",  # partition_indexes [0, 1]
)
HEX_SR_V4_BODY = {
    "controller_id": 1,
    "controller_epoch": 2,
    "max_broker_epoch": -2,
    "delete_partitions": True,
    "topics": [{"name": "t", "partition_indexes": [0, 1]}],
}

HEX_CS_V2 = hx(
    "00000018",  # size = 24
    "0007 0002 00000001",  # ControlledShutdown, v2, correlation_id 1
    "0002 6231",  # client_id "b1"
    "00000001",  # broker_id 1
    "0000000000000100",  # broker_epoch 256
)

HEX_CS_V2_RESP = hx(
    "00000013",  # size = 19
    "00000001",  # correlation_id 1 (response header v0: nothing else)
    "0000",  # error_code 0
    "00000001",  # remaining_partitions: 1
    "0003 666f6f",  # topic_name "foo"
    "00000002",  # partition_index 2
)

HEX_AP_V0 = hx(
    "00000039",  # size = 57
    "0038 0000 00000001",  # AlterPartition (56), v0, correlation_id 1
    "ffff",  # client_id null (int16 length even in header v2)
    "00",  # header tagged fields
    "00000003",  # broker_id 3
    "0000000000000064",  # broker_epoch 100
    "02",  # topics: compact count 1+1
    "04 666f6f",  # topic_name compact "foo"
    "02",  # partitions: 1
    "00000000",  # partition_index 0
    "00000004",  # leader_epoch 4
    "04 00000001 00000002 00000003",  # new_isr [1, 2, 3]
    "00000006",  # partition_epoch 6
    "00",  # partition tagged fields
    "00",  # topic tagged fields
    "00",  # top-level tagged fields
)
HEX_AP_V0_BODY = {
    "broker_id": 3,
    "broker_epoch": 100,
    "topics": [
        {
            "topic_name": "foo",
            "partitions": [
                {"partition_index": 0, "leader_epoch": 4, "new_isr": [1, 2, 3], "partition_epoch": 6}
            ],
        }
    ],
}

HEX_AP_V1_RESP = hx(
    "00000030",  # size = 48
    "00000007",  # correlation_id 7
    "00",  # response header v1 tagged fields
    "00000000",  # throttle_time_ms 0
    "0000",  # error_code 0
    "02",  # topics: 1
    "04 666f6f",  # topic_name "foo"
    "02",  # partitions: 1
    "00000000",  # partition_index 0
    "0000",  # error_code 0
    "00000003",  # leader_id 3
    "00000004",  # leader_epoch 4
    "03 00000003 00000001",  # isr [3, 1]
    "01",  # leader_recovery_state 1 (RECOVERING)
    "00000007",  # partition_epoch 7
    "00 00 00",  # tagged fields: partition, topic, top level
)
HEX_AP_V1_RESP_BODY = {
    "throttle_time_ms": 0,
    "error_code": 0,
    "topics": [
        {
            "topic_name": "foo",
            "partitions": [
                {
                    "partition_index": 0,
                    "error_code": 0,
                    "leader_id": 3,
                    "leader_epoch": 4,
                    "isr": [3, 1],
                    "leader_recovery_state": 1,
                    "partition_epoch": 7,
                }
            ],
        }
    ],
}

HEX_AP_V2 = hx(
    "0000003b",  # size = 59
    "0038 0002 00000002",  # AlterPartition, v2, correlation_id 2
    "0001 78",  # client_id "x"
    "00",  # header tagged fields
    "00000001",  # broker_id 1
    "0000000000000001",  # broker_epoch 1
    "02",  # topics: 1
    "0123456789abcdef0123456789abcdef",  # topic_id (16 raw bytes)
    "02",  # partitions: 1
    "00000002",  # partition_index 2
    "00000003",  # leader_epoch 3
    "01",  # new_isr: [] (compact count 0+1)
    "00",  # leader_recovery_state 0
    "00000004",  # partition_epoch 4
    "00 00 00",  # tagged fields
)
HEX_AP_V2_BODY = {
    "broker_id": 1,
    "broker_epoch": 1,
    "topics": [
        {
            "topic_id": TID1,
            "partitions": [
                {
                    "partition_index": 2,
                    "leader_epoch": 3,
                    "new_isr": [],
                    "leader_recovery_state": 0,
                    "partition_epoch": 4,
                }
            ],
        }
    ],
}

HEX_REQUEST_CASES = [
    pytest.param(LEADER_AND_ISR, 2, 42, "ctl", HEX_LAI_V2_BODY, HEX_LAI_V2, id="hex-lai-v2"),
    pytest.param(UPDATE_METADATA, 7, 3, None, HEX_UM_V7_BODY, HEX_UM_V7, id="hex-um-v7-seed"),
    pytest.param(STOP_REPLICA, 4, 9, "", HEX_SR_V4_BODY, HEX_SR_V4, id="hex-sr-v4-seed"),
    pytest.param(
        CONTROLLED_SHUTDOWN, 2, 1, "b1", {"broker_id": 1, "broker_epoch": 256}, HEX_CS_V2, id="hex-cs-v2"
    ),
    pytest.param(ALTER_PARTITION, 0, 1, None, HEX_AP_V0_BODY, HEX_AP_V0, id="hex-ap-v0"),
    pytest.param(ALTER_PARTITION, 2, 2, "x", HEX_AP_V2_BODY, HEX_AP_V2, id="hex-ap-v2"),
]

HEX_RESPONSE_CASES = [
    pytest.param(
        CONTROLLED_SHUTDOWN,
        2,
        1,
        {"error_code": 0, "remaining_partitions": [{"topic_name": "foo", "partition_index": 2}]},
        HEX_CS_V2_RESP,
        id="hex-cs-v2-resp",
    ),
    pytest.param(ALTER_PARTITION, 1, 7, HEX_AP_V1_RESP_BODY, HEX_AP_V1_RESP, id="hex-ap-v1-resp"),
    pytest.param(
        UPDATE_METADATA, 7, 256, {"error_code": 77}, hx("00000006", "00000100", "004d"), id="hex-um-v7-resp"
    ),
]
