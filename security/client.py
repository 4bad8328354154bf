"""The connecting side: TLS and the SASL exchange a node runs when it dials another node.

The SASL exchange is a generator of requests (SaslHandshake v1, then SaslAuthenticate v1) fed with
their response bodies, so that the asyncio connections of the controller and the brokers and the
blocking connections of the replica fetchers drive the same conversation.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from protocol import ApiKey, ErrorCode
from security.config import ClientSecurity
from security.sasl import PlainClient, SaslAuthenticationFailed, ScramClient

__all__ = ["AuthenticationError", "sasl_conversation"]

HANDSHAKE_VERSION = 1
AUTHENTICATE_VERSION = 1

Request = tuple[int, int, dict[str, Any]]
Conversation = Generator[Request, dict[str, Any], None]


class AuthenticationError(ConnectionError):
    """The server refused our credentials or mechanism; retrying soon will not change that."""


def _checked(response: dict[str, Any], what: str) -> dict[str, Any]:
    code = response.get("error_code", 0)
    if code:
        message = response.get("error_message") or ""
        mechanisms = response.get("mechanisms")
        extra = f" (enabled: {mechanisms})" if mechanisms else ""
        raise AuthenticationError(f"{what}: {ErrorCode(code).name}{': ' + message if message else ''}{extra}")
    return response


def sasl_conversation(security: ClientSecurity) -> Conversation:
    """Yields (api key, version, body); send each and pass its response body back in."""
    mechanism = security.mechanism or ""
    handshake = yield (ApiKey.SASL_HANDSHAKE, HANDSHAKE_VERSION, {"mechanism": mechanism})
    _checked(handshake, f"SaslHandshake {mechanism}")

    def token(data: bytes) -> Request:
        return (ApiKey.SASL_AUTHENTICATE, AUTHENTICATE_VERSION, {"auth_bytes": data})

    what = f"SASL {mechanism} as {security.username}"
    if mechanism == "PLAIN":
        _checked((yield token(PlainClient(security.username, security.password).initial())), what)
        return
    scram = ScramClient(mechanism, security.username, security.password)
    first = _checked((yield token(scram.client_first())), what)
    final = _checked((yield token(scram.client_final(bytes(first["auth_bytes"])))), what)
    try:
        scram.verify_server_final(bytes(final["auth_bytes"]))
    except SaslAuthenticationFailed as exc:
        raise AuthenticationError(f"{what}: {exc}") from None
