"""The broker's configuration: Kafka's defaults, the KIP-291 listener checks, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import CONTROL_PLANE_QUEUE_CAPACITY, load
from daemon.config import ConfigError, env_var_name
from tests.support.daemon_start import start_with
from zkstore.znodes import Endpoint

REQUIRED = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181/kafka"}
TWO_LISTENERS = {
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
}


def environ(properties: dict[str, str]) -> dict[str, str]:
    """The KAFKA_* variables for the required keys plus ``properties``: no file, no process environment."""
    return {env_var_name(key): value for key, value in {**REQUIRED, **properties}.items()}


def config_error(properties: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(None, environ=environ(properties))
    return info.value


# ---------------------------------------------------------------- defaults


def test_defaults_are_kafkas() -> None:
    config = load(None, environ=environ({}))
    assert config.broker_id == 1
    assert config.zookeeper_connect == "127.0.0.1:2181/kafka"
    assert config.num_io_threads == 8
    assert config.queued_max_requests == 500
    assert config.controlled_shutdown_enable is True
    assert config.controlled_shutdown_max_retries == 3
    assert config.controlled_shutdown_retry_backoff_s == 5.0
    assert config.zookeeper_session_timeout_ms == 18000
    assert config.controller_socket_timeout_s == 30.0
    assert config.socket_request_max_bytes == 100 * 1024 * 1024
    assert config.control_plane_listener_name is None
    assert config.inter_broker_listener_name == "PLAINTEXT"


def test_control_plane_queue_is_twenty_as_hard_coded_in_kafka() -> None:
    assert CONTROL_PLANE_QUEUE_CAPACITY == 20


def test_advertised_listeners_default_to_listeners() -> None:
    config = load(None, environ=environ(TWO_LISTENERS))
    assert (
        config.advertised
        == config.listeners
        == (
            Endpoint("PLAINTEXT", "127.0.0.1", 9092),
            Endpoint("CONTROLLER", "127.0.0.1", 9093),
        )
    )


def test_advertised_listeners_given_for_some_keep_the_rest_from_listeners() -> None:
    config = load(
        None, environ=environ({**TWO_LISTENERS, "advertised.listeners": "PLAINTEXT://broker-1:19092"})
    )
    assert config.advertised == (
        Endpoint("PLAINTEXT", "broker-1", 19092),
        Endpoint("CONTROLLER", "127.0.0.1", 9093),
    )


# ---------------------------------------------------------------- KIP-291


def test_control_plane_listener_is_read_and_upper_cased() -> None:
    config = load(None, environ=environ({**TWO_LISTENERS, "control.plane.listener.name": "controller"}))
    assert config.control_plane_listener_name == "CONTROLLER"
    assert config.security_protocols == {"PLAINTEXT": "PLAINTEXT", "CONTROLLER": "PLAINTEXT"}


def test_controller_listener_name_is_an_alias_of_control_plane_listener_name(tmp_path: Path) -> None:
    config = load(None, environ=environ({**TWO_LISTENERS, "controller.listener.name": "CONTROLLER"}))
    assert config.control_plane_listener_name == "CONTROLLER"
    path = tmp_path / "server.properties"
    path.write_text(
        "broker.id=2\nzookeeper.connect=127.0.0.1:2181\n"
        "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
        "controller.listener.name=CONTROLLER\n"
    )
    from_file = load(path, environ={})
    assert from_file.control_plane_listener_name == "CONTROLLER"
    assert from_file.loaded is not None and from_file.loaded.unknown == ()


def test_control_plane_listener_must_be_one_of_the_listeners() -> None:
    error = config_error({**TWO_LISTENERS, "control.plane.listener.name": "ELSEWHERE"})
    assert error.key == "control.plane.listener.name"
    assert "ELSEWHERE" in error.reason


def test_control_plane_listener_must_not_be_the_inter_broker_listener() -> None:
    error = config_error({**TWO_LISTENERS, "control.plane.listener.name": "PLAINTEXT"})
    assert error.key == "control.plane.listener.name"
    assert "inter.broker.listener.name" in error.reason


def test_control_plane_listener_equal_to_a_renamed_inter_broker_listener_is_refused() -> None:
    error = config_error(
        {
            **TWO_LISTENERS,
            "inter.broker.listener.name": "CONTROLLER",
            "control.plane.listener.name": "CONTROLLER",
        }
    )
    assert error.key == "control.plane.listener.name"


# ---------------------------------------------------------------- other listener checks


def test_inter_broker_listener_must_be_one_of_the_listeners() -> None:
    error = config_error({**TWO_LISTENERS, "inter.broker.listener.name": "REPLICATION"})
    assert error.key == "inter.broker.listener.name"
    assert "REPLICATION" in error.reason


def test_listener_named_other_than_a_protocol_needs_the_security_protocol_map() -> None:
    error = config_error({"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"})
    assert error.key == "listener.security.protocol.map"
    assert "CONTROLLER" in error.reason


def test_security_protocol_map_must_cover_every_listener() -> None:
    error = config_error(
        {
            "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
        }
    )
    assert error.key == "listener.security.protocol.map"
    assert "CONTROLLER" in error.reason


def test_security_protocol_map_rejects_an_unknown_protocol() -> None:
    error = config_error(
        {**TWO_LISTENERS, "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:TLS"}
    )
    assert error.key == "listener.security.protocol.map"


@pytest.mark.parametrize(
    "properties",
    [
        {"listeners": "SSL://127.0.0.1:9092", "inter.broker.listener.name": "SSL"},
        {**TWO_LISTENERS, "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL"},
    ],
)
def test_an_encrypted_listener_without_a_keystore_is_refused_naming_the_key(
    properties: dict[str, str],
) -> None:
    error = config_error(properties)
    assert error.key == "ssl.keystore.location"
    assert "keystore" in error.reason


def test_a_sasl_listener_offering_only_kerberos_is_refused() -> None:
    error = config_error(
        {**TWO_LISTENERS, "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"}
    )
    assert error.key == "sasl.enabled.mechanisms"
    assert "GSSAPI" in error.reason


def test_inter_broker_listener_may_be_named_by_its_protocol_but_not_both_ways() -> None:
    by_protocol = {"listeners": "PLAINTEXT://127.0.0.1:9092", "security.inter.broker.protocol": "PLAINTEXT"}
    assert load(None, environ=environ(by_protocol)).inter_broker_listener_name == "PLAINTEXT"
    error = config_error({**by_protocol, "inter.broker.listener.name": "PLAINTEXT"})
    assert error.key == "security.inter.broker.protocol"


def test_a_security_protocol_map_may_name_listeners_that_are_not_served() -> None:
    config = load(None, environ=environ({"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL"}))
    assert config.security_protocols["PLAINTEXT"] == "PLAINTEXT"


def test_more_than_one_log_directory_is_refused() -> None:
    error = config_error({"log.dirs": "/data/a,/data/b"})
    assert error.key == "log.dirs"


def test_advertised_listener_must_name_a_listener() -> None:
    error = config_error({**TWO_LISTENERS, "advertised.listeners": "EXTERNAL://broker-1:9094"})
    assert error.key == "advertised.listeners"
    assert "EXTERNAL" in error.reason


@pytest.mark.parametrize("missing", ["broker.id", "zookeeper.connect"])
def test_required_keys_are_named_when_missing(missing: str) -> None:
    present = {k: v for k, v in REQUIRED.items() if k != missing}
    with pytest.raises(ConfigError) as info:
        load(None, environ={env_var_name(k): v for k, v in present.items()})
    assert info.value.key == missing


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num.io.threads", "0"),
        ("queued.max.requests", "0"),
        ("controlled.shutdown.max.retries", "0"),
        ("broker.id", "-1"),
        ("broker.id", "1001"),  # above reserved.broker.max.id: a controller's range
        ("controlled.shutdown.enable", "maybe"),
    ],
)
def test_out_of_range_values_name_their_key(key: str, value: str) -> None:
    assert config_error({key: value}).key == key


# ---------------------------------------------------------------- the command line


def test_command_line_exits_2_naming_the_bad_key(tmp_path: Path) -> None:
    properties = "broker.id=1\nzookeeper.connect=127.0.0.1:1/unused\nnum.io.threads=0\n"
    done = start_with("broker", properties, tmp_path)
    assert done.returncode == 2, done.stderr
    assert "num.io.threads" in done.stderr


def test_data_plane_defaults_are_kafkas() -> None:
    config = load(None, environ=environ({}))
    assert config.segment_bytes == 1 << 30 and config.segment_ms == 168 * 3_600_000
    assert config.retention_ms == 168 * 3_600_000 and config.retention_bytes == -1
    assert config.min_insync_replicas == 1 and config.replica_lag_time_max_ms == 30000
    assert config.message_max_bytes == 1048588 and config.replica_fetch_max_bytes == 1048576


@pytest.mark.parametrize(
    ("properties", "expected"),
    [
        ({"log.retention.hours": "2"}, 7_200_000),
        ({"log.retention.minutes": "3", "log.retention.hours": "2"}, 180_000),
        ({"log.retention.ms": "500", "log.retention.minutes": "3"}, 500),
        ({"log.retention.hours": "-1"}, -1),
        ({"log.retention.ms": "-1", "log.retention.hours": "2"}, -1),
    ],
)
def test_retention_takes_ms_then_minutes_then_hours(properties: dict[str, str], expected: int) -> None:
    assert load(None, environ=environ(properties)).retention_ms == expected


def test_a_bad_data_plane_value_names_its_key() -> None:
    assert config_error({"min.insync.replicas": "0"}).key == "min.insync.replicas"
