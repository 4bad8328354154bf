"""ZooKeeper ACLs on the znodes the cluster creates, authenticated sessions and ZooKeeper over TLS,
against a real server (Kafka's ``zookeeper.set.acl`` and ``zookeeper.ssl.*``, KIP-515)."""

from __future__ import annotations

import argparse
import asyncio
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import ACL, make_digest_acl_credential

from cluster import admin_cli, topics_cli
from daemon.config import ConfigError, load_config
from security.certs import CertificateAuthority, Issued, create_authority
from tests.support.zookeeper import session
from zkserver.config import ServerTls
from zkserver.exporter import MntrCollector
from zkserver.four_letter_words import four_letter_word
from zkserver.server import ZooKeeperServer
from zkstore import entity_configs, topic_writes, znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.client_config import ZOOKEEPER_SECURITY_KEYS, load_zk_security, zk_security_from_loaded
from zkstore.election import try_elect
from zkstore.registration import register_broker
from zkstore.security import ZkSecurity, kazoo_arguments, ssl_context

ALICE, BOB = ("alice", "alice-secret"), ("bob", "bob-secret")
CONNECT_TIMEOUT_S = 15.0
REFUSED_TIMEOUT_S = 3.0
"""How long a session that must be refused gets to (not) connect."""

Acl = tuple[int, str, str]
ALL, READ = 31, 1
WORLD = ("world", "anyone")


def digest(user: tuple[str, str]) -> str:
    return f"{user[0]}:{user[1]}"


def creator(user: tuple[str, str]) -> Acl:
    """The ACL entry ZooKeeper stores for ``auth`` (creator-all) when ``user`` creates a znode."""
    return (ALL, "digest", make_digest_acl_credential(*user))


def acl_set(acls: list[ACL]) -> set[Acl]:
    return {(acl.perms, acl.id.scheme, acl.id.id) for acl in acls}


def secured_by(user: tuple[str, str]) -> ZkSecurity:
    return ZkSecurity(set_acl=True, digest=digest(user))


async def acls_of(zk: AsyncZooKeeper, path: str) -> set[Acl]:
    acls, _ = await asyncio.to_thread(zk.client.get_acls, path)
    return acl_set(acls)


async def remove_everything(zk: AsyncZooKeeper) -> None:
    """Delete the test's znodes with their creator's session: the shared fixture's cleanup runs
    unauthenticated and may not delete children of ACL'd znodes."""
    for child in await zk.get_children("/"):
        await asyncio.to_thread(zk.client.delete, "/" + child, recursive=True)


@pytest.fixture
async def alice(zk_connect: str) -> AsyncIterator[AsyncZooKeeper]:
    """A cluster session with ``zookeeper.set.acl`` and the digest identity alice."""
    zk = await session(zk_connect, secured_by(ALICE))
    try:
        yield zk
    finally:
        await remove_everything(zk)
        await zk.close()


@pytest.fixture
def stranger(zk: AsyncZooKeeper) -> AsyncZooKeeper:
    """An unauthenticated session in the same chroot (the shared ``zk`` fixture)."""
    return zk


# ---------------------------------------------------------------- the policy, without a server


def test_policy_follows_kafka_default_acls() -> None:
    policy = secured_by(ALICE)
    creator_all, world_read = (ALL, "auth", ""), (READ, *WORLD)
    assert acl_set(policy.acls_for("/brokers/ids/1") or []) == {creator_all, world_read}
    for sensitive in (
        "/config/users",
        "/config/users/alice",
        "/config/brokers/1",
        "/delegation_token/tokens/t",
    ):
        assert acl_set(policy.acls_for(sensitive) or []) == {creator_all}, sensitive
    assert acl_set(policy.acls_for("/config/usersx") or []) == {creator_all, world_read}
    assert acl_set(policy.acls_for("/consumers") or []) == {(ALL, *WORLD)}
    assert ZkSecurity(digest=digest(ALICE)).acls_for("/brokers") is None  # no set_acl: ZooKeeper's default


def test_set_acl_without_an_identity_is_refused() -> None:
    with pytest.raises(ValueError, match="identity"):
        ZkSecurity(set_acl=True)
    with pytest.raises(ValueError, match="identity"):
        ZkSecurity(set_acl=True, tls=True, truststore=Path("ca.crt"))  # TLS, but no client certificate


def test_kazoo_arguments() -> None:
    assert kazoo_arguments(None) == {}
    arguments = kazoo_arguments(secured_by(ALICE))
    assert arguments["auth_data"] == [("digest", digest(ALICE))]
    assert acl_set(arguments["default_acl"]) == {(ALL, "auth", ""), (READ, *WORLD)}
    assert "use_ssl" not in arguments


