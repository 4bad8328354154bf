"""Kafka's listener security settings (``ssl.*``, ``sasl.*``), declared once for both daemons.

Every ``ssl.*`` and ``sasl.*`` key may also be given for one listener as
``listener.name.<listener>.<key>`` (SASL's JAAS text per mechanism as
``listener.name.<listener>.<mechanism>.sasl.jaas.config``), as Kafka allows. From these come a
:class:`ListenerSecurity` per served listener and a :class:`ClientSecurity` for each connection a
daemon opens to another node.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from daemon.config import ConfigError, ConfigKey, LoadedConfig, at_least
from security import jaas
from security.principal import PrincipalMapper, parse_mapping_rules
from security.tls import CLIENT_AUTH, TlsSettings, client_context, server_context

__all__ = [
    "LISTENER_SECURITY_PROTOCOL_MAP",
    "PROTOCOLS",
    "SECURITY_KEYS",
    "SERVED_MECHANISMS",
    "ClientSecurity",
    "ListenerSecurity",
    "client_security",
    "listener_security",
    "protocol_name",
    "security_protocols",
]

SERVED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def protocol_name(value: str) -> None:
    """A ConfigKey check: one of Kafka's four security protocols."""
    if value.upper() not in PROTOCOLS:
        raise ValueError(f"not one of {', '.join(PROTOCOLS)}")


def _protocol_map(value: list[str]) -> None:
    for item in value:
        name, sep, protocol = item.partition(":")
        if not sep or not name:
            raise ValueError(f"{item!r} is not LISTENER:PROTOCOL")
        protocol_name(protocol)


LISTENER_SECURITY_PROTOCOL_MAP = ConfigKey(
    "listener.security.protocol.map",
    "list",
    None,
    check=_protocol_map,
    shown_default="names = protocols",
    doc="`LISTENER:PROTOCOL` pairs (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); needed when a listener is "
    "not named after a protocol",
)


def security_protocols(loaded: LoadedConfig, names: list[str]) -> dict[str, str]:
    """Each listener's security protocol, from the map or from its name."""
    if not loaded["listener.security.protocol.map"]:
        unknown = [n for n in names if n not in PROTOCOLS]
        if unknown:
            raise ConfigError(
                "listener.security.protocol.map",
                f"listeners {unknown} are not security protocol names, so they need a mapping",
            )
        return {n: n for n in names}
    protocols = {}
    for item in loaded["listener.security.protocol.map"]:
        name, _, protocol = item.partition(":")
        protocols[name.strip().upper()] = protocol.strip().upper()
    missing = [n for n in names if n not in protocols]
    if missing:
        raise ConfigError("listener.security.protocol.map", f"no security protocol for listeners {missing}")
    return protocols


def _pem_only(value: str) -> None:
    if value.upper() != "PEM":
        raise ValueError("only PEM key and trust stores are read (ssl.keystore.type=PEM, KIP-651)")


def _one_of(*allowed: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        if value.lower() not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}")

    return check


def _rules(value: str) -> None:
    parse_mapping_rules(value)


def _listener_key(name: str, type_: str, default: object, doc: str, **extra: object) -> ConfigKey:
    return ConfigKey(name, type_, default, doc=doc, per_listener=True, **extra)  # type: ignore[arg-type]


