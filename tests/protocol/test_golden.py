"""Golden-byte tests for the control-plane codec: every golden case (field by field in
:mod:`tests.protocol.golden_control` and :mod:`tests.protocol.golden_broker`, hand-written hex in
:mod:`tests.protocol.golden_hex`) encodes to its bytes and decodes from them; request and response
headers of both kinds; the helpers agree with the hand-written hex. How the goldens are written:
:mod:`tests.protocol.golden`. Malformed input: ``test_golden_malformed.py``.
"""

from __future__ import annotations

import pytest

import protocol
from tests.protocol.golden import (
    ALTER_PARTITION,
    CONTROLLED_SHUTDOWN,
    LEADER_AND_ISR,
    LONG_TOPIC,
    STOP_REPLICA,
    TID1,
    TID2,
    TOPIC_UTF8,
    UPDATE_METADATA,
    cs,
    frame,
    hx,
    i32,
    i64,
    norm,
    request_frame,
    response_frame,
    s,
    uid,
    uvarint,
)
from tests.protocol.golden_broker import (
    AP_EMPTY_BODY,
    AP_EMPTY_BODY_BYTES,
    CS_BODY,
    CS_BODY_BYTES,
    CS_REQUEST_CASES,
    CS_RESPONSE_CASES,
    LONG_NAME_CASES,
    ap_request,
    ap_request_cases,
    ap_response,
    ap_response_cases,
    cs_response,
)
from tests.protocol.golden_control import (
    lai_partition,
    lai_request,
    lai_request_cases,
    lai_response_cases,
    sr_request,
    sr_request_cases,
    sr_response_cases,
    um_broker,
    um_request,
    um_request_cases,
    um_response_cases,
)
from tests.protocol.golden_hex import (
    HEX_AP_V0,
    HEX_AP_V0_BODY,
    HEX_AP_V1_RESP,
    HEX_AP_V2,
    HEX_CS_V2,
    HEX_CS_V2_RESP,
    HEX_LAI_V2,
    HEX_REQUEST_CASES,
    HEX_RESPONSE_CASES,
    HEX_SR_V4,
    HEX_UM_V7,
)

REQUEST_CASES = [
    *lai_request_cases(2, "broker_epoch"),
    *lai_request_cases(5, "max_broker_epoch"),
    *um_request_cases(5, "broker_epoch"),
    *um_request_cases(7, "max_broker_epoch"),
    *sr_request_cases(1, "broker_epoch"),
    *sr_request_cases(4, "max_broker_epoch"),
    *CS_REQUEST_CASES,
    *ap_request_cases(0),
    *ap_request_cases(1),
    *ap_request_cases(2),
    *LONG_NAME_CASES,
]

RESPONSE_CASES = [
    *lai_response_cases(2),
    *lai_response_cases(5),
    *um_response_cases(5),
    *um_response_cases(7),
    *sr_response_cases(1),
    *sr_response_cases(4),
    *CS_RESPONSE_CASES,
    *ap_response_cases(0),
    *ap_response_cases(1),
    *ap_response_cases(2),
]


def test_helpers_agree_with_hand_written_hex():
    assert uvarint(0) == b"\x00"
    assert uvarint(127) == b"\x7f"
    assert uvarint(128) == hx("8001")
    assert uvarint(201) == hx("c901")
    assert uvarint(300) == hx("ac02")
    assert cs(LONG_TOPIC)[:2] == hx("c901")
    assert s(TOPIC_UTF8) == hx("000c 74c3ab73742d e4b8bb e9a298")
    assert uid(TID2) == hx("fedcba9876543210800000000000ffff")
    assert (
        request_frame(
            LEADER_AND_ISR,
            2,
            42,
            "ctl",
            lai_request(
                "broker_epoch",
                1,
                5,
                2**32,
                [("tëst", [lai_partition(0, 5, 2, 7, [2, 3], 9, [2, 3, 4], True)])],
                [(2, "h2", 9092)],
            )[1],
        )
        == HEX_LAI_V2
    )
    assert (
        request_frame(
            UPDATE_METADATA,
            7,
            3,
            None,
            um_request(
                "max_broker_epoch", 0, 1, 255, [], [um_broker(4, [(9100, "h", "PLAINTEXT", 0)], None)]
            )[1],
        )
        == HEX_UM_V7
    )
    assert (
        request_frame(
            STOP_REPLICA, 4, 9, "", sr_request("max_broker_epoch", 1, 2, -2, True, [("t", [0, 1])])[1]
        )
        == HEX_SR_V4
    )
    assert request_frame(CONTROLLED_SHUTDOWN, 2, 1, "b1", i32(1) + i64(256)) == HEX_CS_V2
    assert response_frame(CONTROLLED_SHUTDOWN, 1, cs_response(0, [("foo", 2)])[1]) == HEX_CS_V2_RESP
    assert (
        request_frame(
            ALTER_PARTITION, 0, 1, None, ap_request(0, 3, 100, [("foo", [(0, 4, [1, 2, 3], 0, 6)])])[1]
        )
        == HEX_AP_V0
    )
    assert (
        request_frame(ALTER_PARTITION, 2, 2, "x", ap_request(2, 1, 1, [(TID1, [(2, 3, [], 0, 4)])])[1])
        == HEX_AP_V2
    )
    assert (
        response_frame(ALTER_PARTITION, 7, ap_response(1, 0, 0, [("foo", [(0, 0, 3, 4, [3, 1], 1, 7)])])[1])
        == HEX_AP_V1_RESP
    )
    assert ap_request(0, 3, 100, [("foo", [(0, 4, [1, 2, 3], 0, 6)])])[0] == HEX_AP_V0_BODY


