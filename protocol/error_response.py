"""Error-only response bodies for any implemented API version, derived from its schema.

A server that refuses a request (UNSUPPORTED_VERSION, an API not served on a listener) must still answer
with a body its peer can decode. Building it from the construct schema keeps that true for every API
and version without a hand-written error body per message.
"""

from __future__ import annotations

import uuid
from typing import Any

from construct import Construct, Flag, FormatField, Renamed

from protocol.registry import message_codec
from protocol.types import KArray, KString, KStruct, TaggedFields, Uuid

__all__ = ["error_response_body"]

_ZERO_UUID = uuid.UUID(int=0)


def _empty(con: Construct) -> Any:
    """The smallest valid value of ``con``: zero, false, empty, or null where the field allows it."""
    while isinstance(con, Renamed):
        con = con.subcon
    if con is Flag:
        return False
    if isinstance(con, FormatField):
        return 0
    if con is Uuid:
        return _ZERO_UUID
    if isinstance(con, KString):
        return None if con.nullable else ""
    if isinstance(con, KArray):
        return []
    if isinstance(con, KStruct):
        return {sc.name: _empty(sc) for sc in con.subcons if sc is not TaggedFields and sc.name}
    raise TypeError(f"no empty value known for {con!r}")


def error_response_body(api_key: int, api_version: int, error_code: int) -> dict[str, Any]:
    """A response body for ``api_key`` v``api_version`` carrying ``error_code`` in every top-level
    ``error_code`` field and nothing else (empty arrays, zeros).

    Raises ProtocolError for an API or version the codec does not implement.
    """
    body = _empty(message_codec(api_key, api_version, "response").schema)
    if "error_code" in body:
        body["error_code"] = error_code
    return body
