"""The ZooKeeper client's security keys (``zookeeper.set.acl``, ``zookeeper.ssl.*``), declared once.

Both daemons and the admin CLI's ``--zk-config`` file read them; :func:`zk_security_from_loaded` turns
them into the :class:`~zkstore.security.ZkSecurity` that ``AsyncZooKeeper`` takes. Kafka reads the
session's identity from a JAAS ``Client`` section; we take a digest user from ``zookeeper.auth.digest``
instead, or the subject of the TLS client certificate.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from daemon.config import ConfigError, ConfigKey, LoadedConfig, load_config
from zkstore.security import TLS_PROTOCOLS, ZkSecurity

__all__ = [
    "ZOOKEEPER_AUTH_DIGEST",
    "ZOOKEEPER_SECURITY_KEYS",
    "ZOOKEEPER_SET_ACL",
    "load_zk_security",
    "zk_security_from_loaded",
]

NETTY_CLIENT_SOCKET = "org.apache.zookeeper.ClientCnxnSocketNetty"


def _digest(value: str) -> None:
    user, sep, _ = value.partition(":")
    if value and (not sep or not user):
        raise ValueError("expected user:password")


def _pem_only(value: str) -> None:
    if value and value.upper() != "PEM":
        raise ValueError(
            "only PEM is supported here (one file with the private key and certificate chain, or the CA "
            "certificates, as security/certs.py writes them); convert JKS or PKCS12 stores with openssl"
        )


def _protocol(value: str) -> None:
    if value and value not in TLS_PROTOCOLS:
        raise ValueError(f"expected one of {', '.join(TLS_PROTOCOLS)}")


def _protocols(values: list[str]) -> None:
    for value in values:
        _protocol(value)


ZOOKEEPER_SET_ACL = ConfigKey(
    "zookeeper.set.acl",
    "bool",
    False,
    doc="create every znode with all rights for its creator and read for everyone (user and broker "
    "config overrides and delegation tokens: creator only); needs `zookeeper.auth.digest` or a TLS "
    "client certificate",
)
ZOOKEEPER_AUTH_DIGEST = ConfigKey(
    "zookeeper.auth.digest",
    "string",
    None,
    check=_digest,
    sensitive=True,
    doc="**sensitive**: `user:password`, the ZooKeeper digest identity of the session (Kafka takes it "
    "from a JAAS `Client` section, which is not read here)",
)
ZOOKEEPER_SSL_CLIENT_ENABLE = ConfigKey(
    "zookeeper.ssl.client.enable", "bool", False, doc="connect to ZooKeeper over TLS"
)
ZOOKEEPER_CLIENT_CNXN_SOCKET = ConfigKey(
    "zookeeper.clientCnxnSocket",
    "string",
    None,
    doc=f"accepted for compatibility (Kafka needs `{NETTY_CLIENT_SOCKET}` for TLS); not used here",
)
ZOOKEEPER_SSL_KEYSTORE_LOCATION = ConfigKey(
    "zookeeper.ssl.keystore.location",
    "string",
    None,
    doc="PEM file with the client's private key and certificate chain: the session's `x509` identity",
)
ZOOKEEPER_SSL_KEYSTORE_PASSWORD = ConfigKey(
    "zookeeper.ssl.keystore.password",
    "string",
    None,
    sensitive=True,
    doc="**sensitive**: the keystore's private-key password",
)
ZOOKEEPER_SSL_KEYSTORE_TYPE = ConfigKey(
    "zookeeper.ssl.keystore.type", "string", None, check=_pem_only, shown_default="`PEM`", doc="only `PEM`"
)
ZOOKEEPER_SSL_TRUSTSTORE_LOCATION = ConfigKey(
    "zookeeper.ssl.truststore.location",
    "string",
    None,
    shown_default="the system's CAs",
    doc="PEM file with the CA certificates the server's certificate must chain to",
)
ZOOKEEPER_SSL_TRUSTSTORE_PASSWORD = ConfigKey(
    "zookeeper.ssl.truststore.password",
    "string",
    None,
    sensitive=True,
    doc="accepted; a PEM truststore has no password",
)
ZOOKEEPER_SSL_TRUSTSTORE_TYPE = ConfigKey(
    "zookeeper.ssl.truststore.type", "string", None, check=_pem_only, shown_default="`PEM`", doc="only `PEM`"
)
ZOOKEEPER_SSL_PROTOCOL = ConfigKey(
    "zookeeper.ssl.protocol",
    "string",
    "TLSv1.2",
    check=_protocol,
    doc="the TLS version, when `zookeeper.ssl.enabled.protocols` is unset",
)
ZOOKEEPER_SSL_ENABLED_PROTOCOLS = ConfigKey(
    "zookeeper.ssl.enabled.protocols",
    "list",
    None,
    check=_protocols,
    shown_default="`zookeeper.ssl.protocol`",
    doc="TLS versions allowed (`TLSv1.2`, `TLSv1.3`)",
)
ZOOKEEPER_SSL_CIPHER_SUITES = ConfigKey(
    "zookeeper.ssl.cipher.suites",
    "list",
    None,
    shown_default="OpenSSL's",
    doc="TLS 1.2 cipher suites, by their OpenSSL names (e.g. `ECDHE-ECDSA-AES128-GCM-SHA256`)",
)
ZOOKEEPER_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM = ConfigKey(
    "zookeeper.ssl.endpoint.identification.algorithm",
    "string",
    "HTTPS",
    doc="`HTTPS`: the server's certificate must name the host connected to; empty: it need not",
)

ZOOKEEPER_SECURITY_KEYS: tuple[ConfigKey, ...] = (
    ZOOKEEPER_SET_ACL,
    ZOOKEEPER_AUTH_DIGEST,
    ZOOKEEPER_SSL_CLIENT_ENABLE,
    ZOOKEEPER_CLIENT_CNXN_SOCKET,
    ZOOKEEPER_SSL_KEYSTORE_LOCATION,
    ZOOKEEPER_SSL_KEYSTORE_PASSWORD,
    ZOOKEEPER_SSL_KEYSTORE_TYPE,
    ZOOKEEPER_SSL_TRUSTSTORE_LOCATION,
    ZOOKEEPER_SSL_TRUSTSTORE_PASSWORD,
    ZOOKEEPER_SSL_TRUSTSTORE_TYPE,
    ZOOKEEPER_SSL_PROTOCOL,
    ZOOKEEPER_SSL_ENABLED_PROTOCOLS,
    ZOOKEEPER_SSL_CIPHER_SUITES,
    ZOOKEEPER_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM,
)


def _readable_file(key: ConfigKey, value: str | None) -> Path | None:
    """A path key's file, checked now so that a typo fails at startup, not at the first connection."""
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_file():
        raise ConfigError(key.name, f"no such file: {value}")
    return path


