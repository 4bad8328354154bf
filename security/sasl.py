"""SASL mechanisms as sans-IO state machines: tokens in, tokens out, no sockets and no ZooKeeper.

A listener feeds the client's SaslAuthenticate (or raw v0) tokens to a server object and sends back
what it returns; a failure is :class:`SaslAuthenticationFailed`, whose message may go to the client.
SCRAM's server stops after the client-first message so the caller can look the user's credential up
(in ZooKeeper, asynchronously) before answering. The client classes are what our own daemons use to
log in to a SASL listener.

PLAIN follows RFC 4616 and SCRAM RFC 5802/7677, with Kafka's choices: passwords are used as UTF-8
without SASLprep, only the GS2 flag ``n`` (no channel binding), at least 4096 iterations, and the
client-final nonce is checked with "ends with".
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "DEFAULT_ITERATIONS",
    "MAX_ITERATIONS",
    "MIN_ITERATIONS",
    "SCRAM_MECHANISMS",
    "SUPPORTED_MECHANISMS",
    "PlainClient",
    "PlainServer",
    "SaslAuthenticationFailed",
    "ScramClient",
    "ScramCredential",
    "ScramMechanism",
    "ScramServer",
    "check_iterations",
    "derive_credential",
]

ScramMechanism = Literal["SCRAM-SHA-256", "SCRAM-SHA-512"]
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_MECHANISMS: tuple[ScramMechanism, ...] = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MIN_ITERATIONS = 4096
"""Below this a server refuses a stored credential and a client refuses a server-first message."""
MAX_ITERATIONS = 16384
"""Only tools that create credentials enforce this; a stored credential above it still works."""
DEFAULT_ITERATIONS = 4096

_HASHES: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
_RANDOM_BITS = 130


class SaslAuthenticationFailed(ValueError):
    """Authentication failed, or a peer's token is malformed; the message is fit to send to the client
    (SASL_AUTHENTICATION_FAILED). A ValueError, as what failed is always a token received."""


# ----------------------------------------------------------------------------------------------------
# Credentials


def _hash_name(mechanism: str) -> str:
    try:
        return _HASHES[mechanism]
    except KeyError:
        raise ValueError(
            f"unknown SCRAM mechanism {mechanism!r} (supported: {', '.join(SCRAM_MECHANISMS)})"
        ) from None


def _hmac(hash_name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hash_name).digest()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ValueError(f"{what} is not base64: {text[:40]!r}") from None


def _base36(value: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        value, digit = divmod(value, 36)
        out = digits[digit] + out
        if value == 0:
            return out


def _random_base36() -> str:
    """What Kafka uses for salts and nonces: a 130-bit random number written in base 36."""
    return _base36(secrets.randbits(_RANDOM_BITS))


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a server stores per user and mechanism: enough to check a proof, not to recover the
    password. ``str()`` is Kafka's form in ``/config/users/<user>``."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __str__(self) -> str:
        return (
            f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
            f"server_key={_b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def from_string(cls, text: str) -> ScramCredential:
        """Parse ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`` (any order);
        ValueError when a key is missing, repeated or unknown, or a value does not decode."""
        fields: dict[str, str] = {}
        for item in text.split(","):
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or key in fields:
                raise ValueError(f"not a SCRAM credential: {text[:80]!r}")
            fields[key] = value.strip()
        expected = {"salt", "stored_key", "server_key", "iterations"}
        if set(fields) != expected:
            raise ValueError(f"a SCRAM credential has exactly the keys {sorted(expected)}: {text[:80]!r}")
        if not fields["iterations"].isdigit():
            raise ValueError(f"SCRAM credential iterations is not a number: {fields['iterations']!r}")
        return cls(
            salt=_unb64(fields["salt"], "salt"),
            stored_key=_unb64(fields["stored_key"], "stored_key"),
            server_key=_unb64(fields["server_key"], "server_key"),
            iterations=int(fields["iterations"]),
        )


def _salted_password(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)


def derive_credential(
    mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """The stored form of ``password`` (RFC 5802's StoredKey and ServerKey), with a fresh salt in
    Kafka's style unless one is given. The iteration range is the caller's policy
    (:func:`check_iterations`); only a non-positive count is refused here."""
    hash_name = _hash_name(mechanism)
    if iterations < 1:
        raise ValueError(f"SCRAM iterations must be positive, not {iterations}")
    if salt is None:
        salt = _random_base36().encode("utf-8")
    salted = _salted_password(hash_name, password, salt, iterations)
    client_key = _hmac(hash_name, salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        stored_key=hashlib.new(hash_name, client_key).digest(),
        server_key=_hmac(hash_name, salted, b"Server Key"),
        iterations=iterations,
    )


def check_iterations(mechanism: str, iterations: int) -> None:
    """What a tool creating credentials accepts: a known mechanism, iterations in [4096, 16384]."""
    _hash_name(mechanism)
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(
            f"{mechanism} iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, not {iterations}"
        )


# ----------------------------------------------------------------------------------------------------
# PLAIN


def _utf8(message: bytes, mechanism: str) -> str:
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslAuthenticationFailed(f"{mechanism} message is not UTF-8") from None


class PlainServer:
    """PLAIN's server: a single message ``[authzid] NUL user NUL password`` checked against a fixed
    user table (a listener's ``user_<name>`` JAAS options)."""

    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = dict(users)
        self.principal: str | None = None
        """The authenticated user name, once :meth:`authenticate` has succeeded."""

    @property
    def complete(self) -> bool:
        return self.principal is not None

    def authenticate(self, message: bytes) -> str:
        """Check the client's one message; returns the user name (the reply token is empty)."""
        if self.complete:
            raise SaslAuthenticationFailed("PLAIN authentication is already complete")
        parts = _utf8(message, "PLAIN").split("\x00")
        if len(parts) != 3:
            raise SaslAuthenticationFailed(
                f"PLAIN message must be authzid NUL user NUL password, got {len(parts)} part(s)"
            )
        authzid, user, password = parts
        if not user:
            raise SaslAuthenticationFailed("PLAIN authentication failed: no user name given")
        if not password:
            raise SaslAuthenticationFailed("PLAIN authentication failed: no password given")
        expected = self._users.get(user)
        # compare against something even for an unknown user, so timing does not tell them apart
        ok = hmac.compare_digest((expected or "\x00").encode(), password.encode()) and expected is not None
        if not ok:
            raise SaslAuthenticationFailed("PLAIN authentication failed: invalid user name or password")
        if authzid and authzid != user:
            raise SaslAuthenticationFailed(
                "PLAIN authentication failed: the authorization id must be the user name"
            )
        self.principal = user
        return user


class PlainClient:
    """PLAIN's client: one message, sent without an authorization id (the server then uses the user)."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self.username = username
        self.password = password

    def initial(self) -> bytes:
        return f"\x00{self.username}\x00{self.password}".encode()


# ----------------------------------------------------------------------------------------------------
# SCRAM messages


def _escape(name: str) -> str:
    """RFC 5802's saslname: ``=`` and ``,`` written as ``=3D`` and ``=2C``."""
    return name.replace("=", "=3D").replace(",", "=2C")


def _unescape(saslname: str) -> str:
    """The inverse of :func:`_escape`; any other ``=`` sequence or an empty name is malformed."""
    out: list[str] = []
    i = 0
    while i < len(saslname):
        char = saslname[i]
        if char == "=":
            code = saslname[i + 1 : i + 3]
            if code == "2C":
                out.append(",")
            elif code == "3D":
                out.append("=")
            else:
                raise SaslAuthenticationFailed(f"invalid escape in SCRAM user name: {saslname[:60]!r}")
            i += 3
        else:
            out.append(char)
            i += 1
    if not out or "\x00" in out:
        raise SaslAuthenticationFailed("SCRAM user name is empty or holds NUL")
    return "".join(out)


def _printable(nonce: str) -> bool:
    return bool(nonce) and all(0x21 <= ord(c) <= 0x7E and c != "," for c in nonce)


def _attribute(item: str, name: str, where: str) -> str:
    prefix = f"{name}="
    if not item.startswith(prefix):
        raise SaslAuthenticationFailed(f"SCRAM {where} message: expected '{prefix}...', got {item[:40]!r}")
    return item[len(prefix) :]


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def _check_extensions(extensions: list[str]) -> None:
    """``key=value`` items after the nonce; Kafka's one meaningful extension asks for delegation
    tokens, which this cluster does not issue."""
    for extension in extensions:
        key, eq, value = extension.partition("=")
        if not eq or not key.isalnum():
            raise SaslAuthenticationFailed(f"malformed SCRAM extension {extension[:40]!r}")
        if key == "tokenauth" and value.lower() == "true":
            raise SaslAuthenticationFailed("delegation-token authentication is not supported")


class _ServerState(enum.Enum):
    CLIENT_FIRST = "expecting client-first"
    LOOKUP = "expecting the credential"
    CLIENT_FINAL = "expecting client-final"
    COMPLETE = "complete"
    FAILED = "failed"


_DECOY_KEY = secrets.token_bytes(32)
"""Per-process secret behind the salts shown for unknown users: stable per name, so asking twice
does not reveal that the user does not exist, and unpredictable from outside."""


def _decoy_credential(mechanism: str, username: str) -> ScramCredential:
    digest = hmac.new(_DECOY_KEY, f"{mechanism}\x00{username}".encode(), "sha256").digest()
    salt = _base36(int.from_bytes(digest, "big") >> (256 - _RANDOM_BITS)).encode()
    size = hashlib.new(_HASHES[mechanism]).digest_size
    return ScramCredential(salt, secrets.token_bytes(size), secrets.token_bytes(size), DEFAULT_ITERATIONS)


class ScramServer:
    """SCRAM's server in three steps, with the credential look-up left to the caller between the
    first two::

        user = server.receive_client_first(token)        # -> the user name to look up
        reply = server.server_first(credential_or_none)  # an unknown user still gets a plausible reply
        reply = server.receive_client_final(token)       # -> server-final; ``server.principal`` is set

    Any step may raise :class:`SaslAuthenticationFailed`; the object is then spent. An unknown user
    and a wrong password fail the same way, at the last step.
    """

    def __init__(self, mechanism: str, *, nonce: str | None = None) -> None:
        """``nonce`` fixes the server's nonce (for published test vectors); normally it is random."""
        self.mechanism = mechanism
        self._hash = _hash_name(mechanism)
        self._server_nonce = nonce if nonce is not None else _random_base36()
        if not _printable(self._server_nonce):
            raise ValueError("a SCRAM nonce is printable ASCII without ','")
        self._state = _ServerState.CLIENT_FIRST
        self._username = ""
        self._client_first_bare = ""
        self._nonce = ""
        self._server_first = ""
        self._credential: ScramCredential | None = None
        self._known = False
        self.principal: str | None = None
        """The authenticated user (also the authorization id), once the exchange has succeeded."""

    @property
    def complete(self) -> bool:
        return self._state is _ServerState.COMPLETE

    @property
    def authorized_id(self) -> str:
        """The user the client-first message names (its authorization id, if any, must equal it):
        known before the credential is, trusted only once :attr:`complete` is true."""
        return self._username

    def _expect(self, state: _ServerState) -> None:
        if self._state is not state:
            current = self._state
            self._state = _ServerState.FAILED
            raise SaslAuthenticationFailed(f"unexpected SCRAM message: the exchange is {current.value}")

    def _fail(self, message: str) -> SaslAuthenticationFailed:
        self._state = _ServerState.FAILED
        return SaslAuthenticationFailed(message)

    def receive_client_first(self, message: bytes) -> str:
        """Parse ``n,[a=authzid],n=user,r=nonce[,ext...]``; returns the user whose credential to find."""
        self._expect(_ServerState.CLIENT_FIRST)
        try:
            self._username = self._parse_client_first(_utf8(message, self.mechanism))
        except SaslAuthenticationFailed:
            self._state = _ServerState.FAILED
            raise
        self._state = _ServerState.LOOKUP
        return self._username

    def _parse_client_first(self, text: str) -> str:
        if text.startswith(("y,", "p=")):
            raise SaslAuthenticationFailed("SCRAM channel binding is not supported (GS2 flag must be 'n')")
        if not text.startswith("n,"):
            raise SaslAuthenticationFailed("SCRAM client-first message must start with the GS2 flag 'n'")
        authzid_part, sep, bare = text[2:].partition(",")
        if not sep:
            raise SaslAuthenticationFailed("SCRAM client-first message has no GS2 header")
        authzid = _unescape(_attribute(authzid_part, "a", "client-first")) if authzid_part else ""
        items = bare.split(",")
        if len(items) < 2:
            raise SaslAuthenticationFailed("SCRAM client-first message needs n= and r=")
        if items[0].startswith("m="):
            raise SaslAuthenticationFailed("SCRAM mandatory extensions (m=) are not supported")
        username = _unescape(_attribute(items[0], "n", "client-first"))
        client_nonce = _attribute(items[1], "r", "client-first")
        if not _printable(client_nonce):
            raise SaslAuthenticationFailed("SCRAM client nonce must be printable ASCII without ','")
        _check_extensions(items[2:])
        if authzid and authzid != username:
            raise SaslAuthenticationFailed(
                "SCRAM authentication failed: the authorization id must be the user name"
            )
        self._client_first_bare = bare
        self._nonce = client_nonce + self._server_nonce
        return username

    def server_first(self, credential: ScramCredential | None) -> bytes:
        """``r=<nonce>,s=<salt>,i=<n>`` for the user's credential, or for a decoy when it is None."""
        self._expect(_ServerState.LOOKUP)
        if credential is not None and credential.iterations < MIN_ITERATIONS:
            raise self._fail(
                f"{self.mechanism} credential of this user has {credential.iterations} iterations, "
                f"fewer than the minimum {MIN_ITERATIONS}"
            )
        self._known = credential is not None
        self._credential = credential or _decoy_credential(self.mechanism, self._username)
        self._server_first = (
            f"r={self._nonce},s={_b64(self._credential.salt)},i={self._credential.iterations}"
        )
        self._state = _ServerState.CLIENT_FINAL
        return self._server_first.encode()

    def receive_client_final(self, message: bytes) -> bytes:
        """Check ``c=...,r=<nonce>,p=<proof>``; returns server-final ``v=<signature>``."""
        self._expect(_ServerState.CLIENT_FINAL)
        try:
            server_final = self._check_client_final(_utf8(message, self.mechanism))
        except SaslAuthenticationFailed:
            self._state = _ServerState.FAILED
            raise
        self._state = _ServerState.COMPLETE
        self.principal = self._username
        return server_final

    def _check_client_final(self, text: str) -> bytes:
        assert self._credential is not None
        without_proof, sep, proof_text = text.rpartition(",p=")
        items = without_proof.split(",")
        if not sep or len(items) < 2:
            raise SaslAuthenticationFailed("SCRAM client-final message must be c=...,r=...,p=...")
        try:
            _unb64(_attribute(items[0], "c", "client-final"), "channel binding")
            proof = _unb64(proof_text, "proof")
        except ValueError as exc:
            raise SaslAuthenticationFailed(f"SCRAM client-final message: {exc}") from None
        nonce = _attribute(items[1], "r", "client-final")
        if not nonce.endswith(self._nonce):
            raise SaslAuthenticationFailed("SCRAM client-final message has a nonce this server did not give")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = _hmac(self._hash, self._credential.stored_key, auth_message)
        valid = len(proof) == len(client_signature) and hmac.compare_digest(
            hashlib.new(self._hash, _xor(proof, client_signature)).digest(), self._credential.stored_key
        )
        if not (valid and self._known):
            raise SaslAuthenticationFailed(f"{self.mechanism} authentication failed: invalid credentials")
        signature = _hmac(self._hash, self._credential.server_key, auth_message)
        return f"v={_b64(signature)}".encode()


class ScramClient:
    """SCRAM's client: ``client_first()``, then ``client_final(server_first)``, then
    ``verify_server_final(server_final)``, which proves the server knew the credential too."""

    def __init__(self, mechanism: str, username: str, password: str, *, nonce: str | None = None) -> None:
        """``nonce`` fixes the client's nonce (for published test vectors); normally it is random."""
        self.mechanism = mechanism
        self._hash = _hash_name(mechanism)
        self.username = username
        self._password = password
        self._client_nonce = nonce if nonce is not None else _random_base36()
        if not _printable(self._client_nonce):
            raise ValueError("a SCRAM nonce is printable ASCII without ','")
        self._client_first_bare = f"n={_escape(username)},r={self._client_nonce}"
        self._expected_signature: bytes | None = None

    def client_first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def client_final(self, server_first: bytes) -> bytes:
        """Answer ``r=<nonce>,s=<salt>,i=<n>`` with the proof of knowing the password."""
        text = _utf8(server_first, self.mechanism)
        if text.startswith("e="):
            raise SaslAuthenticationFailed(f"SCRAM server refused: {text[2:]}")
        items = text.split(",")
        if len(items) < 3:
            raise SaslAuthenticationFailed("SCRAM server-first message must be r=...,s=...,i=...")
        if items[0].startswith("m="):
            raise SaslAuthenticationFailed("SCRAM mandatory extensions (m=) are not supported")
        nonce = _attribute(items[0], "r", "server-first")
        try:
            salt = _unb64(_attribute(items[1], "s", "server-first"), "salt")
        except ValueError as exc:
            raise SaslAuthenticationFailed(f"SCRAM server-first message: {exc}") from None
        iterations_text = _attribute(items[2], "i", "server-first")
        if not nonce.startswith(self._client_nonce) or len(nonce) == len(self._client_nonce):
            raise SaslAuthenticationFailed("SCRAM server nonce does not extend the client's")
        if not _printable(nonce):
            raise SaslAuthenticationFailed("SCRAM server nonce must be printable ASCII without ','")
        if not iterations_text.isdigit() or int(iterations_text) < MIN_ITERATIONS:
            raise SaslAuthenticationFailed(
                f"SCRAM server asks for {iterations_text!r} iterations (at least {MIN_ITERATIONS} needed)"
            )
        salted = _salted_password(self._hash, self._password, salt, int(iterations_text))
        client_key = _hmac(self._hash, salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        proof = _xor(client_key, _hmac(self._hash, stored_key, auth_message))
        self._expected_signature = _hmac(self._hash, _hmac(self._hash, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        """Raise unless ``v=<signature>`` is the one only a holder of our credential can compute."""
        if self._expected_signature is None:
            raise SaslAuthenticationFailed("SCRAM server-final message before client-final")
        text = _utf8(server_final, self.mechanism)
        if text.startswith("e="):
            raise SaslAuthenticationFailed(f"SCRAM server refused: {text[2:]}")
        try:
            signature = _unb64(_attribute(text.split(",")[0], "v", "server-final"), "server signature")
        except ValueError as exc:
            raise SaslAuthenticationFailed(f"SCRAM server-final message: {exc}") from None
        if not hmac.compare_digest(signature, self._expected_signature):
            raise SaslAuthenticationFailed(
                "SCRAM server signature is wrong: the server does not hold our credential"
            )
