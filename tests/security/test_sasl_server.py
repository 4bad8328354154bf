"""The server side of Kafka's SASL exchange without sockets: frames fed in, frames and verdicts out.

Every step and every refusal a listener makes: PLAIN and SCRAM-SHA-256/512 over SaslAuthenticate
(v1) and over bare tokens (v0), unknown mechanisms, bad credentials, requests out of order or other
than SASL, versions the codec lacks, malformed frames and tokens, and no re-authentication.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest

from protocol import (
    ApiKey,
    ErrorCode,
    RequestHeader,
    UnsupportedVersionError,
    decode_response,
    encode_request,
    encode_response,
)
from security.client import sasl_conversation
from security.config import ClientSecurity, ListenerSecurity
from security.sasl import SCRAM_MECHANISMS, PlainClient, ScramClient, ScramCredential, derive_credential
from security.sasl_server import (
    Authenticated,
    Failed,
    LookUpCredential,
    SaslServerConversation,
    SaslStateError,
    Send,
    Step,
)
from tests.support.raw_client import raw_frame

DELAY_S = 0.25
USERS = {"alice": "alice-secret"}
SECURITY = ListenerSecurity(
    listener="SASL",
    protocol="SASL_PLAINTEXT",
    mechanisms=("PLAIN", *SCRAM_MECHANISMS),
    plain_users=USERS,
    max_receive_size=4096,
    failed_auth_delay_s=DELAY_S,
)
API_VERSIONS_ANSWER = b"api-versions"
UNSUPPORTED_ANSWER = b"unsupported"
HANDSHAKE, AUTHENTICATE = ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE


def api_versions(header: RequestHeader) -> bytes:
    return API_VERSIONS_ANSWER + struct.pack(">i", header.correlation_id)


def unsupported(exc: UnsupportedVersionError) -> bytes:
    return UNSUPPORTED_ANSWER + struct.pack(">hi", exc.api_key, exc.correlation_id)


def conversation(*, answer_api_versions: bool = True) -> SaslServerConversation:
    return SaslServerConversation(
        SECURITY, api_versions=api_versions if answer_api_versions else None, unsupported=unsupported
    )


def credential_of(mechanism: str, password: str = USERS["alice"]) -> ScramCredential:
    return derive_credential(mechanism, password)


def handshake(mechanism: str, version: int = 1, correlation_id: int = 1) -> bytes:
    return encode_request(HANDSHAKE, version, correlation_id, "test", {"mechanism": mechanism})


def authenticate(token: bytes, correlation_id: int = 2, version: int = 1) -> bytes:
    return encode_request(AUTHENTICATE, version, correlation_id, "test", {"auth_bytes": token})


def answer(api_key: int, version: int, step: Step) -> dict[str, Any]:
    """The one response frame ``step`` carries, decoded."""
    assert isinstance(step, Send | Authenticated | Failed)
    _, body = decode_response(api_key, version, step.data)
    return body


def started(mechanism: str, version: int = 1) -> SaslServerConversation:
    """A conversation past a successful SaslHandshake for ``mechanism``."""
    server = conversation()
    step = server.receive(handshake(mechanism, version))
    assert isinstance(step, Send)
    assert answer(HANDSHAKE, version, step) == {
        "error_code": ErrorCode.NONE,
        "mechanisms": list(SECURITY.mechanisms),
    }
    return server


def scram_first_steps(
    server: SaslServerConversation, client: ScramClient, found: ScramCredential | None
) -> bytes:
    """client-first -> the credential look-up -> server-first; returns the server-first message."""
    step = server.receive(authenticate(client.client_first()))
    assert step == LookUpCredential("alice", client.mechanism)
    step = server.credential(found)
    assert isinstance(step, Send)
    body = answer(AUTHENTICATE, 1, step)
    assert body["error_code"] == ErrorCode.NONE
    return bytes(body["auth_bytes"])


# ---------------------------------------------------------------- successful exchanges


def test_plain_over_sasl_authenticate() -> None:
    server = started("PLAIN")
    step = server.receive(authenticate(PlainClient("alice", "alice-secret").initial()))
    assert isinstance(step, Authenticated)
    assert step.principal == "User:alice"
    assert answer(AUTHENTICATE, 1, step) == {
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "auth_bytes": b"",
        "session_lifetime_ms": 0,
    }


@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
def test_scram_over_sasl_authenticate_looks_the_credential_up_between_the_first_two_messages(
    mechanism: str,
) -> None:
    server = started(mechanism)
    client = ScramClient(mechanism, "alice", "alice-secret")
    server_first = scram_first_steps(server, client, credential_of(mechanism))
    step = server.receive(authenticate(client.client_final(server_first), correlation_id=3))
    assert isinstance(step, Authenticated)
    assert step.principal == "User:alice"
    client.verify_server_final(bytes(answer(AUTHENTICATE, 1, step)["auth_bytes"]))


def test_the_mechanism_name_is_matched_without_regard_to_case() -> None:
    server = conversation()
    assert isinstance(server.receive(handshake("scram-sha-256")), Send)
    assert server.mechanism == "SCRAM-SHA-256"


@pytest.mark.parametrize("mechanism", ["PLAIN", *SCRAM_MECHANISMS])
def test_the_client_conversation_authenticates_against_the_server_conversation(mechanism: str) -> None:
    """Both sides sans-IO: the client's requests encoded and fed in, the server's frames decoded back."""
    client = sasl_conversation(ClientSecurity("SASL_PLAINTEXT", None, mechanism, "alice", "alice-secret"))
    server = conversation()
    api_key, version, body = next(client)
    correlation_id = 0
    while True:
        correlation_id += 1
        step = server.receive(encode_request(api_key, version, correlation_id, "client", body))
        while isinstance(step, LookUpCredential):
            step = server.credential(credential_of(step.mechanism) if step.user == "alice" else None)
        assert not isinstance(step, Failed), step.reason
        got, response = decode_response(api_key, version, step.data)
        assert got == correlation_id
        try:
            api_key, version, body = client.send(response)
        except StopIteration:
            break
    assert isinstance(step, Authenticated) and step.principal == "User:alice"


# ---------------------------------------------------------------- legacy v0: bare tokens


def test_plain_over_bare_tokens_after_a_v0_handshake() -> None:
    server = started("PLAIN", version=0)
    step = server.receive(raw_frame(PlainClient("alice", "alice-secret").initial()))
    assert step == Authenticated("User:alice", struct.pack(">i", 0))


@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
def test_scram_over_bare_tokens_after_a_v0_handshake(mechanism: str) -> None:
    server = started(mechanism, version=0)
    client = ScramClient(mechanism, "alice", "alice-secret")
    assert server.receive(raw_frame(client.client_first())) == LookUpCredential("alice", mechanism)
    step = server.credential(credential_of(mechanism))
    assert isinstance(step, Send)
    server_first = step.data[4:]
    assert struct.unpack(">i", step.data[:4]) == (len(server_first),)
    step = server.receive(raw_frame(client.client_final(server_first)))
    assert isinstance(step, Authenticated) and step.principal == "User:alice"
    client.verify_server_final(step.data[4:])


def test_a_bad_bare_token_fails_without_an_answer_after_the_delay() -> None:
    server = started("PLAIN", version=0)
    step = server.receive(raw_frame(PlainClient("alice", "wrong").initial()))
    assert isinstance(step, Failed)
    assert (step.kind, step.data, step.delay_s) == ("sasl", b"", DELAY_S)
    assert "invalid user name or password" in step.reason


# ---------------------------------------------------------------- refusals


def test_an_unknown_mechanism_is_answered_with_the_enabled_ones_and_fails() -> None:
    server = conversation()
    step = server.receive(handshake("GSSAPI"))
    assert isinstance(step, Failed)
    assert (step.kind, step.delay_s) == ("mechanism", 0.0)
    assert answer(HANDSHAKE, 1, step) == {
        "error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        "mechanisms": list(SECURITY.mechanisms),
    }
    assert "GSSAPI is not enabled" in step.reason


def test_a_wrong_plain_password_is_answered_in_band_and_fails_after_the_delay() -> None:
    server = started("PLAIN")
    step = server.receive(authenticate(PlainClient("alice", "wrong").initial()))
    assert isinstance(step, Failed)
    assert (step.kind, step.delay_s) == ("sasl", DELAY_S)
    body = answer(AUTHENTICATE, 1, step)
    assert body["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "invalid user name or password" in body["error_message"]


def test_an_unknown_plain_user_fails_as_a_wrong_password_does() -> None:
    server = started("PLAIN")
    step = server.receive(authenticate(PlainClient("mallory", "alice-secret").initial()))
    assert isinstance(step, Failed) and step.kind == "sasl"
    assert "invalid user name or password" in answer(AUTHENTICATE, 1, step)["error_message"]


@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
def test_a_wrong_scram_password_fails_at_the_client_final_message(mechanism: str) -> None:
    server = started(mechanism)
    client = ScramClient(mechanism, "alice", "wrong")
    server_first = scram_first_steps(server, client, credential_of(mechanism))
    step = server.receive(authenticate(client.client_final(server_first), correlation_id=3))
    assert isinstance(step, Failed)
    assert (step.kind, step.delay_s) == ("sasl", DELAY_S)
    body = answer(AUTHENTICATE, 1, step)
    assert body["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert body["error_message"] == f"{mechanism} authentication failed: invalid credentials"


@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
def test_an_unknown_scram_user_gets_a_plausible_challenge_and_fails_the_same_way(mechanism: str) -> None:
    server = started(mechanism)
    client = ScramClient(mechanism, "alice", "alice-secret")
    server_first = scram_first_steps(server, client, None)
    step = server.receive(authenticate(client.client_final(server_first), correlation_id=3))
    assert isinstance(step, Failed)
    assert (
        answer(AUTHENTICATE, 1, step)["error_message"]
        == f"{mechanism} authentication failed: invalid credentials"
    )


def test_a_stored_credential_with_too_few_iterations_is_refused_at_the_look_up() -> None:
    server = started("SCRAM-SHA-256")
    client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
    assert isinstance(server.receive(authenticate(client.client_first())), LookUpCredential)
    step = server.credential(derive_credential("SCRAM-SHA-256", "alice-secret", iterations=1000))
    assert isinstance(step, Failed) and step.kind == "sasl"
    assert "fewer than the minimum" in answer(AUTHENTICATE, 1, step)["error_message"]


@pytest.mark.parametrize(
    "token",
    [
        pytest.param(b"alice\x00alice-secret", id="plain-two-parts"),
        pytest.param(b"\xff\xfe", id="not-utf8"),
        pytest.param(b"\x00alice\x00", id="plain-no-password"),
    ],
)
def test_a_malformed_plain_token_fails(token: bytes) -> None:
    step = started("PLAIN").receive(authenticate(token))
    assert isinstance(step, Failed) and step.kind == "sasl"
    assert answer(AUTHENTICATE, 1, step)["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED


@pytest.mark.parametrize(
    "token",
    [
        pytest.param(b"garbage", id="no-gs2-header"),
        pytest.param(b"y,,n=alice,r=abc", id="channel-binding"),
        pytest.param(b"n,,n=alice", id="no-nonce"),
        pytest.param(b"n,,n=al=ZZice,r=abc", id="bad-escape"),
    ],
)
def test_a_malformed_scram_client_first_fails_before_any_look_up(token: bytes) -> None:
    step = started("SCRAM-SHA-512").receive(authenticate(token))
    assert isinstance(step, Failed) and step.kind == "sasl"
    assert answer(AUTHENTICATE, 1, step)["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_a_malformed_scram_client_final_fails() -> None:
    server = started("SCRAM-SHA-256")
    scram_first_steps(
        server, ScramClient("SCRAM-SHA-256", "alice", "alice-secret"), credential_of("SCRAM-SHA-256")
    )
    step = server.receive(authenticate(b"c=biws,r=not-our-nonce", correlation_id=3))
    assert isinstance(step, Failed) and step.kind == "sasl"


# ---------------------------------------------------------------- order and other requests


def test_a_request_other_than_sasl_before_the_handshake_closes_without_an_answer() -> None:
    metadata = encode_request(ApiKey.METADATA, 1, 7, "test", {"topics": None})
    step = conversation().receive(metadata)
    assert step == Failed("METADATA before SASL authentication (illegal SASL state)", "illegal_state")


def test_sasl_authenticate_before_the_handshake_is_out_of_order() -> None:
    step = conversation().receive(authenticate(b"\x00alice\x00alice-secret"))
    assert isinstance(step, Failed) and step.kind == "illegal_state" and step.data == b""


@pytest.mark.parametrize(
    ("frame", "api_key", "version"),
    [
        pytest.param(handshake("PLAIN", correlation_id=2), HANDSHAKE, 1, id="second-handshake"),
        pytest.param(
            encode_request(ApiKey.CONTROLLED_SHUTDOWN, 2, 2, "test", {"broker_id": 1, "broker_epoch": 5}),
            ApiKey.CONTROLLED_SHUTDOWN,
            2,
            id="controlled-shutdown",
        ),
    ],
)
def test_another_request_during_the_exchange_is_answered_illegal_sasl_state(
    frame: bytes, api_key: int, version: int
) -> None:
    step = started("PLAIN").receive(frame)
    assert isinstance(step, Failed) and step.kind == "illegal_state"
    assert answer(api_key, version, step)["error_code"] == ErrorCode.ILLEGAL_SASL_STATE


def test_api_versions_is_answered_before_and_during_the_exchange() -> None:
    server = conversation()
    probe = encode_request(ApiKey.API_VERSIONS, 0, 5, "test", {})
    assert server.receive(probe) == Send(api_versions(RequestHeader(ApiKey.API_VERSIONS, 0, 5, "test", 1)))
    assert isinstance(server.receive(handshake("PLAIN")), Send)
    step = server.receive(encode_request(ApiKey.API_VERSIONS, 0, 6, "test", {}))
    assert isinstance(step, Send) and step.data.startswith(API_VERSIONS_ANSWER)
    assert isinstance(
        server.receive(authenticate(PlainClient("alice", "alice-secret").initial())), Authenticated
    )


def test_api_versions_before_authentication_closes_where_it_is_not_answered() -> None:
    step = conversation(answer_api_versions=False).receive(
        encode_request(ApiKey.API_VERSIONS, 0, 5, "test", {})
    )
    assert isinstance(step, Failed) and step.kind == "illegal_state" and step.data == b""


@pytest.mark.parametrize(
    ("api_key", "version"),
    [pytest.param(HANDSHAKE, 9, id="handshake-v9"), pytest.param(AUTHENTICATE, 9, id="authenticate-v9")],
)
def test_a_version_the_codec_lacks_is_answered_and_the_exchange_goes_on(api_key: int, version: int) -> None:
    server = conversation() if api_key == HANDSHAKE else started("PLAIN")
    header = struct.pack(">hhih", api_key, version, 41, -1)
    step = server.receive(raw_frame(header + b"\x00" * 8))
    assert step == Send(UNSUPPORTED_ANSWER + struct.pack(">hi", api_key, 41))
    if api_key == HANDSHAKE:
        assert isinstance(server.receive(handshake("PLAIN")), Send)
    step = server.receive(authenticate(PlainClient("alice", "alice-secret").initial()))
    assert isinstance(step, Authenticated)


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(raw_frame(b"\x00"), id="truncated-header"),
        pytest.param(raw_frame(struct.pack(">hhih", 999, 0, 1, -1)), id="unknown-api-key"),
    ],
)
def test_a_frame_that_is_not_a_kafka_request_fails_as_malformed(frame: bytes) -> None:
    step = conversation().receive(frame)
    assert isinstance(step, Failed) and step.kind == "malformed" and step.data == b""


def test_a_malformed_handshake_body_fails_as_malformed() -> None:
    frame = raw_frame(struct.pack(">hhih", HANDSHAKE, 1, 1, -1) + struct.pack(">h", 40) + b"PL")
    step = conversation().receive(frame)
    assert isinstance(step, Failed) and step.kind == "malformed"
    assert step.reason.startswith("malformed SASL_HANDSHAKE")


def test_frames_larger_than_the_receive_size_are_the_socket_loops_to_refuse() -> None:
    assert conversation().max_frame_size == SECURITY.max_receive_size


# ---------------------------------------------------------------- the end of the exchange


def test_no_re_authentication_the_conversation_ends_with_the_principal() -> None:
    """No KIP-368 session lifetime is granted, and the spent conversation takes no further frame."""
    server = started("PLAIN")
    step = server.receive(authenticate(PlainClient("alice", "alice-secret").initial()))
    assert isinstance(step, Authenticated)
    assert answer(AUTHENTICATE, 1, step)["session_lifetime_ms"] == 0
    with pytest.raises(SaslStateError):
        server.receive(handshake("PLAIN", correlation_id=3))


def test_a_failed_conversation_takes_no_further_frame() -> None:
    server = started("PLAIN")
    assert isinstance(server.receive(authenticate(PlainClient("alice", "wrong").initial())), Failed)
    with pytest.raises(SaslStateError):
        server.receive(authenticate(PlainClient("alice", "alice-secret").initial()))


def test_a_credential_nobody_asked_for_is_a_caller_bug() -> None:
    with pytest.raises(SaslStateError):
        started("SCRAM-SHA-256").credential(credential_of("SCRAM-SHA-256"))


def test_the_conversation_encodes_nothing_itself_beyond_kafka_responses() -> None:
    """The answers are ordinary response frames: what the codec would encode for the same body."""
    server = conversation()
    step = server.receive(handshake("PLAIN", correlation_id=12))
    expected = encode_response(HANDSHAKE, 1, 12, {"error_code": 0, "mechanisms": list(SECURITY.mechanisms)})
    assert step == Send(expected)
