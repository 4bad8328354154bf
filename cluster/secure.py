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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from security.certs import CertificateAuthority, create_authority, load_authority
from security.sasl import derive_credential
from zkstore.aio import AsyncZooKeeper
from zkstore.security import ZkSecurity
from zkstore.users import set_scram_credential

__all__ = ["MECHANISM", "SecureCluster"]

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

    @classmethod
    def create(cls, directory: Path) -> SecureCluster:
        """A new CA and ZooKeeper identity in ``directory``, or the ones already there."""
        directory.mkdir(parents=True, exist_ok=True)
        ca = load_authority(directory) if (directory / "ca.key").exists() else create_authority(directory)
        secret_file = directory / "zookeeper.identity"
        if not secret_file.exists():
            secret_file.touch(mode=0o600)
            secret_file.write_text(f"kafka:{secrets.token_urlsafe(18)}\n")
        return cls(directory, ca, secret_file.read_text().strip())

    @property
    def zk_security(self) -> ZkSecurity:
        return ZkSecurity(set_acl=True, digest=self.zk_identity)

    def _node(self, name: str) -> dict[str, Any]:
        keystore = self.directory / f"{name}.keystore.pem"
        if not keystore.exists():
            self.ca.issue(self.directory, name)
        return {
            "ssl.keystore.location": keystore,
            "ssl.truststore.location": self.ca.certificate,
            "ssl.client.auth": "required",
            "ssl.principal.mapping.rules": MAPPING_RULES,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": SUPER_USERS,
            "zookeeper.set.acl": "true",
            "zookeeper.auth.digest": self.zk_identity,
        }

    def broker_settings(self) -> dict[str, Any]:
        """Settings for every broker (its id goes in ``broker.id``; certificates are per id)."""
        return {
            "listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
            "listener.security.protocol.map": PROTOCOL_MAP,
            "inter.broker.listener.name": "INTERNAL",
            "control.plane.listener.name": "CONTROLLER",
            "listener.name.client.ssl.client.auth": "none",
            "listener.name.client.sasl.enabled.mechanisms": MECHANISM,
        }

    def broker(self, broker_id: int) -> dict[str, Any]:
        return {**self._node(f"broker-{broker_id}"), **self.broker_settings()}

    def controller(self, controller_id: int) -> dict[str, Any]:
        return {
            **self._node(f"controller-{controller_id}"),
            "listeners": "RPC://127.0.0.1:0",
            "listener.security.protocol.map": "RPC:SSL",
            "inter.broker.listener.name": "INTERNAL",
            "control.plane.listener.name": "CONTROLLER",
        }

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
