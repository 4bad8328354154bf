"""Whatever bytes arrive, decoding raises ProtocolError or returns a body: nothing else escapes."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

import protocol
from protocol import DEFAULT_DIALECT, WireDialect
from protocol.registry import SUPPORTED_VERSIONS, message_codec
from tests.protocol.strategies import ALL_MESSAGES, body_strategy, message_id, per_message
from tests.support.raw_client import raw_frame

KNOWN_KEYS = [int(k) for k in SUPPORTED_VERSIONS]


def _decode_or_protocol_error(frame: bytes, dialect: WireDialect = DEFAULT_DIALECT) -> None:
    with contextlib.suppress(protocol.ProtocolError):
        protocol.decode_request(frame, dialect=dialect)


@given(st.binary(max_size=256))
def test_random_bytes(raw: bytes) -> None:
    _decode_or_protocol_error(raw)


@given(
    api_key=st.sampled_from(KNOWN_KEYS) | st.integers(-(2**15), 2**15 - 1),
    api_version=st.integers(-3, 12),
    tail=st.binary(max_size=300),
)
def test_random_payload_behind_a_plausible_header(api_key: int, api_version: int, tail: bytes) -> None:
    _decode_or_protocol_error(raw_frame(struct.pack(">hhi", api_key, api_version, 1) + tail))


@pytest.mark.parametrize("case", [c for c in ALL_MESSAGES if c[2] == "request"], ids=message_id)
@per_message
@given(data=st.data())
def test_mutated_valid_requests(case: tuple[int, int, str, WireDialect], data: st.DataObject) -> None:
    """Flip, insert, delete and truncate bytes of a real request, fixing the size prefix or not."""
    api_key, version, _, dialect = case
    body = data.draw(body_strategy(message_codec(api_key, version, "request", dialect).schema))
    payload = bytearray(protocol.encode_request(api_key, version, 7, "fuzz", body, dialect=dialect)[4:])
    for _ in range(data.draw(st.integers(1, 5))):
        op = data.draw(st.sampled_from(["flip", "insert", "delete", "truncate", "huge-count"]))
        at = data.draw(st.integers(0, len(payload)))
        if op == "flip" and payload:
            payload[min(at, len(payload) - 1)] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "insert":
            payload[at:at] = data.draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del payload[at : at + data.draw(st.integers(1, 8))]
        elif op == "truncate":
            del payload[at:]
        elif op == "huge-count" and at + 4 <= len(payload):
            payload[at : at + 4] = struct.pack(
                ">i", data.draw(st.sampled_from([2**31 - 1, 2**30, -2, 40000]))
            )
    frame = raw_frame(bytes(payload))
    if data.draw(st.booleans()):
        frame = struct.pack(">i", data.draw(st.integers(-(2**31), 2**31 - 1))) + frame[4:]
    _decode_or_protocol_error(frame, dialect)


@pytest.mark.parametrize("case", [c for c in ALL_MESSAGES if c[2] == "response"], ids=message_id)
@per_message
@given(tail=st.binary(max_size=200))
def test_random_responses(case: tuple[int, int, str, WireDialect], tail: bytes) -> None:
    api_key, version, _, dialect = case
    with contextlib.suppress(protocol.ProtocolError):
        protocol.decode_response(api_key, version, raw_frame(tail), dialect=dialect)


def test_unknown_api_key_is_a_protocol_error_not_an_unsupported_version() -> None:
    frame = raw_frame(struct.pack(">hhi", 9999, 0, 5) + b"\xff\xff")
    with pytest.raises(protocol.ProtocolError, match="unknown API key 9999") as info:
        protocol.decode_request(frame)
    assert not isinstance(info.value, protocol.UnsupportedVersionError)


def test_unsupported_version_keeps_what_a_server_needs_to_answer() -> None:
    frame = raw_frame(struct.pack(">hhih", 4, 3, 4242, 3) + b"cli" + b"\x00" * 10)
    with pytest.raises(protocol.UnsupportedVersionError) as info:
        protocol.decode_request(frame)
    err = info.value
    assert (err.api_key, err.api_version, err.correlation_id, err.client_id) == (4, 3, 4242, "cli")


def test_errors_name_the_field_path() -> None:
    body = {
        "controller_id": 1,
        "controller_epoch": 2,
        "broker_epoch": 3,
        "delete_partitions": False,
        "topics": [{"name": "a", "partition_indexes": [0, 1]}],
    }
    frame = bytearray(protocol.encode_request(5, 1, 1, None, body))
    frame[-12:-8] = struct.pack(">i", -5)
    with pytest.raises(protocol.ProtocolError, match=r"topics\[0\] -> partition_indexes: invalid length -5"):
        protocol.decode_request(bytes(frame))
