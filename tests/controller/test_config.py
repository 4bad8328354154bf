"""The controller's configuration: Kafka's defaults, environment overrides and errors that name the key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from controller import config as controller_config
from controller.config import ControllerConfig, epoch_protocol_for
from controller.request_batch import EpochProtocol
from daemon.config import ConfigError
from zkstore.znodes import Endpoint

REPO_ROOT = Path(__file__).resolve().parents[2]
REQUIRED_ENV = {"KAFKA_CONTROLLER_ID": "1001", "KAFKA_ZOOKEEPER_CONNECT": "127.0.0.1:2181/kafka"}


def load_env(**overrides: str) -> ControllerConfig:
    """Load with no file, only ``REQUIRED_ENV`` plus ``overrides`` (never the test process's environment)."""
    return controller_config.load(None, environ=REQUIRED_ENV | overrides)


def config_error(environ: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        controller_config.load(None, environ=environ)
    return caught.value


# -- inter.broker.protocol.version -> epoch protocol


@pytest.mark.parametrize(
    ("ibp", "protocol"),
    [
        ("2.2", EpochProtocol.PER_BROKER),
        ("2.2-IV1", EpochProtocol.PER_BROKER),
        ("2.3-IV0", EpochProtocol.PER_BROKER),
        ("2.3-IV1", EpochProtocol.PER_BROKER),
        ("2.3-IV2", EpochProtocol.MAX_BROKER_EPOCH),
        ("2.3", EpochProtocol.MAX_BROKER_EPOCH),
        ("2.4", EpochProtocol.MAX_BROKER_EPOCH),
        ("3.0-IV1", EpochProtocol.MAX_BROKER_EPOCH),
    ],
)
def test_epoch_protocol_follows_the_inter_broker_protocol_version(ibp: str, protocol: EpochProtocol) -> None:
    assert epoch_protocol_for(ibp) is protocol


@pytest.mark.parametrize("ibp", ["2.1", "1.0", "abc", "", "2.3-IVx"])
def test_versions_without_broker_epochs_or_unparsable_ones_are_rejected(ibp: str) -> None:
    with pytest.raises(ValueError):
        epoch_protocol_for(ibp)


# -- loading


def test_defaults_are_kafkas() -> None:
    config = load_env()
    assert config.controller_id == 1001 and config.zookeeper_connect == "127.0.0.1:2181/kafka"
    assert config.leader_imbalance_per_broker_percentage == 10
    assert config.leader_imbalance_check_interval_s == 300.0
    assert config.auto_leader_rebalance_enable is True
    assert config.unclean_leader_election_enable is False
    assert config.delete_topic_enable is True
    assert config.socket_timeout_s == 30.0
    assert config.inter_broker_protocol_version == "2.3-IV2"
    assert config.epoch_protocol is EpochProtocol.MAX_BROKER_EPOCH
    assert config.listener == config.advertised == Endpoint("PLAINTEXT", "127.0.0.1", 0)
    assert config.control_plane_listener_name is None
    assert config.inter_broker_listener_name == "PLAINTEXT"
    assert config.zookeeper_connection_timeout_s == config.zookeeper_session_timeout_ms / 1000.0
    assert config.metrics_port is None and config.log_dir == ""


def test_environment_variables_set_every_kind_of_value() -> None:
    config = load_env(
        KAFKA_INTER_BROKER_PROTOCOL_VERSION="2.2",
        KAFKA_UNCLEAN_LEADER_ELECTION_ENABLE="true",
        KAFKA_LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS="30",
        KAFKA_CONTROLLER_SOCKET_TIMEOUT_MS="1500",
        KAFKA_LISTENERS="CONTROLLER://0.0.0.0:9099",
        KAFKA_ADVERTISED_LISTENERS="CONTROLLER://controller-1:9099",
        KAFKA_CONTROL_PLANE_LISTENER_NAME="control_plane",
        KAFKA_LOG_DIR="/var/lib/controller",
    )
    assert config.epoch_protocol is EpochProtocol.PER_BROKER
    assert config.unclean_leader_election_enable is True
    assert config.leader_imbalance_check_interval_s == 30.0
    assert config.socket_timeout_s == 1.5
    assert config.listener == Endpoint("CONTROLLER", "0.0.0.0", 9099)
    assert config.advertised == Endpoint("CONTROLLER", "controller-1", 9099)
    assert config.control_plane_listener_name == "CONTROL_PLANE"
    assert config.log_dir == "/var/lib/controller"


def test_environment_overrides_the_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "controller.properties"
    path.write_text(
        "controller.id=1004\n"
        "zookeeper.connect=zk-1:2181\n"
        "leader.imbalance.per.broker.percentage=20\n"
        "unclean.leader.election.enable=true\n"
    )
    config = controller_config.load(path, environ={"KAFKA_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE": "30"})
    assert config.controller_id == 1004 and config.zookeeper_connect == "zk-1:2181"
    assert config.leader_imbalance_per_broker_percentage == 30
    assert config.unclean_leader_election_enable is True
    assert config.loaded is not None
    assert config.loaded.origins["leader.imbalance.per.broker.percentage"] == "env"
    assert config.loaded.origins["unclean.leader.election.enable"] == "file"
    assert config.loaded.origins["delete.topic.enable"] == "default"


def test_listeners_after_the_first_are_client_listeners_with_their_own_security() -> None:
    settings = {
        "KAFKA_LISTENERS": "INTERNAL://0.0.0.0:9099,CLIENTS://0.0.0.0:9092",
        "KAFKA_ADVERTISED_LISTENERS": "CLIENTS://controller-1:9092",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "INTERNAL:PLAINTEXT,CLIENTS:PLAINTEXT,SECURED:SSL",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "INTERNAL",
    }
    config = load_env(**settings)
    assert config.listener == Endpoint("INTERNAL", "0.0.0.0", 9099)
    (clients,) = config.client_listeners
    assert (clients.name, clients.advertised, clients.protocol) == (
        "CLIENTS", Endpoint("CLIENTS", "controller-1", 9092), "PLAINTEXT"
    )  # fmt: skip
    secured = REQUIRED_ENV | settings | {"KAFKA_LISTENERS": settings["KAFKA_LISTENERS"] + ",SECURED://:9093"}
    error = config_error(secured)  # a client listener's own security is checked like the RPC one's
    assert error.key == "ssl.keystore.location" and "listener SECURED" in str(error)


@pytest.mark.parametrize(
    ("environ", "key"),
    [
        ({"KAFKA_ZOOKEEPER_CONNECT": "zk:2181"}, "controller.id"),
        ({"KAFKA_CONTROLLER_ID": "1001"}, "zookeeper.connect"),
        (REQUIRED_ENV | {"KAFKA_CONTROLLER_ID": "one"}, "controller.id"),
        (REQUIRED_ENV | {"KAFKA_CONTROLLER_ID": "-1"}, "controller.id"),
        (REQUIRED_ENV | {"KAFKA_CONTROLLER_ID": "1000"}, "controller.id"),
        (
            REQUIRED_ENV | {"KAFKA_CONTROLLER_ID": "1001", "KAFKA_RESERVED_BROKER_MAX_ID": "1001"},
            "controller.id",
        ),
        (REQUIRED_ENV | {"KAFKA_INTER_BROKER_PROTOCOL_VERSION": "2.1"}, "inter.broker.protocol.version"),
        (REQUIRED_ENV | {"KAFKA_INTER_BROKER_PROTOCOL_VERSION": "latest"}, "inter.broker.protocol.version"),
        (
            REQUIRED_ENV | {"KAFKA_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE": "101"},
            "leader.imbalance.per.broker.percentage",
        ),
        (REQUIRED_ENV | {"KAFKA_AUTO_LEADER_REBALANCE_ENABLE": "yes"}, "auto.leader.rebalance.enable"),
        (
            REQUIRED_ENV
            | {
                "KAFKA_LISTENERS": "CONTROL://a:9093,PLAINTEXT://a:9092",
                "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROL:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            },
            "listeners",
        ),
        (
            REQUIRED_ENV | {"KAFKA_ADVERTISED_LISTENERS": "OTHER://controller-1:9092"},
            "advertised.listeners",
        ),
    ],
    ids=[
        "missing controller.id",
        "missing zookeeper.connect",
        "non-int controller.id",
        "negative controller.id",
        "a broker's id",
        "a broker's id with a higher reserved.broker.max.id",
        "ibp before broker epochs",
        "unparsable ibp",
        "percentage 101",
        "non-bool flag",
        "a client listener named like the inter-broker one",
        "advertised listener not in listeners",
    ],
)
def test_config_error_names_the_offending_key(environ: dict[str, str], key: str) -> None:
    error = config_error(environ)
    assert error.key == key and str(error).startswith(f"{key}: ")


def test_percentage_bounds_are_inclusive() -> None:
    assert (
        load_env(KAFKA_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE="0").leader_imbalance_per_broker_percentage == 0
    )
    assert (
        load_env(KAFKA_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE="100").leader_imbalance_per_broker_percentage
        == 100
    )


# -- python -m controller


def run_controller(tmp_path: Path, properties: str) -> subprocess.CompletedProcess[str]:
    """Start ``python -m controller`` on a properties file, with no KAFKA_* variable inherited."""
    path = tmp_path / "controller.properties"
    path.write_text(properties)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
    return subprocess.run(
        [sys.executable, "-m", "controller", "--config", str(path)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_main_exits_2_naming_a_missing_controller_id(tmp_path: Path) -> None:
    result = run_controller(tmp_path, "zookeeper.connect=127.0.0.1:2181\n")
    assert result.returncode == 2
    assert "controller.id" in result.stderr


def test_main_exits_2_naming_a_bad_inter_broker_protocol_version(tmp_path: Path) -> None:
    result = run_controller(
        tmp_path, "controller.id=1001\nzookeeper.connect=127.0.0.1:2181\ninter.broker.protocol.version=2.0\n"
    )
    assert result.returncode == 2
    assert "inter.broker.protocol.version" in result.stderr
