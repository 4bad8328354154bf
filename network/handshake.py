"""A connection's authentication on a served listener, before its first ordinary request.

The listener's transport has done the TLS handshake before the connection gets here (a TLS upgrade
after accepting would race with the client's first bytes); the certificate gives the principal. Then,
on SASL listeners, Kafka's SASL exchange (§4.3 of the
reference): until a client has authenticated only ApiVersions and SaslHandshake are answered; a
SaslHandshake v0 is followed by bare size-prefixed tokens, v1 by SaslAuthenticate requests. Any other
request, a mechanism not offered or a failed exchange closes the connection, after
``connection.failed.authentication.delay.ms`` for a failed exchange, with its reason.

The result is the connection's principal, which every later request carries.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from daemon.frames import PREFIX_BYTES, StreamEnded, TruncatedFrame, read_frame
from protocol import (
    ApiKey,
    ErrorCode,
    FrameTooLarge,
    ProtocolError,
    RequestHeader,
    UnsupportedVersionError,
    decode_request_header,
    encode_response,
    error_response_body,
    message_codec,
)
from security.config import ListenerSecurity
from security.principal import ANONYMOUS, NoMatchingRule, user
from security.sasl import PlainServer, SaslAuthenticationFailed, ScramCredential, ScramServer

__all__ = ["AuthenticationFailed", "CredentialLookup", "authenticate"]

log = logging.getLogger("network.handshake")

CredentialLookup = Callable[[str, str], Awaitable[ScramCredential | None]]
"""(user name, SCRAM mechanism) -> the stored credential, or None."""

HANDSHAKE_TIMEOUT_S = 30.0
"""How long a TLS listener waits for a client's handshake (a stalled one holds only its socket)."""

_INT32 = struct.Struct(">i")


