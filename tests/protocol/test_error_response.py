"""Error-only response bodies: valid on the wire for every implemented API version."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    ErrorCode,
    ProtocolError,
    decode_response,
    encode_response,
    error_response_body,
)
from protocol.error_response import _element, _empty
from protocol.registry import message_codec
from protocol.types import Bool, Int8, Int32, Int64, KBytes, Layout, Uuid, default
from tests.protocol.strategies import body_strategy, per_message

ALL_VERSIONS = [(int(key), version) for key, versions in SUPPORTED_VERSIONS.items() for version in versions]


PER_PARTITION_APIS = {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.OFFSET_FOR_LEADER_EPOCH}


def _error_codes(value: Any) -> list[int]:
    """Every ``error_code`` in a body, at any depth, in order."""
    if isinstance(value, dict):
        own = [value["error_code"]] if "error_code" in value else []
        return own + [c for k, v in value.items() if k != "error_code" for c in _error_codes(v)]
    if isinstance(value, list):
        return [c for item in value for c in _error_codes(item)]
    return []


def _round_trip(api_key: int, api_version: int, body: dict[str, Any]) -> dict[str, Any]:
    correlation_id, decoded = decode_response(
        api_key, api_version, encode_response(api_key, api_version, 7, body)
    )
    assert correlation_id == 7
    return decoded


@pytest.mark.parametrize(("api_key", "api_version"), ALL_VERSIONS, ids=lambda v: str(v))
@pytest.mark.parametrize("code", [ErrorCode.UNSUPPORTED_VERSION, ErrorCode.INVALID_REQUEST])
def test_error_body_round_trips_with_its_code(api_key: int, api_version: int, code: ErrorCode) -> None:
    """Without the request, the code goes where the version has a top-level error code, and nowhere else."""
    body = error_response_body(api_key, api_version, code)
    assert _round_trip(api_key, api_version, body) == body
    assert _error_codes(body) == ([code] if "error_code" in body else [])


@pytest.mark.parametrize(
    ("api_key", "api_version"),
    [(k, v) for k, v in ALL_VERSIONS if k in PER_PARTITION_APIS | {ApiKey.METADATA}],
    ids=lambda v: str(v),
)
@per_message
@given(data=st.data())
def test_error_body_answers_every_requested_partition(api_key: int, api_version: int, data: st.DataObject):
    """Given the request, every partition (Metadata: every topic) it names carries the code, as in Kafka."""
    request = data.draw(body_strategy(message_codec(api_key, api_version, "request").schema))
    body = error_response_body(api_key, api_version, ErrorCode.NOT_LEADER_OR_FOLLOWER, request)
    assert _round_trip(api_key, api_version, body) == body
    topics = request["topics"] if api_key != ApiKey.PRODUCE else request["topic_data"]
    if api_key == ApiKey.METADATA:
        expected = len(topics or ())
    else:
        expected = sum(
            len(t["partition_data" if api_key == ApiKey.PRODUCE else "partitions"]) for t in topics
        )
    top_level = 1 if "error_code" in body else 0
    assert _error_codes(body) == [ErrorCode.NOT_LEADER_OR_FOLLOWER] * (top_level + expected)


FETCH_REQUEST = {
    "replica_id": -1,
    "max_wait_ms": 500,
    "min_bytes": 1,
    "max_bytes": 1 << 20,
    "isolation_level": 0,
    "session_id": 0,
    "session_epoch": -1,
    "topics": [
        {
            "topic": "t",
            "partitions": [
                {
                    "partition": 3,
                    "current_leader_epoch": 1,
                    "fetch_offset": 10,
                    "log_start_offset": -1,
                    "partition_max_bytes": 4096,
                }
            ],
        }
    ],
    "forgotten_topics_data": [],
    "rack_id": "",
}
"""A consumer's Fetch v11 for partition t-3."""