SECURITY_KEYS: tuple[ConfigKey, ...] = (
    _listener_key("ssl.keystore.type", "string", "PEM", "only `PEM`", check=_pem_only),
    _listener_key("ssl.keystore.location", "string", None, "PEM file: PKCS#8 private key, then the chain"),
    _listener_key(
        "ssl.keystore.key", "string", None, "the private key as inline PEM (sensitive)", sensitive=True
    ),
    _listener_key("ssl.keystore.certificate.chain", "string", None, "the chain as inline PEM"),
    _listener_key(
        "ssl.key.password", "string", None, "decrypts an encrypted private key (sensitive)", sensitive=True
    ),
    _listener_key("ssl.truststore.type", "string", "PEM", "only `PEM`", check=_pem_only),
    _listener_key("ssl.truststore.location", "string", None, "PEM file of the CA certificates trusted"),
    _listener_key("ssl.truststore.certificates", "string", None, "the trusted CA certificates as inline PEM"),
    _listener_key(
        "ssl.client.auth",
        "string",
        "none",
        "`required`: peers without a certificate the truststore trusts fail the handshake; `requested`: "
        "a certificate is checked when given; `none`",
        check=_one_of(*CLIENT_AUTH),
    ),
    _listener_key(
        "ssl.enabled.protocols",
        "list",
        ["TLSv1.2", "TLSv1.3"],
        "TLS versions offered; nothing below TLSv1.2 is",
        check=lambda v: None if set(v) <= {"TLSv1.2", "TLSv1.3"} else _raise("only TLSv1.2 and TLSv1.3"),
    ),
    _listener_key(
        "ssl.protocol", "string", "TLSv1.3", "accepted for compatibility; see ssl.enabled.protocols"
    ),
    _listener_key("ssl.cipher.suites", "list", None, "OpenSSL cipher names for TLSv1.2; unset: the defaults"),
    _listener_key(
        "ssl.endpoint.identification.algorithm",
        "string",
        "https",
        "`https`: a connecting node checks the server's certificate names its host; empty: it does not",
        check=_one_of("https", ""),
    ),
    _listener_key(
        "ssl.principal.mapping.rules",
        "string",
        "DEFAULT",
        "`DEFAULT` and `RULE:regex/replacement/[L|U]` rules mapping a certificate subject to a user name",
        check=_rules,
    ),
    _listener_key(
        "sasl.enabled.mechanisms",
        "list",
        ["GSSAPI"],
        "mechanisms SASL listeners offer: `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512` (GSSAPI is not served)",
    ),
    ConfigKey(
        "sasl.mechanism.inter.broker.protocol",
        "string",
        "GSSAPI",
        doc="the mechanism this node uses when it connects to a SASL listener of another node",
    ),
    _listener_key(
        "sasl.jaas.config",
        "string",
        None,
        "JAAS text: `PlainLoginModule`/`ScramLoginModule` with `username`/`password` (this node's identity "
        'towards others) and, for PLAIN, `user_<name>="<password>"` entries (sensitive)',
        sensitive=True,
    ),
    _listener_key(
        "sasl.server.max.receive.size",
        "int",
        524288,
        "largest frame accepted before a SASL client has authenticated",
        check=at_least(1),
    ),
    ConfigKey(
        "connection.failed.authentication.delay.ms",
        "int",
        100,
        check=at_least(0),
        doc="wait this long before closing a connection whose authentication failed",
    ),
)


def _raise(reason: str) -> None:
    raise ValueError(reason)


def _tls_settings(loaded: LoadedConfig, listener: str) -> TlsSettings:
    def value(key: str) -> object:
        return loaded.for_listener(listener, key)

    return TlsSettings(
        keystore_location=value("ssl.keystore.location"),  # type: ignore[arg-type]
        keystore_key=value("ssl.keystore.key"),  # type: ignore[arg-type]
        keystore_certificate_chain=value("ssl.keystore.certificate.chain"),  # type: ignore[arg-type]
        key_password=value("ssl.key.password"),  # type: ignore[arg-type]
        truststore_location=value("ssl.truststore.location"),  # type: ignore[arg-type]
        truststore_certificates=value("ssl.truststore.certificates"),  # type: ignore[arg-type]
        client_auth=str(value("ssl.client.auth")).lower(),
        enabled_protocols=tuple(value("ssl.enabled.protocols")),  # type: ignore[arg-type]
        cipher_suites=tuple(value("ssl.cipher.suites") or ()),  # type: ignore[arg-type]
        endpoint_identification=str(value("ssl.endpoint.identification.algorithm")).lower() == "https",
    )


def _jaas_options(loaded: LoadedConfig, listener: str, mechanism: str) -> dict[str, str]:
    text = loaded.for_listener(listener, "sasl.jaas.config", mechanism)
    if not text:
        return {}
    try:
        return dict(jaas.parse_jaas_config(text).options)
    except ValueError as exc:
        raise ConfigError("sasl.jaas.config", f"listener {listener} ({mechanism}): {exc}") from None


