"""Error-only response bodies: valid on the wire for every implemented API version."""

from __future__ import annotations

import uuid

import pytest

from protocol import (
    SUPPORTED_VERSIONS,
    ErrorCode,
    ProtocolError,
    decode_response,
    encode_response,
    error_response_body,
)
from protocol.error_response import _empty
from protocol.types import Bool, Int8, Int64, Layout, Uuid

ALL_VERSIONS = [(int(key), version) for key, versions in SUPPORTED_VERSIONS.items() for version in versions]


@pytest.mark.parametrize(("api_key", "api_version"), ALL_VERSIONS, ids=lambda v: str(v))
@pytest.mark.parametrize("code", [ErrorCode.UNSUPPORTED_VERSION, ErrorCode.INVALID_REQUEST])
def test_error_body_round_trips_with_its_code(api_key: int, api_version: int, code: ErrorCode) -> None:
    body = error_response_body(api_key, api_version, code)
    frame = encode_response(api_key, api_version, 7, body)
    correlation_id, decoded = decode_response(api_key, api_version, frame)
    assert correlation_id == 7
    assert decoded == body
    assert decoded["error_code"] == code


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
    )
    empty = _empty(schema)
    assert empty == {
        "error_code": 0,
        "flag": False,
        "id": uuid.UUID(int=0),
        "name": "",
        "maybe": None,
        "inner": {"epoch": 0, "items": []},
    }
    assert schema.parse(schema.build(empty)) == empty
