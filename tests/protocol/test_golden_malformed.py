"""Malformed control-plane frames and bodies raise ``protocol.ProtocolError``; unknown APIs and versions
are refused when encoding. The valid frames they are cut from are in :mod:`tests.protocol.golden_hex`.
"""

from __future__ import annotations

import pytest

import protocol
from tests.protocol.golden import (
    ALTER_PARTITION,
    CONTROLLED_SHUTDOWN,
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    frame,
    hx,
    i32,
)
from tests.protocol.golden_broker import (
    CS_BODY,
    CS_BODY_BYTES,
)
from tests.protocol.golden_hex import (
    HEX_AP_V0,
    HEX_AP_V2,
    HEX_CS_V2,
    HEX_LAI_V2,
    HEX_LAI_V2_BODY,
    HEX_SR_V4,
    HEX_SR_V4_BODY,
    HEX_UM_V7,
    HEX_UM_V7_BODY,
)

# --------------------------------------------------------------------------------------------------------
# Malformed input -> protocol.ProtocolError
# --------------------------------------------------------------------------------------------------------

CS_HEADER = hx("0007 0002 00000001 ffff")
SR_V1_HEADER = hx("0005 0001 00000001 ffff")
LAI_V2_HEADER = hx("0004 0002 00000001 ffff")
AP_V0_HEADER = hx("0038 0000 00000001 ffff 00")


def _payload(frame_bytes: bytes) -> bytes:
    return frame_bytes[4:]


BAD_REQUESTS = [
    pytest.param(b"", id="empty"),
    pytest.param(hx("0000"), id="partial-size-prefix"),
    pytest.param(frame(b""), id="zero-length-frame"),
    pytest.param(frame(hx("0007 0002 0000")), id="truncated-header"),
    pytest.param(frame(hx("0007 0002 00000001 0005 6162")), id="truncated-client-id"),
    pytest.param(frame(CS_HEADER + hx("00000001 00000000")), id="truncated-body-int64"),
    pytest.param(frame(_payload(HEX_LAI_V2)[:-1]), id="truncated-lai-last-byte"),
    pytest.param(frame(_payload(HEX_AP_V0)[:-1]), id="truncated-ap-missing-final-tags"),
    pytest.param(frame(_payload(HEX_AP_V2)[:-20]), id="truncated-ap-inside-uuid"),
    pytest.param(HEX_CS_V2[:-1], id="size-prefix-larger-than-frame"),
    pytest.param(HEX_CS_V2 + b"\x00", id="size-prefix-smaller-than-frame"),
    pytest.param(i32(-1) + _payload(HEX_CS_V2), id="negative-size-prefix"),
    pytest.param(frame(_payload(HEX_CS_V2) + b"\x00"), id="trailing-garbage-cs"),
    pytest.param(frame(_payload(HEX_LAI_V2) + hx("deadbeef")), id="trailing-garbage-lai"),
    pytest.param(frame(_payload(HEX_AP_V0) + b"\x00"), id="trailing-garbage-ap"),
    pytest.param(
        frame(LAI_V2_HEADER + hx("00000001 00000001 0000000000000001", "fffffffe")), id="array-count-minus-2"
    ),
    pytest.param(
        frame(LAI_V2_HEADER + hx("00000001 00000001 0000000000000001", "ffffffff 00000000")),
        id="non-nullable-array-count-minus-1",
    ),
    pytest.param(
        frame(SR_V1_HEADER + hx("00000001 00000001 0000000000000001 00", "00000001", "0001 74", "80000000")),
        id="int32-array-count-min-int",
    ),
    pytest.param(
        frame(LAI_V2_HEADER + hx("00000001 00000001 0000000000000001", "7fffffff")), id="array-count-past-end"
    ),
    pytest.param(
        frame(SR_V1_HEADER + hx("00000001 00000001 0000000000000001 00", "00000001", "0064 6162")),
        id="string-length-past-end",
    ),
    pytest.param(
        frame(SR_V1_HEADER + hx("00000001 00000001 0000000000000001 00", "00000001", "ffff 00000000")),
        id="non-nullable-string-null",
    ),
    pytest.param(
        frame(SR_V1_HEADER + hx("00000001 00000001 0000000000000001 00", "00000001", "fffe 00000000")),
        id="string-length-minus-2",
    ),
    pytest.param(
        frame(
            SR_V1_HEADER + hx("00000001 00000001 0000000000000001 00", "00000001", "0002 fffe", "00000000")
        ),
        id="invalid-utf8-topic",
    ),
    pytest.param(frame(hx("0007 0002 00000001 0002 c328") + CS_BODY_BYTES), id="invalid-utf8-client-id"),
    pytest.param(
        frame(AP_V0_HEADER + hx("00000001 0000000000000002", "02", "03 ff c0", "01 00 00")), id="ap-bad-utf8"
    ),
    pytest.param(
        frame(AP_V0_HEADER + hx("00000001 0000000000000002", "00", "00")), id="ap-null-compact-array"
    ),
    pytest.param(
        frame(AP_V0_HEADER + hx("00000001 0000000000000002", "02", "00", "01 00 00")),
        id="ap-null-compact-str",
    ),
    pytest.param(
        frame(AP_V0_HEADER + hx("00000001 0000000000000002", "02", "7f 61", "01 00 00")),
        id="ap-compact-str-past-end",
    ),
    pytest.param(
        frame(AP_V0_HEADER + hx("00000001 0000000000000002", "ffffffffffffffffffff01", "00")),
        id="ap-varint-too-long",
    ),
    pytest.param(frame(AP_V0_HEADER + hx("00000001 0000000000000002", "80")), id="ap-varint-truncated"),
    pytest.param(
        frame(AP_V0_HEADER + hx("00000001 0000000000000002 01", "01 07 05 abcd")),
        id="ap-tagged-field-past-end",
    ),
    pytest.param(frame(hx("270f 0000 00000001 ffff") + CS_BODY_BYTES), id="unknown-api-key-9999"),
    pytest.param(frame(hx("0004 0003 00000001 ffff") + _payload(HEX_LAI_V2)[13:]), id="lai-v3-unsupported"),
    pytest.param(frame(hx("0006 0006 00000001 ffff") + _payload(HEX_UM_V7)[10:]), id="um-v6-unsupported"),
    pytest.param(frame(hx("0005 0003 00000001 ffff") + _payload(HEX_SR_V4)[10:]), id="sr-v3-unsupported"),
    pytest.param(frame(hx("0004 ffff 00000001 ffff") + _payload(HEX_LAI_V2)[13:]), id="lai-negative-version"),
]


