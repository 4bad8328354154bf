"""The two wire dialects: a version number the seed reuses names another layout in each, every other
version reads the same in both, and the KAFKA dialect never falls back on the seed's layouts.

The frames are written by hand (:mod:`tests.protocol.golden`); the StopReplica v4 frame below is one
byte string that is a valid request in both layouts, read field by field in the comments.
"""

from __future__ import annotations

import pytest

import protocol
from protocol import (
    DEFAULT_DIALECT,
    KAFKA_3_9_VERSIONS,
    MAX_BROKER_EPOCH_VERSIONS,
    PER_BROKER_EPOCH_VERSIONS,
    SUPPORTED_VERSIONS,
    SUPPORTED_VERSIONS_BY_DIALECT,
    ApiKey,
    ErrorCode,
    UnsupportedVersionError,
    WireDialect,
)
from protocol.registry import message_codec, request_header_codec
from tests.protocol.golden import flexible_request_frame, flexible_response_frame, frame, hx, req_header_v1
from tests.protocol.golden_hex import HEX_LAI_V2, HEX_SR_V4, HEX_UM_V7
from tests.protocol.golden_kafka39 import (
    HEX_UM_V8,
    KAFKA_39_REQUEST_CASES,
    KAFKA_39_RESPONSE_CASES,
)

KAFKA, SEED = WireDialect.KAFKA, WireDialect.SEED

# --------------------------------------------------------------------------------------------------------
# One StopReplica v4 frame, two messages
# --------------------------------------------------------------------------------------------------------

# After the common start of both request headers (api_key 5, api_version 4, correlation_id 21, client_id
# "d"), the seed reads header v1 and v1's body; Kafka reads header v2, whose tagged fields hide the
# seed's first ten bytes, and its own flexible body.
SR_V4_TWO_WAYS = frame(
    hx("0005 0004 00000015 0001 64")
    + hx(
        #                offset seed (header v1, v1 layout)    Kafka (header v2, its v4 layout)
        "01000700  ",  # 0-3    controller_id 0x01000700       header tags: 1, tag 0, 7 bytes: 00 ...
        "00000005  ",  # 4-7    controller_epoch 5             ... tag data
        "0000      ",  # 8-9    max_broker_epoch 0x0000...     ... tag data (ends)
        "00000001  ",  # 10-13  ... max_broker_epoch           controller_id 1
        "01        ",  # 14     ... max_broker_epoch           is_kraft_controller true
        "00        ",  # 15     ... max_broker_epoch = 0x10100 controller_epoch 0x0001...
        "01        ",  # 16     delete_partitions true         ... controller_epoch
        "0000      ",  # 17-18  topics: 0x0000...             ... controller_epoch = 0x10000
        "0001      ",  # 19-20  ... topics: 1                  broker_epoch 0x0001...
        "0001 74   ",  # 21-23  name "t"                       ... broker_epoch
        "000000    ",  # 24-26  partition_indexes: 0x000000..  ... broker_epoch = 0x0001000174000000
        "01        ",  # 27     ... partition_indexes: 1       topic_states: 0 (compact: count + 1)
        "01000102  ",  # 28-31  partition index 0x01000102     tagged fields: 1, tag 0, 1 byte: 02 (unknown)
    )
)


def test_the_same_stop_replica_v4_bytes_are_two_different_requests() -> None:
    seed_header, seed_body = protocol.decode_request(SR_V4_TWO_WAYS, dialect=SEED)
    kafka_header, kafka_body = protocol.decode_request(SR_V4_TWO_WAYS, dialect=KAFKA)
    assert (seed_header.version, kafka_header.version) == (1, 2)
    assert seed_header.client_id == kafka_header.client_id == "d"
    assert seed_body == {
        "controller_id": 0x01000700,
        "controller_epoch": 5,
        "max_broker_epoch": 0x10100,
        "delete_partitions": True,
        "topics": [{"name": "t", "partition_indexes": [0x01000102]}],
    }
    assert kafka_body == {
        "controller_id": 1,
        "is_kraft_controller": True,
        "controller_epoch": 0x10000,
        "broker_epoch": 0x0001000174000000,
        "topic_states": [],
    }
    assert protocol.decode_request(SR_V4_TWO_WAYS)[1] == seed_body  # the default dialect is the seed's


