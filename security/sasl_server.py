"""The server side of Kafka's SASL exchange, sans-IO: request frames in, frames to send out, and at
the end a principal or a failure.

Kafka's rules (§4.3 of the reference): until a client has authenticated only ApiVersions and
SaslHandshake are answered. A SaslHandshake v0 is followed by bare size-prefixed tokens, v1 by
SaslAuthenticate requests (KIP-152). Any other request, a mechanism not offered or a failed exchange
ends the connection; a failed exchange after ``connection.failed.authentication.delay.ms``, which
the caller waits. There is no re-authentication (KIP-368): answers carry a session lifetime of 0.

A listener's socket loop (``network/handshake.py``) feeds each frame read to :meth:`receive` and acts
on the step it gets back::

    step = conversation.receive(frame)
    while isinstance(step, LookUpCredential):       # SCRAM: the stored credential, from ZooKeeper
        step = conversation.credential(await lookup(step.user, step.mechanism))
    write(step.data)                                 # Send, Authenticated and Failed all carry frames
    Authenticated -> step.principal; Failed -> wait step.delay_s, close; Send -> read the next frame
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol import (
    ApiKey,
    ErrorCode,
    ProtocolError,
    RequestHeader,
    UnsupportedVersionError,
    decode_request_header,
    encode_response,
    error_response_body,
    message_codec,
)
from security.config import ListenerSecurity
from security.principal import user
from security.sasl import PlainServer, SaslAuthenticationFailed, ScramCredential, ScramServer

__all__ = [
    "Authenticated",
    "Failed",
    "LookUpCredential",
    "SaslServerConversation",
    "SaslStateError",
    "Send",
    "Step",
]

_INT32 = struct.Struct(">i")
_PREFIX_BYTES = 4


@dataclass(frozen=True, slots=True)
class Send:
    """Write ``data`` (answer frames), then feed the next frame read."""

    data: bytes


@dataclass(frozen=True, slots=True)
class LookUpCredential:
    """SCRAM: find ``user``'s stored credential for ``mechanism`` and pass it (or None) to
    :meth:`SaslServerConversation.credential`. Nothing is to be written yet."""

    user: str
    mechanism: str


@dataclass(frozen=True, slots=True)
class Authenticated:
    """The exchange succeeded: write ``data`` (the last answer); requests now come from ``principal``."""

    principal: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Failed:
    """The exchange failed: write ``data`` (if any), wait ``delay_s``, close. ``reason`` says why;
    ``kind`` names it for metrics (``authentication_<kind>``)."""

    reason: str
    kind: str
    data: bytes = b""
    delay_s: float = 0.0


Step = Send | LookUpCredential | Authenticated | Failed


class SaslStateError(RuntimeError):
    """The caller fed the conversation something it cannot take now (a frame after the end, a
    credential nobody asked for): a bug in the socket loop, not the peer's fault."""


class _State(enum.Enum):
    HANDSHAKE = "expecting SaslHandshake"
    RAW_TOKENS = "expecting a bare token (SaslHandshake v0)"
    AUTHENTICATE = "expecting SaslAuthenticate"
    LOOKUP = "expecting the SCRAM credential"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"API key {api_key}"


def _authenticate_response(code: ErrorCode, message: str | None, token: bytes) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "auth_bytes": token, "session_lifetime_ms": 0}


def _illegal_state(api_key: int, version: int) -> dict[str, Any]:
    try:
        return error_response_body(api_key, version, ErrorCode.ILLEGAL_SASL_STATE)
    except (KeyError, ValueError):
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE}


