"""The sans-IO pieces of transactions: the seven transaction APIs, ``__transaction_state`` records and
transaction markers.

Every expected byte string is written by hand from Kafka 3.9's specs (``reference/kafka-messages``,
``reference/kafka-records``, ``reference/kafka-record-batch-v2.md``), never by calling the codec; only
the 4-byte size prefix of frames and the CRC of batches are computed, and frame headers come from
``tests.protocol.golden``'s hand-written helpers. Non-flexible versions: request header v1, response
header v0, int16 strings, int32 counts. Flexible ones: request header v2 and response header v1 (a
trailing 00 each), compact strings and arrays (length + 1 as an unsigned varint), a tagged-field
section (00) closing every struct.
"""

from __future__ import annotations

import struct
from typing import Any

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

import protocol
from protocol import ApiKey, ErrorCode, ProtocolError
from protocol.control_records import ControlType, control_batch, decode_marker
from protocol.errors import CorruptRecordBatch
from protocol.messages import list_transactions, txn_offset_commit
from protocol.record_batch import build_batch, check_batch
from protocol.registry import message_codec
from protocol.transaction_log import (
    TransactionLogValue,
    decode_transaction_key,
    decode_transaction_value,
    encode_transaction_value,
    transaction_key,
    transaction_partition_for,
)
from tests.protocol.golden import (
    frame,
    hx,
    norm,
    req_header_v1,
    req_header_v2,
    resp_header_v0,
    resp_header_v1,
)
from tests.protocol.strategies import body_strategy, per_message

APP, AOT, END, WTM, TOC = 24, 25, 26, 27, 28
DESCRIBE, LIST = 65, 66
TX, T, G = "0002 7478", "0001 74", "0001 67"  # "tx", "t", "g" as int16-length strings
CTX, CT = "03 7478", "02 74"  # "tx", "t" as compact strings
PID, EPOCH = "0000000000000005", "0001"  # producer 5, epoch 1
SENT = {"transactional_id": "tx", "producer_id": 5, "producer_epoch": 1}
SENT_HEX, CSENT_HEX = f"{TX} {PID} {EPOCH}", f"{CTX} {PID} {EPOCH}"  # the three fields above


FIRST_FLEXIBLE = {APP: 3, AOT: 3, END: 3, WTM: 1, TOC: 3, DESCRIBE: 0, LIST: 0}
"""Each API's first flexible version, from its JSON spec's ``flexibleVersions``."""


def case(api_key: int, version: int, corr: int, body: dict[str, Any], hex_body: str, kind: str) -> Any:
    """One golden frame: header by hand (``golden``'s helpers; client id "c" for requests), then the body
    written in hex."""
    flexible = version >= FIRST_FLEXIBLE[api_key]
    if kind == "request":
        header = (req_header_v2 if flexible else req_header_v1)(api_key, version, corr, "c")
    else:
        header = (resp_header_v1 if flexible else resp_header_v0)(corr)
    name = f"{ApiKey(api_key).name.lower()}-v{version}"
    return pytest.param(api_key, version, corr, body, frame(header + hx(hex_body)), id=name)


def request(api_key: int, version: int, corr: int, body: dict[str, Any], hex_body: str) -> Any:
    return case(api_key, version, corr, body, hex_body, "request")


def response(api_key: int, version: int, body: dict[str, Any], hex_body: str) -> Any:
    return case(api_key, version, 7, body, hex_body, "response")


def offsets(**partition: Any) -> list[dict[str, Any]]:
    """TxnOffsetCommit's topics: topic "t", partition 0 at offset 42, with ``partition``'s fields."""
    return [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 42, **partition}]}]


def results(key: str = "partitions", **partition: Any) -> list[dict[str, Any]]:
    """Answers for topic "t": one partition (under ``key``), ``partition``'s fields."""
    return [{"name": "t", key: [partition]}]


