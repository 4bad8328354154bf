"""The generated fast path and the construct schema agree: same bytes, same dicts, same failures."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import ProtocolError
from protocol.fastpath import DECODE_ERRORS, ENCODE_ERRORS
from protocol.registry import message_codec
from tests.protocol.strategies import ALL_MESSAGES, body_strategy, message_id


@pytest.mark.parametrize("case", ALL_MESSAGES, ids=message_id)
@given(data=st.data())
def test_fast_encoder_writes_the_schema_bytes(case: tuple[int, int, str], data: st.DataObject) -> None:
    codec = message_codec(*case)
    body = data.draw(body_strategy(codec.schema))
    out = bytearray()
    codec._fast_encode(body, out)
    assert bytes(out) == codec.reference_encode(body)


@pytest.mark.parametrize("case", ALL_MESSAGES, ids=message_id)
@given(data=st.data())
def test_fast_decoder_reads_the_schema_dict(case: tuple[int, int, str], data: st.DataObject) -> None:
    codec = message_codec(*case)
    raw = codec.reference_encode(data.draw(body_strategy(codec.schema)))
    assert codec._fast_decode(raw, 0) == codec.reference_decode_from(raw, 0)


@pytest.mark.parametrize("case", ALL_MESSAGES, ids=message_id)
@given(data=st.data())
def test_fast_decoder_never_accepts_what_the_schema_rejects(
    case: tuple[int, int, str], data: st.DataObject
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
@given(data=st.data())
def test_large_arrays_take_the_uncached_struct_path(case: tuple[int, int, str], data: st.DataObject) -> None:
    """Integer arrays longer than the prebuilt struct table (64) encode and decode the same way."""
    codec = message_codec(*case)
    body = data.draw(body_strategy(codec.schema, max_items=2, int_items=(60, 130)))
    raw = codec.encode(body)
    assert raw == codec.reference_encode(body)
    assert codec.decode(raw) == codec.reference_decode(raw) == body


BAD_BODIES = [
    ("missing field", lambda b: b.pop(next(iter(b)))),
    (
        "string where an int goes",
        lambda b: b.__setitem__(next(k for k, v in b.items() if type(v) is int), "x"),
    ),
    ("int out of range", lambda b: b.__setitem__(next(k for k, v in b.items() if type(v) is int), 2**70)),
]


@pytest.mark.parametrize("case", ALL_MESSAGES, ids=message_id)
@pytest.mark.parametrize(("what", "spoil"), BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
@given(data=st.data())
def test_bad_bodies_fail_in_both_paths_with_a_named_field(case, what, spoil, data) -> None:
    codec = message_codec(*case)
    body = data.draw(body_strategy(codec.schema))
    if what != "missing field" and not any(type(v) is int for v in body.values()):
        return
    spoil(body)
    with pytest.raises(ENCODE_ERRORS):
        codec._fast_encode(body, bytearray())
    with pytest.raises(ProtocolError, match=codec.label):
        codec.encode(body)
    out = bytearray(b"keep")
    with pytest.raises(ProtocolError):
        codec.encode_into(body, out)
    assert out == b"keep"
