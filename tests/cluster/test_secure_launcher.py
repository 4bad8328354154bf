"""``python -m cluster up --secure``: a local cluster with TLS everywhere, SCRAM for clients and ACLs.

The client config file it prints is all a real client needs; the admin commands find the cluster's
ZooKeeper identity through --dir; a ZooKeeper client without that identity can change nothing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from cluster import launcher, node_control, state_file
from daemon.config import parse_properties

pytestmark = pytest.mark.zookeeper


def properties(path: Path) -> dict[str, str]:
    return parse_properties(path.read_text())


def round_trip(config: dict[str, str], topic: str) -> bytes:
    """Produce one record and read it back from the beginning; the value read."""
    value = uuid.uuid4().bytes
    errors: list[str] = []
    producer = Producer({**config, "message.timeout.ms": 20000})
    producer.produce(topic, value, on_delivery=lambda err, _: errors.append(str(err)) if err else None)
    assert producer.flush(30) == 0 and not errors, errors
    consumer = Consumer({**config, "group.id": "secure-launcher", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None and message.value() == value:
                return value
    finally:
        consumer.close()
    raise AssertionError("the record did not come back within 60 s")


def assert_every_listener_is_secured(state: dict[str, Any]) -> None:
    """SASL_SSL for clients, SSL for the rest; no PLAINTEXT anywhere."""
    for process in state["processes"]:
        if process["role"] == "broker":
            names = [listener.split("://")[0] for listener in process["listeners"]]
            assert names == ["CLIENT", "INTERNAL", "CONTROLLER"]
        if process["role"] != "zookeeper":
            settings = properties(Path(process["config"]))
            assert "PLAINTEXT" not in settings["listener.security.protocol.map"]
            assert settings["zookeeper.ssl.client.enable"] == "true"


def assert_kcat_lists_the_topic(client_config: Path, servers: str) -> None:
    """kcat, where it is installed, reads the printed config file as it is."""
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is not None:
        listed = subprocess.run(
            [kcat, "-F", str(client_config), "-b", servers, "-L", "-t", "demo"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert listed.returncode == 0 and 'topic "demo" with 6 partitions' in listed.stdout, listed.stderr


def assert_admin_commands_work(
    main: Callable[[list[str]], int],
    directory: Path,
    servers: str,
    client_config: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The admin commands reach the TLS ZooKeeper with the cluster's identity through --dir alone.
    assert (
        main(
            [
                "topics",
                "create",
                "orders",
                "--partitions",
                "2",
                "--replication-factor",
                "2",
                "--dir",
                str(directory),
            ]
        )
        == 0
    )
    assert main(["topics", "describe", "orders", "--dir", str(directory), "--json"]) == 0
    capsys.readouterr()
    assert main(["users", "--dir", str(directory), "--describe", "--json"]) == 0
    assert "admin" in json.dumps(json.loads(capsys.readouterr().out))

    # ... and the commands that reach the brokers use its client config (or --command-config).
    assert main(["produce", "--dir", str(directory), "--topic", "orders", "--count", "5"]) == 0
    consumed = ["consume", "--dir", str(directory), "--topic", "orders", "--from-beginning"]
    assert main([*consumed, "--max-messages", "5", "--timeout", "30"]) == 0
    capsys.readouterr()
    admin_api = ["--bootstrap-server", servers, "--command-config", str(client_config)]
    assert main(["topics", "list", *admin_api, "--zookeeper", "unused:1"]) == 0
    assert "orders" in capsys.readouterr().out


def assert_zookeeper_refuses_outsiders(state: dict[str, Any]) -> None:
    """Without the cluster's identity, ZooKeeper refuses every change, even at its root."""
    plain_port = state_file.find(state, "zookeeper-1")["port"]
    outsider = KazooClient(hosts=f"127.0.0.1:{plain_port}")
    outsider.start(timeout=15)
    try:
        for change in (
            lambda: outsider.delete("/controller"),
            lambda: outsider.create("/intruder"),
            lambda: outsider.set("/brokers/topics/orders", b"{}"),
        ):
            with pytest.raises(NoAuthError):
                change()
    finally:
        outsider.stop()
        outsider.close()


def test_up_secure_serves_clients_with_the_printed_config_and_locks_zookeeper(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cluster.__main__ import main

    directory = tmp_path / "secure"
    try:
        assert (
            main(
                [
                    "up",
                    "--secure",
                    "--dir",
                    str(directory),
                    "--detach",
                    "--brokers",
                    "2",
                    "--controllers",
                    "1",
                ]
            )
            == 0
        )
        printed = capsys.readouterr().out
        state = state_file.load_state(directory)
        client_config = state_file.client_config(state)
        assert client_config is not None and str(client_config) in printed
        config = properties(client_config)
        assert config["security.protocol"] == "SASL_SSL" and config["sasl.mechanism"] == "SCRAM-SHA-512"
        assert client_config.stat().st_mode & 0o077 == 0, "the file holds a password"
        assert_every_listener_is_secured(state)

        servers = state_file.bootstrap_servers(state)
        assert round_trip({"bootstrap.servers": servers, **config}, "demo")
        assert_kcat_lists_the_topic(client_config, servers)
        assert_admin_commands_work(main, directory, servers, client_config, capsys)
        assert_zookeeper_refuses_outsiders(state)
    finally:
        if state_file.state_path(directory).exists():
            node_control.down(directory)


def test_secure_refuses_layouts_it_cannot_secure(tmp_path: Path) -> None:
    for layout, reason in (
        (launcher.Layout(zookeeper_nodes=3, secure=True), "--zookeeper-nodes 1"),
        (launcher.Layout(shared_listener=True, secure=True), "--shared-listener"),
    ):
        with pytest.raises(state_file.ClusterError, match=reason):
            layout.check()