ADD_PARTITIONS = {**SENT, "topics": [{"name": "t", "partitions": [0, 2]}]}
MARKER = {
    "producer_id": 5,
    "producer_epoch": 1,
    "transaction_result": True,
    "topics": [{"name": "t", "partition_indexes": [1]}],
    "coordinator_epoch": 7,
}
COMMIT = {"transactional_id": "tx", "group_id": "g", "producer_id": 5, "producer_epoch": 1}
MEMBER = {"generation_id": 3, "member_id": "m", "group_instance_id": None}
ONGOING = "08 4f6e676f696e67"  # "Ongoing", compact
STATE = {
    "error_code": 0,
    "transactional_id": "tx",
    "transaction_state": "Ongoing",
    "transaction_timeout_ms": 60000,
    "transaction_start_time_ms": 1_700_000_000_000,
    "producer_id": 5,
    "producer_epoch": 1,
    "topics": [{"topic": "t", "partitions": [0]}],
}
OFFSET_42 = "00000000 000000000000002a"  # partition 0, offset 42

# (api_key, version, correlation_id, body, frame)
REQUESTS: list[Any] = [
    request(APP, 0, 1, ADD_PARTITIONS, f"{SENT_HEX} 00000001 {T} 00000002 00000000 00000002"),
    request(APP, 3, 2, ADD_PARTITIONS, f"{CSENT_HEX} 02 {CT} 03 00000000 00000002 00 00"),
    request(AOT, 0, 3, {**SENT, "group_id": "g"}, f"{SENT_HEX} {G}"),
    request(AOT, 4, 4, {**SENT, "group_id": "g"}, f"{CSENT_HEX} 02 67 00"),
    request(END, 1, 5, {**SENT, "committed": True}, f"{SENT_HEX} 01"),
    request(END, 3, 6, {**SENT, "committed": False}, f"{CSENT_HEX} 00 00"),
    # one marker: producer, epoch, COMMIT, topic "t" [1], coordinator epoch 7
    request(
        WTM, 0, 7, {"markers": [MARKER]}, f"00000001 {PID} {EPOCH} 01 00000001 {T} 00000001 00000001 00000007"
    ),
    request(WTM, 1, 8, {"markers": [MARKER]}, f"02 {PID} {EPOCH} 01 02 {CT} 02 00000001 00 00000007 00 00"),
    # metadata null
    request(
        TOC,
        0,
        9,
        {**COMMIT, "topics": offsets(committed_metadata=None)},
        f"{TX} {G} {PID} {EPOCH} 00000001 {T} 00000001 {OFFSET_42} ffff",
    ),
    # v2 adds the leader epoch (4) before the metadata ("")
    request(
        TOC,
        2,
        10,
        {**COMMIT, "topics": offsets(committed_leader_epoch=4, committed_metadata="")},
        f"{TX} {G} {PID} {EPOCH} 00000001 {T} 00000001 {OFFSET_42} 00000004 0000",
    ),
    # v3: generation 3, member "m", instance null; the topic and its partition (metadata "x") closed by 00
    request(
        TOC,
        3,
        11,
        {**COMMIT, **MEMBER, "topics": offsets(committed_leader_epoch=4, committed_metadata="x")},
        f"{CTX} 02 67 {PID} {EPOCH} 00000003 02 6d 00 02 {CT} 02 {OFFSET_42} 00000004 02 78 00 00 00",
    ),
    request(DESCRIBE, 0, 12, {"transactional_ids": ["tx"]}, f"02 {CTX} 00"),
    request(LIST, 0, 13, {"state_filters": ["Ongoing"], "producer_id_filters": []}, f"02 {ONGOING} 01 00"),
    # v1 adds duration_filter (1000)
    request(
        LIST,
        1,
        14,
        {"state_filters": [], "producer_id_filters": [5], "duration_filter": 1000},
        f"01 02 {PID} 00000000000003e8 00",
    ),
]

