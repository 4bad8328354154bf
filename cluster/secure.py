"""A secured cluster's settings: a throwaway CA, one certificate per node, SCRAM for clients, ACLs on.

Every listener speaks TLS. Cluster traffic (the control plane, replication, brokers to the
controller) uses mutual TLS: certificate subjects ``CN=broker-<id>`` and ``CN=controller-<id>`` map to
the principals ``User:broker`` and ``User:controller``, the super users. Clients authenticate with
SCRAM-SHA-512 on the CLIENT listener (SASL_SSL), or with their own certificate on the INTERNAL one.
ZooKeeper writes carry the cluster's digest identity (``zookeeper.set.acl``), so that only the cluster
may change its znodes. Listener names avoid ``_`` because the process helpers read ``_`` as ``.``.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from security.certs import DEFAULT_HOSTS, CertificateAuthority, create_authority, load_authority
from security.config import ClientSecurity, ListenerSecurity
from security.principal import PrincipalMapper
from security.sasl import derive_credential
from security.tls import TlsSettings, client_context, server_context
from zkserver.config import ServerTls
from zkserver.ports import LOOPBACK
from zkstore.aio import AsyncZooKeeper
from zkstore.security import ZkSecurity
from zkstore.users import set_scram_credential

__all__ = ["MECHANISM", "SecureCluster", "write_private"]

MECHANISM = "SCRAM-SHA-512"
MAPPING_RULES = (
    r"RULE:^CN=(broker|controller)-[0-9]+,OU=cluster,O=kafka-zk$/$1/,"
    r"RULE:^CN=([A-Za-z0-9._-]+),OU=clients,O=kafka-zk$/$1/,"
    "DEFAULT"
)
"""Node certificates name the node's role (``User:broker``, ``User:controller``), client certificates
their common name (``CN=alice,OU=clients,…`` is ``User:alice``, as a SCRAM login of alice would be)."""
SUPER_USERS = "User:broker;User:controller;User:admin"
PROTOCOL_MAP = "CLIENT:SASL_SSL,INTERNAL:SSL,CONTROLLER:SSL"


@dataclass
class SecureCluster:
    """The files and secrets of one secured cluster, kept in ``directory``."""

    directory: Path
    ca: CertificateAuthority
    zk_identity: str
    """``user:password`` of the cluster's ZooKeeper sessions."""
    zookeeper_tls: bool = False
    """Whether the nodes reach ZooKeeper over TLS (its secure port), with their own certificate."""

    @classmethod
    def create(cls, directory: Path, *, zookeeper_tls: bool = False) -> SecureCluster:
        """A new CA and ZooKeeper identity in ``directory``, or the ones already there."""
        directory.mkdir(parents=True, exist_ok=True)
        ca = load_authority(directory) if (directory / "ca.key").exists() else create_authority(directory)
        return cls(directory, ca, _secret(directory / "zookeeper.identity", "kafka"), zookeeper_tls)

    @property
    def zk_security(self) -> ZkSecurity:
        """The cluster's own ZooKeeper identity (what its tools need to change its znodes)."""
        if not self.zookeeper_tls:
            return ZkSecurity(set_acl=True, digest=self.zk_identity)
        return ZkSecurity(
            set_acl=True,
            digest=self.zk_identity,
            tls=True,
            keystore=self.keystore("admin", unit="clients"),
            truststore=self.ca.certificate,
        )

    def keystore(self, name: str, *, unit: str = "cluster", hosts: Sequence[str] = DEFAULT_HOSTS) -> Path:
        """``name``'s PEM keystore, issued on first use (valid for ``hosts``)."""
        keystore = self.directory / f"{name}.keystore.pem"
        if not keystore.exists():
            self.ca.issue(self.directory, name, unit=unit, hosts=hosts)
        return keystore

    def zookeeper_server(self, host: str = LOOPBACK) -> ServerTls:
        """TLS for the ZooKeeper server's secure port: every client must show a certificate of the CA."""
        return ServerTls(self.keystore("zookeeper", hosts=_hosts(host)), self.ca.certificate, "need")

    def _node(self, name: str, host: str) -> dict[str, Any]:
        keystore = self.keystore(name, hosts=_hosts(host))
        return {
            "ssl.keystore.location": keystore,
            "ssl.truststore.location": self.ca.certificate,
            "ssl.client.auth": "required",
            "ssl.principal.mapping.rules": MAPPING_RULES,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": SUPER_USERS,
            **self.zk_properties(keystore if self.zookeeper_tls else None),
        }

    def zk_properties(self, keystore: Path | None) -> dict[str, str]:
        """The ``zookeeper.*`` settings of a session with the cluster's identity (a daemon's, or the
        CLI's ``--zk-config``): its digest and ACLs, and over TLS with ``keystore`` when given."""
        properties = {"zookeeper.set.acl": "true", "zookeeper.auth.digest": self.zk_identity}
        if keystore is not None:
            properties |= {
                "zookeeper.ssl.client.enable": "true",
                "zookeeper.ssl.keystore.location": str(keystore),
                "zookeeper.ssl.truststore.location": str(self.ca.certificate),
            }
        return properties

    def broker(
        self, broker_id: int, *, host: str = LOOPBACK, ports: tuple[int, int, int] = (0, 0, 0)
    ) -> dict[str, Any]:
        """Every setting of broker ``broker_id`` but its id: CLIENT, INTERNAL and CONTROLLER listeners on
        ``ports`` (0: any free one) of ``host``, which its certificate names."""
        client, internal, control = ports
        return {
            **self._node(f"broker-{broker_id}", host),
            "listeners": f"CLIENT://{host}:{client},INTERNAL://{host}:{internal},CONTROLLER://{host}:{control}",
            "listener.security.protocol.map": PROTOCOL_MAP,
            "inter.broker.listener.name": "INTERNAL",
            "control.plane.listener.name": "CONTROLLER",
            "listener.name.client.ssl.client.auth": "none",
            "listener.name.client.sasl.enabled.mechanisms": MECHANISM,
        }

    def controller(self, controller_id: int, *, host: str = LOOPBACK, port: int = 0) -> dict[str, Any]:
        """Every setting of controller ``controller_id`` but its id: an SSL RPC listener on ``host:port``."""
        return {
            **self._node(f"controller-{controller_id}", host),
            "listeners": f"RPC://{host}:{port}",
            "listener.security.protocol.map": "RPC:SSL",
            "inter.broker.listener.name": "INTERNAL",
            "control.plane.listener.name": "CONTROLLER",
        }

    def dialing(self, keystore: Path | None) -> ClientSecurity:
        """How a client dials the SSL listeners: with the certificate in ``keystore``, or none."""
        settings = TlsSettings(
            keystore_location=str(keystore) if keystore else None,
            truststore_location=str(self.ca.certificate),
        )
        return ClientSecurity("SSL", client_context(settings))

    def serving(self, name: str, listener: str) -> ListenerSecurity:
        """An SSL listener served with node ``name``'s certificate, as the daemons serve theirs: client
        certificates required and mapped to principals by the cluster's rules."""
        settings = TlsSettings(
            keystore_location=str(self.keystore(name)),
            truststore_location=str(self.ca.certificate),
            client_auth="required",
        )
        return ListenerSecurity(listener, "SSL", server_context(settings), PrincipalMapper(MAPPING_RULES))

    def client_certificate(self, name: str) -> Path:
        """A keystore for a client authenticating with its certificate as ``User:<name>``."""
        return self.ca.issue(self.directory, name, unit="clients").keystore

    async def add_user(self, zk: AsyncZooKeeper, user: str, password: str) -> None:
        """Store a SCRAM-SHA-512 credential for ``user`` (``zk`` must carry the cluster's identity)."""
        await set_scram_credential(zk, user, MECHANISM, derive_credential(MECHANISM, password))

    def client_config(self, user: str, password: str) -> dict[str, str]:
        """librdkafka / confluent-kafka settings for a SCRAM client of the CLIENT listener."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM,
            "sasl.username": user,
            "sasl.password": password,
            "ssl.ca.location": str(self.ca.certificate),
        }

    def password(self, user: str) -> str:
        """``user``'s SCRAM password, kept in ``<user>.password`` (made on first use)."""
        return _secret(self.directory / f"{user}.password")

    def write_client_config(self, path: Path, user: str, password: str) -> Path:
        """:meth:`client_config` as a properties file, for kcat's ``-F`` and the CLI's
        ``--command-config`` (Kafka tools' spelling)."""
        write_private(path, "".join(f"{k}={v}\n" for k, v in self.client_config(user, password).items()))
        return path

    def write_zk_config(self, path: Path) -> Path:
        """:attr:`zk_security` as the ``zookeeper.*`` properties the CLI's ``--zk-config`` reads."""
        lines = self.zk_properties(self.zk_security.keystore)
        write_private(path, "".join(f"{k}={v}\n" for k, v in lines.items()))
        return path


def _hosts(host: str) -> tuple[str, ...]:
    return DEFAULT_HOSTS if host in DEFAULT_HOSTS else (*DEFAULT_HOSTS, host)


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner may read: it holds a password."""
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(text)


def _secret(path: Path, user: str | None = None) -> str:
    """The secret kept in ``path`` (``user:password`` with ``user``), made on first use."""
    if not path.exists():
        password = secrets.token_urlsafe(18)
        write_private(path, f"{user}:{password}\n" if user else f"{password}\n")
    return path.read_text().strip()
