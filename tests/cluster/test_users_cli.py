"""``python -m cluster users`` (and ``configs --entity-type users``): credentials that a SCRAM server
accepts, describe output without secrets, and the errors and exit codes for bad input."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import pytest

from cluster import admin_cli, configs_cli, users_cli
from security.sasl import ScramClient, ScramServer
from zkstore import users
from zkstore.aio import AsyncZooKeeper

pytestmark = pytest.mark.zookeeper

ADD = "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]"


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m cluster")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = admin_cli.common_options()
    configs_cli.register(commands, common)
    users_cli.register(commands, common)
    return top


async def cli(zk_connect: str, *argv: str) -> int:
    """One command as ``python -m cluster`` runs it, in a thread (it does its own asyncio.run)."""

    def run() -> int:
        args = parser().parse_args([argv[0], "--zookeeper", zk_connect, *argv[1:]])
        return int(args.run(args) or 0)

    return await asyncio.to_thread(run)


def login(mechanism: str, user: str, password: str, stored: Any) -> str | None:
    """Run a SCRAM exchange against what ZooKeeper holds; the principal, or None if refused."""
    client, server = ScramClient(mechanism, user, password), ScramServer(mechanism)
    server.receive_client_first(client.client_first())
    try:
        server.receive_client_final(client.client_final(server.server_first(stored)))
    except ValueError:
        return None
    return server.principal


async def test_added_credentials_let_the_user_log_in(
    zk_connect: str, zk: AsyncZooKeeper, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await cli(zk_connect, "users", "--alter", "--add-config", ADD, "--entity-name", "alice") == 0
    assert "Completed updating config for user alice." in capsys.readouterr().out
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        stored = await users.read_scram_credential(zk, "alice", mechanism)
        assert login(mechanism, "alice", "alice-secret", stored) == "alice"
        assert login(mechanism, "alice", "wrong", stored) is None
    assert await users.describe_scram_users(zk) == {"alice": {"SCRAM-SHA-256": 8192, "SCRAM-SHA-512": 4096}}


async def test_describe_shows_iterations_never_secrets(
    zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await cli(zk_connect, "users", "--alter", "--add-config", ADD, "--entity-name", "alice")
    capsys.readouterr()
    assert await cli(zk_connect, "users", "--describe") == 0
    table = capsys.readouterr().out
    assert [line.split() for line in table.splitlines()] == [
        ["USER", "MECHANISM", "ITERATIONS"],
        ["alice", "SCRAM-SHA-256", "8192"],
        ["alice", "SCRAM-SHA-512", "4096"],
    ]
    assert await cli(zk_connect, "users", "--describe", "--entity-name", "alice", "--json") == 0
    out = capsys.readouterr().out
    assert json.loads(out) == [
        {
            "user": "alice",
            "credentials": [
                {"mechanism": "SCRAM-SHA-256", "iterations": 8192},
                {"mechanism": "SCRAM-SHA-512", "iterations": 4096},
            ],
        }
    ]
    assert "salt" not in out + table and "key" not in out + table


async def test_delete_config_removes_one_mechanism(
    zk_connect: str, zk: AsyncZooKeeper, capsys: pytest.CaptureFixture[str]
) -> None:
    await cli(zk_connect, "users", "--alter", "--add-config", ADD, "--entity-name", "alice")
    argv = ("users", "--alter", "--delete-config", "SCRAM-SHA-512", "--entity-name", "alice")
    assert await cli(zk_connect, *argv) == 0
    assert await users.describe_scram_users(zk) == {"alice": {"SCRAM-SHA-256": 8192}}
    capsys.readouterr()
    assert await cli(zk_connect, *argv) == 1  # nothing left to delete
    assert "no SCRAM-SHA-512 credential" in capsys.readouterr().err


async def test_configs_entity_type_users_is_the_same_command(zk_connect: str, zk: AsyncZooKeeper) -> None:
    argv = ("configs", "--entity-type", "users", "--entity-name", "bob", "--alter", "--add-config")
    assert await cli(zk_connect, *argv, "SCRAM-SHA-512=[iterations=4096,password=b,c]") == 0
    stored = await users.read_scram_credential(zk, "bob", "SCRAM-SHA-512")
    assert login("SCRAM-SHA-512", "bob", "b,c", stored) == "bob"  # the password is the rest of the entry
    assert await cli(zk_connect, "configs", "--entity-type", "users", "--describe") == 0


@pytest.mark.parametrize(
    ("add_config", "complaint"),
    [
        ("SCRAM-SHA-256=[iterations=4095,password=p]", "between 4096 and 16384"),
        ("SCRAM-SHA-256=[iterations=16385,password=p]", "between 4096 and 16384"),
        ("SCRAM-SHA-1=[password=p]", "not a SCRAM mechanism"),
        ("producer_byte_rate=1024", "not a SCRAM mechanism"),
        ("SCRAM-SHA-256=[iterations=8192]", "password=P"),
        ("SCRAM-SHA-256=[password=p],SCRAM-SHA-256=[password=q]", "twice"),
        ("=[password=p]", "cannot read"),
    ],
)
async def test_bad_credentials_are_errors(
    zk_connect: str, zk: AsyncZooKeeper, capsys: pytest.CaptureFixture[str], add_config: str, complaint: str
) -> None:
    code = await cli(zk_connect, "users", "--alter", "--add-config", add_config, "--entity-name", "eve")
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and complaint in err
    assert await users.list_users(zk) == []


@pytest.mark.parametrize(
    "argv",
    [
        ("users", "--alter", "--add-config", "SCRAM-SHA-256=[password=p]"),  # no user
        ("users", "--alter", "--entity-name", "eve"),  # nothing to change
        ("configs", "--entity-type", "users", "--describe", "--bootstrap-server", "localhost:9092"),
    ],
)
async def test_usage_errors_exit_2(zk_connect: str, argv: tuple[str, ...]) -> None:
    assert await cli(zk_connect, *argv) == 2


async def test_describe_without_credentials(zk_connect: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert await cli(zk_connect, "users", "--describe", "--entity-name", "nobody") == 0
    assert capsys.readouterr().out.strip() == "No SCRAM credentials for user nobody."
    assert await cli(zk_connect, "users", "--describe", "--json") == 0
    assert json.loads(capsys.readouterr().out) == []


def test_parse_scram_config() -> None:
    assert users_cli.parse_scram_config(ADD) == {
        "SCRAM-SHA-256": (8192, "alice-secret"),
        "SCRAM-SHA-512": (4096, "alice-secret"),
    }
    assert users_cli.parse_scram_config("SCRAM-SHA-256=password=p") == {"SCRAM-SHA-256": (4096, "p")}
    assert users_cli.parse_delete_config("SCRAM-SHA-512, SCRAM-SHA-256") == ["SCRAM-SHA-512", "SCRAM-SHA-256"]