class SaslServerConversation:
    """One connection's SASL exchange on a listener with ``security`` (its mechanisms, PLAIN users,
    ``sasl.server.max.receive.size`` and failed-authentication delay).

    ``api_versions`` answers ApiVersions before authentication (None: the connection is closed, as
    on the controller's listener); ``unsupported`` answers an API version the codec lacks.
    """

    def __init__(
        self,
        security: ListenerSecurity,
        *,
        api_versions: Callable[[RequestHeader], bytes] | None,
        unsupported: Callable[[UnsupportedVersionError], bytes],
    ) -> None:
        self.security = security
        self._api_versions = api_versions
        self._unsupported = unsupported
        self._state = _State.HANDSHAKE
        self._tokens = _State.AUTHENTICATE
        """Where tokens come from after the handshake: RAW_TOKENS (v0) or AUTHENTICATE (v1)."""
        self.mechanism = ""
        self._plain: PlainServer | None = None
        self._scram: ScramServer | None = None
        self._tokens_received = 0
        self._answering: RequestHeader | None = None
        """The SaslAuthenticate being answered (None for a bare v0 token)."""

    @property
    def max_frame_size(self) -> int:
        """``sasl.server.max.receive.size``: no frame read before authentication may be larger."""
        return self.security.max_receive_size

    # -- input

    def receive(self, frame: bytes) -> Step:
        """The step after one frame read (size prefix included)."""
        if self._state is _State.HANDSHAKE:
            return self._handshake(frame)
        if self._state is _State.RAW_TOKENS:
            self._answering = None
            return self._token(frame[_PREFIX_BYTES:])
        if self._state is _State.AUTHENTICATE:
            return self._authenticate(frame)
        raise SaslStateError(f"a frame while the SASL exchange is {self._state.value}")

    def credential(self, found: ScramCredential | None) -> Step:
        """The step after the credential :class:`LookUpCredential` asked for (None: no such user)."""
        if self._state is not _State.LOOKUP or self._scram is None:
            raise SaslStateError(f"a credential while the SASL exchange is {self._state.value}")
        try:
            challenge = self._scram.server_first(found)
        except SaslAuthenticationFailed as exc:
            return self._refused(exc)
        self._state = self._tokens
        return self._challenge(challenge, None)

    # -- requests

    def _request(self, frame: bytes) -> tuple[RequestHeader, int] | Step:
        """The next request's header and body offset; ApiVersions and versions the codec lacks are
        answered here (a Step)."""
        try:
            header, offset = decode_request_header(frame, self.max_frame_size)
        except UnsupportedVersionError as exc:
            return Send(self._unsupported(exc))
        except ProtocolError as exc:
            return self._fail(f"not a Kafka request before authenticating: {exc}", "malformed")
        if header.api_key == ApiKey.API_VERSIONS:
            if self._api_versions is None:
                return self._fail("ApiVersions is not answered before authentication here", "illegal_state")
            return Send(self._api_versions(header))
        return header, offset

    def _body(self, header: RequestHeader, frame: bytes, offset: int) -> dict[str, Any] | Failed:
        try:
            body: dict[str, Any] = message_codec(header.api_key, header.api_version, "request").decode(
                frame, offset
            )
        except ProtocolError as exc:
            return self._fail(f"malformed {_api_name(header.api_key)}: {exc}", "malformed")
        return body

    def _handshake(self, frame: bytes) -> Step:
        request = self._request(frame)
        if not isinstance(request, tuple):
            return request
        header, offset = request
        if header.api_key != ApiKey.SASL_HANDSHAKE:
            reason = f"{_api_name(header.api_key)} before SASL authentication (illegal SASL state)"
            return self._fail(reason, "illegal_state")
        body = self._body(header, frame, offset)
        if isinstance(body, Failed):
            return body
        mechanism = str(body["mechanism"]).upper()
        offered = list(self.security.mechanisms)
        code = ErrorCode.NONE if mechanism in offered else ErrorCode.UNSUPPORTED_SASL_MECHANISM
        answer = self._encode(header, {"error_code": code, "mechanisms": offered})
        if code != ErrorCode.NONE:
            reason = f"SASL mechanism {mechanism} is not enabled (sasl.enabled.mechanisms={offered})"
            return self._fail(reason, "mechanism", answer)
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self._plain = PlainServer(self.security.plain_users)
        else:
            self._scram = ScramServer(mechanism)
        self._tokens = _State.RAW_TOKENS if header.api_version == 0 else _State.AUTHENTICATE
        self._state = self._tokens
        return Send(answer)

    def _authenticate(self, frame: bytes) -> Step:
        request = self._request(frame)
        if not isinstance(request, tuple):
            return request
        header, offset = request
        key, version = header.api_key, header.api_version
        if key != ApiKey.SASL_AUTHENTICATE:
            answer = self._encode(header, _illegal_state(key, version))
            reason = f"{_api_name(key)} during SASL authentication (illegal SASL state)"
            return self._fail(reason, "illegal_state", answer)
        body = self._body(header, frame, offset)
        if isinstance(body, Failed):
            return body
        self._answering = header
        return self._token(bytes(body["auth_bytes"]))

    # -- tokens

    def _token(self, token: bytes) -> Step:
        """One token of the mechanism's exchange."""
        self._tokens_received += 1
        try:
            if self._plain is not None:
                return self._done(b"", self._plain.authenticate(token))
            assert self._scram is not None
            if self._tokens_received > 1:  # SCRAM's client-final message
                return self._done(self._scram.receive_client_final(token), self._scram.principal)
            name = self._scram.receive_client_first(token)
        except SaslAuthenticationFailed as exc:
            return self._refused(exc)
        self._state = _State.LOOKUP
        return LookUpCredential(name, self.mechanism)

    def _challenge(self, challenge: bytes, principal: str | None) -> Step:
        """The answer carrying ``challenge``: a SaslAuthenticate response, or a bare v0 frame."""
        header = self._answering
        if header is None:
            data = _INT32.pack(len(challenge)) + challenge
        else:
            data = self._encode(header, _authenticate_response(ErrorCode.NONE, None, challenge))
        if principal is None:
            return Send(data)
        self._state = _State.AUTHENTICATED
        return Authenticated(principal, data)

    def _done(self, reply: bytes, name: str | None) -> Step:
        return self._challenge(reply, user(name or ""))

    def _refused(self, exc: SaslAuthenticationFailed) -> Failed:
        """A failed mechanism step: SASL_AUTHENTICATION_FAILED in-band (v1), after the delay."""
        header = self._answering
        data = b""
        if header is not None:
            failed = _authenticate_response(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc), b"")
            data = self._encode(header, failed)
        reason = f"SASL {self.mechanism} authentication failed: {exc}"
        return self._fail(reason, "sasl", data, self.security.failed_auth_delay_s)

    def _fail(self, reason: str, kind: str, data: bytes = b"", delay_s: float = 0.0) -> Failed:
        self._state = _State.FAILED
        return Failed(reason, kind, data, delay_s)

    @staticmethod
    def _encode(header: RequestHeader, body: dict[str, Any]) -> bytes:
        return encode_response(header.api_key, header.api_version, header.correlation_id, body)