def test_stop_replica_v4_encodes_each_dialects_layout() -> None:
    seed = protocol.decode_request(HEX_SR_V4, dialect=SEED)
    assert protocol.encode_request(5, 4, seed[0].correlation_id, seed[0].client_id, seed[1]) == HEX_SR_V4
    with pytest.raises(protocol.ProtocolError):  # Kafka's v4 has no delete_partitions, no topics
        protocol.encode_request(5, 4, 1, None, seed[1], dialect=KAFKA)
    with pytest.raises(protocol.ProtocolError):  # and the seed's v4 reads Kafka's bytes wrongly or not at all
        protocol.decode_request(
            flexible_request_frame(5, 4, 1, None, hx("00000001 00 00000002")), dialect=SEED
        )


def test_stop_replica_v4_responses_differ_too() -> None:
    seed_answer = frame(hx("00000007", "0000", "00000000"))  # response header v0; error 0, no partitions
    kafka_answer = frame(hx("00000007 00", "0000", "01", "00"))  # response header v1; compact, tags
    assert protocol.decode_response(5, 4, seed_answer, dialect=SEED) == (
        7,
        {"error_code": 0, "partition_errors": []},
    )
    assert protocol.decode_response(5, 4, kafka_answer, dialect=KAFKA) == (
        7,
        {"error_code": 0, "partition_errors": []},
    )
    for answer, dialect in ((seed_answer, KAFKA), (kafka_answer, SEED)):
        with pytest.raises(protocol.ProtocolError):
            protocol.decode_response(5, 4, answer, dialect=dialect)


# --------------------------------------------------------------------------------------------------------
# The KAFKA dialect does not have the seed's LeaderAndIsr v5 and UpdateMetadata v7
# --------------------------------------------------------------------------------------------------------

LAI_V5_SEED = frame(
    req_header_v1(4, 5, 77, "ctl") + hx("00000001 00000002 0000000000000003 00000000 00000000")
)


@pytest.mark.parametrize(
    ("api_key", "version", "frame_bytes"),
    [
        pytest.param(4, 5, LAI_V5_SEED, id="lai-v5"),
        pytest.param(6, 7, HEX_UM_V7, id="um-v7"),
    ],
)
def test_seed_only_numbers_are_unsupported_in_the_kafka_dialect(api_key, version, frame_bytes) -> None:
    header, body = protocol.decode_request(frame_bytes, dialect=SEED)
    assert "max_broker_epoch" in body
    with pytest.raises(UnsupportedVersionError) as info:
        protocol.decode_request(frame_bytes, dialect=KAFKA)
    assert (info.value.api_key, info.value.api_version) == (api_key, version)
    assert (info.value.correlation_id, info.value.client_id) == (header.correlation_id, header.client_id)
    assert not protocol.is_supported(api_key, version, dialect=KAFKA)
    assert protocol.is_supported(api_key, version, dialect=SEED)
    for encode in (
        lambda: protocol.encode_request(api_key, version, 1, None, body, dialect=KAFKA),
        lambda: protocol.encode_response(api_key, version, 1, {"error_code": 0}, dialect=KAFKA),
        lambda: protocol.decode_response(api_key, version, frame(hx("00000001 0000")), dialect=KAFKA),
        lambda: protocol.error_response_body(api_key, version, ErrorCode.UNSUPPORTED_VERSION, dialect=KAFKA),
    ):
        with pytest.raises(protocol.ProtocolError, match="not supported in the KAFKA dialect"):
            encode()


def test_the_version_tables_per_dialect() -> None:
    kafka, seed = SUPPORTED_VERSIONS_BY_DIALECT[KAFKA], SUPPORTED_VERSIONS_BY_DIALECT[SEED]
    assert (kafka[4], kafka[6], kafka[5], kafka[56], kafka[7]) == (
        (2, 7),
        (5, 8),
        (1, 4),
        (0, 1, 2, 3),
        (2, 3),
    )
    assert (seed[4], seed[6], seed[5], seed[56], seed[7]) == (
        (2, 5, 7),
        (5, 7, 8),
        (1, 4),
        (0, 1, 2, 3),
        (2, 3),
    )
    assert {k: v for k, v in kafka.items() if k not in (4, 6)} == {
        k: v for k, v in seed.items() if k not in (4, 6)
    }
    assert DEFAULT_DIALECT is SEED and SUPPORTED_VERSIONS == seed == protocol.supported_versions()
    assert all(v in kafka[key] for key, v in KAFKA_3_9_VERSIONS.items())