@dataclass(frozen=True)
class ListenerSecurity:
    """How one served listener authenticates its peers."""

    listener: str
    protocol: str
    tls: ssl.SSLContext | None = None
    mapper: PrincipalMapper = field(default_factory=PrincipalMapper)
    mechanisms: tuple[str, ...] = ()
    plain_users: Mapping[str, str] = field(default_factory=dict)
    max_receive_size: int = 524288
    failed_auth_delay_s: float = 0.1

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def plaintext(self) -> bool:
        return self.protocol == "PLAINTEXT"


def listener_security(loaded: LoadedConfig, listener: str, protocol: str) -> ListenerSecurity:
    """One served listener's security; ConfigError names the setting that is missing or wrong."""
    protocol = protocol.upper()
    tls = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            tls = server_context(_tls_settings(loaded, listener))
        except (ValueError, OSError, ssl.SSLError) as exc:
            raise ConfigError("ssl.keystore.location", f"listener {listener}: {exc}") from None
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = {}
    if protocol.startswith("SASL_"):
        mechanisms = tuple(m.upper() for m in loaded.for_listener(listener, "sasl.enabled.mechanisms"))
        unserved = [m for m in mechanisms if m not in SERVED_MECHANISMS]
        if unserved or not mechanisms:
            raise ConfigError(
                "sasl.enabled.mechanisms",
                f"listener {listener} ({protocol}) offers {list(mechanisms)}; only "
                f"{', '.join(SERVED_MECHANISMS)} are served",
            )
        if "PLAIN" in mechanisms:
            plain_users = jaas.plain_users(_jaas_options(loaded, listener, "PLAIN"))
            if not plain_users:
                raise ConfigError(
                    "sasl.jaas.config",
                    f"listener {listener} offers PLAIN but its JAAS text has no "
                    'user_<name>="<password>" entry',
                )
    return ListenerSecurity(
        listener=listener,
        protocol=protocol,
        tls=tls,
        mapper=PrincipalMapper(loaded.for_listener(listener, "ssl.principal.mapping.rules")),
        mechanisms=mechanisms,
        plain_users=plain_users,
        max_receive_size=loaded.for_listener(listener, "sasl.server.max.receive.size"),
        failed_auth_delay_s=loaded["connection.failed.authentication.delay.ms"] / 1000.0,
    )


@dataclass(frozen=True)
class ClientSecurity:
    """How this node connects to another node's listener of a given security protocol."""

    protocol: str = "PLAINTEXT"
    tls: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = ""

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


PLAINTEXT_CLIENT = ClientSecurity()


def client_security(loaded: LoadedConfig, listener: str) -> Callable[[str], ClientSecurity]:
    """For each security protocol, how this node dials it, using ``listener``'s settings.

    A node connects with the TLS settings and SASL identity of its own inter-broker (broker) or RPC
    (controller) listener, as Kafka's inter-broker clients do. Settings are checked when a protocol
    is first needed, so a PLAINTEXT cluster needs none of them.
    """
    built: dict[str, ClientSecurity] = {}

    def for_protocol(protocol: str) -> ClientSecurity:
        protocol = protocol.upper()
        if protocol not in built:
            built[protocol] = _client(loaded, listener, protocol)
        return built[protocol]

    return for_protocol


def _client(loaded: LoadedConfig, listener: str, protocol: str) -> ClientSecurity:
    if protocol == "PLAINTEXT":
        return PLAINTEXT_CLIENT
    if protocol not in PROTOCOLS:
        raise ConfigError("listener.security.protocol.map", f"unknown security protocol {protocol}")
    tls = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            tls = client_context(_tls_settings(loaded, listener))
        except (ValueError, OSError, ssl.SSLError) as exc:
            raise ConfigError("ssl.truststore.location", f"connecting over {protocol}: {exc}") from None
    if not protocol.startswith("SASL_"):
        return ClientSecurity(protocol, tls)
    mechanism = loaded["sasl.mechanism.inter.broker.protocol"].upper()
    if mechanism not in SERVED_MECHANISMS:
        raise ConfigError(
            "sasl.mechanism.inter.broker.protocol",
            f"{mechanism} cannot be used; choose one of {', '.join(SERVED_MECHANISMS)}",
        )
    try:
        username, password = jaas.client_identity(_jaas_options(loaded, listener, mechanism))
    except ValueError as exc:
        raise ConfigError("sasl.jaas.config", f"no identity to connect over {protocol}: {exc}") from None
    return ClientSecurity(protocol, tls, mechanism, username, password)
