"""How the cluster authenticates to ZooKeeper and guards the znodes it creates (``zookeeper.set.acl``).

With ``set_acl``, every znode gets all permissions for its creator (ZooKeeper's ``auth`` scheme: every
identity the creating session authenticated, a digest user and/or its TLS certificate's subject) and
read for everyone, as Kafka's ``ZkData.defaultAcls`` does. Sensitive znodes (user and broker config
overrides, which may hold credentials, and delegation tokens) are readable by their creator only;
``/consumers`` stays open to all, as old consumers write there with their own identities.

:class:`ZkSecurity` and its ACL policy are pure values; :func:`kazoo_arguments` turns them into a
``KazooClient``'s arguments, reading the key files for :class:`TlsHandler`, which opens the TLS
connections itself because kazoo cannot set protocol versions or cipher suites.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

__all__ = [
    "CONSUMERS_PATH",
    "SENSITIVE_ROOT_PATHS",
    "TLS_PROTOCOLS",
    "TlsHandler",
    "ZkSecurity",
    "is_sensitive",
    "kazoo_arguments",
    "ssl_context",
]

SENSITIVE_ROOT_PATHS = ("/config/users", "/config/brokers", "/delegation_token/tokens")
"""Roots whose znodes (the root itself included) may hold secrets: creator-only, not world-readable."""

CONSUMERS_PATH = "/consumers"
"""Old consumers register here under their own identities, so Kafka leaves this znode open to all."""

TLS_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
"""Protocol names as Kafka's ``zookeeper.ssl.*protocol*`` keys spell them; older versions are refused."""


def is_sensitive(path: str) -> bool:
    """Whether ``path`` (as the cluster names it, without the chroot) is one of the sensitive znodes."""
    return any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOT_PATHS)


@dataclass(frozen=True, slots=True)
class ZkSecurity:
    """One ZooKeeper client's identity, TLS settings and ACL policy.

    ``digest`` is ``user:password`` for ZooKeeper's digest scheme. ``keystore`` is one PEM file with
    the private key and the certificate chain (what ``security.certs`` writes), whose subject becomes
    the session's ``x509`` identity when the server asks for client certificates; ``key_password``
    decrypts that key. ``truststore`` is the PEM CA the server's certificate must chain to.
    ``protocols`` limits the TLS versions (empty: Python's defaults) and ``cipher_suites`` the TLS 1.2
    suites, by their OpenSSL names.
    """

    set_acl: bool = False
    digest: str | None = None
    tls: bool = False
    keystore: Path | None = None
    key_password: str | None = None
    truststore: Path | None = None
    check_hostname: bool = True
    protocols: tuple[str, ...] = ()
    cipher_suites: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.digest is not None:
            user, sep, _ = self.digest.partition(":")
            if not sep or not user:
                raise ValueError("the digest identity must read user:password")
        unknown = [p for p in self.protocols if p not in TLS_PROTOCOLS]
        if unknown:
            raise ValueError(
                f"unsupported TLS protocol(s) {', '.join(unknown)}; use {', '.join(TLS_PROTOCOLS)}"
            )
        if self.set_acl and not self.authenticated:
            raise ValueError("ACLs need an authenticated identity: a digest user or a TLS client certificate")

    @property
    def authenticated(self) -> bool:
        """Whether the session proves an identity that the ``auth`` ACL scheme can name."""
        return self.digest is not None or (self.tls and self.keystore is not None)

    def acls_for(self, path: str) -> list[ACL] | None:
        """The ACL to create ``path`` with; None leaves ZooKeeper's open default (no ``set_acl``)."""
        if not self.set_acl:
            return None
        if path == CONSUMERS_PATH:
            return list(OPEN_ACL_UNSAFE)
        if is_sensitive(path):
            return list(CREATOR_ALL_ACL)
        return list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE)


def ssl_context(security: ZkSecurity) -> ssl.SSLContext:
    """The client-side TLS context ``security`` describes (reads the key and CA files)."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if security.truststore is not None:
        context.load_verify_locations(cafile=str(security.truststore))
    context.check_hostname = security.check_hostname
    if security.keystore is not None:
        context.load_cert_chain(str(security.keystore), password=security.key_password)
    if security.protocols:
        versions = sorted(TLS_PROTOCOLS[p] for p in security.protocols)
        context.minimum_version, context.maximum_version = versions[0], versions[-1]
    if security.cipher_suites:
        context.set_ciphers(":".join(security.cipher_suites))
    return context


class TlsHandler(SequentialThreadingHandler):  # type: ignore[misc]  # kazoo has no type hints
    """kazoo's threading handler, connecting with a prepared ``SSLContext``.

    kazoo builds its own context per connection from a few arguments and has no way to pass the
    protocol versions or cipher suites; this handler replaces only that step.
    """

    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__()
        self.context = context

    def create_connection(
        self,
        address: tuple[str, int],
        hostname: str | None = None,
        timeout: float | None = None,
        **_kazoo_tls_arguments: Any,
    ) -> socket.socket:
        family = socket.getaddrinfo(address[0], address[1], 0, socket.SOCK_STREAM)[0][0]
        sock = self.context.wrap_socket(socket.socket(family), server_hostname=hostname)
        try:
            sock.settimeout(timeout)
            sock.connect(address)  # and the handshake: a refused certificate fails here
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except BaseException:
            sock.close()
            raise
        return sock


def kazoo_arguments(security: ZkSecurity | None) -> dict[str, Any]:
    """Keyword arguments for ``KazooClient``: authentication, the default ACL and TLS.

    The default ACL (a non-sensitive znode's) only covers creates that bypass ``AsyncZooKeeper``,
    which passes each path's own ACL.
    """
    if security is None:
        return {}
    arguments: dict[str, Any] = {}
    if security.digest is not None:
        arguments["auth_data"] = [("digest", security.digest)]
    if security.set_acl:
        arguments["default_acl"] = security.acls_for("/")
    if security.tls:
        keystore = str(security.keystore) if security.keystore is not None else None
        arguments |= {
            "use_ssl": True,
            "certfile": keystore,
            "keyfile": keystore,
            "keyfile_password": security.key_password,
            "ca": str(security.truststore) if security.truststore is not None else None,
            "verify_certs": True,
            "check_hostname": security.check_hostname,
            "handler": TlsHandler(ssl_context(security)),
        }
    return arguments
