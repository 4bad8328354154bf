"""A schema bound to its generated fast path, with construct as the reference and the error reporter."""

from __future__ import annotations

import gc
import io
from collections.abc import Callable
from typing import Any

from construct import Construct, ConstructError, Renamed

from protocol.errors import ProtocolError
from protocol.fastpath import DECODE_ERRORS, ENCODE_ERRORS, compile_decoder, compile_encoder
from protocol.types import Encoded, KArray, KStruct

_PAUSE_GC_ABOVE = 64 * 1024


def _describe(exc: ConstructError) -> str:
    """``field path: reason`` from a construct error, without construct's own framing."""
    text = str(exc)
    path = exc.path or ""
    if path and text.startswith("Error in path"):
        text = text.split("\n", 1)[1] if "\n" in text else text
    for prefix in ("(parsing)", "(building)"):
        if path.startswith(prefix):
            path = path[len(prefix) :].removeprefix(" -> ")
    return f"{path or 'body'}: {text}"


def _array_element(schema: Construct, field: str) -> KStruct:
    for sub in schema.subcons:
        if sub.name == field:
            while isinstance(sub, Renamed):
                sub = sub.subcon
            element = sub.element if isinstance(sub, KArray) else None
            while isinstance(element, Renamed):
                element = element.subcon
            if isinstance(element, KStruct):
                return element
            break
    raise KeyError(f"no top-level array of structs named {field!r}")


class MessageCodec:
    """Encodes and decodes one message version (or header version) of the wire protocol.

    ``decode_from``/``encode_into`` try the generated code first; on any miss they re-run the construct
    schema, whose result is authoritative and whose errors name the field. ``reference_*`` run construct
    alone (the benchmark's baseline and the property tests' oracle).
    """

    __slots__ = ("_element_encoders", "_fast_decode", "_fast_encode", "label", "schema")

    def __init__(self, label: str, schema: Construct) -> None:
        self.label = label
        self.schema = schema
        self._fast_decode = compile_decoder(schema)
        self._fast_encode = compile_encoder(schema)
        self._element_encoders: dict[str, Callable[[dict[str, Any]], Encoded]] = {}

    def __repr__(self) -> str:
        return f"<MessageCodec {self.label}>"

    # -- decoding

    def decode_from(self, data: bytes, offset: int = 0) -> tuple[dict[str, Any], int]:
        """Decode at ``offset``; return the body and the offset just past it."""
        # A big body creates hundreds of thousands of dicts and lists, none in a cycle; letting the
        # cyclic collector run over them every 700 allocations halves decoding speed. Only the thread
        # that paused the collector resumes it, so concurrent decoders cannot leave it off.
        paused = len(data) - offset >= _PAUSE_GC_ABOVE and gc.isenabled()
        if paused:
            gc.disable()
        try:
            return self._fast_decode(data, offset)
        except DECODE_ERRORS:
            return self.reference_decode_from(data, offset)
        finally:
            if paused:
                gc.enable()

    def decode(self, data: bytes, offset: int = 0) -> dict[str, Any]:
        """Decode a body that must run exactly to the end of ``data``."""
        return self._whole(data, *self.decode_from(data, offset))

    def reference_decode_from(self, data: bytes, offset: int = 0) -> tuple[dict[str, Any], int]:
        stream = io.BytesIO(data)
        stream.seek(offset)
        try:
            body = self.schema.parse_stream(stream)
        except ConstructError as exc:
            raise ProtocolError(f"{self.label}: {_describe(exc)}") from None
        return body, stream.tell()

    def reference_decode(self, data: bytes, offset: int = 0) -> dict[str, Any]:
        return self._whole(data, *self.reference_decode_from(data, offset))

    def _whole(self, data: bytes, body: dict[str, Any], end: int) -> dict[str, Any]:
        """``body`` if it ran exactly to the end of ``data``; trailing bytes are malformed input."""
        if end != len(data):
            raise ProtocolError(f"{self.label}: {len(data) - end} bytes of trailing data after the body")
        return body

    # -- encoding

    def encode_into(self, body: dict[str, Any], out: bytearray) -> None:
        """Append the encoding of ``body`` to ``out`` (left untouched if ``body`` is invalid)."""
        mark = len(out)
        try:
            self._fast_encode(body, out)
        except ENCODE_ERRORS:
            del out[mark:]
            out += self.reference_encode(body)

    def encode(self, body: dict[str, Any]) -> bytes:
        out = bytearray()
        self.encode_into(body, out)
        return bytes(out)

    def element_encoder(self, field: str) -> Callable[[dict[str, Any]], Encoded]:
        """An encoder for one element of the top-level array ``field``, whose result this codec's
        encoders accept in that array in place of the element's dict."""
        encoder = self._element_encoders.get(field)
        if encoder is None:
            element = _array_element(self.schema, field)
            fast = compile_encoder(element)

            def encoder(item: dict[str, Any]) -> Encoded:
                out = bytearray()
                try:
                    fast(item, out)
                except ENCODE_ERRORS:
                    try:
                        return Encoded(element.build(item))
                    except ConstructError as exc:
                        raise ProtocolError(f"{self.label}: {field}[]: {_describe(exc)}") from None
                return Encoded(out)

            self._element_encoders[field] = encoder
        return encoder

    def reference_encode(self, body: dict[str, Any]) -> bytes:
        try:
            encoded: bytes = self.schema.build(body)
            return encoded
        except ConstructError as exc:
            raise ProtocolError(f"{self.label}: {_describe(exc)}") from None
