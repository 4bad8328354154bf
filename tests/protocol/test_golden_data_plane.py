"""Golden-byte tests for the data-plane APIs: ApiVersions, Metadata, Produce, Fetch, ListOffsets and
OffsetForLeaderEpoch.

Every expected byte string is written out by hand, field by field, from Apache Kafka's message specs
(``reference/kafka-messages/*.json``) -- never by calling the codec. Only the 4-byte size prefix is
computed (``frame``). All versions here are non-flexible: request header v1 (api_key, api_version,
correlation_id, int16-length client_id), response header v0 (correlation_id), int16-length strings,
int32-length bytes and int32-count arrays, -1 for null.

``records`` fields are opaque to the codec, so short arbitrary blobs stand in for record batches
(``test_record_batch.py`` has golden batches).
"""

from __future__ import annotations

from typing import Any

import pytest

import protocol

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, OFFSET_FOR_LEADER_EPOCH = 0, 1, 2, 3, 18, 23


def hx(*parts: str) -> bytes:
    """Hand-written hex; spaces allowed."""
    return bytes.fromhex("".join(parts))


def frame(*parts: str) -> bytes:
    payload = hx(*parts)
    return len(payload).to_bytes(4, "big") + payload


ORDERS = "0006 6f7264657273"  # "orders": int16 length 6, then ASCII
BLOB = bytes(range(0x10, 0x1A))  # 10 opaque bytes standing for record batches
BLOB_HEX = "0000000a 10111213141516171819"  # int32 length 10, then the bytes