def zk_security_from_loaded(loaded: LoadedConfig) -> ZkSecurity:
    """The ZooKeeper client security the loaded keys describe.

    As in Kafka, ``zookeeper.set.acl=true`` without an identity is a startup error: ZooKeeper refuses
    to create a znode whose creator it cannot name.
    """
    values: Mapping[str, Any] = loaded.values
    tls = bool(values[ZOOKEEPER_SSL_CLIENT_ENABLE.name])
    keystore = _readable_file(ZOOKEEPER_SSL_KEYSTORE_LOCATION, values[ZOOKEEPER_SSL_KEYSTORE_LOCATION.name])
    truststore = _readable_file(
        ZOOKEEPER_SSL_TRUSTSTORE_LOCATION, values[ZOOKEEPER_SSL_TRUSTSTORE_LOCATION.name]
    )
    digest = values[ZOOKEEPER_AUTH_DIGEST.name] or None
    set_acl = bool(values[ZOOKEEPER_SET_ACL.name])
    if set_acl and digest is None and not (tls and keystore is not None):
        raise ConfigError(
            ZOOKEEPER_SET_ACL.name,
            "true needs an authenticated ZooKeeper identity: set zookeeper.auth.digest=user:password, or "
            "zookeeper.ssl.client.enable=true with zookeeper.ssl.keystore.location (a client certificate)",
        )
    protocols = values[ZOOKEEPER_SSL_ENABLED_PROTOCOLS.name] or [values[ZOOKEEPER_SSL_PROTOCOL.name]]
    algorithm = values[ZOOKEEPER_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM.name] or ""
    return ZkSecurity(
        set_acl=set_acl,
        digest=digest,
        tls=tls,
        keystore=keystore,
        key_password=values[ZOOKEEPER_SSL_KEYSTORE_PASSWORD.name] or None,
        truststore=truststore,
        check_hostname=algorithm.upper() == "HTTPS",
        protocols=tuple(p for p in protocols if p),
        cipher_suites=tuple(values[ZOOKEEPER_SSL_CIPHER_SUITES.name] or ()),
    )


def load_zk_security(path: str | Path) -> ZkSecurity:
    """The ZooKeeper security keys of a properties file alone, as Kafka's tools read
    ``--zk-tls-config-file``: no environment overrides (the admin CLI's ``--zk-config``)."""
    try:
        loaded = load_config(ZOOKEEPER_SECURITY_KEYS, path, environ={})
    except ConfigError as exc:
        if exc.key == "--config":  # the file itself could not be read
            raise ConfigError("--zk-config", exc.reason) from None
        raise
    return zk_security_from_loaded(loaded)
