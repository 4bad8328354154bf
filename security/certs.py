"""A throwaway certificate authority and the PEM files Kafka's ``ssl.keystore.type=PEM`` expects.

For local clusters, compose files and tests: one CA per cluster directory, and per node a keystore
file holding its PKCS#8 private key followed by its certificate chain (what ``ssl.keystore.location``
names), plus the CA certificate as the truststore (``ssl.truststore.location``). Subjects are built
so that their RFC 2253 form reads ``CN=<name>,OU=<unit>,O=<organization>``, the string Kafka maps
through ``ssl.principal.mapping.rules``. Elliptic-curve keys keep generation and handshakes fast.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertificateAuthority", "Issued", "create_authority", "load_authority"]

ORGANIZATION = "kafka-zk"
VALIDITY = datetime.timedelta(days=365)
DEFAULT_HOSTS = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class Issued:
    """One node's files: ``keystore`` (key + chain, for ``ssl.keystore.location``), and the parts."""

    keystore: Path
    certificate: Path
    key: Path
    subject: str
    """RFC 2253 form, e.g. ``CN=broker-1,OU=cluster,O=kafka-zk``."""


def _subject(common_name: str, unit: str) -> x509.Name:
    # Most general first in the certificate, so that the RFC 2253 string starts with CN.
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _san(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
    )
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_bytes(data)


class CertificateAuthority:
    """A self-signed CA whose certificate is ``certificate`` (the truststore every node shares)."""

    def __init__(self, certificate: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
        self.certificate = certificate
        self._cert = cert
        self._key = key

    def issue(
        self,
        directory: Path,
        name: str,
        *,
        unit: str = "cluster",
        hosts: Sequence[str] = DEFAULT_HOSTS,
        key_password: str | None = None,
    ) -> Issued:
        """A certificate for ``name`` (server and client use), valid for ``hosts``; files ``<name>.*``."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_subject(name, unit))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
            .add_extension(_san(hosts), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        chain = cert_pem + self._cert.public_bytes(serialization.Encoding.PEM)
        key_pem = _key_pem(key, key_password)
        directory.mkdir(parents=True, exist_ok=True)
        certificate, key_path, keystore = (
            directory / f"{name}{s}" for s in (".crt", ".key", ".keystore.pem")
        )
        certificate.write_bytes(chain)
        _write_private(key_path, key_pem)
        _write_private(keystore, key_pem + chain)
        return Issued(keystore, certificate, key_path, cert.subject.rfc4514_string())


_CA_USAGE = x509.KeyUsage(
    digital_signature=True,
    key_cert_sign=True,
    crl_sign=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    encipher_only=False,
    decipher_only=False,
)


def create_authority(directory: Path, name: str = "kafka-zk local CA") -> CertificateAuthority:
    """A new CA in ``directory`` (``ca.crt``, ``ca.key``), replacing any there."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    subject = _subject(name, "ca")
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_CA_USAGE, critical=True)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    certificate = directory / "ca.crt"
    certificate.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_private(directory / "ca.key", _key_pem(key, None))
    return CertificateAuthority(certificate, cert, key)


def load_authority(directory: Path) -> CertificateAuthority:
    """The CA that :func:`create_authority` left in ``directory``."""
    cert = x509.load_pem_x509_certificate((directory / "ca.crt").read_bytes())
    key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{directory / 'ca.key'} is not an elliptic-curve key")
    return CertificateAuthority(directory / "ca.crt", cert, key)