# (api_key, version, correlation_id, body, frame)
RESPONSES: list[Any] = [
    # throttle 0; topic "t": partition 0 no error, partition 2 CONCURRENT_TRANSACTIONS (51)
    response(
        APP,
        0,
        {
            "throttle_time_ms": 0,
            "results_by_topic": [
                {
                    "name": "t",
                    "results_by_partition": [
                        {"partition_index": 0, "partition_error_code": 0},
                        {"partition_index": 2, "partition_error_code": 51},
                    ],
                }
            ],
        },
        f"00000000 00000001 {T} 00000002 00000000 0000 00000002 0033",
    ),
    response(
        APP,
        3,
        {
            "throttle_time_ms": 100,
            "results_by_topic": results("results_by_partition", partition_index=1, partition_error_code=0),
        },
        f"00000064 02 {CT} 02 00000001 0000 00 00 00",
    ),
    response(AOT, 1, {"throttle_time_ms": 0, "error_code": 48}, "00000000 0030"),  # INVALID_TXN_STATE
    response(AOT, 3, {"throttle_time_ms": 7, "error_code": 0}, "00000007 0000 00"),
    response(END, 2, {"throttle_time_ms": 0, "error_code": 90}, "00000000 005a"),  # PRODUCER_FENCED
    response(END, 4, {"throttle_time_ms": 0, "error_code": 0}, "00000000 0000 00"),
    response(
        WTM,
        0,
        {"markers": [{"producer_id": 5, "topics": results(partition_index=1, error_code=0)}]},
        f"00000001 {PID} 00000001 {T} 00000001 00000001 0000",
    ),
    response(
        WTM,
        1,
        {"markers": [{"producer_id": 5, "topics": results(partition_index=1, error_code=6)}]},
        f"02 {PID} 02 {CT} 02 00000001 0006 00 00 00 00",
    ),
    response(
        TOC,
        0,
        {"throttle_time_ms": 0, "topics": results(partition_index=0, error_code=0)},
        f"00000000 00000001 {T} 00000001 00000000 0000",
    ),
    # ILLEGAL_GENERATION (22)
    response(
        TOC,
        3,
        {"throttle_time_ms": 0, "topics": results(partition_index=0, error_code=22)},
        f"00000000 02 {CT} 02 00000000 0016 00 00 00",
    ),
    # one state: no error, "tx", "Ongoing", timeout 60000, started at 1700000000000, producer, topic "t" [0]
    response(
        DESCRIBE,
        0,
        {"throttle_time_ms": 0, "transaction_states": [STATE]},
        f"00000000 02 0000 {CTX} {ONGOING} 0000ea60 0000018bcfe56800 {PID} {EPOCH}"
        f" 02 {CT} 02 00000000 00 00 00",
    ),
    response(
        LIST,
        1,
        {
            "throttle_time_ms": 0,
            "error_code": 0,
            "unknown_state_filters": ["Bogus"],
            "transaction_states": [
                {"transactional_id": "tx", "producer_id": 5, "transaction_state": "Ongoing"}
            ],
        },
        f"00000000 0000 02 06 426f677573 02 {CTX} {PID} {ONGOING} 00 00",
    ),
]

NEW_APIS = (APP, AOT, END, WTM, TOC, DESCRIBE, LIST)


@pytest.mark.parametrize(("api_key", "version", "corr", "body", "expected"), REQUESTS)
def test_request_golden(api_key: int, version: int, corr: int, body: dict[str, Any], expected: bytes) -> None:
    assert protocol.encode_request(api_key, version, corr, "c", body) == expected
    header, decoded = protocol.decode_request(expected)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        api_key,
        version,
        corr,
        "c",
    )
    assert norm(decoded) == norm(body)


@pytest.mark.parametrize(("api_key", "version", "corr", "body", "expected"), RESPONSES)
def test_response_golden(
    api_key: int, version: int, corr: int, body: dict[str, Any], expected: bytes
) -> None:
    assert protocol.encode_response(api_key, version, corr, body) == expected
    assert norm(protocol.decode_response(api_key, version, expected)) == norm((corr, body))


def test_kafka_39s_versions_are_served_but_add_partitions_between_brokers() -> None:
    assert {key: protocol.SUPPORTED_VERSIONS[key] for key in NEW_APIS} == {
        APP: (0, 1, 2, 3),  # v4-v5: broker to broker (KIP-890)
        AOT: (0, 1, 2, 3, 4),
        END: (0, 1, 2, 3, 4),
        WTM: (0, 1),
        TOC: (0, 1, 2, 3, 4),
        DESCRIBE: (0,),
        LIST: (0, 1),
    }
    assert [ApiKey(k).name for k in NEW_APIS] == [
        "ADD_PARTITIONS_TO_TXN",
        "ADD_OFFSETS_TO_TXN",
        "END_TXN",
        "WRITE_TXN_MARKERS",
        "TXN_OFFSET_COMMIT",
        "DESCRIBE_TRANSACTIONS",
        "LIST_TRANSACTIONS",
    ]


TXN_MESSAGES = [
    (key, version, kind)
    for key in NEW_APIS
    for version in protocol.SUPPORTED_VERSIONS[key]
    for kind in ("request", "response")
]