# --------------------------------------------------------------------------------------------------------
# Round trips against the goldens
# --------------------------------------------------------------------------------------------------------

ALL_REQUESTS = [
    *HEX_REQUEST_CASES,
    *(
        pytest.param(k, v, c, cid, body, request_frame(k, v, c, cid, raw), id=p.id)
        for p in REQUEST_CASES
        for (k, v, c, cid, body, raw) in [p.values]
    ),
]
ALL_RESPONSES = [
    *HEX_RESPONSE_CASES,
    *(
        pytest.param(k, v, c, body, response_frame(k, c, raw), id=p.id)
        for p in RESPONSE_CASES
        for (k, v, c, body, raw) in [p.values]
    ),
]


@pytest.mark.parametrize(("api_key", "version", "corr", "client_id", "body", "expected"), ALL_REQUESTS)
def test_encode_request_golden(api_key, version, corr, client_id, body, expected):
    assert bytes(protocol.encode_request(api_key, version, corr, client_id, body)).hex() == expected.hex()


@pytest.mark.parametrize(("api_key", "version", "corr", "client_id", "body", "expected"), ALL_REQUESTS)
def test_decode_request_golden(api_key, version, corr, client_id, body, expected):
    header, decoded = protocol.decode_request(expected)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        api_key,
        version,
        corr,
        client_id,
    )
    assert norm(decoded) == norm(body)


@pytest.mark.parametrize(("api_key", "version", "corr", "body", "expected"), ALL_RESPONSES)
def test_encode_response_golden(api_key, version, corr, body, expected):
    assert bytes(protocol.encode_response(api_key, version, corr, body)).hex() == expected.hex()


@pytest.mark.parametrize(("api_key", "version", "corr", "body", "expected"), ALL_RESPONSES)
def test_decode_response_golden(api_key, version, corr, body, expected):
    decoded_corr, decoded = protocol.decode_response(api_key, version, expected)
    assert decoded_corr == corr
    assert norm(decoded) == norm(body)


# --------------------------------------------------------------------------------------------------------
# Headers
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("client_id", "header_hex"),
    [
        pytest.param(None, "0007 0002 0000000b ffff", id="null"),
        pytest.param("", "0007 0002 0000000b 0000", id="empty"),
        pytest.param("kafka", "0007 0002 0000000b 0005 6b61666b61", id="ascii"),
        pytest.param("é", "0007 0002 0000000b 0002 c3a9", id="utf8-byte-length"),
    ],
)
def test_request_header_v1(client_id, header_hex):
    expected = frame(hx(header_hex) + CS_BODY_BYTES)
    assert bytes(protocol.encode_request(CONTROLLED_SHUTDOWN, 2, 11, client_id, CS_BODY)) == expected
    header, body = protocol.decode_request(expected)
    assert header.client_id == client_id
    assert (header.api_key, header.api_version, header.correlation_id) == (7, 2, 11)
    assert body == CS_BODY


@pytest.mark.parametrize(
    ("client_id", "header_hex"),
    [
        # client_id keeps its int16 length in header v2; then one 0x00 for the empty tagged-field section.
        pytest.param(None, "0038 0001 fffffffe ffff 00", id="null"),
        pytest.param("", "0038 0001 fffffffe 0000 00", id="empty"),
        pytest.param("b-2", "0038 0001 fffffffe 0003 622d32 00", id="ascii"),
    ],
)
def test_request_header_v2(client_id, header_hex):
    expected = frame(hx(header_hex) + AP_EMPTY_BODY_BYTES)
    assert bytes(protocol.encode_request(ALTER_PARTITION, 1, -2, client_id, AP_EMPTY_BODY)) == expected
    header, body = protocol.decode_request(expected)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        56,
        1,
        -2,
        client_id,
    )
    assert body == AP_EMPTY_BODY


def test_response_header_v0_is_only_correlation_id():
    expected = hx("00000006", "7fffffff", "0000")
    assert bytes(protocol.encode_response(UPDATE_METADATA, 5, 2**31 - 1, {"error_code": 0})) == expected
    assert protocol.decode_response(UPDATE_METADATA, 5, expected) == (2**31 - 1, {"error_code": 0})


def test_response_header_v1_has_tagged_fields():
    body = {"throttle_time_ms": 5, "error_code": 0, "topics": []}
    expected = hx("0000000d", "80000000", "00", "00000005", "0000", "01", "00")
    assert bytes(protocol.encode_response(ALTER_PARTITION, 2, -(2**31), body)) == expected
    assert protocol.decode_response(ALTER_PARTITION, 2, expected) == (-(2**31), body)


def test_unknown_tagged_fields_are_skipped_on_decode():
    # Request header v2 and the body's top level each carry one unknown tag (tag 7, 2 bytes of data).
    frame_bytes = frame(
        hx("0038 0000 00000001 ffff", "01 07 02 abcd")  # header: 1 tagged field: tag 7, size 2, data
        + hx("00000001 0000000000000002 01", "01 07 02 abcd")  # body, top-level tagged fields likewise
    )
    header, body = protocol.decode_request(frame_bytes)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (56, 0, 1, None)
    assert body == AP_EMPTY_BODY


def test_decoded_booleans_are_bool():
    body = protocol.decode_request(HEX_SR_V4)[1]
    assert body["delete_partitions"] is True
    body = protocol.decode_request(HEX_LAI_V2)[1]
    assert body["topic_states"][0]["partition_states"][0]["is_new"] is True


def test_seed_versions_do_not_carry_broker_epoch():
    for frame_bytes in (HEX_UM_V7, HEX_SR_V4):
        body = protocol.decode_request(frame_bytes)[1]
        assert "broker_epoch" not in body
        assert "max_broker_epoch" in body
