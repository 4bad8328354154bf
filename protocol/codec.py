"""The codec's public surface: whole frames (size prefix included) in and out, bodies as plain dicts.

Sans-IO: these functions take and return bytes; the daemons own sockets and buffering. Each takes the
wire dialect (``WireDialect``, keyword ``dialect``) that says which layout an ambiguous control-plane
version number names; callers that name none get ``DEFAULT_DIALECT`` (the seed's).
"""

from __future__ import annotations

import struct
from typing import Any

from protocol.api import DEFAULT_DIALECT, WireDialect
from protocol.errors import ProtocolError, UnsupportedVersionError
from protocol.framing import DEFAULT_MAX_FRAME_SIZE, SIZE_PREFIX, check_frame
from protocol.headers import RequestHeader, request_header_version
from protocol.registry import (
    APIS,
    api_spec,
    is_supported,
    message_codec,
    request_header_codec,
    response_header_codec,
)

_HEADER_START = struct.Struct(">hhi")


def encode_request_body(
    api_key: int, api_version: int, body: dict[str, Any], *, dialect: WireDialect = DEFAULT_DIALECT
) -> bytes:
    """Only the body's bytes: encode once, then frame per destination with ``encode_request_header``."""
    return message_codec(api_key, api_version, "request", dialect).encode(body)


def _start_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, dialect: WireDialect
) -> bytearray:
    """A buffer holding a placeholder size prefix and the request header for this API version."""
    out = bytearray(SIZE_PREFIX.size)
    header = {
        "api_key": api_key,
        "api_version": api_version,
        "correlation_id": correlation_id,
        "client_id": client_id,
    }
    request_header_codec(api_key, api_version, dialect).encode_into(header, out)
    return out


def encode_request_header(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body_size: int,
    *,
    dialect: WireDialect = DEFAULT_DIALECT,
) -> bytes:
    """The size prefix and request header for a body of ``body_size`` bytes encoded separately.

    ``encode_request_header(...) + body`` equals ``encode_request(...)``; writing the two parts with
    ``writelines`` lets one shared body serve many brokers (seed 002) without a copy per broker.
    """
    out = _start_request(api_key, api_version, correlation_id, client_id, dialect)
    SIZE_PREFIX.pack_into(out, 0, len(out) - SIZE_PREFIX.size + body_size)
    return bytes(out)


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: dict[str, Any],
    *,
    dialect: WireDialect = DEFAULT_DIALECT,
) -> bytes:
    """A whole request frame: size prefix, request header (v0/v1/v2 as the API version needs), body."""
    codec = message_codec(api_key, api_version, "request", dialect)
    out = _start_request(api_key, api_version, correlation_id, client_id, dialect)
    codec.encode_into(body, out)
    SIZE_PREFIX.pack_into(out, 0, len(out) - SIZE_PREFIX.size)
    return bytes(out)


def encode_response(
    api_key: int,
    api_version: int,
    correlation_id: int,
    body: dict[str, Any],
    *,
    dialect: WireDialect = DEFAULT_DIALECT,
) -> bytes:
    """A whole response frame: size prefix, response header (v0/v1), body."""
    codec = message_codec(api_key, api_version, "response", dialect)
    out = bytearray(SIZE_PREFIX.size)
    header_codec = response_header_codec(api_key, api_version, dialect)
    header_codec.encode_into({"correlation_id": correlation_id}, out)
    codec.encode_into(body, out)
    SIZE_PREFIX.pack_into(out, 0, len(out) - SIZE_PREFIX.size)
    return bytes(out)


def _as_bytes(frame: bytes | bytearray | memoryview) -> bytes:
    return frame if type(frame) is bytes else bytes(frame)


def decode_request_header(
    frame: bytes | bytearray | memoryview,
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    *,
    dialect: WireDialect = DEFAULT_DIALECT,
) -> tuple[RequestHeader, int]:
    """The header of a whole request frame and the offset where its body starts.

    An unknown API key raises ProtocolError (a server closes the connection); a known key with a
    version not implemented in ``dialect`` raises UnsupportedVersionError carrying the correlation id,
    so a server can answer UNSUPPORTED_VERSION.
    """
    data = _as_bytes(frame)
    check_frame(data, max_frame_size)
    if len(data) < SIZE_PREFIX.size + _HEADER_START.size:
        raise ProtocolError(f"request header truncated: {len(data) - SIZE_PREFIX.size} bytes")
    api_key, api_version, correlation_id = _HEADER_START.unpack_from(data, SIZE_PREFIX.size)
    spec = APIS.get(api_key)
    if spec is None:
        raise ProtocolError(f"unknown API key {api_key} (correlation id {correlation_id})")
    codec = request_header_codec(api_key, api_version, dialect)
    if not is_supported(api_key, api_version, dialect=dialect):
        try:
            client_id = codec.decode_from(data, SIZE_PREFIX.size)[0].get("client_id")
        except ProtocolError:
            client_id = None
        raise UnsupportedVersionError(api_key, api_version, correlation_id, client_id)
    fields, offset = codec.decode_from(data, SIZE_PREFIX.size)
    header = RequestHeader(
        api_key=api_key,
        api_version=api_version,
        correlation_id=correlation_id,
        client_id=fields.get("client_id"),
        version=request_header_version(spec, api_version, dialect),
    )
    return header, offset


def decode_request(
    frame: bytes | bytearray | memoryview,
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    *,
    dialect: WireDialect = DEFAULT_DIALECT,
) -> tuple[RequestHeader, dict[str, Any]]:
    """A whole request frame (size prefix included) -> (header, body dict)."""
    data = _as_bytes(frame)
    header, offset = decode_request_header(data, max_frame_size, dialect=dialect)
    body = message_codec(header.api_key, header.api_version, "request", dialect).decode(data, offset)
    return header, body


def decode_response(
    api_key: int,
    api_version: int,
    frame: bytes | bytearray | memoryview,
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    *,
    dialect: WireDialect = DEFAULT_DIALECT,
) -> tuple[int, dict[str, Any]]:
    """A whole response frame (size prefix included) to a request of ``api_key`` v``api_version``.

    Responses do not name their API, so the caller says which request this answers, and in which
    dialect.
    """
    data = _as_bytes(frame)
    check_frame(data, max_frame_size)
    api_spec(api_key)
    codec = message_codec(api_key, api_version, "response", dialect)
    header_codec = response_header_codec(api_key, api_version, dialect)
    fields, offset = header_codec.decode_from(data, SIZE_PREFIX.size)
    return fields["correlation_id"], codec.decode(data, offset)
