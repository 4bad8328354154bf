"""Replica verification: every replica holds the leader's batches up to the high watermark."""

from __future__ import annotations

import asyncio
import json
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cluster import launcher, node_control, state_file
from cluster.verify_replicas import Batch, compare
from protocol.record_batch import parse_batches
from tests.support.waiting import wait_until
from zkstore import admin_session, cluster_reads

LEADER = [Batch(0, 4, 1, 111), Batch(5, 9, 1, 222), Batch(10, 14, 2, 333)]


def test_identical_replicas_and_an_uncommitted_tail_are_consistent() -> None:
    follower = [*LEADER[:2], Batch(10, 12, 3, 999)]  # differs only above the high watermark
    assert compare("t", 0, {1: LEADER, 2: list(LEADER), 3: follower}, 10, 1) == []


def test_a_different_batch_below_the_high_watermark_is_reported_at_its_offset() -> None:
    follower = [LEADER[0], Batch(5, 9, 2, 444), LEADER[2]]
    [divergence] = compare("t", 0, {1: LEADER, 2: follower}, 15, 1)
    assert (divergence.replica, divergence.offset, divergence.reference) == (2, 5, 1)


def test_a_replica_that_ends_below_the_high_watermark_is_reported() -> None:
    [divergence] = compare("t", 0, {1: LEADER, 2: LEADER[:1]}, 15, 1)
    assert (divergence.replica, divergence.offset) == (2, 5)


def cli(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m cluster ARGS --dir DIRECTORY``, as a user types it."""
    command = [sys.executable, "-m", "cluster", *args, "--dir", str(directory)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


async def verify(directory: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(cli, directory, "verify-replicas", *flags)


async def consistent(directory: Path) -> bool:
    return (await verify(directory, "--no-record")).returncode == 0


def recorded(directory: Path) -> list[dict[str, Any]]:
    """The ``replicas_verified`` lines verify-replicas left for the audit, without ts and node."""
    path = directory / "verify-replicas" / "events.jsonl"
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert {(e["node"], e["kind"]) for e in lines} <= {("verify-replicas", "replicas_verified")}
    return [{k: v for k, v in e.items() if k not in ("ts", "node", "kind")} for e in lines]


@pytest.mark.zookeeper
async def test_the_command_finds_a_replica_whose_batch_has_another_leader_epoch(directory: Path) -> None:
    state = await launcher.up(directory, launcher.Layout(brokers=3, controllers=1))
    await launcher.create_demo_topic(state, "t", partitions=1)
    produced = await asyncio.to_thread(cli, directory, "produce", "--topic", "t", "--count", "50")
    assert produced.returncode == 0, produced.stderr
    await wait_until(lambda: consistent(directory), timeout=30, what="every replica caught up")
    assert recorded(directory) == []  # --no-record wrote nothing
    assert "1 consistent, 0 diverged" in (await verify(directory)).stdout
    assert recorded(directory) == [{"partitions": 1, "consistent": 1, "divergences": [], "topics": []}]

    # A follower whose first batch claims another leader epoch: what two leaders writing the same
    # offsets leave behind (the epoch is outside the CRC, so the batch still reads as sound).
    async with admin_session.connect(state["zookeeper_connect"]) as zk:
        (described,) = await cluster_reads.describe_topics(zk, ["t"])
    follower = next(b for b in described.replicas if b != described.leader)
    victim = state_file.find(state, f"broker-{follower}")
    node_control.node_action(directory, victim["name"], "kill")
    segment = next(Path(victim["config"]).parent.glob("**/t-0/*.log"))
    data = bytearray(segment.read_bytes())
    header = parse_batches(bytes(data))[0][0]
    struct.pack_into(">i", data, 12, header.partition_leader_epoch + 7)
    segment.write_bytes(bytes(data))

    result = await verify(directory, "--topic", "t")
    assert result.returncode == 1
    assert f"t-0: replica {victim['id']} differs at offset 0" in result.stdout
    _, last = recorded(directory)
    assert (last["partitions"], last["consistent"], last["topics"]) == (1, 0, ["t"])
    [divergence] = last["divergences"]
    assert divergence.startswith(f"t-0: replica {victim['id']} at offset 0: ")
