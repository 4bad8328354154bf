"""Golden-byte tests for the data-plane APIs' responses: ApiVersions, Metadata, Produce, Fetch,
ListOffsets and OffsetForLeaderEpoch, written out by hand like their requests
(``test_golden_data_plane.py``, which says how): response header v0, then the body field by field.
"""

from __future__ import annotations

from typing import Any

import pytest

import protocol
from tests.protocol.golden import (
    API_VERSIONS,
    BLOB,
    BLOB_HEX,
    FETCH,
    LIST_OFFSETS,
    METADATA,
    OFFSET_FOR_LEADER_EPOCH,
    ORDERS,
    PRODUCE,
    hex_frame,
)

# (api_key, version, correlation_id, body, frame)
RESPONSES: list[Any] = [
    pytest.param(
        API_VERSIONS,
        2,
        1,
        {
            "error_code": 0,
            "api_keys": [
                {"api_key": 0, "min_version": 3, "max_version": 8},
                {"api_key": 18, "min_version": 0, "max_version": 2},
            ],
            "throttle_time_ms": 100,
        },
        hex_frame(
            "00000001",  # response header v0: correlation id 1
            "0000",  # error_code
            "00000002",  # api_keys: two
            "0000 0003 0008",  # Produce 3..8
            "0012 0000 0002",  # ApiVersions 0..2
            "00000064",  # throttle_time_ms (v1+): 100
        ),
        id="api-versions-v2-two-apis",
    ),
    pytest.param(
        API_VERSIONS,
        0,
        2,
        {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}]},
        hex_frame("00000002", "0023", "00000001", "0012 0000 0002"),  # UNSUPPORTED_VERSION; no throttle in v0
        id="api-versions-v0-unsupported-version",
    ),
    pytest.param(
        METADATA,
        8,
        3,
        {
            "throttle_time_ms": 0,
            "brokers": [{"node_id": 1, "host": "h1", "port": 9092, "rack": None}],
            "cluster_id": "cid",
            "controller_id": 1,
            "topics": [
                {
                    "error_code": 0,
                    "name": "t",
                    "is_internal": False,
                    "partitions": [
                        {
                            "error_code": 0,
                            "partition_index": 0,
                            "leader_id": 1,
                            "leader_epoch": 5,
                            "replica_nodes": [1],
                            "isr_nodes": [1],
                            "offline_replicas": [],
                        }
                    ],
                    "topic_authorized_operations": -(2**31),
                }
            ],
            "cluster_authorized_operations": -(2**31),
        },
        hex_frame(
            "00000003",  # correlation id
            "00000000",  # throttle_time_ms (v3+)
            "00000001",  # brokers: one
            "00000001 0002 6831 00002384 ffff",  # node 1, host "h1", port 9092, rack null
            "0003 636964",  # cluster_id "cid" (v2+)
            "00000001",  # controller_id
            "00000001",  # topics: one
            "0000 0001 74 00",  # error_code, name "t", is_internal false
            "00000001",  # partitions: one
            "0000 00000000 00000001",  # error_code, partition_index 0, leader_id 1
            "00000005",  # leader_epoch (v7+)
            "00000001 00000001",  # replica_nodes [1]
            "00000001 00000001",  # isr_nodes [1]
            "00000000",  # offline_replicas [] (v5+)
            "80000000",  # topic_authorized_operations (v8+): not requested
            "80000000",  # cluster_authorized_operations (v8): not requested
        ),
        id="metadata-v8-one-broker-topic-partition",
    ),
    pytest.param(
        METADATA,
        1,
        4,
        {
            "brokers": [{"node_id": 0, "host": "b", "port": 1, "rack": "r"}],
            "controller_id": -1,
            "topics": [{"error_code": 3, "name": "x", "is_internal": True, "partitions": []}],
        },
        hex_frame(
            "00000004",
            "00000001 00000000 0001 62 00000001 0001 72",  # brokers: node 0, "b", port 1, rack "r"
            "ffffffff",  # controller_id -1; no cluster_id before v2
            "00000001 0003 0001 78 01 00000000",  # UNKNOWN_TOPIC_OR_PARTITION, "x", internal, no partitions
        ),
        id="metadata-v1-unknown-topic",
    ),
    pytest.param(
        PRODUCE,
        3,
        5,
        {
            "responses": [
                {
                    "name": "orders",
                    "partition_responses": [
                        {"index": 0, "error_code": 0, "base_offset": 42, "log_append_time_ms": -1},
                        {"index": 1, "error_code": 2, "base_offset": -1, "log_append_time_ms": -1},
                    ],
                }
            ],
            "throttle_time_ms": 0,
        },
        hex_frame(
            "00000005",
            "00000001",  # responses: one
            ORDERS,
            "00000002",  # partition_responses: two
            "00000000 0000 000000000000002a ffffffffffffffff",  # index 0, ok, base_offset 42, no append time
            "00000001 0002 ffffffffffffffff ffffffffffffffff",  # index 1, CORRUPT_MESSAGE, -1, -1
            "00000000",  # throttle_time_ms (after the responses)
        ),
        id="produce-v3",
    ),
    pytest.param(
        PRODUCE,
        8,
        6,
        {
            "responses": [
                {
                    "name": "orders",
                    "partition_responses": [
                        {
                            "index": 0,
                            "error_code": 87,
                            "base_offset": -1,
                            "log_append_time_ms": -1,
                            "log_start_offset": 0,
                            "record_errors": [{"batch_index": 3, "batch_index_error_message": "bad"}],
                            "error_message": None,
                        }
                    ],
                }
            ],
            "throttle_time_ms": 7,
        },
        hex_frame(
            "00000006",
            "00000001",
            ORDERS,
            "00000001",
            "00000000 0057",  # index 0, INVALID_RECORD
            "ffffffffffffffff ffffffffffffffff",  # base_offset, log_append_time_ms
            "0000000000000000",  # log_start_offset (v5+)
            "00000001 00000003 0003 626164",  # record_errors (v8+): batch 3, "bad"
            "ffff",  # error_message (v8+): null
            "00000007",  # throttle_time_ms
        ),
        id="produce-v8-record-errors",
    ),
    pytest.param(
        FETCH,
        11,
        7,
        {
            "throttle_time_ms": 0,
            "error_code": 0,
            "session_id": 123,
            "responses": [
                {
                    "topic": "orders",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "error_code": 0,
                            "high_watermark": 110,
                            "last_stable_offset": 110,
                            "log_start_offset": 0,
                            "aborted_transactions": [{"producer_id": 7, "first_offset": 100}],
                            "preferred_read_replica": -1,
                            "records": BLOB,
                        },
                        {
                            "partition_index": 1,
                            "error_code": 6,
                            "high_watermark": -1,
                            "last_stable_offset": -1,
                            "log_start_offset": -1,
                            "aborted_transactions": None,
                            "preferred_read_replica": -1,
                            "records": None,
                        },
                    ],
                }
            ],
        },
        hex_frame(
            "00000007",
            "00000000",  # throttle_time_ms
            "0000",  # error_code (v7+)
            "0000007b",  # session_id (v7+): 123
            "00000001",  # responses: one
            ORDERS,
            "00000002",  # partitions: two
            "00000000 0000",  # partition 0, no error
            "000000000000006e",  # high_watermark 110
            "000000000000006e",  # last_stable_offset 110 (v4+)
            "0000000000000000",  # log_start_offset 0 (v5+)
            "00000001 0000000000000007 0000000000000064",  # aborted_transactions: producer 7 from 100
            "ffffffff",  # preferred_read_replica (v11+): none
            BLOB_HEX,  # records
            "00000001 0006",  # partition 1, NOT_LEADER_OR_FOLLOWER
            "ffffffffffffffff ffffffffffffffff ffffffffffffffff",  # high watermark, LSO, log start: -1
            "ffffffff",  # aborted_transactions: null
            "ffffffff",  # preferred_read_replica: -1
            "ffffffff",  # records: null
        ),
        id="fetch-v11-records",
    ),
    pytest.param(
        FETCH,
        4,
        8,
        {
            "throttle_time_ms": 1,
            "responses": [
                {
                    "topic": "orders",
                    "partitions": [
                        {
                            "partition_index": 2,
                            "error_code": 0,
                            "high_watermark": 5,
                            "last_stable_offset": 4,
                            "aborted_transactions": [],
                            "records": b"",
                        }
                    ],
                }
            ],
        },
        hex_frame(
            "00000008",
            "00000001",  # throttle_time_ms; no error_code or session_id before v7
            "00000001",
            ORDERS,
            "00000001",
            "00000002 0000 0000000000000005 0000000000000004",  # no log_start_offset before v5
            "00000000",  # aborted_transactions: empty
            "00000000",  # records: empty (no preferred_read_replica before v11)
        ),
        id="fetch-v4-empty-records",
    ),
    pytest.param(
        LIST_OFFSETS,
        1,
        9,
        {
            "topics": [
                {
                    "name": "orders",
                    "partitions": [
                        {"partition_index": 0, "error_code": 0, "timestamp": -1, "offset": 42},
                        {"partition_index": 1, "error_code": 0, "timestamp": -1, "offset": 0},
                    ],
                }
            ]
        },
        hex_frame(
            "00000009",
            "00000001",  # topics: one (no throttle_time_ms before v2)
            ORDERS,
            "00000002",
            "00000000 0000 ffffffffffffffff 000000000000002a",  # partition 0: timestamp -1, offset 42
            "00000001 0000 ffffffffffffffff 0000000000000000",  # partition 1: offset 0
        ),
        id="list-offsets-v1",
    ),
    pytest.param(
        OFFSET_FOR_LEADER_EPOCH,
        0,
        10,
        {
            "topics": [
                {"topic": "orders", "partitions": [{"error_code": 0, "partition": 0, "end_offset": 100}]}
            ]
        },
        hex_frame(
            "0000000a",
            "00000001",
            ORDERS,
            "00000001",
            "0000 00000000 0000000000000064",  # error_code first, partition 0, end_offset 100
        ),
        id="offset-for-leader-epoch-v0",
    ),
    pytest.param(
        OFFSET_FOR_LEADER_EPOCH,
        3,
        11,
        {
            "throttle_time_ms": 0,
            "topics": [
                {
                    "topic": "orders",
                    "partitions": [
                        {"error_code": 0, "partition": 0, "leader_epoch": 3, "end_offset": 100},
                        {"error_code": 74, "partition": 1, "leader_epoch": -1, "end_offset": -1},
                    ],
                }
            ],
        },
        hex_frame(
            "0000000b",
            "00000000",  # throttle_time_ms (v2+)
            "00000001",
            ORDERS,
            "00000002",
            "0000 00000000 00000003 0000000000000064",  # leader_epoch (v1+) before end_offset
            "004a 00000001 ffffffff ffffffffffffffff",  # FENCED_LEADER_EPOCH, undefined epoch and offset
        ),
        id="offset-for-leader-epoch-v3",
    ),
]


@pytest.mark.parametrize(("api_key", "version", "corr", "body", "expected"), RESPONSES)
def test_encode_response_golden(api_key, version, corr, body, expected):
    assert protocol.encode_response(api_key, version, corr, body) == expected


@pytest.mark.parametrize(("api_key", "version", "corr", "body", "expected"), RESPONSES)
def test_decode_response_golden(api_key, version, corr, body, expected):
    assert protocol.decode_response(api_key, version, expected) == (corr, body)
