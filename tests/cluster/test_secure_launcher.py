"""``python -m cluster up --secure``: a local cluster with TLS everywhere, SCRAM for clients and ACLs.

The client config file it prints is all a real client needs; the admin commands find the cluster's
ZooKeeper identity through --dir; a ZooKeeper client without that identity can change nothing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from cluster import launcher
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
        state = launcher.load_state(directory)
        client_config = launcher.client_config(state)
        assert client_config is not None and str(client_config) in printed
        config = properties(client_config)
        assert config["security.protocol"] == "SASL_SSL" and config["sasl.mechanism"] == "SCRAM-SHA-512"
        assert client_config.stat().st_mode & 0o077 == 0, "the file holds a password"

        # Every listener is secured: SASL_SSL for clients, SSL for the rest; no PLAINTEXT anywhere.
        for process in state["processes"]:
            if process["role"] == "broker":
                names = [listener.split("://")[0] for listener in process["listeners"]]
                assert names == ["CLIENT", "INTERNAL", "CONTROLLER"]
            if process["role"] != "zookeeper":
                settings = properties(Path(process["config"]))
                assert "PLAINTEXT" not in settings["listener.security.protocol.map"]
                assert settings["zookeeper.ssl.client.enable"] == "true"

        servers = launcher.bootstrap_servers(state)
        assert round_trip({"bootstrap.servers": servers, **config}, "demo")
        kcat = shutil.which("kcat") or shutil.which("kafkacat")
        if kcat is not None:
            listed = subprocess.run(
                [kcat, "-F", str(client_config), "-b", servers, "-L", "-t", "demo"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert listed.returncode == 0 and 'topic "demo" with 6 partitions' in listed.stdout, listed.stderr

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

        # Without that identity, ZooKeeper refuses every change, even at its root.
        plain_port = launcher.find(state, "zookeeper-1")["port"]
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
    finally:
        if launcher.state_path(directory).exists():
            launcher.down(directory)


def test_secure_refuses_layouts_it_cannot_secure(tmp_path: Path) -> None:
    for layout, reason in (
        (launcher.Layout(zookeeper_nodes=3, secure=True), "--zookeeper-nodes 1"),
        (launcher.Layout(shared_listener=True, secure=True), "--shared-listener"),
    ):
        with pytest.raises(launcher.ClusterError, match=reason):
            layout.check()
