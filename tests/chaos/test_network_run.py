"""A short chaos run with a network partition and ZooKeeper trouble on a --netns cluster.

Seed 1 against this layout: broker-1 is cut off from ZooKeeper alone for 9 s (its session expires
while it still talks to producers and followers: the zombie leader), then ZooKeeper is restarted
under the whole cluster. Every acknowledged record must be read back where it was acknowledged, and
every replica must end with the leader's batches. Root only: skipped with the reason elsewhere.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chaos.__main__ import main
from cluster import launcher, netns, node_control, state_file
from cluster.verify_replicas import verify

REASON = netns.unavailable()
pytestmark = [pytest.mark.netns, pytest.mark.skipif(REASON is not None, reason=REASON or "")]


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "cluster"
    asyncio.run(launcher.up(directory, launcher.Layout(brokers=3, controllers=2, netns=True)))
    try:
        yield directory
    finally:
        node_control.down(directory)


@pytest.mark.long
def test_a_zombie_broker_and_a_zookeeper_restart_lose_nothing(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--dir", str(cluster), "--duration", "22", "--interval", "4", "--rate", "100"]
    argv += ["--faults", "isolate-zookeeper,zookeeper-restart", "--seed", "1"]
    status = main(argv)
    captured = capsys.readouterr()
    out = captured.out
    assert status == 0, out + captured.err
    [run_dir] = (cluster / "chaos").iterdir()
    events = lines(run_dir / "events.jsonl")
    injected = [(e["fault"], e["target"]) for e in events if e["kind"] == "fault_injected"]
    assert injected[:2] == [("isolate-zookeeper", "broker-1"), ("zookeeper-restart", "zookeeper-1")]
    state = state_file.load_state(cluster)
    broker_1 = lines(Path(state_file.find(state, "broker-1")["events"]))
    assert any(e["kind"] == "session_expired" for e in broker_1), "cut off past its session timeout"
    assert [r for r in asyncio.run(verify(state)) if not r.consistent] == []
