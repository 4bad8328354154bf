"""``python -m cluster.secrets_cli``: the secrets of a secured deployment, made in one directory.

``generate`` keeps or makes the secured layout of :mod:`cluster.secure` (a throwaway CA and the
cluster's ZooKeeper digest identity) and, from it: a certificate per node valid for the node's host
name, one for the ZooKeeper servers, a certificate and a password for one client user, and the files
that use them. Run again, it keeps every certificate still valid for what is asked and every secret.
Run as root, it gives each file to the user that reads it (``--owner``, ``--zookeeper-owner``) and
keeps the CA's key to itself.

``register``, once ZooKeeper serves, stores the client user's SCRAM credential and closes ZooKeeper's
root to everyone but the cluster (creator-all, world-read), so that no other session can delete
``/controller`` or create top-level znodes. It needs no root and never reads the CA's key.

Files in ``--dir`` (besides ``ca.crt``, ``ca.key``, ``zookeeper.identity`` and ``<name>.crt``,
``<name>.key``, ``<name>.keystore.pem`` per certificate):

``daemon.properties``
    what every daemon reads with ``--config`` because it cannot be in a compose file's environment:
    the ZooKeeper digest identity (a secret) and the client listeners' own keys (``listener.name.*``
    keys are read from files only).
``zookeeper-admin.properties``
    the admin CLI's ``--zk-config``: the digest identity over TLS with the client user's certificate.
``<user>.password``
    the client user's password.
``client/client.properties``, ``client/ca.crt``
    librdkafka / confluent-kafka settings for the client user, with the CA beside them
    (``ssl.ca.location`` is relative: run clients from that directory).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import NameOID

from cluster.secure import MECHANISM, PROTOCOL_MAP, SecureCluster, write_private
from security.certs import DEFAULT_HOSTS, CertificateAuthority
from security.sasl import derive_credential
from zkstore.aio import AsyncZooKeeper
from zkstore.client_config import load_zk_security
from zkstore.users import set_scram_credential

__all__ = [
    "CLIENT_DIR",
    "DAEMON_CONFIG",
    "ZOOKEEPER_ADMIN_CONFIG",
    "ZOOKEEPER_CERTIFICATE",
    "Owner",
    "SecretsRequest",
    "generate",
    "main",
    "register",
]

DAEMON_CONFIG = "daemon.properties"
ZOOKEEPER_ADMIN_CONFIG = "zookeeper-admin.properties"
CLIENT_DIR = "client"
CLIENT_CONFIG = "client.properties"
ZOOKEEPER_CERTIFICATE = "zookeeper"
"""One certificate for every ZooKeeper server, valid for all their host names: their zoo.cfg is then
the same on every server."""
RENEW_BEFORE = datetime.timedelta(days=30)
"""A kept certificate that expires sooner than this is issued again."""
CONNECT_TIMEOUT_S = 30.0
PUBLIC = 0o644
"""The CA certificate's mode: every container's user reads it, whatever the umask."""
NAME = re.compile(r"[A-Za-z0-9._-]+")
"""Host and user names: file names here, and what the principal mapping rules accept."""


@dataclass(frozen=True)
class Owner:
    """Who a file is given to (``chown``); ``gid`` -1 leaves the group as it is."""

    uid: int
    gid: int = -1

    @classmethod
    def parse(cls, text: str) -> Owner:
        """``UID`` or ``UID:GID``, numeric: the users of the containers reading the files."""
        uid, _, gid = text.partition(":")
        try:
            return cls(int(uid), int(gid) if gid else -1)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected UID or UID:GID (numbers), not {text!r}") from None


@dataclass(frozen=True)
class SecretsRequest:
    """What :func:`generate` makes in ``directory``."""

    directory: Path
    nodes: tuple[str, ...]
    """Brokers (``broker-<id>``) and controllers (``controller-<id>``), named as their hosts."""
    zookeeper_hosts: tuple[str, ...]
    client: str = "admin"
    bootstrap_servers: str | None = None
    owner: Owner | None = None
    """Of everything but the CA's key and the ZooKeeper servers' files (the daemons' user)."""
    zookeeper_owner: Owner | None = None
    """Of the ZooKeeper servers' key and certificate (the ZooKeeper image's user)."""


# ---------------------------------------------------------------- generate


def generate(request: SecretsRequest) -> list[str]:
    """Make or keep every file of ``request``; one line per certificate and file, for the log."""
    directory = request.directory.resolve()
    had_authority = (directory / "ca.key").exists()
    cluster = SecureCluster.create(directory)
    cluster.ca.certificate.chmod(PUBLIC)
    report = [f"{'kept' if had_authority else 'made'} the CA {cluster.ca.certificate}"]
    owned: list[Path] = [cluster.ca.certificate, directory / "zookeeper.identity"]
    for node in request.nodes:
        owned += _certificate(cluster.ca, directory, node, "cluster", (node, *DEFAULT_HOSTS), report)
    zookeeper_files = _certificate(
        cluster.ca,
        directory,
        ZOOKEEPER_CERTIFICATE,
        "zookeeper",
        (*request.zookeeper_hosts, *DEFAULT_HOSTS),
        report,
    )
    client_files = _certificate(cluster.ca, directory, request.client, "clients", DEFAULT_HOSTS, report)
    password = cluster.password(request.client)
    password_file = directory / f"{request.client}.password"
    written = _configuration(cluster, directory, request, client_files[0], password)
    report += [f"wrote {path}" for path in written]
    owned += [*client_files, password_file, *written]
    if os.geteuid() == 0:
        _give([*owned, directory / CLIENT_DIR], request.owner)
        _give(zookeeper_files, request.zookeeper_owner)
    elif request.owner is not None or request.zookeeper_owner is not None:
        report.append(f"not root: every file stays with uid {os.geteuid()}")
    return report


def _configuration(
    cluster: SecureCluster, directory: Path, request: SecretsRequest, client_keystore: Path, password: str
) -> list[Path]:
    """``daemon.properties``, ``zookeeper-admin.properties`` and the client bundle."""
    daemon: dict[str, str] = {"zookeeper.auth.digest": cluster.zk_identity}
    for listener in _sasl_ssl_listeners(PROTOCOL_MAP):
        # Clients of SASL listeners authenticate with SCRAM, not with a certificate.
        daemon[f"listener.name.{listener.lower()}.ssl.client.auth"] = "none"
    admin = cluster.zk_properties(client_keystore)
    bundle = directory / CLIENT_DIR
    bundle.mkdir(exist_ok=True)
    ca_copy = bundle / "ca.crt"
    ca_copy.write_bytes(cluster.ca.certificate.read_bytes())
    ca_copy.chmod(PUBLIC)
    client = cluster.client_config(request.client, password) | {"ssl.ca.location": ca_copy.name}
    if request.bootstrap_servers:
        client = {"bootstrap.servers": request.bootstrap_servers, **client}
    comments = {
        DAEMON_CONFIG: "Every daemon's --config: what cannot be in its environment.",
        ZOOKEEPER_ADMIN_CONFIG: "The admin CLI's --zk-config: the cluster's ZooKeeper identity over TLS.",
        CLIENT_CONFIG: f"librdkafka settings of {request.client} ({MECHANISM}). ssl.ca.location is "
        "relative: run clients from this directory (kcat -F client.properties), or make it absolute.",
    }
    files = {
        directory / DAEMON_CONFIG: daemon,
        directory / ZOOKEEPER_ADMIN_CONFIG: admin,
        bundle / CLIENT_CONFIG: client,
    }
    for path, settings in files.items():
        lines = [f"# {comments[path.name]}", *(f"{k}={v}" for k, v in settings.items())]
        write_private(path, "\n".join(lines) + "\n")
    return [*files, ca_copy]


def _sasl_ssl_listeners(protocol_map: str) -> list[str]:
    pairs = (item.split(":", 1) for item in protocol_map.split(","))
    return [listener for listener, protocol in pairs if protocol == "SASL_SSL"]


def _certificate(
    ca: CertificateAuthority,
    directory: Path,
    name: str,
    unit: str,
    hosts: Sequence[str],
    report: list[str],
) -> list[Path]:
    """``name``'s keystore, certificate and key: kept when still valid for ``hosts``, else issued."""
    files = [directory / f"{name}{suffix}" for suffix in (".keystore.pem", ".crt", ".key")]
    hosts = tuple(dict.fromkeys(hosts))
    reason = _reissue_reason(ca, files, unit, hosts)
    if reason is None:
        report.append(f"kept {name}")
    else:
        ca.issue(directory, name, unit=unit, hosts=hosts)
        report.append(f"issued {name} ({reason}) for {', '.join(hosts)}")
    return files


def _reissue_reason(
    ca: CertificateAuthority, files: list[Path], unit: str, hosts: Iterable[str]
) -> str | None:
    """Why the certificate in ``files`` cannot be kept, or None when it can."""
    if not all(path.exists() for path in files):
        return "new"
    cert = x509.load_pem_x509_certificates(files[1].read_bytes())[0]
    authority = x509.load_pem_x509_certificate(ca.certificate.read_bytes())
    try:
        cert.verify_directly_issued_by(authority)
    except (InvalidSignature, ValueError, TypeError):
        return "another CA"
    if cert.not_valid_after_utc - datetime.datetime.now(datetime.UTC) < RENEW_BEFORE:
        return "expiring"
    units = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)
    if [u.value for u in units] != [unit]:
        return "another unit"
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    named = {str(n.value) for n in san if isinstance(n, x509.DNSName | x509.IPAddress)}
    if not set(hosts) <= named:
        return "new host names"
    return None


