"""SASL mechanisms: RFC 7677's published SCRAM-SHA-256 exchange, our client against our server, and
every refusal a listener must make (wrong password, unknown user, tampered nonce, weak credential,
someone else's authorization id, malformed tokens)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from security.sasl import (
    SCRAM_MECHANISMS,
    SUPPORTED_MECHANISMS,
    PlainClient,
    PlainServer,
    SaslAuthenticationFailed,
    ScramClient,
    ScramCredential,
    ScramServer,
    check_iterations,
    derive_credential,
)

# RFC 7677 section 3: user "user", password "pencil", 4096 iterations.
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

usernames = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1)
"""Any user name SCRAM can carry: commas and equals signs included (escaped as =2C and =3D)."""


def exchange(
    mechanism: str, client: ScramClient, credential: ScramCredential | None
) -> tuple[ScramServer, bytes]:
    """Run a whole exchange; returns the server and its server-final message."""
    server = ScramServer(mechanism)
    assert server.receive_client_first(client.client_first()) == client.username
    final = client.client_final(server.server_first(credential))
    return server, server.receive_client_final(final)


def test_rfc7677_vector_from_the_server_side() -> None:
    credential = derive_credential("SCRAM-SHA-256", "pencil", 4096, RFC_SALT)
    server = ScramServer("SCRAM-SHA-256", nonce=RFC_SERVER_NONCE)
    assert server.receive_client_first(RFC_CLIENT_FIRST) == "user"
    assert server.server_first(credential) == RFC_SERVER_FIRST
    assert server.receive_client_final(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.principal == "user"


def test_rfc7677_vector_from_the_client_side() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.client_first() == RFC_CLIENT_FIRST
    assert client.client_final(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.verify_server_final(RFC_SERVER_FINAL)


@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
def test_client_and_server_agree(mechanism: str) -> None:
    credential = derive_credential(mechanism, "alice-secret", 4096)
    client = ScramClient(mechanism, "alice", "alice-secret")
    server, server_final = exchange(mechanism, client, credential)
    client.verify_server_final(server_final)
    assert server.principal == "alice"


@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
def test_wrong_password_is_refused(mechanism: str) -> None:
    credential = derive_credential(mechanism, "alice-secret")
    with pytest.raises(SaslAuthenticationFailed, match="invalid credentials"):
        exchange(mechanism, ScramClient(mechanism, "alice", "guess"), credential)


def test_unknown_user_looks_like_a_known_one_until_the_end() -> None:
    client = ScramClient("SCRAM-SHA-256", "mallory", "anything")
    server = ScramServer("SCRAM-SHA-256")
    server.receive_client_first(client.client_first())
    server_first = server.server_first(None)
    assert server_first.split(b",")[2] == b"i=4096"
    again = ScramServer("SCRAM-SHA-256")
    again.receive_client_first(ScramClient("SCRAM-SHA-256", "mallory", "x").client_first())
    assert again.server_first(None).split(b",")[1] == server_first.split(b",")[1]  # same salt each time
    with pytest.raises(SaslAuthenticationFailed, match="invalid credentials"):
        server.receive_client_final(client.client_final(server_first))
    assert server.principal is None and not server.complete


def test_tampered_server_nonce_is_refused() -> None:
    credential = derive_credential("SCRAM-SHA-256", "pw")
    client = ScramClient("SCRAM-SHA-256", "alice", "pw")
    server = ScramServer("SCRAM-SHA-256")
    server.receive_client_first(client.client_first())
    server_first = server.server_first(credential)
    final = client.client_final(server_first).decode()
    nonce = final.split(",")[1]
    tampered = final.replace(nonce, nonce[:-1] + ("A" if nonce[-1] != "A" else "B")).encode()
    with pytest.raises(SaslAuthenticationFailed, match="nonce"):
        server.receive_client_final(tampered)


def test_final_nonce_is_only_checked_to_end_with_the_servers() -> None:
    """Kafka's rule: a prefix before the nonce passes that check (the proof still covers it)."""
    credential = derive_credential("SCRAM-SHA-256", "pw")
    client = ScramClient("SCRAM-SHA-256", "alice", "pw")
    server = ScramServer("SCRAM-SHA-256")
    server.receive_client_first(client.client_first())
    server_first = server.server_first(credential)
    final = client.client_final(server_first).decode()
    bad_proof = final.replace(",r=", ",r=x", 1).encode()
    with pytest.raises(SaslAuthenticationFailed, match="invalid credentials"):  # past the nonce check
        server.receive_client_final(bad_proof)


def test_credential_with_too_few_iterations_is_refused() -> None:
    weak = derive_credential("SCRAM-SHA-512", "pw", iterations=4095)
    server = ScramServer("SCRAM-SHA-512")
    server.receive_client_first(ScramClient("SCRAM-SHA-512", "alice", "pw").client_first())
    with pytest.raises(SaslAuthenticationFailed, match="4095 iterations"):
        server.server_first(weak)


def test_client_refuses_a_server_asking_for_too_few_iterations() -> None:
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", nonce="abc")
    with pytest.raises(SaslAuthenticationFailed, match="iterations"):
        client.client_final(b"r=abcdef,s=c2FsdA==,i=1000")


def test_authzid_must_be_the_user() -> None:
    server = ScramServer("SCRAM-SHA-256")
    with pytest.raises(SaslAuthenticationFailed, match="authorization id"):
        server.receive_client_first(b"n,a=admin,n=alice,r=abc")
    same = ScramServer("SCRAM-SHA-256")
    assert same.receive_client_first(b"n,a=alice,n=alice,r=abc") == "alice"


