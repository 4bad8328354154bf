"""Golden-byte tests for the control-plane versions Apache Kafka 3.9 speaks: LeaderAndIsr v7,
UpdateMetadata v8 (with its tagged ``type``), StopReplica v4 in Kafka's layout, AlterPartition v3 and
ControlledShutdown v3. Every case (:mod:`tests.protocol.golden_kafka39`) encodes to its hand-built bytes
and decodes from them in the KAFKA dialect, and in the SEED dialect too where the version number means
the same there; the hand-written hex frames check the field-by-field helpers.
"""

from __future__ import annotations

import pytest

import protocol
from protocol import UnsupportedVersionError, WireDialect
from tests.protocol.golden import (
    STOP_REPLICA,
    TID1,
    UPDATE_METADATA,
    cs,
    flexible_request_frame,
    flexible_response_frame,
    hx,
    i8,
    i32,
    i64,
    norm,
    uid,
)
from tests.protocol.golden_kafka39 import (
    HEX_SR_V4_KAFKA,
    HEX_SR_V4_KAFKA_BODY,
    HEX_UM_V8,
    HEX_UM_V8_BODY,
    KAFKA_39_REQUEST_CASES,
    KAFKA_39_RESPONSE_CASES,
    sr4_request,
    um8_broker,
    um8_request,
)

KAFKA = WireDialect.KAFKA
SEED = WireDialect.SEED


def _dialects(api_key: int, version: int) -> list[WireDialect]:
    """KAFKA always; SEED too where the number is not one of the seed's own layouts."""
    same = not protocol.uses_max_broker_epoch(protocol.ApiKey(api_key), version, SEED)
    return [KAFKA, SEED] if same else [KAFKA]


ALL_REQUESTS = [
    pytest.param(
        k, v, c, cid, body, flexible_request_frame(k, v, c, cid, raw), dialect, id=f"{p.id}-{dialect.value}"
    )
    for p in KAFKA_39_REQUEST_CASES
    for (k, v, c, cid, body, raw) in [p.values]
    for dialect in _dialects(k, v)
] + [
    pytest.param(UPDATE_METADATA, 8, 3, None, HEX_UM_V8_BODY, HEX_UM_V8, KAFKA, id="hex-um-v8"),
    pytest.param(STOP_REPLICA, 4, 9, "", HEX_SR_V4_KAFKA_BODY, HEX_SR_V4_KAFKA, KAFKA, id="hex-sr-v4-kafka"),
]
ALL_RESPONSES = [
    pytest.param(k, v, c, body, flexible_response_frame(c, raw), dialect, id=f"{p.id}-{dialect.value}")
    for p in KAFKA_39_RESPONSE_CASES
    for (k, v, c, body, raw) in [p.values]
    for dialect in _dialects(k, v)
]


def test_helpers_agree_with_hand_written_hex() -> None:
    um = um8_request(
        0, True, 1, 1, 255, [("t", TID1, [])], [um8_broker(4, [(9100, "h", "PLAINTEXT", 0)], None)]
    )
    assert flexible_request_frame(UPDATE_METADATA, 8, 3, None, um[1]) == HEX_UM_V8
    assert um[0] == HEX_UM_V8_BODY
    sr = sr4_request(1, False, 2, -2, [("t", [(0, 7, True), (1, -1, False)])])
    assert flexible_request_frame(STOP_REPLICA, 4, 9, "", sr[1]) == HEX_SR_V4_KAFKA
    assert sr[0] == HEX_SR_V4_KAFKA_BODY


@pytest.mark.parametrize(
    ("api_key", "version", "corr", "client_id", "body", "expected", "dialect"), ALL_REQUESTS
)
def test_encode_request_golden(api_key, version, corr, client_id, body, expected, dialect):
    encoded = protocol.encode_request(api_key, version, corr, client_id, body, dialect=dialect)
    assert encoded.hex() == expected.hex()


@pytest.mark.parametrize(
    ("api_key", "version", "corr", "client_id", "body", "expected", "dialect"), ALL_REQUESTS
)
def test_decode_request_golden(api_key, version, corr, client_id, body, expected, dialect):
    header, decoded = protocol.decode_request(expected, dialect=dialect)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        api_key,
        version,
        corr,
        client_id,
    )
    assert header.version == 2  # flexible: request header v2
    assert norm(decoded) == norm(body)


@pytest.mark.parametrize(("api_key", "version", "corr", "body", "expected", "dialect"), ALL_RESPONSES)
def test_encode_response_golden(api_key, version, corr, body, expected, dialect):
    assert protocol.encode_response(api_key, version, corr, body, dialect=dialect).hex() == expected.hex()


@pytest.mark.parametrize(("api_key", "version", "corr", "body", "expected", "dialect"), ALL_RESPONSES)
def test_decode_response_golden(api_key, version, corr, body, expected, dialect):
    decoded_corr, decoded = protocol.decode_response(api_key, version, expected, dialect=dialect)
    assert decoded_corr == corr
    assert norm(decoded) == norm(body)


# --------------------------------------------------------------------------------------------------------
# UpdateMetadata v8's tagged field
# --------------------------------------------------------------------------------------------------------