def test_ssl_context_limits_protocols(tmp_path: Path) -> None:
    ca = create_authority(tmp_path / "ca")
    issued = ca.issue(tmp_path, "client", key_password="pw")
    security = ZkSecurity(
        tls=True,
        keystore=issued.keystore,
        key_password="pw",
        truststore=ca.certificate,
        protocols=("TLSv1.3",),
    )
    context = ssl_context(security)
    assert (context.minimum_version, context.maximum_version) == (ssl.TLSVersion.TLSv1_3,) * 2
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    assert not ssl_context(
        ZkSecurity(tls=True, truststore=ca.certificate, check_hostname=False)
    ).check_hostname


# ---------------------------------------------------------------- ACLs on the cluster's own znodes


async def test_every_znode_the_cluster_creates_carries_the_policy(
    alice: AsyncZooKeeper, stranger: AsyncZooKeeper
) -> None:
    for path in znodes.PERSISTENT_PATHS:  # what the controller makes sure exists at startup
        await alice.ensure_path(path)
    await register_broker(alice, 1, b'{"version":5,"host":"localhost","port":9092}')  # multi-op create
    token = await try_elect(alice, 3001, znodes.ControllerRegistration(3001, 0).encode())  # single + multi
    assert token is not None
    await topic_writes.create_internal_topic(alice, "orders", 1, 1, {"cleanup.policy": "compact"})  # makepath
    await entity_configs.change_topic_configs(alice, "orders", {"retention.ms": "1000"})  # sequential create
    await alice.create("/config/users/carol", b'{"version":1,"config":{}}', makepath=True)

    open_to_read = {creator(ALICE), (READ, *WORLD)}
    sensitive = {"/config/users", "/config/users/carol", "/config/brokers"}
    created = [
        *znodes.PERSISTENT_PATHS,
        "/brokers",
        "/config",
        znodes.broker_path(1),
        znodes.CONTROLLER,
        znodes.CONTROLLER_EPOCH,
        znodes.topic_path("orders"),
        "/config/topics/orders",
        "/config/users/carol",
        *("/config/changes/" + c for c in await alice.get_children("/config/changes")),
    ]
    for path in created:
        expected = (
            {(ALL, *WORLD)}
            if path == "/consumers"
            else {creator(ALICE)}
            if path in sensitive
            else open_to_read
        )
        assert await acls_of(alice, path) == expected, path


async def test_an_unauthenticated_session_reads_but_cannot_change(
    alice: AsyncZooKeeper, stranger: AsyncZooKeeper
) -> None:
    await register_broker(alice, 1, b'{"version":5}')
    await topic_writes.create_topic(alice, "orders", {0: (1,)})
    await alice.create("/config/users/carol", b"scram credentials", makepath=True)

    data, _ = await stranger.get(znodes.topic_path("orders"))  # world-readable
    assert znodes.decode_topic_assignment(data, znodes.topic_path("orders")) is not None
    assert await stranger.get_children(znodes.BROKER_IDS) == ["1"]
    with pytest.raises(NoAuthError):
        await stranger.set(znodes.topic_path("orders"), b"{}")
    with pytest.raises(NoAuthError):
        await stranger.delete(znodes.topic_path("orders"))
    with pytest.raises(NoAuthError):
        await stranger.create(znodes.broker_path(2), ephemeral=True)
    with pytest.raises(NoAuthError):
        await stranger.get("/config/users/carol")
    with pytest.raises(NoAuthError):
        await stranger.get_children("/config/users")
    # /consumers stays open to all, as in Kafka
    await alice.ensure_path("/consumers")
    await stranger.create("/consumers/old-group")
    await stranger.delete("/consumers/old-group")


async def test_another_digest_user_is_refused_too(alice: AsyncZooKeeper, zk_connect: str) -> None:
    await topic_writes.create_topic(alice, "orders", {0: (1,)})
    await alice.create("/config/brokers/1", b"{}", makepath=True)
    bob = await session(zk_connect, secured_by(BOB))
    try:
        with pytest.raises(NoAuthError):
            await bob.set(znodes.topic_path("orders"), b"{}")
        with pytest.raises(NoAuthError):
            await bob.delete(znodes.topic_path("orders"))
        with pytest.raises(NoAuthError):
            await bob.get("/config/brokers/1")
        # what bob creates under a node he may create in is his own
        await bob.create("/bobs", b"", makepath=True)
        assert await acls_of(bob, "/bobs") == {creator(BOB), (READ, *WORLD)}
        with pytest.raises(NoAuthError):
            await alice.set("/bobs", b"x")
    finally:
        await bob.delete("/bobs")
        await bob.close()