@pytest.mark.parametrize("data", BAD_REQUESTS)
def test_decode_request_rejects_malformed(data):
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_request(data)


BAD_RESPONSES = [
    pytest.param(UPDATE_METADATA, 5, b"", id="empty"),
    pytest.param(UPDATE_METADATA, 5, frame(hx("00000001 00")), id="truncated-error-code"),
    pytest.param(UPDATE_METADATA, 5, frame(hx("00000001 0000 00")), id="trailing-garbage"),
    pytest.param(UPDATE_METADATA, 5, hx("00000007 00000001 0000"), id="size-prefix-mismatch"),
    pytest.param(STOP_REPLICA, 1, frame(hx("00000001 0000 ffffffff")), id="sr-array-count-minus-1"),
    pytest.param(STOP_REPLICA, 1, frame(hx("00000001 0000 00000001 0009 61")), id="sr-string-past-end"),
    pytest.param(
        CONTROLLED_SHUTDOWN, 2, frame(hx("00000001 0000 00000001 0001 ff 00000000")), id="cs-invalid-utf8"
    ),
    pytest.param(LEADER_AND_ISR, 2, frame(hx("00000001 0000 00000001 0001 61 00000000")), id="lai-truncated"),
    pytest.param(
        ALTER_PARTITION, 0, frame(hx("00000001", "00000000 0000 01 00")), id="ap-missing-header-tags"
    ),
    pytest.param(
        ALTER_PARTITION, 2, frame(hx("00000001 00", "00000000 0000 02", "0123")), id="ap-truncated-uuid"
    ),
    pytest.param(9999, 0, frame(hx("00000001 0000")), id="unknown-api-key"),
    pytest.param(LEADER_AND_ISR, 3, frame(hx("00000001 0000 00000000")), id="lai-v3-unsupported"),
]


@pytest.mark.parametrize(("api_key", "version", "data"), BAD_RESPONSES)
def test_decode_response_rejects_malformed(api_key, version, data):
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_response(api_key, version, data)


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        pytest.param(9999, 0, CS_BODY, id="unknown-api-key"),
        pytest.param(LEADER_AND_ISR, 3, HEX_LAI_V2_BODY, id="lai-v3"),
        pytest.param(UPDATE_METADATA, 6, HEX_UM_V7_BODY, id="um-v6"),
        pytest.param(STOP_REPLICA, 3, HEX_SR_V4_BODY, id="sr-v3"),
    ],
)
def test_encode_rejects_unknown_api_or_version(api_key, version, body):
    with pytest.raises(protocol.ProtocolError):
        protocol.encode_request(api_key, version, 1, None, body)
    with pytest.raises(protocol.ProtocolError):
        protocol.encode_response(api_key, version, 1, {"error_code": 0})