@pytest.mark.parametrize(("api_key", "version", "kind"), TXN_MESSAGES, ids=lambda v: str(v))
@per_message
@given(data=st.data())
def test_every_version_round_trips(api_key: int, version: int, kind: str, data: st.DataObject) -> None:
    body = data.draw(body_strategy(message_codec(api_key, version, kind).schema))
    if kind == "request":
        header, decoded = protocol.decode_request(protocol.encode_request(api_key, version, 3, "c", body))
        assert (header.api_key, header.api_version) == (api_key, version)
    else:
        _, decoded = protocol.decode_response(
            api_key, version, protocol.encode_response(api_key, version, 3, body)
        )
    assert norm(decoded) == norm(body)


def test_older_bodies_get_kafkas_defaults_for_the_fields_their_version_lacks() -> None:
    _, decoded = protocol.decode_request(REQUESTS[8].values[4])
    assert "generation_id" not in decoded  # the wire has none of them...
    assert txn_offset_commit.fill_defaults(decoded) == {  # ...and the handler reads Kafka's defaults
        **COMMIT,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": offsets(committed_leader_epoch=-1, committed_metadata=None),
    }
    v3 = REQUESTS[10].values[3]
    assert txn_offset_commit.fill_defaults(protocol.decode_request(REQUESTS[10].values[4])[1]) == v3
    _, listed = protocol.decode_request(REQUESTS[12].values[4])
    assert list_transactions.fill_defaults(listed)["duration_filter"] == -1
    assert list_transactions.fill_defaults({"duration_filter": 5})["duration_filter"] == 5


# ---------------------------------------------------------------- error responses


MARKERS = {"markers": [MARKER, {**MARKER, "producer_id": 9}]}