def test_error_partitions_name_what_was_asked_and_carry_kafkas_defaults() -> None:
    assert error_response_body(ApiKey.FETCH, 11, ErrorCode.NOT_LEADER_OR_FOLLOWER, FETCH_REQUEST) == {
        "throttle_time_ms": 0,
        "error_code": 6,
        "session_id": 0,
        "responses": [
            {
                "topic": "t",
                "partitions": [
                    {
                        "partition_index": 3,
                        "error_code": 6,
                        "high_watermark": -1,
                        "last_stable_offset": -1,
                        "log_start_offset": -1,
                        "aborted_transactions": [],
                        "preferred_read_replica": -1,
                        "records": b"",
                    }
                ],
            }
        ],
    }
    produce_request = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"x"}]}],
    }
    assert error_response_body(ApiKey.PRODUCE, 3, ErrorCode.NOT_LEADER_OR_FOLLOWER, produce_request) == {
        "responses": [
            {
                "name": "t",
                "partition_responses": [
                    {"index": 0, "error_code": 6, "base_offset": -1, "log_append_time_ms": -1}
                ],
            }
        ],
        "throttle_time_ms": 0,
    }
    metadata = error_response_body(ApiKey.METADATA, 8, ErrorCode.INVALID_REQUEST, {"topics": None})
    assert metadata["topics"] == [] and metadata["controller_id"] == -1
    assert metadata["cluster_authorized_operations"] == -(2**31)
    metadata = error_response_body(
        ApiKey.METADATA,
        8,
        ErrorCode.INVALID_REQUEST,
        {"topics": [{"name": "a"}], "allow_auto_topic_creation": True},
    )
    assert metadata["topics"] == [
        {
            "error_code": 42,
            "name": "a",
            "is_internal": False,
            "partitions": [],
            "topic_authorized_operations": -(2**31),
        }
    ]


def test_error_body_is_empty_apart_from_the_code() -> None:
    assert error_response_body(4, 2, ErrorCode.STALE_BROKER_EPOCH) == {
        "error_code": 77,
        "partition_errors": [],
    }
    alter_partition = error_response_body(56, 2, ErrorCode.NOT_CONTROLLER)
    assert alter_partition == {"throttle_time_ms": 0, "error_code": 41, "topics": []}


def test_each_call_returns_a_fresh_body() -> None:
    first = error_response_body(4, 2, 35)
    first["partition_errors"].append({"topic_name": "t", "partition_index": 0, "error_code": 0})
    assert error_response_body(4, 2, 35)["partition_errors"] == []


def test_unknown_api_or_version_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        error_response_body(4, 0, 35)
    with pytest.raises(ProtocolError):
        error_response_body(9999, 0, 35)


def test_every_wire_type_gets_its_empty_value() -> None:
    k = Layout(flexible=True)
    schema = k.struct(
        "error_code" / Int8,
        "flag" / Bool,
        "id" / Uuid,
        "name" / k.string(),
        "maybe" / k.string(nullable=True),
        "inner" / k.struct("epoch" / Int64, "items" / k.array(Int64, nullable=True)),
        "records" / KBytes(compact=True, nullable=True),
        default("leader_epoch" / Int32, -1),
    )
    empty = _empty(schema)
    assert empty == {
        "error_code": 0,
        "flag": False,
        "id": uuid.UUID(int=0),
        "name": "",
        "maybe": None,
        "inner": {"epoch": 0, "items": []},
        "records": b"",
        "leader_epoch": -1,
    }
    assert schema.parse(schema.build(empty)) == empty


def test_group_and_producer_id_error_bodies_carry_kafkas_unknowns() -> None:
    """As Kafka's own error responses: no coordinator (-1, "", -1), no generation, no producer id."""
    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert error_response_body(ApiKey.FIND_COORDINATOR, 0, code) == {
        "error_code": 15,
        "node_id": -1,
        "host": "",
        "port": -1,
    }
    # v4 answers per key: without the request there is no key to answer, and no top-level code.
    assert error_response_body(ApiKey.FIND_COORDINATOR, 4, code) == {
        "throttle_time_ms": 0,
        "coordinators": [],
    }
    coordinator = _empty(
        _element(message_codec(ApiKey.FIND_COORDINATOR, 4, "response").schema, "coordinators")
    )
    assert coordinator == {
        "key": "",
        "node_id": -1,
        "host": "",
        "port": -1,
        "error_code": 0,
        "error_message": None,
    }
    assert error_response_body(ApiKey.JOIN_GROUP, 6, code) == {
        "throttle_time_ms": 0,
        "error_code": 15,
        "generation_id": -1,
        "protocol_name": "",
        "leader": "",
        "member_id": "",
        "members": [],
    }
    join_v7 = error_response_body(ApiKey.JOIN_GROUP, 7, code)
    assert join_v7["protocol_type"] is None and join_v7["protocol_name"] is None
    assert error_response_body(ApiKey.INIT_PRODUCER_ID, 4, code) == {
        "throttle_time_ms": 0,
        "error_code": 15,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    fetched = message_codec(ApiKey.OFFSET_FETCH, 7, "response").schema
    assert _empty(_element(_element(fetched, "topics"), "partitions")) == {
        "partition_index": 0,
        "committed_offset": -1,
        "committed_leader_epoch": -1,
        "metadata": None,
        "error_code": 0,
    }
    described = message_codec(ApiKey.DESCRIBE_GROUPS, 5, "response").schema
    assert _empty(_element(described, "groups"))["authorized_operations"] == -(2**31)
