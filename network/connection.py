"""An asyncio client connection to a Kafka-protocol server, with pipelined requests.

Kafka answers the requests of one connection in the order they were sent, so in-flight requests wait
in a FIFO and one reader task resolves its head with each response. A response whose correlation id
is not the head's means the stream can no longer be trusted: the connection is closed and every
waiting request fails. The same goes for a request that timed out, since its late answer would be
taken for the next request's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import struct
from collections import deque
from dataclasses import dataclass
from typing import Any

from daemon.frames import read_frame, recv_frame
from protocol import (
    DEFAULT_DIALECT,
    DEFAULT_MAX_FRAME_SIZE,
    FrameTooLarge,
    ProtocolError,
    WireDialect,
    decode_response,
    encode_request,
    encode_request_header,
)
from security.client import AuthenticationError, sasl_conversation
from security.config import ClientSecurity

__all__ = ["BlockingConnection", "KafkaConnection"]

log = logging.getLogger(__name__)

_INT32 = struct.Struct(">i")
_CORRELATION_ID_LIMIT = 1 << 31
"""Correlation ids are int32 and never negative; they wrap back to 0."""


TLS_SHUTDOWN_TIMEOUT_S = 2.0
"""How long closing a TLS connection waits for the peer's close_notify (asyncio waits 30 s): a frozen
or vanished peer must not hold up a controller that resigns or a broker that stops."""


@dataclass(slots=True)
class _InFlight:
    correlation_id: int
    api_key: int
    api_version: int
    future: asyncio.Future[dict[str, Any]]
    dialect: WireDialect = DEFAULT_DIALECT


class KafkaConnection:
    """One TCP connection; ``send`` may be called concurrently, responses resolve in order."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        client_id: str,
        endpoint: str,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        self.client_id = client_id
        self.endpoint = endpoint
        self.max_frame_size = max_frame_size
        self._reader = reader
        self._writer = writer
        self._in_flight: deque[_InFlight] = deque()
        self._next_correlation_id = 0
        self._closed = False
        self._close_reason = ""
        self._close_cause: BaseException | None = None
        self._reader_task = asyncio.create_task(self._read_responses(), name=f"kafka-connection-{endpoint}")

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        client_id: str,
        connect_timeout: float = 30.0,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        security: ClientSecurity | None = None,
    ) -> KafkaConnection:
        """Connect (with TLS and SASL as ``security`` says), giving up after ``connect_timeout`` seconds.

        A refused authentication raises ``security.client.AuthenticationError`` (a ConnectionError).
        """
        tls = security.tls if security is not None else None
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    host,
                    port,
                    ssl=tls,
                    server_hostname=host if tls else None,
                    ssl_shutdown_timeout=TLS_SHUTDOWN_TIMEOUT_S if tls else None,
                ),
                connect_timeout,
            )
        except TimeoutError as exc:
            raise TimeoutError(f"could not connect to {host}:{port} within {connect_timeout} s") from exc
        except ssl.SSLError as exc:
            raise ConnectionError(f"TLS handshake with {host}:{port} failed: {exc}") from exc
        connection = cls(
            reader, writer, client_id=client_id, endpoint=f"{host}:{port}", max_frame_size=max_frame_size
        )
        if security is not None and security.sasl:
            try:
                await connection.authenticate(security, connect_timeout)
            except BaseException:
                await connection.close()
                raise
        return connection

    async def authenticate(self, security: ClientSecurity, timeout: float) -> None:
        """Run the SASL exchange; AuthenticationError when the server refuses it."""
        conversation = sasl_conversation(security)
        request = next(conversation)
        while True:
            _, response = await self.send(*request, timeout=timeout)
            try:
                request = conversation.send(response)
            except StopIteration:
                return

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        """Requests written whose response has not arrived yet."""
        return len(self._in_flight)

    @property
    def next_correlation_id(self) -> int:
        """The id the next ``send`` will use, so a sole sender can log a request before it goes out."""
        return self._next_correlation_id

    async def send(
        self,
        api_key: int,
        api_version: int,
        body: dict[str, Any] | bytes,
        *,
        timeout: float,
        dialect: WireDialect = DEFAULT_DIALECT,
    ) -> tuple[int, dict[str, Any]]:
        """Send one request and wait for its response: ``(correlation_id, response body)``.

        ``body`` as ``bytes`` is an already-encoded request body; it is written after its own header
        without being copied, so one encoding can go to many servers. ``dialect`` names the layouts of
        the header, the body and the response (Kafka's StopReplica v4 is not the seed's). A timeout
        raises TimeoutError and closes the connection; a broken connection raises ConnectionError.
        """
        if self._closed:
            raise self._closed_error()
        correlation_id = self._next_correlation_id
        if isinstance(body, dict):
            client_id = self.client_id
            frame = encode_request(api_key, api_version, correlation_id, client_id, body, dialect=dialect)
            parts: tuple[bytes, ...] = (frame,)
        else:
            header = encode_request_header(
                api_key, api_version, correlation_id, self.client_id, len(body), dialect=dialect
            )
            parts = (header, body)
        self._next_correlation_id = (correlation_id + 1) % _CORRELATION_ID_LIMIT
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        # Written and queued with no await in between, so the FIFO matches the byte stream.
        self._writer.writelines(parts)
        self._in_flight.append(_InFlight(correlation_id, api_key, api_version, future, dialect))
        try:
            async with asyncio.timeout(timeout):
                await self._writer.drain()
                response = await future
        except TimeoutError as exc:
            self._abort(f"closed after request {correlation_id} timed out", exc)
            raise TimeoutError(
                f"no response to request {correlation_id} from {self.endpoint} within {timeout} s"
            ) from exc
        except OSError as exc:  # the write failed; a failure the reader saw arrives already wrapped
            self._abort(f"failed: {exc}", exc)
            if future.done() and not future.cancelled() and future.exception() is exc:
                raise
            raise self._closed_error() from self._close_cause
        return correlation_id, response

    async def close(self) -> None:
        """Close the socket and fail whatever is still in flight with ConnectionError."""
        self._abort("closed", None)
        if self._reader_task is not asyncio.current_task():
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader_task
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()

    def _abort(self, reason: str, cause: BaseException | None) -> None:
        """Close at once and fail every waiting request; the first reason is the one reported."""
        if not self._closed:
            self._closed = True
            self._close_reason, self._close_cause = reason, cause
            self._writer.close()
        while self._in_flight:
            future = self._in_flight.popleft().future
            if not future.done():
                future.set_exception(self._closed_error())

    def _closed_error(self) -> ConnectionError:
        error = ConnectionError(f"connection to {self.endpoint} {self._close_reason}")
        error.__cause__ = self._close_cause
        return error

    async def _read_responses(self) -> None:
        try:
            while True:
                self._resolve(await read_frame(self._reader, self.max_frame_size))
        except asyncio.IncompleteReadError as exc:
            self._abort("closed by the server", exc)
        except FrameTooLarge as exc:
            error = ProtocolError(
                f"response frame of {exc.size} bytes from {self.endpoint} is outside 0..{exc.max_size} "
                "(max_frame_size)"
            )
            log.warning("closing connection: %s", error)
            error.__cause__ = exc
            self._abort(f"closed: {error}", error)
        except Exception as exc:  # a protocol error, a reset, or a decoding bug: never leave requests hanging
            if not self._closed:
                log.warning("closing connection to %s: %s", self.endpoint, exc)
            self._abort(f"closed: {exc}", exc)

    def _resolve(self, frame: bytes) -> None:
        """Hand one response frame to the oldest request; anything unexpected raises ProtocolError."""
        if not self._in_flight:
            raise ProtocolError(f"response from {self.endpoint} with no request in flight")
        head = self._in_flight[0]
        if len(frame) < 2 * _INT32.size:
            raise ProtocolError(f"response of {len(frame)} bytes from {self.endpoint} has no header")
        (correlation_id,) = _INT32.unpack_from(frame, _INT32.size)
        if correlation_id != head.correlation_id:
            raise ProtocolError(
                f"response correlation id {correlation_id} from {self.endpoint} does not match "
                f"request {head.correlation_id}"
            )
        _, body = decode_response(
            head.api_key, head.api_version, frame, self.max_frame_size, dialect=head.dialect
        )
        self._in_flight.popleft()
        if not head.future.done():  # the sender may have been cancelled; the stream stays in sync
            head.future.set_result(body)


