"""docker-compose.secure.yml over docker-compose.yml: the secured layout, checked without a Docker engine.

The merged file is validated by ``docker compose config``; its ``secrets`` service runs here (the
generator, as it runs in the image) and every daemon's merged environment and ``--config`` file go
through the daemons' own loaders. Then the merged services are replayed as local processes
(:mod:`tests.support.local_compose`): ``secrets``, a local ZooKeeper started with the ZooKeeper
services' zoo.cfg lines (TLS client port, client certificates required), ``credentials``, and every
controller and broker, which connect to ZooKeeper over TLS with the digest identity and speak TLS on
every listener; a confluent-kafka client with the generated client config produces and consumes over SASL_SSL.

Not exercised here: the containers themselves (the image, file ownership across containers' users,
compose's ordering and healthchecks on an engine) and ZooKeeper's quorum TLS, since one local server
stands for the three.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import Permissions

from authorizer.acl_authorizer import parse_super_users
from broker import config as broker_config
from cluster.secrets_cli import CLIENT_DIR, DAEMON_CONFIG, ZOOKEEPER_ADMIN_CONFIG, ZOOKEEPER_CERTIFICATE
from cluster.secure import MAPPING_RULES, MECHANISM, PROTOCOL_MAP, SUPER_USERS
from controller import config as controller_config
from daemon.config import env_var_name, parse_properties
from tests.support.clients import confluent_round_trip
from tests.support.compose import (
    SECURE_FILES,
    Model,
    compose,
    compose_model,
    container_environment,
    daemon_module,
    daemon_services,
    one_shot_services,
    startup_order,
    zookeeper_services,
)
from tests.support.local_compose import LOOPBACK, LocalCompose, running_compose
from zkserver.config import ServerTls
from zkserver.ports import find_free_port
from zkserver.server import ZooKeeperServer
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.client_config import load_zk_security
from zkstore.topic_writes import create_topic

SECRETS = "/secrets"
ZOOKEEPER_TLS_PORT = 2182
CLIENT_PORTS = {9092, 9093, 9094}
TOPIC = "secure-compose-round-trip"
ASSIGNMENT: dict[int, tuple[int, ...]] = {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}
"""Three replicas each: followers replicate over the INTERNAL listener (mutual TLS) for acks=all."""


@pytest.fixture(scope="module")
def model() -> Model:
    return compose_model(SECURE_FILES)


@pytest.fixture(scope="module")
def generated(model: Model, tmp_path_factory: pytest.TempPathFactory) -> LocalCompose:
    """The merged services mapped onto a directory where the ``secrets`` service has run."""
    local = LocalCompose(model, f"{LOOPBACK}:2181", tmp_path_factory.mktemp("secure-compose"))
    local.run_once("secrets")
    return local


def secrets_dir(local: LocalCompose) -> Path:
    return local.workdir / "volumes" / "secrets"


def of_module(model: Model, module: str) -> list[str]:
    return [n for n in daemon_services(model) if daemon_module(model["services"][n]) == module]


def properties(path: Path) -> dict[str, str]:
    return parse_properties(path.read_text())


# ---------------------------------------------------------------- the merged file


def test_the_merged_files_validate() -> None:
    result = compose("config", "--quiet", files=SECURE_FILES)
    assert result.returncode == 0, result.stderr


def test_secrets_come_first_credentials_once_zookeeper_is_healthy_daemons_last(model: Model) -> None:
    services = model["services"]
    assert one_shot_services(model) == ["credentials", "secrets"]
    order = startup_order(model)

    def waits(name: str, dependency: str, condition: str) -> None:
        assert services[name]["depends_on"][dependency]["condition"] == condition, f"{name} -> {dependency}"
        assert order.index(dependency) < order.index(name)

    for name in zookeeper_services(model):
        waits(name, "secrets", "service_completed_successfully")
        waits("credentials", name, "service_healthy")
    for name in daemon_services(model):
        waits(name, "credentials", "service_completed_successfully")
    for name in one_shot_services(model):
        assert services[name].get("restart", "no") == "no", f"{name} runs once"
    users = {
        name: services[name].get("user") for name in [*daemon_services(model), *one_shot_services(model)]
    }
    assert {name for name, user in users.items() if user is not None} == {"secrets"}, "root for chown only"


def test_the_secrets_volume_is_read_only_but_for_its_generator(model: Model) -> None:
    assert "secrets" in model["volumes"]
    for name, service in model["services"].items():
        mounts = [m for m in service.get("volumes", []) if m["source"] == "secrets"]
        if name in ("prometheus", "grafana"):
            assert not mounts
            continue
        assert [m["target"] for m in mounts] == [SECRETS], name
        assert mounts[0].get("read_only", False) is (name != "secrets"), name


def test_only_the_client_listeners_prometheus_and_grafana_are_published(model: Model) -> None:
    published = {
        name: {int(p["published"]) for p in service.get("ports", [])}
        for name, service in model["services"].items()
    }
    assert {port for name in of_module(model, "broker") for port in published[name]} == CLIENT_PORTS
    assert {name for name, ports in published.items() if ports} == {
        "broker-1",
        "broker-2",
        "broker-3",
        "prometheus",
        "grafana",
    }


# ---------------------------------------------------------------- ZooKeeper


def test_zookeeper_serves_tls_to_the_network_and_plaintext_to_its_own_loopback(
    model: Model, generated: LocalCompose
) -> None:
    secrets = secrets_dir(generated)
    expected = ServerTls(Path(f"{SECRETS}/{ZOOKEEPER_CERTIFICATE}.keystore.pem"), Path(f"{SECRETS}/ca.crt"))
    for name in zookeeper_services(model):
        env = container_environment(model["services"][name])
        servers = dict(s.split("=", 1) for s in env["ZOO_SERVERS"].split())
        assert {address.split(";")[1] for address in servers.values()} == {f"{LOOPBACK}:2181"}
        extra = dict(entry.split("=", 1) for entry in env["ZOO_CFG_EXTRA"].split())
        # What zkstore's ServerTls writes for the local TLS server (tests/zkstore), on every address.
        served = expected.settings(ZOOKEEPER_TLS_PORT, LOOPBACK)
        del served["secureClientPortAddress"]
        assert served.items() <= extra.items()
        assert extra["sslQuorum"] == "true"
        for kind in ("keyStore", "trustStore"):
            assert extra[f"ssl.quorum.{kind}.location"] == extra[f"ssl.{kind}.location"]
            assert extra[f"ssl.quorum.{kind}.type"] == "PEM"
    config = generated.zookeeper_config()
    for key in ("ssl.keyStore.location", "ssl.trustStore.location"):
        assert Path(config[key]).is_file() and Path(config[key]).parent == secrets


# ---------------------------------------------------------------- the daemons


def check_common_security(name: str, config: object, generated: LocalCompose) -> None:
    """ZooKeeper over TLS with the digest identity and ACLs, the authorizer on, and no key unknown."""
    secrets = secrets_dir(generated)
    zk = config.zk_security  # type: ignore[attr-defined]
    assert zk is not None and zk.tls and zk.set_acl, name
    assert zk.digest == (secrets / "zookeeper.identity").read_text().strip()
    assert zk.keystore == secrets / f"{name}.keystore.pem"
    assert zk.truststore == secrets / "ca.crt"
    hosts = config.zookeeper_connect.split(",")  # type: ignore[attr-defined]
    assert {h.rsplit(":", 1)[1] for h in hosts} == {str(generated.port("zookeeper-1", ZOOKEEPER_TLS_PORT))}
    authorizer = config.authorizer  # type: ignore[attr-defined]
    assert authorizer.enabled and authorizer.super_users == parse_super_users(SUPER_USERS)
    loaded = config.loaded  # type: ignore[attr-defined]
    assert loaded.values["ssl.principal.mapping.rules"] == MAPPING_RULES
    assert loaded.unknown == (), f"{name}: {loaded.unknown} are no configuration keys"


def test_every_broker_listener_is_tls_client_sasl_ssl_cluster_mutual(
    model: Model, generated: LocalCompose
) -> None:
    protocols = dict(pair.split(":") for pair in PROTOCOL_MAP.split(","))
    client = next(listener for listener, protocol in protocols.items() if protocol == "SASL_SSL")
    for name in of_module(model, "broker"):
        config = generated.load(name)
        assert isinstance(config, broker_config.BrokerConfig)
        check_common_security(name, config, generated)
        bound = {e.listener_name for e in config.listeners}
        assert config.security_protocols == protocols and bound == set(protocols)
        assert set(config.listener_security) == bound, "a listener absent here would be PLAINTEXT"
        for listener, security in config.listener_security.items():
            assert security.tls is not None, f"{name} {listener}"
            if listener == client:
                assert security.mechanisms == (MECHANISM,)
                assert security.tls.verify_mode == ssl.CERT_NONE, "SCRAM clients show no certificate"
            else:
                assert not security.sasl
                assert security.tls.verify_mode == ssl.CERT_REQUIRED, f"{name} {listener}: mutual TLS"
        # In the container: clients on the compose host reach CLIENT at localhost:P, published as P.
        env = container_environment(model["services"][name])
        advertised = dict(item.split("://") for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
        port = int(advertised[client].removeprefix("localhost:"))
        published = [(int(p["published"]), int(p["target"])) for p in model["services"][name]["ports"]]
        assert published == [(port, port)] and port in CLIENT_PORTS
        assert advertised["INTERNAL"].split(":")[0] == advertised["CONTROLLER"].split(":")[0] == name


def test_controllers_rpc_listener_requires_the_peers_certificate(
    model: Model, generated: LocalCompose
) -> None:
    for name in of_module(model, "controller"):
        config = generated.load(name)
        assert isinstance(config, controller_config.ControllerConfig)
        check_common_security(name, config, generated)
        assert config.listener_protocol == "SSL"
        assert config.listener_security is not None and config.listener_security.tls is not None
        assert config.listener_security.tls.verify_mode == ssl.CERT_REQUIRED


def test_daemons_take_from_their_file_only_what_the_environment_cannot_hold(
    model: Model, generated: LocalCompose
) -> None:
    daemon_file = properties(secrets_dir(generated) / DAEMON_CONFIG)
    assert set(daemon_file) == {"zookeeper.auth.digest", "listener.name.client.ssl.client.auth"}
    for name in daemon_services(model):
        service = model["services"][name]
        assert service["command"][-2:] == ["--config", f"{SECRETS}/{DAEMON_CONFIG}"]
        assert env_var_name("zookeeper.auth.digest") not in service["environment"], "a secret"


# ---------------------------------------------------------------- the generated files


def test_the_client_config_is_ready_for_a_client_on_the_compose_host(
    model: Model, generated: LocalCompose
) -> None:
    secrets = secrets_dir(generated)
    bundle = secrets / CLIENT_DIR
    config = properties(bundle / "client.properties")
    assert config == {
        "bootstrap.servers": ",".join(f"localhost:{port}" for port in sorted(CLIENT_PORTS)),
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": MECHANISM,
        "sasl.username": "admin",
        "sasl.password": (secrets / "admin.password").read_text().strip(),
        "ssl.ca.location": "ca.crt",
    }
    assert (bundle / config["ssl.ca.location"]).read_bytes() == (secrets / "ca.crt").read_bytes()
    assert (bundle / "client.properties").stat().st_mode & 0o077 == 0, "it holds a password"
    admin = load_zk_security(secrets / ZOOKEEPER_ADMIN_CONFIG)
    assert admin.tls and admin.set_acl and admin.keystore == secrets / "admin.keystore.pem"


# ---------------------------------------------------------------- the replay


@pytest.fixture
async def secure_cluster(tmp_path: Path) -> AsyncIterator[LocalCompose]:
    """The merged services up on loopback, on a private ZooKeeper configured as the compose file says."""
    servers: list[ZooKeeperServer] = []
    zk_port = find_free_port(LOOPBACK)

    def start_zookeeper(cluster: LocalCompose) -> None:
        server = ZooKeeperServer(
            port=zk_port, data_dir=tmp_path / "zookeeper", extra_config=cluster.zookeeper_config()
        )
        servers.append(server)
        server.start()

    try:
        async with running_compose(
            f"{LOOPBACK}:{zk_port}", tmp_path, files=SECURE_FILES, start_zookeeper=start_zookeeper
        ) as cluster:
            yield cluster
    finally:
        for server in servers:
            server.stop()


def client_config(cluster: LocalCompose) -> dict[str, str]:
    """client/client.properties as a client run from its directory reads it (the CA path is relative)."""
    bundle = secrets_dir(cluster) / CLIENT_DIR
    config = properties(bundle / "client.properties")
    config["ssl.ca.location"] = str(bundle / config["ssl.ca.location"])
    return config


def refuses_an_anonymous_write(connect: str) -> bool:
    client = KazooClient(hosts=connect)
    client.start(timeout=15)
    try:
        client.create("/intruder")
    except NoAuthError:
        return True
    finally:
        client.stop()
        client.close()
    return False


@pytest.mark.zookeeper
async def test_the_secured_cluster_comes_up_over_tls_and_serves_scram_clients(
    secure_cluster: LocalCompose,
) -> None:
    cluster = secure_cluster
    secrets = secrets_dir(cluster)
    tls_port = cluster.port("zookeeper-1", ZOOKEEPER_TLS_PORT)
    zk = AsyncZooKeeper(f"{LOOPBACK}:{tls_port}", security=load_zk_security(secrets / ZOOKEEPER_ADMIN_CONFIG))
    await zk.start()
    try:
        for broker_id in (1, 2, 3):
            path = f"{znodes.BROKER_IDS}/{broker_id}"
            registration = znodes.decode_broker_registration((await zk.get(path))[0], path)
            assert registration is not None
            assert "PLAINTEXT" not in registration.listener_security_protocol_map.values()
            acl, _ = await asyncio.to_thread(zk.client.get_acls, path)
            assert {(a.id.scheme, a.perms) for a in acl} >= {("digest", Permissions.ALL)}
        controller = znodes.decode_controller_registration(
            (await zk.get(znodes.CONTROLLER))[0], "/controller"
        )
        assert controller is not None and controller.security_protocol == "SSL"
        root, _ = await asyncio.to_thread(zk.client.get_acls, "/")
        assert all(a.perms == Permissions.READ for a in root if a.id.scheme == "world"), root

        for name in daemon_services(cluster.model):
            result = cluster.healthcheck(name)
            assert result.returncode == 0, f"{name} healthcheck: {result.stderr}"

        await create_topic(zk, TOPIC, ASSIGNMENT)
        brokers = cluster.of_module("broker")
        for partition, replicas in ASSIGNMENT.items():
            await brokers[f"broker-{replicas[0]}"].wait_kind(
                "become_leader", topic=TOPIC, partition=partition
            )
    finally:
        await zk.close()
    # The local server's plaintext port stands for the containers' loopback-only one.
    assert await asyncio.to_thread(
        refuses_an_anonymous_write, f"{LOOPBACK}:{cluster.port('zookeeper-1', 2181)}"
    )

    records = [(i % 3, f"key-{i}".encode(), f"value-{i}".encode()) for i in range(90)]
    bootstrap = cluster.external_bootstrap("CLIENT")
    got = await asyncio.to_thread(confluent_round_trip, bootstrap, TOPIC, records, client_config(cluster))
    by_partition: dict[int, list[tuple[bytes, bytes]]] = defaultdict(list)
    for partition, key, value in got:
        by_partition[partition].append((key, value))
    for partition in ASSIGNMENT:
        assert by_partition[partition] == [(k, v) for p, k, v in records if p == partition]
