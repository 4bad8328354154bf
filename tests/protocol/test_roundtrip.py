"""Every message and version survives encode -> decode, through the public frame API."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import protocol
from protocol import WireDialect
from protocol.message_codec import MessageCodec
from protocol.registry import message_codec, request_header_codec_for, response_header_codec_for
from tests.protocol.strategies import ALL_MESSAGES, body_strategy, message_id, per_message

client_ids = st.none() | st.text(max_size=10)
correlation_ids = st.integers(-(2**31), 2**31 - 1)


@pytest.mark.parametrize("case", ALL_MESSAGES, ids=message_id)
@per_message
@given(data=st.data())
def test_frame_round_trip(case: tuple[int, int, str, WireDialect], data: st.DataObject) -> None:
    api_key, version, kind, dialect = case
    body = data.draw(body_strategy(message_codec(api_key, version, kind, dialect).schema))
    correlation_id = data.draw(correlation_ids)
    if kind == "request":
        client_id = data.draw(client_ids)
        frame = protocol.encode_request(api_key, version, correlation_id, client_id, body, dialect=dialect)
        header, decoded = protocol.decode_request(frame, dialect=dialect)
        assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
            api_key,
            version,
            correlation_id,
            client_id,
        )
    else:
        frame = protocol.encode_response(api_key, version, correlation_id, body, dialect=dialect)
        got_correlation_id, decoded = protocol.decode_response(api_key, version, frame, dialect=dialect)
        assert got_correlation_id == correlation_id
    assert decoded == body
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4


@pytest.mark.parametrize("case", [c for c in ALL_MESSAGES if c[2] == "request"], ids=message_id)
@per_message
@given(data=st.data())
def test_header_and_body_encoded_apart_equal_one_frame(
    case: tuple[int, int, str, WireDialect], data: st.DataObject
) -> None:
    """The encode-once path (one body, a header per broker) yields the same bytes as encode_request."""
    api_key, version, _, dialect = case
    body = data.draw(body_strategy(message_codec(api_key, version, "request", dialect).schema))
    correlation_id, client_id = data.draw(correlation_ids), data.draw(client_ids)
    shared = protocol.encode_request_body(api_key, version, body, dialect=dialect)
    head = protocol.encode_request_header(
        api_key, version, correlation_id, client_id, len(shared), dialect=dialect
    )
    whole = protocol.encode_request(api_key, version, correlation_id, client_id, body, dialect=dialect)
    assert head + shared == whole


def test_seed_versions_carry_max_broker_epoch_where_kip380_versions_carry_broker_epoch() -> None:
    for api_key, seed_version in protocol.MAX_BROKER_EPOCH_VERSIONS.items():
        base_version = protocol.PER_BROKER_EPOCH_VERSIONS[api_key]
        seed_fields = [sc.name for sc in message_codec(api_key, seed_version, "request").schema.subcons]
        base_fields = [sc.name for sc in message_codec(api_key, base_version, "request").schema.subcons]
        assert seed_fields == ["max_broker_epoch" if name == "broker_epoch" else name for name in base_fields]
        assert protocol.epoch_field(api_key, seed_version) == "max_broker_epoch"
        assert protocol.epoch_field(api_key, base_version) == "broker_epoch"


@pytest.mark.parametrize(
    ("label", "codec"),
    [(f"request-v{v}", request_header_codec_for(v)) for v in (0, 1, 2)]
    + [(f"response-v{v}", response_header_codec_for(v)) for v in (0, 1)],
    ids=lambda x: x if isinstance(x, str) else "",
)
@given(data=st.data())
def test_every_header_version_round_trips(label: str, codec: MessageCodec, data: st.DataObject) -> None:
    header = data.draw(body_strategy(codec.schema))
    raw = codec.encode(header)
    assert raw == codec.reference_encode(header)
    assert codec.decode(raw) == header
    fixed = {"request-v0": 8, "request-v1": 10, "request-v2": 11, "response-v0": 4, "response-v1": 5}[label]
    client_id = header.get("client_id")
    assert len(raw) == fixed + (len(client_id.encode()) if client_id else 0)
