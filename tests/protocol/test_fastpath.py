"""The generated fast path and the construct schema agree: same bytes, same dicts, same failures."""

from __future__ import annotations

import re
import tracemalloc
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import protocol
from protocol import DEFAULT_DIALECT, ApiKey, ProtocolError, WireDialect, error_response_body
from protocol.fastpath import DECODE_ERRORS, ENCODE_ERRORS
from protocol.message_codec import MessageCodec
from protocol.registry import SUPPORTED_VERSIONS, api_spec, message_codec
from protocol.types import KTaggedFields
from tests.protocol.strategies import ALL_MESSAGES, body_strategy, message_id, per_message

TAGGED_NAMES = {
    field.name
    for case in ALL_MESSAGES
    for section in message_codec(*case).schema.subcons
    if isinstance(section, KTaggedFields)
    for field in section.fields
}
"""The top-level tagged fields of every message (UpdateMetadata v8's ``type``)."""


@pytest.mark.parametrize("case", ALL_MESSAGES, ids=message_id)
@per_message
@given(data=st.data())
def test_fast_encoder_writes_the_schema_bytes(
    case: tuple[int, int, str, WireDialect], data: st.DataObject
) -> None:
    codec = message_codec(*case)
    body = data.draw(body_strategy(codec.schema))
    out = bytearray()
    codec._fast_encode(body, out)
    assert bytes(out) == codec.reference_encode(body)


@pytest.mark.parametrize("case", ALL_MESSAGES, ids=message_id)
@per_message
@given(data=st.data())
def test_fast_decoder_reads_the_schema_dict(
    case: tuple[int, int, str, WireDialect], data: st.DataObject
) -> None:
    codec = message_codec(*case)
    raw = codec.reference_encode(data.draw(body_strategy(codec.schema)))
    assert codec._fast_decode(raw, 0) == codec.reference_decode_from(raw, 0)


@pytest.mark.parametrize("case", ALL_MESSAGES, ids=message_id)
@per_message
@given(data=st.data())
def test_fast_decoder_never_accepts_what_the_schema_rejects(
    case: tuple[int, int, str, WireDialect], data: st.DataObject
) -> None:
    """On mangled bytes the fast path either misses or agrees with construct, offset included."""
    codec = message_codec(*case)
    raw = bytearray(codec.reference_encode(data.draw(body_strategy(codec.schema))))
    for _ in range(data.draw(st.integers(1, 4))):
        if raw and data.draw(st.booleans()):
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        else:
            cut = data.draw(st.integers(0, len(raw)))
            raw[cut:cut] = data.draw(st.binary(max_size=6))
    raw = bytes(raw[: data.draw(st.integers(0, len(raw)))] if data.draw(st.booleans()) else raw)
    try:
        fast = codec._fast_decode(raw, 0)
    except DECODE_ERRORS:
        fast = None
    try:
        reference = codec.reference_decode_from(raw, 0)
    except ProtocolError:
        reference = None
    if fast is not None:
        assert fast == reference


@pytest.mark.parametrize("case", ALL_MESSAGES, ids=message_id)
@per_message
@given(data=st.data())
def test_large_arrays_take_the_uncached_struct_path(
    case: tuple[int, int, str, WireDialect], data: st.DataObject
) -> None:
    """Integer arrays longer than the prebuilt struct table (64) encode and decode the same way."""
    codec = message_codec(*case)
    body = data.draw(body_strategy(codec.schema, max_items=2, int_items=(60, 130)))
    raw = codec.encode(body)
    assert raw == codec.reference_encode(body)
    assert codec.decode(raw) == codec.reference_decode(raw) == body


BAD_BODIES = [
    # A tagged field may be left out (it encodes as its default), so the field removed is a plain one.
    ("missing field", lambda b: b.pop(next(k for k in b if k not in TAGGED_NAMES))),
    (
        "string where an int goes",
        lambda b: b.__setitem__(next(k for k, v in b.items() if type(v) is int), "x"),
    ),
    ("int out of range", lambda b: b.__setitem__(next(k for k, v in b.items() if type(v) is int), 2**70)),
]


@pytest.mark.parametrize("case", ALL_MESSAGES, ids=message_id)
@per_message
@given(data=st.data())
def test_bad_bodies_fail_in_both_paths_with_a_named_field(case, data) -> None:
    """Each way of spoiling a drawn body (see BAD_BODIES) fails alike in both paths."""
    codec = message_codec(*case)
    drawn = data.draw(body_strategy(codec.schema))
    for what, spoil in BAD_BODIES:
        if not drawn or (what != "missing field" and not any(type(v) is int for v in drawn.values())):
            continue  # nothing to spoil (ApiVersions requests have no fields)
        body = dict(drawn)
        spoil(body)
        with pytest.raises(ENCODE_ERRORS):
            codec._fast_encode(body, bytearray())
        with pytest.raises(ProtocolError, match=re.escape(codec.label)):
            codec.encode(body)
        out = bytearray(b"keep")
        with pytest.raises(ProtocolError):
            codec.encode_into(body, out)
        assert out == b"keep", what