def test_epoch_fields_per_dialect() -> None:
    for api_key, version in MAX_BROKER_EPOCH_VERSIONS.items():
        assert protocol.epoch_field(api_key, version, SEED) == "max_broker_epoch"
        assert protocol.epoch_field(api_key, version) == "max_broker_epoch"
        assert protocol.epoch_field(api_key, version, KAFKA) == "broker_epoch"
        assert protocol.uses_max_broker_epoch(api_key, version, SEED)
        assert not protocol.uses_max_broker_epoch(api_key, version, KAFKA)
    for table in (PER_BROKER_EPOCH_VERSIONS, KAFKA_3_9_VERSIONS):
        for api_key, version in table.items():
            for dialect in (KAFKA, SEED):
                if version != MAX_BROKER_EPOCH_VERSIONS.get(api_key) or dialect is KAFKA:
                    assert protocol.epoch_field(api_key, version, dialect) == "broker_epoch"


# --------------------------------------------------------------------------------------------------------
# Everything else reads the same in both
# --------------------------------------------------------------------------------------------------------

SAME_IN_BOTH = [
    pytest.param(HEX_LAI_V2, id="lai-v2"),
    pytest.param(HEX_UM_V8, id="um-v8"),
    *(
        pytest.param(flexible_request_frame(k, v, c, cid, raw), id=p.id)
        for p in KAFKA_39_REQUEST_CASES
        for (k, v, c, cid, _, raw) in [p.values]
        if not (k == ApiKey.STOP_REPLICA and v == 4)
    ),
]


@pytest.mark.parametrize("frame_bytes", SAME_IN_BOTH)
def test_versions_kafka_alone_defines_decode_alike_in_both_dialects(frame_bytes: bytes) -> None:
    assert protocol.decode_request(frame_bytes, dialect=KAFKA) == protocol.decode_request(
        frame_bytes, dialect=SEED
    )


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(p.values, id=p.id)
        for p in KAFKA_39_RESPONSE_CASES
        if not (p.values[0] == ApiKey.STOP_REPLICA and p.values[1] == 4)
    ],
)
def test_responses_kafka_alone_defines_decode_alike_in_both_dialects(case) -> None:
    api_key, version, corr, body, raw = case
    answer = flexible_response_frame(corr, raw)
    assert protocol.decode_response(api_key, version, answer, dialect=KAFKA) == (corr, body)
    assert protocol.decode_response(api_key, version, answer, dialect=SEED) == (corr, body)


def test_a_layout_has_one_codec_whatever_the_dialect() -> None:
    for api_key, versions in SUPPORTED_VERSIONS_BY_DIALECT[KAFKA].items():
        for version in versions:
            for kind in ("request", "response"):
                same = message_codec(api_key, version, kind, KAFKA) is message_codec(
                    api_key, version, kind, SEED
                )
                assert same == (MAX_BROKER_EPOCH_VERSIONS.get(ApiKey(api_key)) != version), (api_key, version)
    assert message_codec(5, 4, "request", SEED).label == "StopReplica v4 (seed) request"
    assert message_codec(5, 4, "request", KAFKA).label == "StopReplica v4 request"
    assert request_header_codec(5, 4, SEED) is not request_header_codec(5, 4, KAFKA)


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(k, v) for k, versions in SUPPORTED_VERSIONS_BY_DIALECT[KAFKA].items() for v in versions],
    ids=str,
)
def test_error_bodies_round_trip_in_the_kafka_dialect(api_key: int, version: int) -> None:
    body = protocol.error_response_body(api_key, version, ErrorCode.UNSUPPORTED_VERSION, dialect=KAFKA)
    encoded = protocol.encode_response(api_key, version, 3, body, dialect=KAFKA)
    assert protocol.decode_response(api_key, version, encoded, dialect=KAFKA) == (3, body)


def test_error_bodies_of_the_new_versions() -> None:
    code = ErrorCode.STALE_BROKER_EPOCH
    assert protocol.error_response_body(4, 7, code, dialect=KAFKA) == {"error_code": code, "topics": []}
    assert protocol.error_response_body(4, 5, code) == {"error_code": code, "partition_errors": []}
    assert protocol.error_response_body(5, 4, code, dialect=KAFKA) == {
        "error_code": code,
        "partition_errors": [],
    }
    assert protocol.error_response_body(6, 8, code) == {"error_code": code}
