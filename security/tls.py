"""TLS contexts from Kafka's ``ssl.*`` settings, PEM only (KIP-651).

The keystore is one PEM file holding the PKCS#8 private key and the certificate chain
(``ssl.keystore.location``), or the same as inline text (``ssl.keystore.key`` and
``ssl.keystore.certificate.chain``); ``ssl.key.password`` decrypts an encrypted key. The truststore is
a PEM file of CA certificates or inline ``ssl.truststore.certificates``. Protocols below TLS 1.2 are
refused whatever ``ssl.enabled.protocols`` says.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["TlsSettings", "client_context", "server_context"]

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
CLIENT_AUTH = ("none", "requested", "required")


@dataclass(frozen=True)
class TlsSettings:
    """One listener's (or one client's) TLS settings, as read from the configuration."""

    keystore_location: str | None = None
    keystore_key: str | None = None
    keystore_certificate_chain: str | None = None
    key_password: str | None = None
    truststore_location: str | None = None
    truststore_certificates: str | None = None
    client_auth: str = "none"
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    cipher_suites: tuple[str, ...] = ()
    endpoint_identification: bool = True
    """``ssl.endpoint.identification.algorithm=https``: a client checks the server's host name."""

    @property
    def has_keystore(self) -> bool:
        return bool(self.keystore_location or self.keystore_key)


def _versions(context: ssl.SSLContext, enabled: Sequence[str]) -> None:
    chosen = sorted(_VERSIONS[p] for p in enabled if p in _VERSIONS)
    if not chosen:
        raise ValueError(f"none of {list(enabled)} is a supported protocol (TLSv1.2, TLSv1.3)")
    context.minimum_version, context.maximum_version = chosen[0], chosen[-1]


def _load_keystore(context: ssl.SSLContext, settings: TlsSettings) -> None:
    password = settings.key_password or None
    if settings.keystore_location:
        context.load_cert_chain(settings.keystore_location, password=password)
        return
    if not (settings.keystore_key and settings.keystore_certificate_chain):
        raise ValueError("ssl.keystore.key needs ssl.keystore.certificate.chain")
    # ssl loads keys from files only: a private file that lives for the duration of the call.
    with tempfile.NamedTemporaryFile("w", suffix=".pem") as pem:
        os.chmod(pem.name, 0o600)
        pem.write(settings.keystore_key.strip() + "\n" + settings.keystore_certificate_chain.strip() + "\n")
        pem.flush()
        context.load_cert_chain(pem.name, password=password)


def _load_truststore(context: ssl.SSLContext, settings: TlsSettings) -> None:
    if settings.truststore_location:
        context.load_verify_locations(cafile=settings.truststore_location)
    elif settings.truststore_certificates:
        context.load_verify_locations(cadata=settings.truststore_certificates)
    else:
        purpose = ssl.Purpose.CLIENT_AUTH if context.check_hostname is False else ssl.Purpose.SERVER_AUTH
        context.load_default_certs(purpose)


def _common(context: ssl.SSLContext, settings: TlsSettings) -> None:
    _versions(context, settings.enabled_protocols)
    if settings.cipher_suites:
        context.set_ciphers(":".join(settings.cipher_suites))


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """A listener's context: its keystore, and client certificates checked per ``ssl.client.auth``."""
    if not settings.has_keystore:
        raise ValueError("an SSL listener needs a keystore (ssl.keystore.location or ssl.keystore.key)")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _common(context, settings)
    _load_keystore(context, settings)
    context.verify_mode = {
        "none": ssl.CERT_NONE,
        "requested": ssl.CERT_OPTIONAL,
        "required": ssl.CERT_REQUIRED,
    }[settings.client_auth]
    if context.verify_mode != ssl.CERT_NONE:
        _load_truststore(context, settings)
    return context


def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """A connecting side's context: the server verified against the truststore, our certificate if any."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _common(context, settings)
    context.check_hostname = settings.endpoint_identification
    _load_truststore(context, settings)
    if settings.has_keystore:
        _load_keystore(context, settings)
    return context