class BlockingConnection:
    """One request at a time over a plain socket, for threads that own their connection (fetchers).

    Any failure (timeout, closed socket, unexpected correlation id) closes the connection and raises
    ConnectionError or TimeoutError; the caller reconnects.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str,
        timeout: float,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        security: ClientSecurity | None = None,
    ) -> None:
        self.endpoint = f"{host}:{port}"
        self.client_id = client_id
        self.max_frame_size = max_frame_size
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except TimeoutError as exc:
            raise TimeoutError(f"could not connect to {self.endpoint} within {timeout} s") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if security is not None and security.tls is not None:
            try:
                sock = security.tls.wrap_socket(sock, server_hostname=host)
            except (ssl.SSLError, OSError) as exc:
                sock.close()
                raise ConnectionError(f"TLS handshake with {self.endpoint} failed: {exc}") from exc
        self._sock = sock
        self._next_correlation_id = 0
        if security is not None and security.sasl:
            self.authenticate(security, timeout)

    def authenticate(self, security: ClientSecurity, timeout: float) -> None:
        """Run the SASL exchange; AuthenticationError (the socket closed) when the server refuses it."""
        conversation = sasl_conversation(security)
        request = next(conversation)
        while True:
            response = self.send(*request, timeout=timeout)
            try:
                request = conversation.send(response)
            except StopIteration:
                return
            except AuthenticationError:
                self.close()
                raise

    def send(self, api_key: int, api_version: int, body: dict[str, Any], *, timeout: float) -> dict[str, Any]:
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) % _CORRELATION_ID_LIMIT
        try:
            self._sock.settimeout(timeout)
            self._sock.sendall(encode_request(api_key, api_version, correlation_id, self.client_id, body))
            frame = recv_frame(self._sock, self.max_frame_size)
            got, response = decode_response(api_key, api_version, frame, self.max_frame_size)
        except TimeoutError as exc:
            self.close()
            raise TimeoutError(f"no response from {self.endpoint} within {timeout} s") from exc
        except (OSError, asyncio.IncompleteReadError, ProtocolError) as exc:
            self.close()
            raise ConnectionError(f"connection to {self.endpoint} failed: {exc}") from exc
        if got != correlation_id:
            self.close()
            raise ConnectionError(f"{self.endpoint} answered {got} where {correlation_id} was due")
        return response

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()