async def test_the_admin_cli_authenticates_with_zk_config(
    alice: AsyncZooKeeper, zk_connect: str, tmp_path: Path
) -> None:
    await register_broker(alice, 1, b'{"version":5,"host":"localhost","port":9092}')
    config = tmp_path / "zk.properties"
    config.write_text(f"zookeeper.set.acl=true\nzookeeper.auth.digest={digest(ALICE)}\n")

    top = argparse.ArgumentParser()
    topics_cli.register(top.add_subparsers(dest="command", required=True), admin_cli.common_options())

    def run(*argv: str) -> int:
        args = top.parse_args(list(argv))
        return int(args.run(args) or 0)

    common = ("--zookeeper", zk_connect, "--zk-config", str(config))
    create = ("topics", "create", "made-by-cli", "--partitions", "1", "--replication-factor", "1")
    assert await asyncio.to_thread(run, *create, *common) == 0
    assert await acls_of(alice, znodes.topic_path("made-by-cli")) == {creator(ALICE), (READ, *WORLD)}
    assert await asyncio.to_thread(run, "topics", "delete", "made-by-cli", *common) == 0
    assert await acls_of(alice, znodes.delete_topic_path("made-by-cli")) == {creator(ALICE), (READ, *WORLD)}


# ---------------------------------------------------------------- ZooKeeper over TLS


class TlsServer:
    """A private ZooKeeper serving TLS (client certificates required), with its CA and certificates."""

    def __init__(self, directory: Path) -> None:
        self.ca: CertificateAuthority = create_authority(directory / "ca")
        self.client: Issued = self.ca.issue(directory / "certs", "broker-1", key_password="key-pw")
        server = self.ca.issue(directory / "certs", "zookeeper")
        tls = ServerTls(keystore=server.keystore, truststore=self.ca.certificate, client_auth="need")
        self.server = ZooKeeperServer(data_dir=directory / "zookeeper", tls=tls)

    def security(self, **changes: object) -> ZkSecurity:
        settings: dict[str, object] = {
            "tls": True,
            "keystore": self.client.keystore,
            "key_password": "key-pw",
            "truststore": self.ca.certificate,
        }
        return ZkSecurity(**(settings | changes))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsServer]:
    tls = TlsServer(tmp_path_factory.mktemp("zookeeper-tls"))
    tls.server.start()
    try:
        yield tls
    finally:
        tls.server.stop()


async def test_a_session_over_tls_with_a_client_certificate(tls_server: TlsServer) -> None:
    security = tls_server.security(set_acl=True)  # the certificate is the identity: no digest
    zk = await session(tls_server.server.secure_connect_string, security)
    try:
        await zk.create("/tls/broker", b"hello", makepath=True)
        assert (await zk.get("/tls/broker"))[0] == b"hello"
        subject = tls_server.client.subject
        assert await acls_of(zk, "/tls/broker") == {(ALL, "x509", subject), (READ, *WORLD)}
        await asyncio.to_thread(zk.client.delete, "/tls", recursive=True)
    finally:
        await zk.close()


async def test_tls_protocol_versions_are_honoured(tls_server: TlsServer) -> None:
    for protocols in (("TLSv1.2",), ("TLSv1.3",)):
        zk = await session(tls_server.server.secure_connect_string, tls_server.security(protocols=protocols))
        try:
            assert await zk.exists("/") is not None
        finally:
            await zk.close()


@pytest.mark.parametrize(
    ("case", "changes"),
    [("no CA", {"truststore": None}), ("no client certificate", {"keystore": None, "key_password": None})],
)
async def test_tls_sessions_are_refused(tls_server: TlsServer, case: str, changes: dict[str, object]) -> None:
    zk = AsyncZooKeeper(
        tls_server.server.secure_connect_string,
        connect_timeout_s=REFUSED_TIMEOUT_S,
        security=tls_server.security(**changes),
    )
    with pytest.raises(KazooTimeoutError):
        await zk.start()


def test_plaintext_port_stays_for_health_checks(tls_server: TlsServer) -> None:
    assert tls_server.server.mode() == "standalone"
    client = KazooClient(hosts=tls_server.server.connect_string)
    client.start(timeout=CONNECT_TIMEOUT_S)
    try:
        assert client.exists("/") is not None
    finally:
        client.stop()
        client.close()