MEGABYTE_OF_RECORDS = bytes(range(256)) * 4096
TOPIC_ID = uuid.UUID(int=27)
"""Fetch v13+ names topics by id."""
LARGE_RECORDS_CASES = [(ApiKey.PRODUCE, v, "request") for v in SUPPORTED_VERSIONS[ApiKey.PRODUCE]] + [
    (ApiKey.FETCH, v, "response") for v in SUPPORTED_VERSIONS[ApiKey.FETCH]
]


def _body_with_records(api_key: int, version: int, records: Any) -> dict[str, Any]:
    if api_key == ApiKey.PRODUCE:
        partition = {"index": 0, "records": records}
        return {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [partition]}],
        }
    topic: dict[str, Any] = {"topic_id": TOPIC_ID} if version >= 13 else {"topic": "t"}
    body = error_response_body(api_key, version, 0, {"topics": [{**topic, "partitions": [{"partition": 0}]}]})
    body["responses"][0]["partitions"][0]["records"] = records
    return body


def encode_bound(api_key: int, version: int) -> float:
    """The encoding's peak memory per byte of records. A flexible version writes tagged-field sections
    after the records, so the output buffer grows once more after them, and CPython over-allocates a
    growing bytearray by an eighth: still one copy of the records, in a larger buffer."""
    return 1.25 if api_spec(api_key).is_flexible(version, DEFAULT_DIALECT) else 1.1


@pytest.mark.parametrize("case", LARGE_RECORDS_CASES, ids=message_id)
def test_a_megabyte_of_records_stays_on_the_fast_path_with_one_copy_each_way(case, monkeypatch) -> None:
    """1 MiB of record batches: no fallback to construct, and one copy of the records per direction."""
    api_key, version, kind = case
    codec = message_codec(*case)

    def fell_back(*args: Any) -> None:
        raise AssertionError("the construct path ran")

    monkeypatch.setattr(MessageCodec, "reference_encode", fell_back)
    monkeypatch.setattr(MessageCodec, "reference_decode_from", fell_back)
    for records in (MEGABYTE_OF_RECORDS, bytearray(MEGABYTE_OF_RECORDS), memoryview(MEGABYTE_OF_RECORDS)):
        body = _body_with_records(api_key, version, records)
        tracemalloc.start()
        try:
            out = bytearray()
            codec.encode_into(body, out)
            encode_peak = tracemalloc.get_traced_memory()[1]
            raw = bytes(out)
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            decoded = codec.decode(raw)
            decode_peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
        assert encode_peak < encode_bound(api_key, version) * len(MEGABYTE_OF_RECORDS)
        assert decode_peak < 1.1 * len(MEGABYTE_OF_RECORDS)
        assert decoded == _body_with_records(api_key, version, MEGABYTE_OF_RECORDS)
        if kind == "request":
            frame = protocol.encode_request(api_key, version, 1, "c", body)
            assert protocol.decode_request(frame)[1] == decoded
        else:
            frame = protocol.encode_response(api_key, version, 1, body)
            assert protocol.decode_response(api_key, version, frame) == (1, decoded)


def _struct_arrays(codec: MessageCodec) -> list[str]:
    names = []
    for sub in codec.schema.subcons:
        try:
            codec.element_encoder(sub.name)
        except KeyError:
            continue
        names.append(sub.name)
    return names


@pytest.mark.parametrize("case", ALL_MESSAGES, ids=message_id)
@per_message
@given(data=st.data())
def test_pre_encoded_elements_give_the_same_bytes(
    case: tuple[int, int, str, WireDialect], data: st.DataObject
) -> None:
    codec = message_codec(*case)
    body = data.draw(body_strategy(codec.schema))
    expected = codec.reference_encode(body)
    swapped = dict(body)
    for name in _struct_arrays(codec):
        if body[name] is not None:
            swapped[name] = [codec.element_encoder(name)(item) for item in body[name]]
    assert codec.encode(swapped) == expected
    assert codec.reference_encode(swapped) == expected


def test_element_encoder_needs_a_top_level_array_of_structs() -> None:
    codec = message_codec(ApiKey.METADATA, 1, "response")
    with pytest.raises(KeyError):
        codec.element_encoder("controller_id")
    with pytest.raises(KeyError):
        codec.element_encoder("no_such_field")