class AuthenticationFailed(Exception):
    """The peer did not authenticate; ``reason`` says why, ``kind`` names it for metrics."""

    def __init__(self, reason: str, kind: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind


async def authenticate(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    security: ListenerSecurity | None,
    *,
    credentials: CredentialLookup | None,
    api_versions: Callable[[RequestHeader], bytes],
    unsupported: Callable[[UnsupportedVersionError], bytes],
    timeout_s: float | None = None,
) -> str:
    """The principal of this connection, or AuthenticationFailed (the caller closes it). A listener
    without ``security`` (None) is PLAINTEXT: ``User:ANONYMOUS``.

    ``timeout_s`` (``connections.max.idle.ms``) bounds the whole exchange, so a peer that stalls
    while authenticating holds no more than its socket.
    """
    if security is None or security.plaintext:
        return ANONYMOUS
    try:
        async with asyncio.timeout(timeout_s):
            return await _authenticate(reader, writer, security, credentials, api_versions, unsupported)
    except TimeoutError:
        reason = f"did not authenticate within {timeout_s:g} s (connections.max.idle.ms)"
        raise AuthenticationFailed(reason, "idle") from None


async def _authenticate(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    security: ListenerSecurity,
    credentials: CredentialLookup | None,
    api_versions: Callable[[RequestHeader], bytes],
    unsupported: Callable[[UnsupportedVersionError], bytes],
) -> str:
    principal = ANONYMOUS
    if security.tls is not None:
        ssl_object = writer.get_extra_info("ssl_object")
        if ssl_object is None:
            raise AuthenticationFailed("an SSL listener's connection without TLS", "ssl_handshake")
        try:
            principal = security.mapper.principal(ssl_object.getpeercert())
        except NoMatchingRule as exc:
            raise AuthenticationFailed(str(exc), "principal") from None
    if security.sasl:
        exchange = _SaslExchange(reader, writer, security, credentials, api_versions, unsupported)
        principal = await exchange.run()
    return principal


class _SaslExchange:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        security: ListenerSecurity,
        credentials: CredentialLookup | None,
        api_versions: Callable[[RequestHeader], bytes],
        unsupported: Callable[[UnsupportedVersionError], bytes],
    ) -> None:
        self.reader, self.writer, self.security = reader, writer, security
        self.credentials = credentials
        self.api_versions, self.unsupported = api_versions, unsupported

    async def run(self) -> str:
        mechanism, version = await self._handshake()
        if version == 0:
            return await self._raw_tokens(mechanism)
        return await self._authenticate_requests(mechanism)

    async def _frame(self) -> bytes:
        try:
            return await read_frame(self.reader, self.security.max_receive_size)
        except (StreamEnded, TruncatedFrame) as exc:
            raise AuthenticationFailed(f"closed before authenticating ({exc})", "closed") from None
        except FrameTooLarge as exc:
            raise AuthenticationFailed(f"{exc} (sasl.server.max.receive.size)", "too_large") from None

    async def _write(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def _request(self) -> tuple[RequestHeader, bytes, int] | None:
        """The next request; ApiVersions (and unsupported versions) are answered here (None)."""
        frame = await self._frame()
        try:
            header, offset = decode_request_header(frame, self.security.max_receive_size)
        except UnsupportedVersionError as exc:
            await self._write(self.unsupported(exc))
            return None
        except ProtocolError as exc:
            raise AuthenticationFailed(
                f"not a Kafka request before authenticating: {exc}", "malformed"
            ) from None
        if header.api_key == ApiKey.API_VERSIONS:
            await self._write(self.api_versions(header))
            return None
        return header, frame, offset

    def _body(self, header: RequestHeader, frame: bytes, offset: int) -> dict[str, Any]:
        try:
            body: dict[str, Any] = message_codec(header.api_key, header.api_version, "request").decode(
                frame, offset
            )
        except ProtocolError as exc:
            raise AuthenticationFailed(
                f"malformed {ApiKey(header.api_key).name}: {exc}", "malformed"
            ) from None
        return body

    async def _handshake(self) -> tuple[str, int]:
        while (request := await self._request()) is None:
            pass
        header, frame, offset = request
        if header.api_key != ApiKey.SASL_HANDSHAKE:
            raise AuthenticationFailed(
                f"{_api_name(header.api_key)} before SASL authentication (illegal SASL state)",
                "illegal_state",
            )
        mechanism = str(self._body(header, frame, offset)["mechanism"]).upper()
        offered = list(self.security.mechanisms)
        code = ErrorCode.NONE if mechanism in offered else ErrorCode.UNSUPPORTED_SASL_MECHANISM
        body = {"error_code": code, "mechanisms": offered}
        await self._write(encode_response(header.api_key, header.api_version, header.correlation_id, body))
        if code != ErrorCode.NONE:
            raise AuthenticationFailed(
                f"SASL mechanism {mechanism} is not enabled (sasl.enabled.mechanisms={offered})", "mechanism"
            )
        return mechanism, header.api_version

    async def _raw_tokens(self, mechanism: str) -> str:
        """After SaslHandshake v0: tokens are bare frames, and a failure simply closes."""
        server = _ServerSide(mechanism, self.security, self.credentials)
        while not server.complete:
            frame = await self._frame()
            try:
                challenge = await server.step(frame[PREFIX_BYTES:])
            except SaslAuthenticationFailed as exc:
                await asyncio.sleep(self.security.failed_auth_delay_s)
                raise AuthenticationFailed(f"SASL {mechanism} authentication failed: {exc}", "sasl") from None
            await self._write(_INT32.pack(len(challenge)) + challenge)
        return server.principal

    async def _authenticate_requests(self, mechanism: str) -> str:
        """After SaslHandshake v1: tokens travel in SaslAuthenticate requests (KIP-152)."""
        server = _ServerSide(mechanism, self.security, self.credentials)
        while not server.complete:
            while (request := await self._request()) is None:
                pass
            header, frame, offset = request
            key, version, correlation_id = header.api_key, header.api_version, header.correlation_id
            if key != ApiKey.SASL_AUTHENTICATE:
                await self._write(encode_response(key, version, correlation_id, _illegal_state(key, version)))
                raise AuthenticationFailed(
                    f"{_api_name(key)} during SASL authentication (illegal SASL state)", "illegal_state"
                )
            token = self._body(header, frame, offset)["auth_bytes"]
            try:
                challenge = await server.step(bytes(token))
            except SaslAuthenticationFailed as exc:
                failed = _authenticate_response(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc), b"")
                await self._write(encode_response(key, version, correlation_id, failed))
                await asyncio.sleep(self.security.failed_auth_delay_s)
                raise AuthenticationFailed(f"SASL {mechanism} authentication failed: {exc}", "sasl") from None
            ok = _authenticate_response(ErrorCode.NONE, None, challenge)
            await self._write(encode_response(key, version, correlation_id, ok))
        return server.principal


def _authenticate_response(code: ErrorCode, message: str | None, token: bytes) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "auth_bytes": token, "session_lifetime_ms": 0}


def _illegal_state(api_key: int, version: int) -> dict[str, Any]:
    try:
        return error_response_body(api_key, version, ErrorCode.ILLEGAL_SASL_STATE)
    except (KeyError, ValueError):
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE}


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"API key {api_key}"


class _ServerSide:
    """One mechanism's server, stepped token by token; SCRAM looks its credential up in between."""

    def __init__(
        self, mechanism: str, security: ListenerSecurity, credentials: CredentialLookup | None
    ) -> None:
        self.mechanism = mechanism
        self.credentials = credentials
        self.complete = False
        self.principal = ANONYMOUS
        self._plain = PlainServer(security.plain_users) if mechanism == "PLAIN" else None
        self._scram = ScramServer(mechanism) if mechanism.startswith("SCRAM-") else None
        self._round = 0

    async def step(self, token: bytes) -> bytes:
        self._round += 1
        if self._plain is not None:
            return self._done(b"", self._plain.authenticate(token))
        assert self._scram is not None
        if self._round == 1:
            name = self._scram.receive_client_first(token)
            found = await self.credentials(name, self.mechanism) if self.credentials is not None else None
            return self._scram.server_first(found)
        reply = self._scram.receive_client_final(token)
        return self._done(reply, self._scram.principal)

    def _done(self, reply: bytes, name: str | None) -> bytes:
        self.complete = True
        self.principal = user(name or "")
        return reply