def _give(paths: Iterable[Path], owner: Owner | None) -> None:
    if owner is None:
        return
    for path in paths:
        os.chown(path, owner.uid, owner.gid)


# ---------------------------------------------------------------- register


async def register(directory: Path, zookeeper: str, client: str = "admin") -> list[str]:
    """Store ``client``'s SCRAM credential and close ZooKeeper's root, as the cluster's identity."""
    security = load_zk_security(directory / ZOOKEEPER_ADMIN_CONFIG)
    root_acl = security.acls_for("/")
    if root_acl is None:
        raise ValueError(f"{ZOOKEEPER_ADMIN_CONFIG} must set zookeeper.set.acl=true")
    password = (directory / f"{client}.password").read_text().strip()
    zk = AsyncZooKeeper(zookeeper, security=security, connect_timeout_s=CONNECT_TIMEOUT_S)
    await zk.start()
    try:
        await zk.set_acls("/", root_acl)
        await set_scram_credential(zk, client, MECHANISM, derive_credential(MECHANISM, password))
    finally:
        await zk.close()
    return [
        f"ZooKeeper's root: all rights for the cluster's identity, read for everyone ({zookeeper})",
        f"stored the {MECHANISM} credential of {client}",
    ]


# ---------------------------------------------------------------- command line


