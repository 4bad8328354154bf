"""``python -m cluster acls``: kafka-acls.sh's flags writing Kafka's ACL znodes, its outputs and errors.

Commands run as ``python -m cluster`` runs them (argparse, then ``args.run``), in-process; each does
its own ``asyncio.run``, so the tests are plain functions.
"""

from __future__ import annotations

import argparse
import json

import pytest
from kazoo.client import KazooClient

from cluster import acls_cli, admin_cli

pytestmark = pytest.mark.zookeeper


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m cluster")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    acls_cli.register(commands, admin_cli.common_options())
    return top


class Cli:
    def __init__(self, zk_connect: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.zk_connect = zk_connect
        self.capsys = capsys

    def __call__(self, *argv: str) -> int:
        args = parser().parse_args(["acls", "--zookeeper", self.zk_connect, *argv])
        return int(args.run(args) or 0)

    def json(self, *argv: str) -> object:
        self.capsys.readouterr()
        assert self(*argv, "--json") == 0
        return json.loads(self.capsys.readouterr().out)

    def error(self, *argv: str) -> tuple[int, str]:
        self.capsys.readouterr()
        code = self(*argv)
        err = self.capsys.readouterr().err.strip()
        assert err.startswith("error: "), err
        return code, err


@pytest.fixture
def cli(zk_connect: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(zk_connect, capsys)


def stored(zk_client: KazooClient, path: str) -> list[dict[str, str]]:
    acls: list[dict[str, str]] = json.loads(zk_client.get(path)[0])["acls"]
    return acls


def rows(listing: object) -> set[tuple[str, ...]]:
    """(type, name, pattern, principal, host, operation, permission) of each listed ACL."""
    assert isinstance(listing, list)
    keys = ("resourceType", "name", "patternType", "principal", "host", "operation", "permissionType")
    return {tuple(item[k] for k in keys) for item in listing}


def test_add_writes_kafkas_znode_and_notification(cli: Cli, zk_client: KazooClient) -> None:
    assert (
        cli(
            "--add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Read",
            "--operation",
            "describe",
            "--topic",
            "orders",
        )
        == 0
    )
    assert stored(zk_client, "/kafka-acl/Topic/orders") == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Describe", "host": "*"},
    ]
    changes = zk_client.get_children("/kafka-acl-changes")
    assert [zk_client.get(f"/kafka-acl-changes/{c}")[0] for c in changes] == [b"TOPIC:orders"]


def test_list_as_table_and_json(cli: Cli, capsys: pytest.CaptureFixture[str]) -> None:
    cli("--add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9", "--topic", "orders")
    capsys.readouterr()
    assert cli("--list") == 0
    out = capsys.readouterr().out
    assert "RESOURCE-TYPE" in out
    assert ["TOPIC", "orders", "LITERAL", "User:mallory", "10.0.0.9", "ALL", "DENY"] in [
        line.split() for line in out.splitlines()
    ]
    assert rows(cli.json("--list", "--topic", "orders")) == {
        ("TOPIC", "orders", "LITERAL", "User:mallory", "10.0.0.9", "ALL", "DENY")
    }
    assert cli.json("--list", "--topic", "other") == []


def test_producer_and_consumer_conveniences(cli: Cli, zk_client: KazooClient) -> None:
    cli("--add", "--allow-principal", "User:p", "--producer", "--topic", "orders")
    cli("--add", "--allow-principal", "User:c", "--consumer", "--topic", "orders", "--group", "billing")
    listing = rows(cli.json("--list"))
    assert {(r[0], r[1], r[3], r[5]) for r in listing} == {
        ("TOPIC", "orders", "User:p", "WRITE"),
        ("TOPIC", "orders", "User:p", "DESCRIBE"),
        ("TOPIC", "orders", "User:p", "CREATE"),
        ("TOPIC", "orders", "User:c", "READ"),
        ("TOPIC", "orders", "User:c", "DESCRIBE"),
        ("GROUP", "billing", "User:c", "READ"),
    }
    assert zk_client.exists("/kafka-acl/Group/billing")


def test_prefixed_and_match(cli: Cli, zk_client: KazooClient) -> None:
    cli(
        "--add",
        "--allow-principal",
        "User:a",
        "--operation",
        "Write",
        "--topic",
        "ord",
        "--resource-pattern-type",
        "prefixed",
    )
    cli("--add", "--allow-principal", "User:b", "--operation", "Read", "--topic", "*")
    cli("--add", "--allow-principal", "User:c", "--operation", "Read", "--topic", "orders")
    cli("--add", "--allow-principal", "User:d", "--operation", "Read", "--topic", "other")
    assert zk_client.exists("/kafka-acl-extended/prefixed/Topic/ord")
    matched = cli.json("--list", "--topic", "orders", "--resource-pattern-type", "match")
    assert {(r[1], r[2], r[3]) for r in rows(matched)} == {
        ("ord", "PREFIXED", "User:a"),
        ("*", "LITERAL", "User:b"),
        ("orders", "LITERAL", "User:c"),
    }
    assert {r[1] for r in rows(cli.json("--list", "--resource-pattern-type", "prefixed"))} == {"ord"}


def test_remove_by_principal_operation_or_everything(cli: Cli, zk_client: KazooClient) -> None:
    cli(
        "--add",
        "--allow-principal",
        "User:a",
        "--allow-principal",
        "User:b",
        "--operation",
        "Read",
        "--operation",
        "Write",
        "--topic",
        "orders",
    )
    removed = cli.json("--remove", "--allow-principal", "User:a", "--operation", "Write", "--topic", "orders")
    assert isinstance(removed, dict)
    assert rows(removed["removed"]) == {("TOPIC", "orders", "LITERAL", "User:a", "*", "WRITE", "ALLOW")}
    assert len(removed["current"]) == 3
    cli("--remove", "--allow-principal", "User:b", "--topic", "orders")  # every operation of b's
    assert {(r[3], r[5]) for r in rows(cli.json("--list"))} == {("User:a", "READ")}
    cli("--remove", "--topic", "orders")
    assert not zk_client.exists("/kafka-acl/Topic/orders")
    assert len(zk_client.get_children("/kafka-acl-changes")) == 4


def test_remove_with_match_reaches_every_pattern_that_applies(cli: Cli) -> None:
    cli("--add", "--allow-principal", "User:a", "--topic", "ord", "--resource-pattern-type", "prefixed")
    cli("--add", "--allow-principal", "User:a", "--topic", "orders")
    cli("--add", "--allow-principal", "User:a", "--topic", "zzz")
    cli("--remove", "--topic", "orders", "--resource-pattern-type", "match")
    assert {r[1] for r in rows(cli.json("--list"))} == {"zzz"}


def test_cluster_and_transactional_id(cli: Cli, zk_client: KazooClient) -> None:
    cli("--add", "--allow-principal", "User:b", "--operation", "ClusterAction", "--cluster")
    cli("--add", "--allow-principal", "User:p", "--producer", "--transactional-id", "tx", "--idempotent")
    assert stored(zk_client, "/kafka-acl/Cluster/kafka-cluster")
    assert {(r[0], r[1], r[5]) for r in rows(cli.json("--list", "--principal", "User:p"))} == {
        ("TRANSACTIONAL_ID", "tx", "WRITE"),
        ("TRANSACTIONAL_ID", "tx", "DESCRIBE"),
        ("CLUSTER", "kafka-cluster", "IDEMPOTENT_WRITE"),
    }


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["--add", "--topic", "t"], 2, "--allow-principal"),
        (["--add", "--allow-principal", "User:a"], 2, "name a resource"),
        (
            ["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"],
            2,
            "literal or prefixed",
        ),
        (["--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"], 2, "--group"),
        (["--add", "--allow-principal", "alice", "--topic", "t"], 1, "Type:Name"),
        (["--add", "--allow-principal", "User:a", "--operation", "Write", "--group", "g"], 1, "Group"),
        (["--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"], 1, "Fly"),
        (["--add", "--allow-principal", "User:a", "--topic", "a/b"], 1, "'/'"),
    ],
)
def test_refusals(cli: Cli, zk_client: KazooClient, argv: list[str], code: int, says: str) -> None:
    got_code, message = cli.error(*argv)
    assert got_code == code
    assert says in message
    assert not zk_client.exists("/kafka-acl/Topic/t")


def test_corrupt_znode_is_reported_not_overwritten(cli: Cli, zk_client: KazooClient) -> None:
    zk_client.create("/kafka-acl/Topic/t", b"{half", makepath=True)
    code, message = cli.error("--add", "--allow-principal", "User:a", "--topic", "t")
    assert code == 1 and "/kafka-acl/Topic/t" in message
    assert zk_client.get("/kafka-acl/Topic/t")[0] == b"{half"


def test_kafka_acls_spelling_of_zookeeper(zk_connect: str, zk_client: KazooClient) -> None:
    argv = ["acls", "--authorizer-properties", f"zookeeper.connect={zk_connect}", "--add"]
    args = parser().parse_args([*argv, "--allow-principal", "User:a", "--operation", "Read", "--topic", "t"])
    assert args.run(args) == 0
    assert stored(zk_client, "/kafka-acl/Topic/t")
