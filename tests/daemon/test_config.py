"""The shared configuration loader: properties syntax, env overrides, typed values, errors naming keys."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.config import (
    REQUIRED,
    ConfigError,
    ConfigKey,
    Endpoint,
    at_least,
    env_var_name,
    load_config,
    parse_listeners,
    parse_properties,
)

KEYS = [
    ConfigKey("zookeeper.connect", "string"),
    ConfigKey("controller.id", "int", check=at_least(0)),
    ConfigKey("delete.topic.enable", "bool", default=True),
    ConfigKey("listeners", "list", default=["PLAINTEXT://127.0.0.1:0"]),
    ConfigKey("control.plane.listener.name", "string", default=None, aliases=("controller.listener.name",)),
]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "server.properties"
    path.write_text(text)
    return path


def test_properties_syntax() -> None:
    text = (
        "# a comment\n"
        "! another\n"
        "a=1\n"
        "b : two words  \n"
        "c three\n"
        "   d=   leading spaces go\n"
        "long=first,\\\n"
        "     second\n"
        "path=C:\\\\dir\n"
        "uni=caf\\u00e9\n"
        "empty=\n"
        "key\\=with\\:seps=x\n"
    )
    assert parse_properties(text) == {
        "a": "1",
        "b": "two words  ",
        "c": "three",
        "d": "leading spaces go",
        "long": "first,second",
        "path": "C:\\dir",
        "uni": "café",
        "empty": "",
        "key=with:seps": "x",
    }


def test_env_var_names_follow_the_container_convention() -> None:
    assert env_var_name("zookeeper.connect") == "KAFKA_ZOOKEEPER_CONNECT"
    assert env_var_name("log.dirs") == "KAFKA_LOG_DIRS"
    assert env_var_name("some_key.with-dash") == "KAFKA_SOME__KEY_WITH___DASH"


def test_values_are_typed_and_environment_wins_over_the_file(tmp_path: Path) -> None:
    path = write(
        tmp_path, "zookeeper.connect=127.0.0.1:2181/kafka\ncontroller.id=3\ndelete.topic.enable=false\n"
    )
    config = load_config(KEYS, path, environ={"KAFKA_CONTROLLER_ID": "7"})
    assert config["controller.id"] == 7 and config.origins["controller.id"] == "env"
    assert (
        config["zookeeper.connect"] == "127.0.0.1:2181/kafka"
        and config.origins["zookeeper.connect"] == "file"
    )
    assert config["delete.topic.enable"] is False
    assert config["listeners"] == ["PLAINTEXT://127.0.0.1:0"] and config.origins["listeners"] == "default"
    assert config["control.plane.listener.name"] is None


def test_an_alias_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, "zookeeper.connect=z:1\ncontroller.id=1\ncontroller.listener.name=CONTROL\n")
    assert load_config(KEYS, path, environ={})["control.plane.listener.name"] == "CONTROL"


@pytest.mark.parametrize(
    ("text", "environ", "key", "reason"),
    [
        ("controller.id=1\n", {}, "zookeeper.connect", "is required"),
        ("zookeeper.connect=z:1\ncontroller.id=one\n", {}, "controller.id", "invalid int value 'one'"),
        ("zookeeper.connect=z:1\ncontroller.id=-1\n", {}, "controller.id", "must be at least 0"),
        (
            "zookeeper.connect=z:1\ncontroller.id=1\n",
            {"KAFKA_DELETE_TOPIC_ENABLE": "yes"},
            "delete.topic.enable",
            "expected true or false",
        ),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, text: str, environ: dict, key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(KEYS, write(tmp_path, text), environ=environ)
    assert info.value.key == key
    assert str(info.value).startswith(f"{key}: ") and reason in str(info.value)


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(KEYS, tmp_path / "absent.properties", environ={})


def test_unknown_keys_are_reported_not_fatal(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write(tmp_path, "zookeeper.connect=z:1\ncontroller.id=1\nnum.partitionz=3\n")
    config = load_config(KEYS, path, environ={})
    assert config.unknown == ("num.partitionz",)
    assert "num.partitionz was supplied but is not a known key" in caplog.text


def test_unknown_kafka_environment_variables_are_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path, "zookeeper.connect=z:1\ncontroller.id=1\n")
    environ = {
        "KAFKA_CONTROLLER_ID": "2",  # a known key: used
        "KAFKA_NUM_PARTITIONZ": "3",  # a misspelt key: warned about
        "KAFKA_HEAP_OPTS": "-Xmx1g",  # Kafka's start scripts read it: not a key
        "kafka_lower": "x",  # not the convention
    }
    config = load_config(KEYS, path, environ=environ)
    assert config["controller.id"] == 2
    assert config.unknown == ("KAFKA_NUM_PARTITIONZ",)
    assert "KAFKA_NUM_PARTITIONZ looks like a configuration key" in caplog.text
    assert "KAFKA_HEAP_OPTS" not in caplog.text


def test_listeners_parse_like_kafkas() -> None:
    assert parse_listeners("listeners", ["PLAINTEXT://:9092", "control://[::1]:9093", "X://h.example:0"]) == [
        Endpoint("PLAINTEXT", "", 9092),
        Endpoint("CONTROL", "::1", 9093),
        Endpoint("X", "h.example", 0),
    ]
    for bad in (["nohost"], ["A://h:70000"], ["A://h:1", "a://h:2"], ["A://h"]):
        with pytest.raises(ConfigError, match=r"^listeners: "):
            parse_listeners("listeners", bad)


@given(
    st.dictionaries(
        st.from_regex(r"[a-z][a-z0-9.]{0,12}", fullmatch=True),
        st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=20).map(str.strip),
        max_size=8,
    )
)
def test_properties_written_with_escapes_read_back(values: dict[str, str]) -> None:
    def escape(text: str) -> str:
        return "".join("\\" + c if c in "\\=:#! " else c for c in text)

    text = "".join(f"{k}={escape(v)}\n" for k, v in values.items())
    assert parse_properties(text) == values


def test_required_marker_is_distinct_from_none() -> None:
    assert REQUIRED is not None and repr(REQUIRED) == "REQUIRED"


def test_the_start_up_log_hides_secrets_wherever_they_are_set(tmp_path: Path) -> None:
    keys = (
        ConfigKey("zookeeper.connect", "string"),
        ConfigKey("zookeeper.auth.digest", "string", None, sensitive=True),
        ConfigKey("sasl.jaas.config", "string", None, per_listener=True, sensitive=True),
    )
    path = tmp_path / "node.properties"
    path.write_text(
        "zookeeper.connect=zk:2181\nlistener.name.client.scram-sha-512.sasl.jaas.config=password=p2\n"
    )
    loaded = load_config(keys, path, environ={"KAFKA_ZOOKEEPER_AUTH_DIGEST": "kafka:p1"})
    described = loaded.describe()
    assert "p1" not in described and "p2" not in described
    assert "zookeeper.auth.digest=[hidden] (env)" in described
    assert "listener.name.client.scram-sha-512.sasl.jaas.config=[hidden]" in described
    assert "zookeeper.connect='zk:2181' (file)" in described
    assert "sasl.jaas.config=None (default)" in described  # unset: nothing to hide
