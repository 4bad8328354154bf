"""A bare Kafka-protocol client for tests that must send what a well-behaved client never would:
oversized or malformed frames, pipelined requests, unknown versions. It speaks whole frames over one
loopback connection and reads answers through the daemons' own frame reader."""

from __future__ import annotations

import asyncio
import ssl
import struct
from typing import Any

from daemon.frames import read_frame
from protocol import DEFAULT_MAX_FRAME_SIZE, decode_response, encode_request

TIMEOUT_S = 10.0
CLIENT_ID = "test"


def raw_frame(payload: bytes) -> bytes:
    """``payload`` behind its size prefix, whatever it holds."""
    return struct.pack(">i", len(payload)) + payload


class RawClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(
        cls, port: int, host: str = "127.0.0.1", *, tls: ssl.SSLContext | None = None
    ) -> RawClient:
        """A connection to ``host:port``, over TLS with ``tls``."""
        return cls(*await asyncio.open_connection(host, port, ssl=tls))

    async def send(self, *frames: bytes) -> None:
        self.writer.write(b"".join(frames))
        await self.writer.drain()

    async def read_frame(self) -> bytes:
        async with asyncio.timeout(TIMEOUT_S):
            return await read_frame(self.reader, DEFAULT_MAX_FRAME_SIZE)

    async def read_answer(self, api_key: int, version: int) -> tuple[int, dict[str, Any]]:
        """The next response, decoded as ``api_key`` v``version``: (correlation id, body)."""
        return decode_response(api_key, version, await self.read_frame())

    async def call(
        self, api_key: int, version: int, correlation_id: int, body: dict[str, Any]
    ) -> dict[str, Any]:
        """One request and its response, whose correlation id must match."""
        await self.send(encode_request(api_key, version, correlation_id, CLIENT_ID, body))
        got, response = await self.read_answer(api_key, version)
        assert got == correlation_id, f"answer to {got} where {correlation_id} was due"
        return response

    async def closed_by_server(self) -> bool:
        """True once the server has closed the connection (end of stream or reset)."""
        try:
            async with asyncio.timeout(TIMEOUT_S):
                return await self.reader.read() == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.writer.close()


async def call_once(
    port: int, api_key: int, version: int, body: dict[str, Any], correlation_id: int = 1
) -> dict[str, Any]:
    """One request on a fresh loopback connection; the decoded response body."""
    client = await RawClient.connect(port)
    try:
        return await client.call(api_key, version, correlation_id, body)
    finally:
        client.close()