def test_four_letter_words_and_the_exporter_work_over_tls(tls_server: TlsServer) -> None:
    """The secured compose file's ZooKeeper-exporter reads mntr on the TLS port, with a certificate."""
    address = tls_server.server.secure_connect_string
    host, _, port = address.rpartition(":")
    tls = ssl_context(tls_server.security())
    assert "zk_server_state\tstandalone" in four_letter_word(host, int(port), "mntr", tls=tls)
    collector = MntrCollector([address], tls=tls)
    up = {s.name: s.value for family in collector.collect() for s in family.samples}
    assert up["zookeeper_up"] == 1.0 and up["znode_count"] > 0
    refused = MntrCollector([address], tls=ssl_context(tls_server.security(keystore=None, key_password=None)))
    assert [s.value for f in refused.collect() if f.name == "zookeeper_up" for s in f.samples] == [0.0]


# ---------------------------------------------------------------- the configuration keys


def load(tmp_path: Path, text: str) -> ZkSecurity:
    path = tmp_path / "zk.properties"
    path.write_text(text)
    return zk_security_from_loaded(load_config(ZOOKEEPER_SECURITY_KEYS, path, environ={}))


def test_defaults_are_an_open_plaintext_session(tmp_path: Path) -> None:
    assert load(tmp_path, "") == ZkSecurity(protocols=("TLSv1.2",))


def test_tls_keys(tmp_path: Path) -> None:
    ca = create_authority(tmp_path / "ca")
    issued = ca.issue(tmp_path, "broker-1")
    security = load(
        tmp_path,
        "zookeeper.set.acl=true\n"
        "zookeeper.ssl.client.enable=true\n"
        "zookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty\n"
        f"zookeeper.ssl.keystore.location={issued.keystore}\n"
        "zookeeper.ssl.keystore.password=pw\n"
        "zookeeper.ssl.keystore.type=PEM\n"
        f"zookeeper.ssl.truststore.location={ca.certificate}\n"
        "zookeeper.ssl.truststore.type=pem\n"
        "zookeeper.ssl.enabled.protocols=TLSv1.3,TLSv1.2\n"
        "zookeeper.ssl.cipher.suites=ECDHE-ECDSA-AES128-GCM-SHA256\n"
        "zookeeper.ssl.endpoint.identification.algorithm=\n",
    )
    assert security == ZkSecurity(
        set_acl=True,
        tls=True,
        keystore=issued.keystore,
        key_password="pw",
        truststore=ca.certificate,
        check_hostname=False,
        protocols=("TLSv1.3", "TLSv1.2"),
        cipher_suites=("ECDHE-ECDSA-AES128-GCM-SHA256",),
    )
    assert load(tmp_path, "zookeeper.ssl.protocol=TLSv1.3\n").protocols == ("TLSv1.3",)
    assert load(tmp_path, "zookeeper.ssl.client.enable=true\n").check_hostname  # HTTPS by default


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("zookeeper.set.acl=true\n", "zookeeper.set.acl"),
        ("zookeeper.set.acl=true\nzookeeper.ssl.client.enable=true\n", "zookeeper.set.acl"),
        ("zookeeper.auth.digest=nocolon\n", "zookeeper.auth.digest"),
        ("zookeeper.auth.digest=:password\n", "zookeeper.auth.digest"),
        ("zookeeper.ssl.keystore.type=JKS\n", "zookeeper.ssl.keystore.type"),
        ("zookeeper.ssl.truststore.type=PKCS12\n", "zookeeper.ssl.truststore.type"),
        ("zookeeper.ssl.enabled.protocols=TLSv1.2,TLSv1.1\n", "zookeeper.ssl.enabled.protocols"),
        ("zookeeper.ssl.protocol=SSLv3\n", "zookeeper.ssl.protocol"),
        ("zookeeper.ssl.keystore.location=/nonexistent/keystore.pem\n", "zookeeper.ssl.keystore.location"),
        ("zookeeper.set.acl=maybe\n", "zookeeper.set.acl"),
    ],
)
def test_invalid_settings_name_their_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, text)
    assert raised.value.key == key


def test_set_acl_with_a_digest_identity(tmp_path: Path) -> None:
    security = load(tmp_path, f"zookeeper.set.acl=true\nzookeeper.auth.digest={digest(ALICE)}\n")
    assert security == ZkSecurity(set_acl=True, digest=digest(ALICE), protocols=("TLSv1.2",))


def test_zk_config_file_must_be_readable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_zk_security(tmp_path / "missing.properties")
    assert raised.value.key == "--zk-config"