def _name(text: str) -> str:
    if not NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a host or user name ([A-Za-z0-9._-])")
    return text


def _names(text: str) -> tuple[str, ...]:
    return tuple(_name(name.strip()) for name in text.split(",") if name.strip())


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="python -m cluster.secrets_cli",
        description="Certificates, passwords and configuration files of a secured cluster, in one "
        "directory (generate), and the client user's SCRAM credential in ZooKeeper (register).",
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    made = commands.add_parser("generate", help="make (or keep) every file; idempotent")
    made.add_argument("--dir", type=Path, required=True, help="where the files go (created)")
    made.add_argument(
        "--nodes",
        type=_names,
        required=True,
        metavar="HOST,...",
        help="broker and controller hosts",
    )
    made.add_argument(
        "--zookeeper-hosts", type=_names, required=True, metavar="HOST,...", help="the ZooKeeper servers"
    )
    made.add_argument(
        "--client", type=_name, default="admin", help="the client user (default admin, a super user)"
    )
    made.add_argument("--bootstrap-servers", metavar="HOST:PORT,...", help="written into client.properties")
    made.add_argument("--owner", type=Owner.parse, metavar="UID[:GID]", help="the daemons' user (as root)")
    made.add_argument(
        "--zookeeper-owner", type=Owner.parse, metavar="UID[:GID]", help="ZooKeeper's user (as root)"
    )
    stored = commands.add_parser(
        "register", help="store the client user's credential; close ZooKeeper's root"
    )
    stored.add_argument("--dir", type=Path, required=True, help="the directory generate wrote")
    stored.add_argument("--zookeeper", required=True, metavar="HOST:PORT,...", help="ZooKeeper's TLS port(s)")
    stored.add_argument("--client", type=_name, default="admin", help="the client user (default admin)")
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "generate":
        request = SecretsRequest(
            directory=args.dir,
            nodes=args.nodes,
            zookeeper_hosts=args.zookeeper_hosts,
            client=args.client,
            bootstrap_servers=args.bootstrap_servers,
            owner=args.owner,
            zookeeper_owner=args.zookeeper_owner,
        )
        lines = generate(request)
    else:
        lines = asyncio.run(register(args.dir.resolve(), args.zookeeper, args.client))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