@pytest.mark.parametrize(
    ("message", "complaint"),
    [
        (b"y,,n=alice,r=abc", "channel binding"),
        (b"p=tls-unique,,n=alice,r=abc", "channel binding"),
        (b"n,,n=al=2Xce,r=abc", "escape"),
        (b"n,,n=,r=abc", "empty"),
        (b"n,,n=alice", "n= and r="),
        (b"n,,n=alice,r=a b", "nonce"),
        (b"n,,m=x,n=alice,r=abc", "mandatory"),
        (b"n,,n=alice,r=abc,tokenauth=true", "delegation"),
        (b"\xff", "UTF-8"),
    ],
)
def test_malformed_client_first_is_refused(message: bytes, complaint: str) -> None:
    server = ScramServer("SCRAM-SHA-256")
    with pytest.raises(SaslAuthenticationFailed, match=complaint):
        server.receive_client_first(message)
    with pytest.raises(SaslAuthenticationFailed):  # spent after a failure
        server.server_first(None)


def test_steps_out_of_order_are_refused() -> None:
    server = ScramServer("SCRAM-SHA-256")
    with pytest.raises(SaslAuthenticationFailed, match="unexpected"):
        server.receive_client_final(b"c=biws,r=abc,p=AAAA")


def test_server_signature_from_an_impostor_is_refused() -> None:
    client = ScramClient("SCRAM-SHA-256", "alice", "pw")
    server = ScramServer("SCRAM-SHA-256")
    server.receive_client_first(client.client_first())
    client.client_final(server.server_first(derive_credential("SCRAM-SHA-256", "pw")))
    with pytest.raises(SaslAuthenticationFailed, match="signature"):
        client.verify_server_final(b"v=" + base64.b64encode(b"\x00" * 32))
    with pytest.raises(SaslAuthenticationFailed, match="refused: other-error"):
        client.verify_server_final(b"e=other-error")


@given(username=usernames, password=st.text(max_size=20))
def test_any_user_name_survives_the_escapes(username: str, password: str) -> None:
    credential = derive_credential("SCRAM-SHA-256", password, 4096, salt=b"fixed-salt")
    client = ScramClient("SCRAM-SHA-256", username, password)
    server, server_final = exchange("SCRAM-SHA-256", client, credential)
    client.verify_server_final(server_final)
    assert server.principal == username


def test_escapes_on_the_wire() -> None:
    assert ScramClient("SCRAM-SHA-256", "a,b=c", "pw", nonce="n").client_first() == b"n,,n=a=2Cb=3Dc,r=n"


# ----------------------------------------------------------------------------------------------------
# credentials


def test_credential_string_round_trip() -> None:
    credential = derive_credential("SCRAM-SHA-512", "alice-secret", 8192)
    text = str(credential)
    assert text.startswith("salt=") and text.endswith(",iterations=8192")
    assert ScramCredential.from_string(text) == credential


def test_credential_keys_match_the_rfc_vector() -> None:
    credential = derive_credential("SCRAM-SHA-256", "pencil", 4096, RFC_SALT)
    text = str(credential)
    assert ScramCredential.from_string(text).salt == RFC_SALT


def test_generated_salt_is_base36_text() -> None:
    salt = derive_credential("SCRAM-SHA-256", "pw").salt.decode()
    assert salt.isalnum() and salt == salt.lower() and 20 <= len(salt) <= 26


@pytest.mark.parametrize(
    "text",
    [
        "",
        "salt=AAAA,stored_key=AAAA,server_key=AAAA",
        "salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=x",
        "salt=!!,stored_key=AAAA,server_key=AAAA,iterations=4096",
        "salt=AAAA,salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=4096",
        "salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=4096,extra=1",
    ],
)
def test_malformed_credential_strings_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        ScramCredential.from_string(text)


def test_iteration_policy() -> None:
    check_iterations("SCRAM-SHA-256", 4096)
    check_iterations("SCRAM-SHA-512", 16384)
    for bad in (4095, 16385):
        with pytest.raises(ValueError, match="between 4096 and 16384"):
            check_iterations("SCRAM-SHA-256", bad)
    with pytest.raises(ValueError, match="unknown SCRAM mechanism"):
        check_iterations("SCRAM-SHA-1", 4096)


def test_supported_mechanisms() -> None:
    assert SUPPORTED_MECHANISMS == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


# ----------------------------------------------------------------------------------------------------
# PLAIN


def test_plain_good_password() -> None:
    server = PlainServer({"alice": "alice-secret"})
    assert server.authenticate(PlainClient("alice", "alice-secret").initial()) == "alice"
    assert server.complete and server.principal == "alice"


@pytest.mark.parametrize(
    ("message", "complaint"),
    [
        (b"\x00alice\x00guess", "invalid user name or password"),
        (b"\x00bob\x00alice-secret", "invalid user name or password"),
        (b"\x00\x00alice-secret", "no user name"),
        (b"\x00alice\x00", "no password"),
        (b"alice\x00alice-secret", "authzid NUL user NUL password"),
        (b"admin\x00alice\x00alice-secret", "authorization id"),
        (b"\xff\x00alice\x00x", "UTF-8"),
    ],
)
def test_plain_refusals(message: bytes, complaint: str) -> None:
    server = PlainServer({"alice": "alice-secret"})
    with pytest.raises(SaslAuthenticationFailed, match=complaint):
        server.authenticate(message)
    assert server.principal is None


def test_plain_authzid_equal_to_the_user_is_accepted() -> None:
    assert PlainServer({"alice": "pw"}).authenticate(b"alice\x00alice\x00pw") == "alice"
