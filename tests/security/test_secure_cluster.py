"""A secured cluster of real processes: mutual TLS between nodes, SCRAM for clients, ACLs, ZooKeeper ACLs.

The outsider's moves of issue 16 are tried against it: control requests and AlterPartition without
the cluster's identity, a broker without the ZooKeeper identity, an unauthenticated ZooKeeper
client, wrong passwords, topics without ACLs. Real clients produce and consume through it.
"""

from __future__ import annotations

import asyncio
import functools
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from cluster.processes import BrokerProcess
from cluster.secure import SecureCluster
from network.connection import KafkaConnection
from protocol import ApiKey, ErrorCode
from security.acl import AclEntry, AclOperation, AclPermissionType, PatternType, ResourcePattern, ResourceType
from security.config import ClientSecurity
from security.tls import TlsSettings, client_context
from tests.support.cluster import Cluster, epoch_of
from tests.support.requests import (
    alter_partition_request,
    lai_partition,
    leader_and_isr,
    stop_replica,
    update_metadata,
)
from tests.support.waiting import wait_until
from zkstore import znodes
from zkstore.acls import update_resource_acls
from zkstore.aio import AsyncZooKeeper
from zkstore.topic_writes import create_topic

PASSWORD = "alice-secret"


class Secured:
    """The secured cluster of one test, its authenticated ZooKeeper session and its CA."""

    def __init__(self, cluster: Cluster, secure: SecureCluster, zk: AsyncZooKeeper) -> None:
        self.cluster, self.secure, self.zk = cluster, secure, zk

    def bootstrap(self, listener: str = "CLIENT") -> str:
        return ",".join("{}:{}".format(*b.endpoint(listener)) for b in self.cluster.brokers.values())

    async def allow(self, kind: ResourceType, name: str, principal: str, *ops: AclOperation) -> None:
        """Grant ``ops`` and return once every broker's authorizer has them in force: brokers follow
        ACL changes through ZooKeeper notifications, so a client right after the write could be refused."""
        entries = {AclEntry(principal, AclPermissionType.ALLOW, op, "*") for op in ops}
        await update_resource_acls(self.zk, ResourcePattern(kind, name), lambda current: current | entries)
        admin = self.tls(self.secure.client_certificate("admin"))  # a super user may describe ACLs
        wanted = {(principal, int(op)) for op in ops}
        for broker in self.cluster.brokers.values():
            await wait_until(
                functools.partial(self._granted, broker, admin, kind, name, wanted),
                f"the ACLs of {name} in force on {broker.name}",
            )

    @staticmethod
    async def _granted(
        broker: BrokerProcess,
        admin: ClientSecurity,
        kind: ResourceType,
        name: str,
        wanted: set[tuple[str, int]],
    ) -> bool:
        host, port = broker.endpoint("INTERNAL")
        connection = await KafkaConnection.open(
            host, port, client_id="acl-probe", security=admin, connect_timeout=5
        )
        try:
            query = {
                "resource_type_filter": int(kind),
                "resource_name_filter": name,
                "pattern_type_filter": int(PatternType.LITERAL),
                "principal_filter": None,
                "host_filter": None,
                "operation": int(AclOperation.ANY),
                "permission_type": int(AclPermissionType.ALLOW),
            }
            _, answer = await connection.send(ApiKey.DESCRIBE_ACLS, 1, query, timeout=15)
        finally:
            await connection.close()
        have = {(a["principal"], a["operation"]) for r in answer["resources"] for a in r["acls"]}
        return wanted <= have

    def tls(self, keystore: Path | None) -> ClientSecurity:
        settings = TlsSettings(
            keystore_location=str(keystore) if keystore else None,
            truststore_location=str(self.secure.ca.certificate),
        )
        return ClientSecurity("SSL", client_context(settings))


@pytest.fixture
async def secured(cluster: Cluster, zk_connect: str, tmp_path: Path) -> Any:
    secure = SecureCluster.create(tmp_path / "secrets")
    zk = AsyncZooKeeper(zk_connect, security=secure.zk_security)
    await zk.start()
    # The chroot is the parent of /controller: like a secured root, it must not be world-writable
    # (what Kafka's security migration leaves); the test fixture created it open.
    await zk.set_acls("/", zk.acls_for("/controller"))
    try:
        await secure.add_user(zk, "alice", PASSWORD)
        for broker_id in (1, 2):
            cluster.broker(broker_id, **secure.broker(broker_id))
        for broker in cluster.brokers.values():
            await broker.wait_kind("broker_started")
        cluster.controller = cluster.start_controller(1001, **secure.controller(1001))
        await cluster.controller.wait_kind("failover_complete", timeout=30)
        for topic in ("orders", "secret"):
            await create_topic(zk, topic, {0: (1, 2)})
        secured = Secured(cluster, secure, zk)
        alice = "User:alice"
        await secured.allow(ResourceType.TOPIC, "orders", alice, AclOperation.WRITE, AclOperation.READ)
        await secured.allow(ResourceType.GROUP, "readers", alice, AclOperation.READ)
        for broker in cluster.brokers.values():
            for topic in ("orders", "secret"):
                await broker.wait_event(
                    lambda e, t=topic: e["kind"] in ("become_leader", "become_follower") and e["topic"] == t,
                    what=f"{topic} on {broker.name}",
                )
        yield secured
    finally:
        await zk.close()


