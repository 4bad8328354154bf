"""An ack broker's connection: read a request's header and controller epoch, skip its body, answer NONE.

``bench.ack_brokers`` serves this protocol for every broker it simulates. Only the header and the
fixed-width fields before ``controller_epoch`` are decoded; the answer is a precomputed NONE body framed
for the request's correlation id, and ``Stats`` counts what was answered, per API and controller epoch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from construct import Renamed, SizeofError

from protocol import (
    CONTROL_APIS,
    ApiKey,
    ProtocolError,
    WireDialect,
    decode_request_header,
    encode_response,
    error_response_body,
)
from protocol.framing import DEFAULT_MAX_FRAME_SIZE, SIZE_PREFIX, frame_size
from protocol.registry import message_codec

__all__ = ["HEADER_PEEK", "AckProtocol", "Progress", "Stats", "epoch_offset"]

log = logging.getLogger("bench.ack_brokers")

HEADER_PEEK = 512
"""Payload bytes read before decoding the header: more than any header (its client id included) and
the fixed-width fields that follow it."""

Progress = dict[int, dict[int, list[float]]]
"""Per controller epoch, per API key: ``[answers, wall-clock time of the last]``."""


@dataclass(slots=True)
class Stats:
    """Per API key: requests answered, their bytes (size prefix included), and when the last was; and
    the connections accepted, how many of them over TLS."""

    requests: Counter[int] = field(default_factory=Counter)
    bytes: Counter[int] = field(default_factory=Counter)
    last_response_at: dict[int, float] = field(default_factory=dict)
    connections: int = 0
    tls_connections: int = 0
    by_epoch: Progress = field(default_factory=dict)
    """Control requests per controller epoch: answers and the wall-clock time of the last."""

    def answered(self, epoch: int, api_key: int, at: float) -> None:
        entry = self.by_epoch.setdefault(epoch, {}).setdefault(api_key, [0, at])
        entry[0] += 1
        entry[1] = at

    def progress_json(self) -> dict[str, dict[str, list[float]]]:
        return {
            str(epoch): {_api_name(key): list(entry) for key, entry in sorted(apis.items())}
            for epoch, apis in sorted(self.by_epoch.items())
        }

    def as_json(self) -> dict[str, Any]:
        def named(values: dict[int, Any]) -> dict[str, Any]:
            return {_api_name(key): value for key, value in sorted(values.items())}

        return {
            "requests": named(self.requests),
            "bytes": named(self.bytes),
            "last_response_at": named(self.last_response_at),
            "connections": self.connections,
            "tls_connections": self.tls_connections,
            "by_epoch": self.progress_json(),
        }


def _api_name(key: int) -> str:
    try:
        return ApiKey(key).name
    except ValueError:
        return str(key)


_RESPONSE_BODIES: dict[tuple[int, int, WireDialect], dict[str, Any]] = {}
_EPOCH_OFFSETS: dict[tuple[int, int, WireDialect], int | None] = {}
_EPOCH = struct.Struct(">i")


def _response(api_key: int, api_version: int, correlation_id: int, dialect: WireDialect) -> bytes:
    body = _RESPONSE_BODIES.get((api_key, api_version, dialect))
    if body is None:
        body = error_response_body(api_key, api_version, 0, dialect=dialect)
        _RESPONSE_BODIES[api_key, api_version, dialect] = body
    return encode_response(api_key, api_version, correlation_id, body, dialect=dialect)


def epoch_offset(api_key: int, api_version: int, dialect: WireDialect) -> int | None:
    """Where ``controller_epoch`` starts in a control request's body, when only fixed-width fields
    come before it (every LeaderAndIsr, UpdateMetadata and StopReplica layout); None otherwise."""
    key = (api_key, api_version, dialect)
    if key not in _EPOCH_OFFSETS:
        _EPOCH_OFFSETS[key] = _fixed_offset(api_key, api_version, dialect, "controller_epoch")
    return _EPOCH_OFFSETS[key]


def _fixed_offset(api_key: int, api_version: int, dialect: WireDialect, name: str) -> int | None:
    if api_key not in CONTROL_APIS:
        return None
    offset = 0
    for sc in message_codec(api_key, api_version, "request", dialect).schema.subcons:
        found = sc.name == name
        while isinstance(sc, Renamed):
            sc = sc.subcon
        if found:
            return offset
        try:
            offset += sc.sizeof()
        except SizeofError:
            return None
    return None


class AckProtocol(asyncio.Protocol):
    """One connection: collect a frame's prefix and header, skip the rest of its bytes, answer.

    A protocol rather than a StreamReader: the body is consumed chunk by chunk as it arrives, never
    buffered or copied, so 200 brokers receiving a 10 MB request each cost no memory.
    """

    def __init__(self, stats: Stats, dialect: WireDialect) -> None:
        self.stats = stats
        self.dialect = dialect
        self.epoch: int | None = None
        self.transport: Any = None
        self._head = bytearray()
        self._need = SIZE_PREFIX.size
        self._size = -1
        self._skip = 0
        self._key = self._version = self._correlation_id = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # uvloop's transports are no asyncio.Transport subclasses
        self.stats.connections += 1
        self.stats.tls_connections += transport.get_extra_info("ssl_object") is not None
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        pos, end = 0, len(data)
        try:
            while pos < end:
                if self._skip:
                    taken = min(self._skip, end - pos)
                    self._skip -= taken
                    pos += taken
                    if not self._skip:
                        self._answer()
                    continue
                taken = min(self._need - len(self._head), end - pos)
                self._head += data[pos : pos + taken]
                pos += taken
                if len(self._head) == self._need:
                    self._head_complete()
        except ProtocolError as exc:
            log.warning("closing a connection: %s", exc)
            self.transport.close()

    def _head_complete(self) -> None:
        if self._size < 0:
            self._size = frame_size(self._head, DEFAULT_MAX_FRAME_SIZE)
            self._need = SIZE_PREFIX.size + min(self._size, HEADER_PEEK)
            if self._need > len(self._head):
                return
        peeked = len(self._head) - SIZE_PREFIX.size
        # A frame of only the bytes read so far: the header decoder checks the prefix against them.
        SIZE_PREFIX.pack_into(self._head, 0, peeked)
        header, body_at = decode_request_header(self._head, dialect=self.dialect)
        self._key, self._version, self._correlation_id = (
            header.api_key,
            header.api_version,
            header.correlation_id,
        )
        self.epoch = None
        at = epoch_offset(header.api_key, header.api_version, self.dialect)
        if at is not None and body_at + at + _EPOCH.size <= len(self._head):
            (self.epoch,) = _EPOCH.unpack_from(self._head, body_at + at)
        self._skip = self._size - peeked
        if not self._skip:
            self._answer()

    def _answer(self) -> None:
        key, stats = self._key, self.stats
        self.transport.write(_response(key, self._version, self._correlation_id, self.dialect))
        stats.requests[key] += 1
        stats.bytes[key] += SIZE_PREFIX.size + self._size
        stats.last_response_at[key] = time.monotonic()
        if self.epoch is not None:
            stats.answered(self.epoch, key, time.time())
        self._head = bytearray()
        self._need, self._size = SIZE_PREFIX.size, -1
