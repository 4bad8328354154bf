"""The admin CLI: table and JSON outputs, exit codes and error lines, and one end-to-end run on real daemons.

Commands run the way ``python -m cluster`` runs them (argparse, then ``args.run``), each in a worker thread
because every command does its own ``asyncio.run``.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from cluster import admin_cli, brokers_cli, console_cli, leadership_cli, state_file, topics_cli
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until
from tests.support.zookeeper import register
from zkstore import topic_writes, znodes
from zkstore.aio import AsyncZooKeeper

pytestmark = pytest.mark.zookeeper


def parser() -> argparse.ArgumentParser:
    """``python -m cluster`` with only the admin commands (the lifecycle ones are another module's)."""
    top = argparse.ArgumentParser(prog="python -m cluster")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = admin_cli.common_options()
    for module in (topics_cli, brokers_cli, leadership_cli, console_cli):
        module.register(commands, common)
    return top


def run(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    return int(args.run(args) or 0)


async def cli(*argv: str) -> int:
    return await asyncio.to_thread(run, list(argv))


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


def error_line(captured: Any) -> str:
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("error: ")
    return lines[0]


def write_cluster_file(directory: Path, zk_connect: str, brokers: dict[int, tuple[str, int]]) -> Path:
    """A ``cluster.json`` as the launcher writes it."""
    directory.mkdir(parents=True, exist_ok=True)
    processes = [
        {"name": f"broker-{b}", "role": "broker", "id": b, "listeners": [f"PLAINTEXT://{h}:{p}"]}
        for b, (h, p) in brokers.items()
    ]
    processes.append({"name": "controller-100", "role": "controller", "id": 100, "listeners": []})
    state = {"version": state_file.STATE_VERSION, "zookeeper_connect": zk_connect, "processes": processes}
    path = state_file.state_path(directory)
    path.write_text(json.dumps(state))
    return path


# ---------------------------------------------------------------- topics


async def test_create_describe_list_as_tables_and_json(
    zk: AsyncZooKeeper, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await register(zk, 1, 2, 3)
    assert (
        await cli(
            "topics",
            "create",
            "orders",
            "--partitions",
            "3",
            "--replication-factor",
            "2",
            "--zookeeper",
            zk_connect,
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("Created topic orders (topic id ")
    assert rows(out)[1] == ["PARTITION", "REPLICAS"]
    assert (
        await cli("topics", "create", "pinned", "--replica-assignment", "3:1,1:2", "--zookeeper", zk_connect)
        == 0
    )
    capsys.readouterr()
    state = znodes.LeaderIsrState(leader=3, leader_epoch=2, controller_epoch=1, isr=(3, 1))
    await zk.create(znodes.partition_state_path("pinned", 0), state.encode(), makepath=True)

    assert await cli("topics", "describe", "pinned", "--zookeeper", zk_connect) == 0
    table = rows(capsys.readouterr().out)
    assert table[0] == ["TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "TOPIC-ID", "STATE"]
    assert table[1][:3] == ["pinned", "2", "2"]
    assert table[2] == ["TOPIC", "PARTITION", "LEADER", "LEADER-EPOCH", "ISR", "REPLICAS"]
    assert table[3:] == [
        ["pinned", "0", "3", "2", "3,1", "3,1"],
        ["pinned", "1", "(no", "state)", "-", "-", "1,2"],
    ]

    assert await cli("topics", "describe", "--json", "--zookeeper", zk_connect) == 0
    described = json.loads(capsys.readouterr().out)
    assert [t["topic"] for t in described["topics"]] == ["orders", "pinned"]
    pinned = described["topics"][1]
    assert pinned["partition_count"] == 2 and pinned["replication_factor"] == 2
    assert pinned["partitions"][0] == {
        "partition": 0,
        "replicas": [3, 1],
        "leader": 3,
        "leader_epoch": 2,
        "isr": [3, 1],
        "partition_epoch": 0,
        "adding_replicas": [],
        "removing_replicas": [],
    }
    assert pinned["partitions"][1]["leader"] is None

    assert await cli("topics", "list", "--zookeeper", zk_connect) == 0
    assert [r[0] for r in rows(capsys.readouterr().out)] == ["TOPIC", "orders", "pinned"]
    assert await cli("topics", "list", "--json", "--zookeeper", zk_connect) == 0
    listed = json.loads(capsys.readouterr().out)["topics"]
    assert [(t["topic"], t["partition_count"]) for t in listed] == [("orders", 3), ("pinned", 2)]


async def test_alter_and_delete(
    zk: AsyncZooKeeper, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await register(zk, 1, 2, 3)
    await topic_writes.create_new_topic(zk, "orders", assignment={0: (1, 2)})
    assert (
        await cli("topics", "alter", "orders", "--partitions", "3", "--json", "--zookeeper", zk_connect) == 0
    )
    assert json.loads(capsys.readouterr().out) == {
        "topic": "orders",
        "partitions": 3,
        "added": {"1": [2, 3], "2": [3, 1]},
    }
    assert await cli("topics", "alter", "orders", "--partitions", "2", "--zookeeper", zk_connect) == 1
    assert "can only be increased" in error_line(capsys.readouterr())

    assert await cli("topics", "delete", "orders", "--zookeeper", zk_connect) == 0
    assert capsys.readouterr().out.startswith("Topic orders is marked for deletion.")
    assert await zk.get_children(znodes.DELETE_TOPICS) == ["orders"]
    assert await cli("topics", "list", "--zookeeper", zk_connect) == 0
    assert rows(capsys.readouterr().out)[1][-3:] == ["marked", "for", "deletion"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["orders", "--partitions", "1", "--replication-factor", "1"],
            "error: Topic 'orders' already exists.",
        ),
        (["a b", "--partitions", "1", "--replication-factor", "1"], "is illegal, it contains a character"),
        (["x" * 250, "--partitions", "1", "--replication-factor", "1"], "longer than 249 characters"),
        (["big", "--partitions", "1", "--replication-factor", "4"], "larger than available brokers: 3."),
        (["none", "--partitions", "0", "--replication-factor", "1"], "Number of partitions must be larger"),
        (["bad", "--replica-assignment", "1:1"], "Duplicate replica assignment found"),
        (["bad", "--replica-assignment", "1:x"], "is not a list of broker ids"),
    ],
)
async def test_create_errors_are_one_line_exit_1_and_write_nothing(
    zk: AsyncZooKeeper, zk_connect: str, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    await register(zk, 1, 2, 3)
    await topic_writes.create_topic(zk, "orders", {0: (1,)})
    assert await cli("topics", "create", *argv, "--zookeeper", zk_connect) == 1
    captured = capsys.readouterr()
    assert message in error_line(captured)
    assert captured.out == ""
    assert await zk.get_children(znodes.BROKER_TOPICS) == ["orders"]


async def test_usage_errors_exit_2(zk_connect: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert await cli("topics", "create", "t", "--partitions", "1", "--zookeeper", zk_connect) == 2
    assert "--replication-factor" in error_line(capsys.readouterr())
    assert await cli("elect-leaders", "--partition", "0", "--zookeeper", zk_connect) == 2
    assert await cli("reassign", "--generate", "--topics", "t", "--zookeeper", zk_connect) == 2
    capsys.readouterr()
    assert await cli("elect-leaders", "--type", "unclean", "--zookeeper", zk_connect) == 2
    assert "--bootstrap-server" in error_line(capsys.readouterr())
    for argv in (["elect-leaders", "--type", "fancy"], ["topics"], ["reassign", "--verify", "--generate"]):
        with pytest.raises(SystemExit) as exited:
            run(argv)
        assert exited.value.code == 2


async def test_describe_of_a_missing_topic(zk_connect: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert await cli("topics", "describe", "missing", "--zookeeper", zk_connect) == 1
    assert error_line(capsys.readouterr()) == "error: Topic 'missing' does not exist"


async def test_a_terminal_gets_a_rich_table(
    zk: AsyncZooKeeper, zk_connect: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("rich")
    await topic_writes.create_topic(zk, "orders", {0: (1,)})
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert await cli("topics", "list", "--zookeeper", zk_connect) == 0
    out = capsys.readouterr().out
    assert "┃" in out
    assert "orders" in out


# ---------------------------------------------------------------- where the cluster is


async def test_zookeeper_from_dir_and_from_the_environment(
    zk: AsyncZooKeeper,
    zk_connect: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await topic_writes.create_topic(zk, "orders", {0: (1,)})
    write_cluster_file(tmp_path / "run", zk_connect, {})
    assert await cli("topics", "list", "--json", "--dir", str(tmp_path / "run")) == 0
    assert [t["topic"] for t in json.loads(capsys.readouterr().out)["topics"]] == ["orders"]

    monkeypatch.setenv(admin_cli.ZOOKEEPER_ENV, zk_connect)
    assert await cli("topics", "list", "--json") == 0
    assert [t["topic"] for t in json.loads(capsys.readouterr().out)["topics"]] == ["orders"]

    # Without --dir or the environment, the cluster `make run` started in ./.run/cluster.
    monkeypatch.delenv(admin_cli.ZOOKEEPER_ENV)
    write_cluster_file(tmp_path / "checkout" / state_file.DEFAULT_DIR, zk_connect, {})
    monkeypatch.chdir(tmp_path / "checkout")
    assert await cli("topics", "list", "--json") == 0
    assert [t["topic"] for t in json.loads(capsys.readouterr().out)["topics"]] == ["orders"]

    assert await cli("topics", "list", "--dir", str(tmp_path / "nowhere")) == 1
    assert "cluster.json does not exist" in error_line(capsys.readouterr())
    assert await cli("produce", "--topic", "orders", "--count", "1", "--dir", str(tmp_path / "run")) == 1
    assert "no broker with a PLAINTEXT listener" in error_line(capsys.readouterr())


# ---------------------------------------------------------------- brokers, controller


async def test_brokers_and_controller(
    zk: AsyncZooKeeper, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    epochs = await register(zk, 2, 1)
    assert await cli("brokers", "--zookeeper", zk_connect) == 0
    table = rows(capsys.readouterr().out)
    assert table[0] == ["ID", "EPOCH", "EPOCH-HEX", "ENDPOINTS", "RACK"]
    assert table[1] == ["1", str(epochs[1]), f"0x{epochs[1]:x}", "PLAINTEXT://127.0.0.1:9001", "rack-1"]
    assert await cli("brokers", "--json", "--zookeeper", zk_connect) == 0
    assert json.loads(capsys.readouterr().out)["brokers"][1] == {
        "broker_id": 2,
        "epoch": epochs[2],
        "endpoints": ["PLAINTEXT://127.0.0.1:9002"],
        "rack": "rack-0",
    }

    assert await cli("controller", "--json", "--zookeeper", zk_connect) == 0
    assert json.loads(capsys.readouterr().out) == {
        "controller_id": None,
        "epoch": None,
        "epoch_zk_version": None,
        "rpc_endpoint": None,
    }
    await zk.create(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(6))
    await zk.set(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(7))
    await zk.create(znodes.CONTROLLER, znodes.ControllerRegistration(100, 0).encode(), ephemeral=True)
    assert await cli("controller", "--zookeeper", zk_connect) == 0
    assert rows(capsys.readouterr().out) == [
        ["CONTROLLER-ID", "EPOCH", "EPOCH-ZK-VERSION", "RPC-ENDPOINT"],
        ["100", "7", "1", "-"],
    ]


# ---------------------------------------------------------------- elections and reassignments


async def test_elect_leaders_writes_the_request(
    zk: AsyncZooKeeper, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await topic_writes.create_topic(zk, "orders", {0: (1, 2), 1: (2, 1)})
    assert (
        await cli(
            "elect-leaders", "--type", "preferred", "--topic", "orders", "--json", "--zookeeper", zk_connect
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out) == {
        "type": "preferred",
        "partitions": [{"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 1}],
    }
    data, _ = await zk.get(znodes.PREFERRED_REPLICA_ELECTION)
    assert znodes.decode_preferred_replica_election(data, "") == {("orders", 0), ("orders", 1)}
    assert await cli("elect-leaders", "--zookeeper", zk_connect) == 1
    assert "currently in progress" in error_line(capsys.readouterr())


async def test_reassign_generate_execute_verify(
    zk: AsyncZooKeeper, zk_connect: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await register(zk, 1, 2, 3)
    await topic_writes.create_topic(zk, "orders", {0: (1, 2), 1: (2, 1)})
    assert (
        await cli(
            "reassign",
            "--generate",
            "--topics",
            "orders",
            "--brokers",
            "2,3",
            "--json",
            "--zookeeper",
            zk_connect,
        )
        == 0
    )
    generated = json.loads(capsys.readouterr().out)
    assert generated["current"] == {
        "version": 1,
        "partitions": [
            {"topic": "orders", "partition": 0, "replicas": [1, 2]},
            {"topic": "orders", "partition": 1, "replicas": [2, 1]},
        ],
    }
    assert all(sorted(p["replicas"]) == [2, 3] for p in generated["proposed"]["partitions"])
    assert await zk.exists(znodes.REASSIGN_PARTITIONS) is None

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(generated["proposed"]))
    assert await cli("reassign", "--plan", str(plan), "--zookeeper", zk_connect) == 0
    out = capsys.readouterr().out
    assert out.startswith("Current partition replica assignment")
    assert "Successfully started partition reassignments for orders-0,orders-1" in out
    data, _ = await zk.get(znodes.REASSIGN_PARTITIONS)
    assert json.loads(data) == generated["proposed"]

    assert await cli("reassign", "--verify", "--plan", str(plan), "--json", "--zookeeper", zk_connect) == 0
    verified = json.loads(capsys.readouterr().out)["partitions"]
    assert [p["status"] for p in verified] == ["in progress", "in progress"]
    await zk.delete(znodes.REASSIGN_PARTITIONS)  # as if the controller had given up: nothing moved
    assert await cli("reassign", "--verify", "--plan", str(plan), "--zookeeper", zk_connect) == 1
    captured = capsys.readouterr()
    assert [r[2] for r in rows(captured.out)[1:]] == ["failed", "failed"]
    assert error_line(captured) == "error: reassignment failed for orders-0, orders-1"

    bad = tmp_path / "bad.json"
    bad.write_text('{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[4]}]}')
    assert await cli("reassign", "--plan", str(bad), "--zookeeper", zk_connect) == 1
    assert "non-existent brokerIDs: 4" in error_line(capsys.readouterr())
    assert await cli("reassign", "--plan", str(tmp_path / "missing.json"), "--zookeeper", zk_connect) == 1
    assert "No such file" in error_line(capsys.readouterr())


# ---------------------------------------------------------------- through python -m cluster


async def test_main_entry_point_runs_admin_commands(
    zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("cluster.lifecycle_cli")
    from cluster.__main__ import main

    assert await asyncio.to_thread(main, ["topics", "list", "--json", "--zookeeper", zk_connect]) == 0
    assert json.loads(capsys.readouterr().out) == {"topics": []}
    assert await asyncio.to_thread(main, ["topics", "describe", "nope", "--zookeeper", zk_connect]) == 1
    assert error_line(capsys.readouterr()) == "error: Topic 'nope' does not exist"


# ---------------------------------------------------------------- end to end


async def test_topic_created_produced_and_consumed_through_the_cli(
    cluster: Cluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await cluster.start((1, 2, 3))
    zk_connect = cluster.zk_connect
    assert (
        await cli(
            "topics",
            "create",
            "e2e",
            "--partitions",
            "3",
            "--replication-factor",
            "2",
            "--zookeeper",
            zk_connect,
        )
        == 0
    )

    async def every_partition_led() -> bool:
        capsys.readouterr()
        assert await cli("topics", "describe", "e2e", "--json", "--zookeeper", zk_connect) == 0
        partitions = json.loads(capsys.readouterr().out)["topics"][0]["partitions"]
        return all(p["leader"] is not None and p["leader"] >= 0 for p in partitions)

    await wait_until(every_partition_led, "a leader for every partition", timeout=60, interval=0.1)

    brokers = {b: process.endpoint("PLAINTEXT") for b, process in cluster.brokers.items()}
    directory = write_cluster_file(tmp_path / "run", zk_connect, brokers).parent
    lines = [f"line-{i}" for i in range(100)]
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{line}\n" for line in lines)))
    assert await cli("produce", "--topic", "e2e", "--acks", "all", "--json", "--dir", str(directory)) == 0
    produced = json.loads(capsys.readouterr().out)
    assert produced["acknowledged"] == produced["sent"] == 100
    assert sum(p["count"] for p in produced["partitions"]) == 100
    assert all(p["first_offset"] == 0 and p["last_offset"] == p["count"] - 1 for p in produced["partitions"])

    # No --bootstrap-server and no --dir: the brokers' PLAINTEXT endpoints are read from ZooKeeper.
    assert (
        await cli(
            "consume",
            "--topic",
            "e2e",
            "--from-beginning",
            "--max-messages",
            "100",
            "--timeout",
            "30",
            "--json",
            "--zookeeper",
            zk_connect,
        )
        == 0
    )
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(r["value"] for r in records) == sorted(lines)
    for p in produced["partitions"]:
        offsets = [r["offset"] for r in records if r["partition"] == p["partition"]]
        assert offsets == list(range(p["count"]))

    servers = ",".join(f"{h}:{p}" for h, p in brokers.values())
    await assert_one_partition_consumed_through_the_brokers(servers, produced, capsys)
    await assert_a_topic_that_cannot_exist_is_refused(servers, capsys)


async def assert_one_partition_consumed_through_the_brokers(
    servers: str, produced: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    # the producer's sticky partitioner may leave partitions empty: read one that has records
    filled = next(p["partition"] for p in produced["partitions"] if p["count"])
    assert (
        await cli(
            "consume",
            "--topic",
            "e2e",
            "--partition",
            str(filled),
            "--from-beginning",
            "--max-messages",
            "1",
            "--timeout",
            "30",
            "--bootstrap-server",
            servers,
        )
        == 0
    )
    (line,) = capsys.readouterr().out.splitlines()
    assert line.split("\t")[:3] == [str(filled), "0", "null"]


async def assert_a_topic_that_cannot_exist_is_refused(
    servers: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # a topic that cannot exist (the brokers create any other on first use): nothing is acknowledged
    assert (
        await cli(
            "produce", "--topic", "no*pe", "--count", "3", "--timeout", "2", "--bootstrap-server", servers
        )
        == 1
    )
    captured = capsys.readouterr()
    assert captured.out.startswith("0 of 3 records acknowledged")
    assert error_line(captured).startswith("error: 3 of 3 records not acknowledged: ")
    assert await cli("consume", "--topic", "no*pe", "--timeout", "1", "--bootstrap-server", servers) == 1
    assert error_line(capsys.readouterr()).startswith("error: topic no*pe: ")
