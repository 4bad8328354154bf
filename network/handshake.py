"""A connection's authentication on a served listener, before its first ordinary request.

The listener's transport has done the TLS handshake before the connection gets here (a TLS upgrade
after accepting would race with the client's first bytes); the certificate gives the principal. Then,
on SASL listeners, the exchange of ``security/sasl_server.py`` runs over the socket: this module only
reads its frames, writes what it answers, looks SCRAM credentials up and waits
``connection.failed.authentication.delay.ms`` after a failed exchange.

The result is the connection's principal, which every later request carries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from daemon.frames import StreamEnded, TruncatedFrame, read_frame
from protocol import FrameTooLarge, RequestHeader, UnsupportedVersionError
from security.config import ListenerSecurity
from security.principal import ANONYMOUS, NoMatchingRule
from security.sasl import ScramCredential
from security.sasl_server import Authenticated, Failed, LookUpCredential, SaslServerConversation

__all__ = ["HANDSHAKE_TIMEOUT_S", "AuthenticationFailed", "CredentialLookup", "authenticate"]

CredentialLookup = Callable[[str, str], Awaitable[ScramCredential | None]]
"""(user name, SCRAM mechanism) -> the stored credential, or None."""

HANDSHAKE_TIMEOUT_S = 30.0
"""How long a TLS listener waits for a client's handshake (a stalled one holds only its socket)."""


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
    api_versions: Callable[[RequestHeader], bytes] | None,
    unsupported: Callable[[UnsupportedVersionError], bytes],
    timeout_s: float | None = None,
) -> str:
    """The principal of this connection, or AuthenticationFailed (the caller closes it). A listener
    without ``security`` (None) is PLAINTEXT: ``User:ANONYMOUS``.

    ``api_versions`` answers ApiVersions before a SASL client has authenticated (None: the connection
    is closed instead). ``timeout_s`` (``connections.max.idle.ms``) bounds the whole exchange, so a
    peer that stalls while authenticating holds no more than its socket.
    """
    if security is None or security.plaintext:
        return ANONYMOUS
    try:
        async with asyncio.timeout(timeout_s):
            principal = _certificate_principal(writer, security)
            if not security.sasl:
                return principal
            conversation = SaslServerConversation(
                security, api_versions=api_versions, unsupported=unsupported
            )
            return await _converse(reader, writer, conversation, credentials)
    except TimeoutError:
        reason = f"did not authenticate within {timeout_s:g} s (connections.max.idle.ms)"
        raise AuthenticationFailed(reason, "idle") from None


def _certificate_principal(writer: asyncio.StreamWriter, security: ListenerSecurity) -> str:
    """The principal the peer's certificate maps to on a TLS listener; ANONYMOUS without TLS."""
    if security.tls is None:
        return ANONYMOUS
    ssl_object = writer.get_extra_info("ssl_object")
    if ssl_object is None:
        raise AuthenticationFailed("an SSL listener's connection without TLS", "ssl_handshake")
    try:
        return security.mapper.principal(ssl_object.getpeercert())
    except NoMatchingRule as exc:
        raise AuthenticationFailed(str(exc), "principal") from None


async def _converse(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    conversation: SaslServerConversation,
    credentials: CredentialLookup | None,
) -> str:
    """Run the SASL exchange over the socket: frames in, answers out, until a principal or a failure."""
    while True:
        step = conversation.receive(await _frame(reader, conversation.max_frame_size))
        while isinstance(step, LookUpCredential):
            found = await credentials(step.user, step.mechanism) if credentials is not None else None
            step = conversation.credential(found)
        if step.data:
            writer.write(step.data)
            await writer.drain()
        if isinstance(step, Authenticated):
            return step.principal
        if isinstance(step, Failed):
            if step.delay_s > 0:
                await asyncio.sleep(step.delay_s)
            raise AuthenticationFailed(step.reason, step.kind)


async def _frame(reader: asyncio.StreamReader, max_size: int) -> bytes:
    try:
        return await read_frame(reader, max_size)
    except (StreamEnded, TruncatedFrame) as exc:
        raise AuthenticationFailed(f"closed before authenticating ({exc})", "closed") from None
    except FrameTooLarge as exc:
        raise AuthenticationFailed(f"{exc} (sasl.server.max.receive.size)", "too_large") from None
