"""Golden-byte tests for the data-plane APIs' requests: ApiVersions, Metadata, Produce, Fetch,
ListOffsets and OffsetForLeaderEpoch.

Every expected byte string is written out by hand, field by field, from Apache Kafka's message specs
(``reference/kafka-messages/*.json``) -- never by calling the codec. Only the 4-byte size prefix is
computed (``hex_frame``). All versions here are non-flexible: request header v1 (api_key, api_version,
correlation_id, int16-length client_id), response header v0 (correlation_id), int16-length strings,
int32-length bytes and int32-count arrays, -1 for null.

``records`` fields are opaque to the codec, so short arbitrary blobs stand in for record batches
(``test_record_batch.py`` has golden batches).

The responses are in ``test_golden_data_plane_responses.py``; both share
:mod:`tests.protocol.golden`.
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

# (api_key, version, correlation_id, client_id, body, frame)
REQUESTS: list[Any] = [
    pytest.param(
        API_VERSIONS,
        0,
        1,
        "c",
        {},
        hex_frame("0012 0000 00000001 0001 63"),  # header only: key 18, v0, corr 1, client "c"; empty body
        id="api-versions-v0-empty-body",
    ),
    pytest.param(
        API_VERSIONS,
        2,
        2,
        None,
        {},
        hex_frame("0012 0002 00000002 ffff"),  # null client id
        id="api-versions-v2-null-client",
    ),
    pytest.param(
        METADATA,
        1,
        7,
        "cl",
        {"topics": None},
        hex_frame(
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
        hex_frame(
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
        hex_frame(
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
        hex_frame(
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
        hex_frame(
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
        hex_frame(
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
        hex_frame(
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
        hex_frame(
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
        hex_frame(
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
        hex_frame(
            "0000 0003 00000001 ffff",
            "ffff 0001 00000001 00000001",
            ORDERS,
            "00000001 00000000 0000000b 1011",
        ),
        id="produce-records-length-beyond-the-frame",
    ),
    pytest.param(
        hex_frame(
            "0000 0003 00000001 ffff", "ffff 0001 00000001 00000001", ORDERS, "00000001 00000000 fffffffe"
        ),
        id="produce-records-length-minus-2",
    ),
    pytest.param(hex_frame("0003 0001 00000001 ffff", "fffffffe"), id="metadata-topics-count-minus-2"),
    pytest.param(hex_frame("0012 0000 00000001 ffff", "00"), id="api-versions-v0-trailing-byte"),
]


@pytest.mark.parametrize("data", BAD_FRAMES)
def test_malformed_data_plane_requests_are_protocol_errors(data):
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_request(data)
