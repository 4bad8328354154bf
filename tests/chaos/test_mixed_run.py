"""A chaos run on a cluster shared with Apache Kafka 3.9 brokers (``--kafka-brokers``): our only
controller candidate is paused past its session, so a Kafka broker's controller takes over, and the
run, its verdict and its safety rules account for a controller that keeps no log of ours.

Kafka's jars must be there (``make kafka``): a missing set fails here rather than skipping.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos import safety
from chaos.__main__ import main
from cluster import launcher, node_control, state_file
from kafkapeer.jars import BROKER, JarsMissing, classpath

pytestmark = [pytest.mark.zookeeper, pytest.mark.mixed]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Path]:
    try:
        classpath(BROKER)
    except JarsMissing as exc:
        pytest.fail(f"Kafka's jars are missing, so no Kafka broker can run: {exc}")
    directory = tmp_path / "cluster"
    asyncio.run(launcher.up(directory, launcher.Layout(brokers=2, controllers=1, kafka_brokers=2)))
    try:
        yield directory
    finally:
        node_control.down(directory)


def test_a_run_passes_control_to_a_kafka_broker_and_judges_it(
    cluster: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state = state_file.load_state(cluster)
    kafka = [p for p in state["processes"] if p.get("kind") == "kafka"]
    assert [(p["name"], p["role"], p["id"]) for p in kafka] == [
        ("kafka-3", "broker", 3),
        ("kafka-4", "broker", 4),
    ]
    # The rule about one active controller is judged 15 s after a heal instead of 30: enough for our
    # killed candidate's 6 s session to expire and a Kafka broker's controller to be elected and seen.
    monkeypatch.setattr(safety, "SETTLE_S", 15.0)
    # Our one candidate is the only controller target; with the Kafka brokers' controllers it may go
    # down alone. Paused past its session (a kill's 3 s would let it race again), it leaves
    # /controller to a Kafka broker, the only other candidates, and resigns when it resumes.
    argv = ["run", "--dir", str(cluster), "--duration", "4", "--interval", "2", "--rate", "100"]
    argv += ["--faults", "pause", "--targets", "controller", "--seed", "1"]
    status = main(argv)
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    [run_dir] = (cluster / "chaos").iterdir()
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert ("pause", "controller-1001") in {
        (e["fault"], e["target"]) for e in events if e["kind"] == "fault_injected"
    }
    seen = [(e["controller_id"], e["implementation"]) for e in events if e["kind"] == "controller_seen"]
    assert seen[0] == (1001, "ours") and seen[1][1] == "kafka" and seen[1][0] in (3, 4), seen
    assert "by Kafka brokers" in captured.out