# (api_key, version, correlation_id, client_id, body, frame)
REQUESTS: list[Any] = [
    pytest.param(
        API_VERSIONS,
        0,
        1,
        "c",
        {},
        frame("0012 0000 00000001 0001 63"),  # header only: key 18, v0, corr 1, client "c"; empty body
        id="api-versions-v0-empty-body",
    ),
    pytest.param(
        API_VERSIONS,
        2,
        2,
        None,
        {},
        frame("0012 0002 00000002 ffff"),  # null client id
        id="api-versions-v2-null-client",
    ),
    pytest.param(
        METADATA,
        1,
        7,
        "cl",
        {"topics": None},
        frame(
            "0003 0001 00000007 0002 636c",  # header: key 3, v1, corr 7, client "cl"
            "ffffffff",  # topics: null = every topic
        ),
        id="metadata-v1-all-topics",
    ),
    pytest.param(
        METADATA,
        1,
        8,
        "cl",
        {"topics": [{"name": "orders"}]},
        frame(
            "0003 0001 00000008 0002 636c",
            "00000001",  # topics: one
            ORDERS,  # name
        ),
        id="metadata-v1-one-topic",
    ),
    pytest.param(
        METADATA,
        8,
        9,
        "cl",
        {
            "topics": [],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": True,
            "include_topic_authorized_operations": False,
        },
        frame(
            "0003 0008 00000009 0002 636c",
            "00000000",  # topics: empty = none
            "00",  # allow_auto_topic_creation (v4+)
            "01",  # include_cluster_authorized_operations (v8)
            "00",  # include_topic_authorized_operations (v8+)
        ),
        id="metadata-v8-no-topics",
    ),
    pytest.param(
        PRODUCE,
        3,
        11,
        "p",
        {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 30000,
            "topic_data": [
                {
                    "name": "orders",
                    "partition_data": [{"index": 0, "records": BLOB}, {"index": 1, "records": None}],
                }
            ],
        },
        frame(
            "0000 0003 0000000b 0001 70",  # header: key 0, v3, corr 11, client "p"
            "ffff",  # transactional_id: null
            "ffff",  # acks: -1 (all in-sync replicas)
            "00007530",  # timeout_ms: 30000
            "00000001",  # topic_data: one
            ORDERS,
            "00000002",  # partition_data: two
            "00000000",  # index 0
            BLOB_HEX,  # records
            "00000001",  # index 1
            "ffffffff",  # records: null
        ),
        id="produce-v3",
    ),
    pytest.param(
        FETCH,
        4,
        12,
        "f",
        {
            "replica_id": -1,
            "max_wait_ms": 500,
            "min_bytes": 1,
            "max_bytes": 52428800,
            "isolation_level": 1,
            "topics": [
                {
                    "topic": "orders",
                    "partitions": [{"partition": 0, "fetch_offset": 100, "partition_max_bytes": 1048576}],
                }
            ],
        },
        frame(
            "0001 0004 0000000c 0001 66",  # header: key 1, v4, corr 12, client "f"
            "ffffffff",  # replica_id: -1 (a consumer)
            "000001f4",  # max_wait_ms: 500
            "00000001",  # min_bytes: 1
            "03200000",  # max_bytes: 50 MiB (v3+)
            "01",  # isolation_level: READ_COMMITTED (v4+)
            "00000001",  # topics: one
            ORDERS,
            "00000001",  # partitions: one
            "00000000",  # partition 0
            "0000000000000064",  # fetch_offset: 100
            "00100000",  # partition_max_bytes: 1 MiB
        ),
        id="fetch-v4",
    ),
    pytest.param(
        FETCH,
        11,
        13,
        "f",
        {
            "replica_id": 2,
            "max_wait_ms": 0,
            "min_bytes": 0,
            "max_bytes": 1,
            "isolation_level": 0,
            "session_id": 5,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": "orders",
                    "partitions": [
                        {
                            "partition": 3,
                            "current_leader_epoch": 9,
                            "fetch_offset": 0,
                            "log_start_offset": -1,
                            "partition_max_bytes": 16,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [{"topic": "orders", "partitions": [1, 2]}],
            "rack_id": "r1",
        },
        frame(
            "0001 000b 0000000d 0001 66",  # header: key 1, v11, corr 13
            "00000002",  # replica_id: broker 2
            "00000000 00000000 00000001",  # max_wait_ms, min_bytes, max_bytes
            "00",  # isolation_level
            "00000005",  # session_id (v7+)
            "ffffffff",  # session_epoch (v7+)
            "00000001",  # topics: one
            ORDERS,
            "00000001",  # partitions: one
            "00000003",  # partition
            "00000009",  # current_leader_epoch (v9+)
            "0000000000000000",  # fetch_offset
            "ffffffffffffffff",  # log_start_offset (v5+)
            "00000010",  # partition_max_bytes
            "00000001",  # forgotten_topics_data (v7+): one
            ORDERS,
            "00000002 00000001 00000002",  # partitions [1, 2]
            "0002 7231",  # rack_id "r1" (v11+)
        ),
        id="fetch-v11",
    ),
    pytest.param(
        LIST_OFFSETS,
        1,
        14,
        "l",
        {
            "replica_id": -1,
            "topics": [
                {
                    "name": "orders",
                    "partitions": [
                        {"partition_index": 0, "timestamp": -1},
                        {"partition_index": 1, "timestamp": -2},
                    ],
                }
            ],
        },
        frame(
            "0002 0001 0000000e 0001 6c",  # header: key 2, v1, corr 14, client "l"
            "ffffffff",  # replica_id: -1
            "00000001",  # topics: one
            ORDERS,
            "00000002",  # partitions: two
            "00000000 ffffffffffffffff",  # partition 0, timestamp -1 (latest)
            "00000001 fffffffffffffffe",  # partition 1, timestamp -2 (earliest)
        ),
        id="list-offsets-v1",
    ),
    pytest.param(
        OFFSET_FOR_LEADER_EPOCH,
        0,
        15,
        "o",
        {"topics": [{"topic": "orders", "partitions": [{"partition": 0, "leader_epoch": 3}]}]},
        frame(
            "0017 0000 0000000f 0001 6f",  # header: key 23, v0, corr 15, client "o"
            "00000001",  # topics: one
            ORDERS,
            "00000001",  # partitions: one
            "00000000 00000003",  # partition 0, leader_epoch 3
        ),
        id="offset-for-leader-epoch-v0",
    ),
    pytest.param(
        OFFSET_FOR_LEADER_EPOCH,
        3,
        16,
        "o",
        {
            "replica_id": 2,
            "topics": [
                {
                    "topic": "orders",
                    "partitions": [{"partition": 0, "current_leader_epoch": 5, "leader_epoch": 3}],
                }
            ],
        },
        frame(
            "0017 0003 00000010 0001 6f",  # header: key 23, v3, corr 16
            "00000002",  # replica_id (v3+): broker 2
            "00000001",  # topics: one
            ORDERS,
            "00000001",  # partitions: one
            "00000000",  # partition 0
            "00000005",  # current_leader_epoch (v2+)
            "00000003",  # leader_epoch
        ),
        id="offset-for-leader-epoch-v3",
    ),
]


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
        frame(
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
        frame("00000002", "0023", "00000001", "0012 0000 0002"),  # UNSUPPORTED_VERSION; no throttle in v0
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
        frame(
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
        frame(
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
        frame(
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
        frame(
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
        frame(
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
        frame(
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
        frame(
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
        frame(
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
        frame(
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


@pytest.mark.parametrize(("api_key", "version", "corr", "client_id", "body", "expected"), REQUESTS)
def test_encode_request_golden(api_key, version, corr, client_id, body, expected):
    assert protocol.encode_request(api_key, version, corr, client_id, body) == expected


@pytest.mark.parametrize(("api_key", "version", "corr", "client_id", "body", "expected"), REQUESTS)
def test_decode_request_golden(api_key, version, corr, client_id, body, expected):
    header, decoded = protocol.decode_request(expected)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        api_key,
        version,
        corr,
        client_id,
    )
    assert header.version == 1
    assert decoded == body


@pytest.mark.parametrize(("api_key", "version", "corr", "body", "expected"), RESPONSES)
def test_encode_response_golden(api_key, version, corr, body, expected):
    assert protocol.encode_response(api_key, version, corr, body) == expected


@pytest.mark.parametrize(("api_key", "version", "corr", "body", "expected"), RESPONSES)
def test_decode_response_golden(api_key, version, corr, body, expected):
    assert protocol.decode_response(api_key, version, expected) == (corr, body)


def test_records_decode_as_bytes_and_encode_from_any_buffer():
    """A broker may hand out slices of its log as memoryviews; they encode like the bytes they view."""
    produce = REQUESTS[5].values[4]
    for wrap in (bytearray, memoryview, lambda b: memoryview(bytearray(b))):
        partition = {"index": 0, "records": wrap(BLOB)}
        as_buffer = {**produce, "topic_data": [{"name": "orders", "partition_data": [partition]}]}
        as_bytes = {
            **produce,
            "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": BLOB}]}],
        }
        assert protocol.encode_request(PRODUCE, 3, 1, None, as_buffer) == protocol.encode_request(
            PRODUCE, 3, 1, None, as_bytes
        )
    _, decoded = protocol.decode_request(REQUESTS[5].values[5])
    assert type(decoded["topic_data"][0]["partition_data"][0]["records"]) is bytes


BAD_FRAMES = [
    pytest.param(
        frame(
            "0000 0003 00000001 ffff",
            "ffff 0001 00000001 00000001",
            ORDERS,
            "00000001 00000000 0000000b 1011",
        ),
        id="produce-records-length-beyond-the-frame",
    ),
    pytest.param(
        frame("0000 0003 00000001 ffff", "ffff 0001 00000001 00000001", ORDERS, "00000001 00000000 fffffffe"),
        id="produce-records-length-minus-2",
    ),
    pytest.param(frame("0003 0001 00000001 ffff", "fffffffe"), id="metadata-topics-count-minus-2"),
    pytest.param(frame("0012 0000 00000001 ffff", "00"), id="api-versions-v0-trailing-byte"),
]


@pytest.mark.parametrize("data", BAD_FRAMES)
def test_malformed_data_plane_requests_are_protocol_errors(data):
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_request(data)