UM8_EMPTY = i32(0) + hx("00") + i32(1) + i64(0) + hx("01 01")  # controller 0, false, epoch 1, 0, [], []
UM8_EMPTY_BODY = {
    "controller_id": 0,
    "is_kraft_controller": False,
    "controller_epoch": 1,
    "broker_epoch": 0,
    "topic_states": [],
    "live_brokers": [],
}


def _um8(tags: bytes) -> bytes:
    return flexible_request_frame(UPDATE_METADATA, 8, 1, None, UM8_EMPTY + tags)


def test_an_absent_type_reads_as_its_default_and_is_not_written() -> None:
    body = {**UM8_EMPTY_BODY, "type": 0}
    assert protocol.decode_request(_um8(hx("00")), dialect=KAFKA)[1] == body
    assert protocol.encode_request(UPDATE_METADATA, 8, 1, None, body, dialect=KAFKA) == _um8(hx("00"))


def test_a_body_without_type_encodes_as_the_default() -> None:
    assert protocol.encode_request(UPDATE_METADATA, 8, 1, None, UM8_EMPTY_BODY, dialect=KAFKA) == _um8(
        hx("00")
    )


def test_a_type_of_zero_on_the_wire_reads_as_zero_and_is_written_back_without_the_tag() -> None:
    _, body = protocol.decode_request(_um8(hx("01 00 01 00")), dialect=KAFKA)
    assert body["type"] == 0
    assert protocol.encode_request(UPDATE_METADATA, 8, 1, None, body, dialect=KAFKA) == _um8(hx("00"))


def test_known_and_unknown_tags_side_by_side() -> None:
    # tag 0 (type, 1 byte: 2), then tag 5 (unknown, 3 bytes: skipped)
    body = protocol.decode_request(_um8(hx("02", "00 01 02", "05 03 aabbcc")), dialect=KAFKA)[1]
    assert body == {**UM8_EMPTY_BODY, "type": 2}


@pytest.mark.parametrize(
    "tags",
    [
        pytest.param(hx("01 00 02 0102"), id="type-of-two-bytes"),
        pytest.param(hx("01 00 00"), id="type-of-no-bytes"),
        pytest.param(hx("02 00 01 01 00 01 01"), id="type-twice"),
        pytest.param(hx("01 00 05 01"), id="type-past-the-end"),
    ],
)
def test_a_malformed_tagged_type_is_refused(tags: bytes) -> None:
    with pytest.raises(protocol.ProtocolError, match="UpdateMetadata v8 request"):
        protocol.decode_request(_um8(tags), dialect=KAFKA)


@pytest.mark.parametrize("value", ["full", 128, None])
def test_a_type_that_is_no_int8_is_refused(value: object) -> None:
    with pytest.raises(protocol.ProtocolError, match="type"):
        protocol.encode_request(UPDATE_METADATA, 8, 1, None, {**UM8_EMPTY_BODY, "type": value}, dialect=KAFKA)


def test_um8_type_bytes() -> None:
    """The helper's tagged section for type 2, by hand."""
    assert um8_request(0, False, 2, 1, 0, [], [])[1] == UM8_EMPTY + hx("01 00 01") + i8(2)


# --------------------------------------------------------------------------------------------------------
# Flexible headers, AlterPartition v3's ISR with epochs, versions still unsupported
# --------------------------------------------------------------------------------------------------------


def test_flexible_controlled_shutdown_uses_header_v2_and_response_header_v1() -> None:
    frame = protocol.encode_request(7, 3, 5, "b", {"broker_id": 1, "broker_epoch": 2})
    assert frame[4:16] == hx("0007 0003 00000005 0001 62 00")
    response = protocol.encode_response(
        7, 3, 5, {"error_code": 0, "remaining_partitions": [{"topic_name": "t", "partition_index": 1}]}
    )
    assert response == hx("00000010", "00000005 00", "0000", "02", cs("t").hex(), "00000001 00", "00")


def test_alter_partition_v3_replaces_new_isr() -> None:
    body = {
        "broker_id": 1,
        "broker_epoch": 2,
        "topics": [
            {
                "topic_id": TID1,
                "partitions": [
                    {
                        "partition_index": 0,
                        "leader_epoch": 1,
                        "new_isr": [1],
                        "leader_recovery_state": 0,
                        "partition_epoch": 1,
                    }
                ],
            }
        ],
    }
    with pytest.raises(protocol.ProtocolError, match="new_isr_with_epochs"):
        protocol.encode_request(56, 3, 1, None, body)
    assert uid(TID1) in protocol.encode_request(56, 2, 1, None, body)


def test_lai_v6_and_um_v6_stay_unsupported_in_both_dialects() -> None:
    for dialect in WireDialect:
        for api_key, version in ((4, 6), (4, 4), (6, 6), (5, 3)):
            frame = flexible_request_frame(api_key, version, 8, "x", b"")
            with pytest.raises(UnsupportedVersionError) as info:
                protocol.decode_request(frame, dialect=dialect)
            assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (
                api_key,
                version,
                8,
            )