def _round_trip(api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    _, decoded = protocol.decode_response(
        api_key, version, protocol.encode_response(api_key, version, 1, body)
    )
    return decoded


def test_error_answers_name_every_partition_or_id_asked() -> None:
    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    body = protocol.error_response_body(APP, 3, code, ADD_PARTITIONS)
    assert body == {
        "throttle_time_ms": 0,
        "results_by_topic": [
            {
                "name": "t",
                "results_by_partition": [
                    {"partition_index": 0, "partition_error_code": 14},
                    {"partition_index": 2, "partition_error_code": 14},
                ],
            }
        ],
    }
    answered = protocol.error_response_body(WTM, 1, code, MARKERS)["markers"]
    assert [(m["producer_id"], m["topics"]) for m in answered] == [
        (p, [{"name": "t", "partitions": [{"partition_index": 1, "error_code": 14}]}]) for p in (5, 9)
    ]
    committed = protocol.error_response_body(TOC, 0, code, REQUESTS[8].values[3])
    assert committed["topics"] == [{"name": "t", "partitions": [{"partition_index": 0, "error_code": 14}]}]
    described = protocol.error_response_body(DESCRIBE, 0, code, {"transactional_ids": ["a", "b"]})
    assert [
        (s["transactional_id"], s["error_code"], s["topics"]) for s in described["transaction_states"]
    ] == [
        ("a", 14, []),
        ("b", 14, []),
    ]
    for key, version, request, answer in [
        (APP, 0, ADD_PARTITIONS, body),
        (WTM, 0, MARKERS, None),
        (TOC, 3, REQUESTS[10].values[3], committed),
        (DESCRIBE, 0, {"transactional_ids": ["a", "b"]}, described),
    ]:
        built = protocol.error_response_body(key, version, code, request)
        assert _round_trip(key, version, built) == built
        assert answer is None or built == answer


@pytest.mark.parametrize(
    ("api_key", "version"), [(AOT, 0), (AOT, 4), (END, 1), (END, 3), (LIST, 0), (LIST, 1)]
)
def test_error_answers_with_a_top_level_code(api_key: int, version: int) -> None:
    body = protocol.error_response_body(api_key, version, ErrorCode.NOT_COORDINATOR)
    assert body["error_code"] == ErrorCode.NOT_COORDINATOR and body["throttle_time_ms"] == 0
    assert _round_trip(api_key, version, body) == body


# ---------------------------------------------------------------- __transaction_state records

ONGOING_VALUE = TransactionLogValue(5, 1, 60000, 1, (("t", (0, 1)),), 1_700_000_000_000, 1_699_999_999_000)
VALUE_V0 = hx(
    "0000",  # version 0
    PID,
    EPOCH,
    "0000ea60",  # transaction_timeout_ms 60000
    "01",  # transaction_status: Ongoing
    f"00000001 {T} 00000002 00000000 00000001",  # transaction_partitions: "t" [0, 1]
    "0000018bcfe56800",  # transaction_last_update_timestamp_ms 1700000000000
    "0000018bcfe56418",  # transaction_start_timestamp_ms 1699999999000
)


def test_transaction_log_records_are_kafkas_key_v0_and_value_v0() -> None:
    assert transaction_key("tx") == hx("0000", TX)
    assert decode_transaction_key(hx("0000", TX)) == "tx"
    assert encode_transaction_value(ONGOING_VALUE) == VALUE_V0
    assert decode_transaction_value(VALUE_V0) == ONGOING_VALUE


def test_an_empty_transaction_is_written_with_null_partitions_and_read_without_any() -> None:
    empty = TransactionLogValue(5, 2, 60000, 0, (), 1_700_000_000_000, -1)
    written = hx("0000", PID, "0002 0000ea60 00 ffffffff 0000018bcfe56800 ffffffffffffffff")
    assert encode_transaction_value(empty) == written
    assert decode_transaction_value(written) == empty
    listed = hx("0000", PID, f"0002 0000ea60 00 00000001 {T} 00000000 0000018bcfe56800 ffffffffffffffff")
    assert decode_transaction_value(listed) == empty  # as Kafka, partitions of an Empty state are ignored
    with pytest.raises(ValueError, match="no partitions"):
        encode_transaction_value(TransactionLogValue(5, 2, 60000, 0, (("t", (0,)),), 0, -1))


def test_value_v1_is_read() -> None:
    """The flexible version Kafka 4's ``transaction.version`` 1 writes: compact arrays, tagged fields."""
    v1 = hx(
        "0001",
        PID,
        EPOCH,
        "0000ea60 01",
        f"02 {CT} 03 00000000 00000001 00",
        "0000018bcfe56800 0000018bcfe56418 00",
    )
    assert decode_transaction_value(v1) == ONGOING_VALUE


def test_transaction_partition_is_kafkas_abs_hash_modulo() -> None:
    assert transaction_partition_for("polygenelubricants", 50) == 0  # hashCode Int.MinValue
    assert transaction_partition_for("hello", 50) == 99162322 % 50
    assert transaction_partition_for("my-group", 50) == 1906497762 % 50


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", hx("0001", TX), hx("0000 0005 7478"), hx("0000", TX, "00"), hx("0000 0001 ff")],
    ids=["empty", "half-a-version", "version-1", "truncated", "trailing-byte", "bad-utf8"],
)
def test_malformed_keys_are_protocol_errors(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_transaction_key(data)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"\x00\x02" + VALUE_V0[2:],
        VALUE_V0[:-1],
        VALUE_V0 + b"\x00",
        VALUE_V0[:17] + hx("fffffffe"),
    ],
    ids=["empty", "half-a-version", "version-2", "truncated", "trailing-byte", "negative-count"],
)
def test_malformed_values_are_protocol_errors(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_transaction_value(data)


@given(
    st.builds(
        TransactionLogValue,
        producer_id=st.integers(-(2**63), 2**63 - 1),
        producer_epoch=st.integers(-(2**15), 2**15 - 1),
        transaction_timeout_ms=st.integers(-(2**31), 2**31 - 1),
        transaction_status=st.integers(1, 7),
        partitions=st.lists(
            st.tuples(st.text(max_size=8), st.lists(st.integers(0, 2**31 - 1)).map(tuple)), max_size=3
        ).map(tuple),
        last_update_timestamp_ms=st.integers(-(2**63), 2**63 - 1),
        start_timestamp_ms=st.integers(-(2**63), 2**63 - 1),
    ),
    st.text(max_size=20),
)
def test_transaction_log_records_round_trip(value: TransactionLogValue, transactional_id: str) -> None:
    assert decode_transaction_value(encode_transaction_value(value)) == value
    assert decode_transaction_key(transaction_key(transactional_id)) == transactional_id


# ---------------------------------------------------------------- transaction markers


def test_a_commit_marker_is_kafkas_control_batch() -> None:
    """Spelled out from the v2 layout and Kafka's control record key and EndTxnMarker; only the CRC is
    computed (over attributes..end)."""
    record = hx(
        "00 00 00",  # record attributes, timestamp delta 0, offset delta 0
        "08 0000 0001",  # key: 4 bytes (zig-zag 8), version 0, type 1 COMMIT
        "0c 0000 00000007",  # value: 6 bytes (zig-zag 12), EndTxnMarker version 0, coordinator epoch 7
        "00",  # no headers
    )
    after_crc = (
        hx(
            "0030",  # attributes: transactional (bit 4) and control (bit 5), no compression, create time
            "00000000",  # last_offset_delta 0
            "0000018bcfe56800 0000018bcfe56800",  # base and max timestamp 1700000000000
            PID,
            EPOCH,
            "ffffffff",  # base_sequence -1
            "00000001",  # one record
            "20",  # record length 16 (zig-zag 32)
        )
        + record
    )
    crc = struct.pack(">I", crc32c.crc32c(after_crc))
    expected = hx("000000000000000a", "00000042", "00000003", "02") + crc + after_crc  # offset 10, epoch 3
    assert (
        control_batch(5, 1, 7, True, 1_700_000_000_000, base_offset=10, partition_leader_epoch=3) == expected
    )
    header = check_batch(expected)
    assert header.is_control and header.is_transactional and header.base_sequence == -1
    assert decode_marker(expected) == (ControlType.COMMIT, 7)
    assert decode_marker(memoryview(expected)) == (ControlType.COMMIT, 7)


@given(
    st.integers(0, 2**63 - 1),
    st.integers(0, 2**15 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.booleans(),
    st.integers(0, 2**62),
    st.integers(0, 2**62),
)
def test_markers_round_trip(producer: int, epoch: int, coordinator: int, commit: bool, ts: int, offset: int):
    batch = control_batch(producer, epoch, coordinator, commit, ts, offset)
    header = check_batch(batch)
    assert (header.producer_id, header.producer_epoch, header.base_offset) == (producer, epoch, offset)
    assert (header.partition_leader_epoch, header.max_timestamp, header.records_count) == (-1, ts, 1)
    assert decode_marker(batch) == (ControlType.COMMIT if commit else ControlType.ABORT, coordinator)


def _control(key: bytes | None, value: bytes | None, records: int = 1) -> bytes:
    return build_batch([(key, value)] * records, producer_id=5, transactional=True, control=True)


EPOCH_7 = hx("0000 00000007")  # a good EndTxnMarker value


@pytest.mark.parametrize(
    ("batch", "error", "match"),
    [
        pytest.param(
            build_batch([(None, b"v")], transactional=True), ProtocolError, "not a control", id="data"
        ),
        pytest.param(_control(hx("0000 0002"), EPOCH_7), ProtocolError, "type 2", id="leader-change"),
        pytest.param(_control(hx("0000 0001"), EPOCH_7, 2), ProtocolError, "one record", id="two-records"),
        pytest.param(_control(hx("0000"), EPOCH_7), CorruptRecordBatch, "key of 2 bytes", id="short-key"),
        pytest.param(_control(None, EPOCH_7), CorruptRecordBatch, "key of 0 bytes", id="null-key"),
        pytest.param(
            _control(hx("ffff 0001"), EPOCH_7), CorruptRecordBatch, "key version -1", id="key-version"
        ),
        pytest.param(
            _control(hx("0000 0000"), hx("0000 0007")), CorruptRecordBatch, "of 4 bytes", id="short"
        ),
        pytest.param(
            _control(hx("0000 0000"), hx("ffff 00000007")), CorruptRecordBatch, "version -1", id="ver"
        ),
        pytest.param(control_batch(5, 1, 7, True, 0)[:-1] + b"\x01", CorruptRecordBatch, "CRC", id="crc"),
    ],
)
def test_what_is_not_a_marker_is_refused(batch: bytes, error: type[ProtocolError], match: str) -> None:
    """A damaged batch is a CorruptRecordBatch; a sound batch that is no transaction marker is not."""
    with pytest.raises(error, match=match) as raised:
        decode_marker(batch)
    assert isinstance(raised.value, CorruptRecordBatch) == (error is CorruptRecordBatch)