def _produce(config: dict[str, Any], topic: str, value: bytes) -> str | None:
    """Produce one record and flush; the delivery error's name, or None when it was written."""
    errors: list[str] = []
    producer = Producer({**config, "message.timeout.ms": 20000})
    producer.produce(topic, value, on_delivery=lambda err, _: errors.append(err.name()) if err else None)
    remaining = producer.flush(30)
    assert remaining == 0, "the producer could not deliver or fail in time"
    return errors[0] if errors else None


def _consumed(config: dict[str, Any], topic: str, value: bytes) -> bool:
    """Whether a member of the group ``readers`` reads ``value`` from ``topic`` within 60 s."""
    consumer = Consumer({**config, "group.id": "readers", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None and message.value() == value:
                return True
        return False
    finally:
        consumer.close()


async def test_scram_clients_produce_and_consume_and_acls_decide(secured: Secured) -> None:
    config = {"bootstrap.servers": secured.bootstrap(), **secured.secure.client_config("alice", PASSWORD)}
    value = uuid.uuid4().bytes
    assert await asyncio.to_thread(_produce, config, "orders", value) is None
    assert await asyncio.to_thread(_consumed, config, "orders", value)
    # no ACL on "secret": refused, and the refusal is a line in the broker's event log
    assert await asyncio.to_thread(_produce, config, "secret", b"x") == "TOPIC_AUTHORIZATION_FAILED"
    assert any(
        e["resource"] == "secret" and e["principal"] == "User:alice"
        for b in secured.cluster.brokers.values()
        for e in b.of_kind("authorization_denied")
    )


async def test_a_wrong_password_is_refused(secured: Secured) -> None:
    config = {
        "bootstrap.servers": secured.bootstrap(),
        **secured.secure.client_config("alice", "not-the-password"),
    }
    admin = AdminClient(config)

    def metadata() -> None:
        admin.list_topics(timeout=10)

    with pytest.raises(KafkaException):
        await asyncio.to_thread(metadata)


def _kafka_python_round_trip(config: dict[str, str], topic: str, value: bytes) -> bytes | None:
    """Produce ``value`` with kafka-python, then read ``topic`` until it comes back (None if it does not)."""
    import kafka

    translated: dict[str, Any] = {
        "bootstrap_servers": config["bootstrap.servers"].split(","),
        "security_protocol": config["security.protocol"],
        "ssl_cafile": config["ssl.ca.location"],
    }
    if "sasl.username" in config:
        translated |= {
            "sasl_mechanism": config["sasl.mechanism"],
            "sasl_plain_username": config["sasl.username"],
            "sasl_plain_password": config["sasl.password"],
        }
    else:
        translated["ssl_certfile"] = config["ssl.certificate.location"]  # key and chain in one PEM
    producer = kafka.KafkaProducer(**translated)
    producer.send(topic, value).get(timeout=30)
    producer.close()
    consumer = kafka.KafkaConsumer(
        topic, group_id="readers", auto_offset_reset="earliest", consumer_timeout_ms=20000, **translated
    )
    try:
        return next((m.value for m in consumer if m.value == value), None)
    finally:
        consumer.close()


def _kcat_round_trip(kcat: str, config: dict[str, str], topic: str, value: bytes) -> bytes | None:
    settings = [arg for key, setting in config.items() for arg in ("-X", f"{key}={setting}")]
    produced = subprocess.run(
        [kcat, *settings, "-P", "-t", topic], input=value + b"\n", capture_output=True, timeout=60
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        [kcat, *settings, "-C", "-t", topic, "-o", "beginning", "-e", "-q"], capture_output=True, timeout=60
    )
    assert consumed.returncode == 0, consumed.stderr
    return value if value in consumed.stdout.split(b"\n") else None


async def test_confluent_kafka_python_and_kcat_round_trip_over_ssl_and_scram(secured: Secured) -> None:
    """Each client over SSL with its certificate (INTERNAL) and over SASL_SSL with SCRAM (CLIENT)."""
    keystore = secured.secure.client_certificate("carol")  # User:carol, by the mapping rules
    carol = "User:carol"
    await secured.allow(ResourceType.TOPIC, "orders", carol, AclOperation.WRITE, AclOperation.READ)
    await secured.allow(ResourceType.GROUP, "readers", carol, AclOperation.READ)
    ca = str(secured.secure.ca.certificate)
    configs = {
        "SSL": {
            "bootstrap.servers": secured.bootstrap("INTERNAL"),
            "security.protocol": "SSL",
            "ssl.ca.location": ca,
            "ssl.certificate.location": str(keystore),
            "ssl.key.location": str(keystore),
        },
        "SASL_SSL": {
            "bootstrap.servers": secured.bootstrap(),
            **secured.secure.client_config("alice", PASSWORD),
        },
    }
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    for protocol, config in configs.items():
        value = f"confluent over {protocol} {uuid.uuid4()}".encode()
        assert await asyncio.to_thread(_produce, config, "orders", value) is None, protocol
        assert await asyncio.to_thread(_consumed, config, "orders", value), protocol
        value = f"kafka-python over {protocol} {uuid.uuid4()}".encode()
        assert await asyncio.to_thread(_kafka_python_round_trip, config, "orders", value) == value, protocol
        if kcat is not None:  # installed by make clients, which make test runs
            value = f"kcat over {protocol} {uuid.uuid4()}".encode()
            assert await asyncio.to_thread(_kcat_round_trip, kcat, config, "orders", value) == value, protocol


async def _live_brokers(host: str, broker: BrokerProcess, security: ClientSecurity) -> list[int]:
    """The broker ids ``broker``'s metadata cache holds, as a Metadata request on INTERNAL shows them."""
    connection = await KafkaConnection.open(
        host, broker.endpoint("INTERNAL")[1], client_id="observer", security=security, connect_timeout=5
    )
    try:
        _, answer = await connection.send(ApiKey.METADATA, 1, {"topics": []}, timeout=15)
    finally:
        await connection.close()
    return sorted(b["node_id"] for b in answer["brokers"])


async def test_control_requests_need_the_controllers_identity(secured: Secured) -> None:
    broker = secured.cluster.brokers[1]
    controller = secured.cluster.controller
    assert controller is not None
    host, port = broker.endpoint("CONTROLLER")
    forged = leader_and_isr(5, epoch_of(broker), {"orders": [lai_partition(0, leader=2, replicas=(1, 2))]})
    forged["controller_id"] = controller.controller_id
    # no client certificate: the TLS handshake fails (with TLS 1.3 the client learns it on its first read)
    with pytest.raises((ConnectionError, OSError)):
        await _send_once(host, port, secured.tls(None), ApiKey.LEADER_AND_ISR, 5, forged)
    # a certificate from the same CA, but not the controller's: CLUSTER_AUTHORIZATION_FAILED, nothing applied
    stop_replica_request = stop_replica(4, epoch_of(broker), {"orders": [0]}, delete=True)
    stop_replica_request["controller_id"] = controller.controller_id
    # ... and an UpdateMetadata in which broker 1 is gone, stamped as the real controller stamps them
    epoch = (await controller.wait_kind("controller_elected"))["controller_epoch"]
    forged_metadata = update_metadata(
        7, epoch_of(broker), {}, controller_id=controller.controller_id, controller_epoch=epoch, live=(2,)
    )
    before = len(broker.of_kind("become_follower")) + len(broker.of_kind("become_leader"))
    outsider = secured.tls(secured.secure.client_certificate("mallory"))
    connection = await KafkaConnection.open(
        host, port, client_id="outsider", security=outsider, connect_timeout=5
    )
    try:
        for api_key, version, body in (
            (ApiKey.LEADER_AND_ISR, 5, forged),
            (ApiKey.UPDATE_METADATA, 7, forged_metadata),
            (ApiKey.STOP_REPLICA, 4, stop_replica_request),
        ):
            _, answer = await connection.send(api_key, version, body, timeout=15)
            assert answer["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    finally:
        await connection.close()
    assert len(broker.of_kind("become_follower")) + len(broker.of_kind("become_leader")) == before
    assert await _live_brokers(host, secured.cluster.brokers[1], outsider) == [1, 2], "broker 1 was dropped"
    denied = broker.of_kind("authorization_denied")
    assert {e["api"] for e in denied} >= {"LeaderAndIsr", "UpdateMetadata", "StopReplica"}
    assert all(e["principal"] == "User:mallory" for e in denied)
    # ... and so does AlterPartition at the controller
    rpc_host, rpc_port = controller.rpc_address()
    connection = await KafkaConnection.open(
        rpc_host, rpc_port, client_id="outsider", security=outsider, connect_timeout=5
    )
    try:
        data, _ = await secured.zk.get(znodes.partition_state_path("orders", 0))
        state = znodes.decode_leader_isr_state(data, "state")
        assert state is not None
        request = alter_partition_request(1, epoch_of(broker), "orders", state, 0, [1], version=1)
        _, answer = await connection.send(ApiKey.ALTER_PARTITION, 1, request, timeout=15)
        assert answer["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    finally:
        await connection.close()
    assert controller.of_kind("authorization_denied")


async def _send_once(
    host: str, port: int, security: ClientSecurity, api_key: ApiKey, version: int, body: dict[str, Any]
) -> dict[str, Any]:
    connection = await KafkaConnection.open(
        host, port, client_id="outsider", security=security, connect_timeout=5
    )
    try:
        _, answer = await connection.send(api_key, version, body, timeout=15)
        return answer
    finally:
        await connection.close()


async def test_zookeeper_refuses_whoever_lacks_the_clusters_identity(
    secured: Secured, zk_connect: str
) -> None:
    outsider = KazooClient(hosts=zk_connect)
    await asyncio.to_thread(outsider.start, 15)
    try:
        data, _ = await asyncio.to_thread(outsider.get, znodes.CONTROLLER)  # world-readable, as in Kafka
        assert data
        for what, action in (
            ("delete /controller", lambda: outsider.delete(znodes.CONTROLLER)),
            ("rewrite a topic", lambda: outsider.set(znodes.topic_path("orders"), b"{}")),
            ("register a broker", lambda: outsider.create("/brokers/ids/7", b"{}", ephemeral=True)),
            ("read SCRAM credentials", lambda: outsider.get("/config/users/alice")),
        ):
            with pytest.raises(NoAuthError):
                await asyncio.to_thread(action)
                pytest.fail(f"an unauthenticated client could {what}")
    finally:
        await asyncio.to_thread(outsider.stop)
    # a broker started with another ZooKeeper identity cannot register
    intruder = secured.cluster.broker(
        7, **{**secured.secure.broker(7), "zookeeper.auth.digest": "intruder:x"}
    )
    await wait_until(lambda: intruder.process is not None and intruder.process.poll() is not None, timeout=60,
                     what="the intruder exits")  # fmt: skip
    assert "NoAuth" in intruder.tail(), intruder.tail()


async def test_the_admin_api_creates_describes_and_deletes_acls(secured: Secured) -> None:
    """confluent-kafka's create_acls/describe_acls/delete_acls, as a super user (a client certificate
    mapped to User:admin); an ordinary user may not, and nothing it asked is stored."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
    )
    from confluent_kafka.admin import ResourceType as Kind

    admin_key = secured.secure.client_certificate("admin")
    config = {
        "bootstrap.servers": secured.bootstrap("INTERNAL"),
        "security.protocol": "SSL",
        "ssl.ca.location": str(secured.secure.ca.certificate),
        "ssl.certificate.location": str(admin_key),
        "ssl.key.location": str(admin_key),
    }
    bob_reads = AclBinding(
        Kind.TOPIC, "ledger", ResourcePatternType.PREFIXED, "User:bob", "*", AclOperation.READ,
        AclPermissionType.ALLOW,
    )  # fmt: skip
    bobs = AclBindingFilter(
        Kind.ANY, None, ResourcePatternType.ANY, "User:bob", None, AclOperation.ANY, AclPermissionType.ANY
    )

    def round_trip() -> tuple[list[Any], list[Any], list[Any]]:
        client = AdminClient(config)
        client.create_acls([bob_reads])[bob_reads].result(timeout=30)
        described = client.describe_acls(bobs).result(timeout=30)
        deleted = client.delete_acls([bobs])[bobs].result(timeout=30)
        return described, deleted, client.describe_acls(bobs).result(timeout=30)

    described, deleted, after = await asyncio.to_thread(round_trip)
    assert described == [bob_reads] and deleted == [bob_reads] and after == []

    alice = AdminClient(
        {"bootstrap.servers": secured.bootstrap(), **secured.secure.client_config("alice", PASSWORD)}
    )
    grab = AclBinding(
        Kind.TOPIC, "payroll", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.ALL,
        AclPermissionType.ALLOW,
    )  # fmt: skip
    with pytest.raises(KafkaException, match="CLUSTER_AUTHORIZATION_FAILED"):
        await asyncio.to_thread(lambda: alice.create_acls([grab])[grab].result(timeout=30))
    assert not await secured.zk.exists("/kafka-acl/Topic/payroll")
