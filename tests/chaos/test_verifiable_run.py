"""A short chaos run whose workload is Kafka's own VerifiableProducer and VerifiableConsumer
(``--workload kafka-verifiable``) against a real local cluster (ZooKeeper, 2 controllers, 3 brokers).

Kafka's jars must be there (``make kafka``): a missing set fails here, as in tests/interop, rather
than skipping the only run of Kafka's clients under faults.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chaos import safety
from chaos.__main__ import main
from chaos.verifiable import value_prefix
from cluster import launcher, node_control
from kafkapeer.jars import NEWEST_CLIENTS, JarsMissing, classpath
from tests.chaos.test_run import FIELDS, TS, lines


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Path]:
    try:
        classpath(NEWEST_CLIENTS)
    except JarsMissing as exc:
        pytest.fail(f"Kafka's jars are missing, so Kafka's tools cannot run: {exc}")
    directory = tmp_path / "cluster"
    asyncio.run(launcher.up(directory, launcher.Layout(brokers=3, controllers=2)))
    try:
        yield directory
    finally:
        node_control.down(directory)


def raw(run_dir: Path, name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / f"{name}.jsonl").read_text().splitlines()]


@pytest.mark.zookeeper
@pytest.mark.long
def test_kafkas_own_clients_are_acknowledged_consumed_and_judged_through_faults(
    cluster: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Broker faults only, so the controller never moves and its "one active controller" rule can be
    # judged 5 s after the last heal instead of 30: the run takes half a minute, not a whole one.
    monkeypatch.setattr(safety, "SETTLE_S", 5.0)
    # Seed 8 against this layout: bounce broker-1 after ~2 s, then kill it after ~7 s (3 s down).
    argv = ["run", "--dir", str(cluster), "--workload", "kafka-verifiable", "--duration", "12"]
    argv += ["--interval", "3", "--rate", "100", "--faults", "kill,bounce,restart", "--targets", "broker"]
    status = main([*argv, "--seed", "8"])
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    [run_dir] = (cluster / "chaos").iterdir()
    events, history = lines(run_dir / "events.jsonl"), lines(run_dir / "history.jsonl")
    for line in events + history:  # the very lines, with the very fields, of the default workload
        assert TS.fullmatch(line["ts"]) and line["node"] == ("chaos" if line in events else "workload")
        assert set(line) == {"ts", "node", "kind"} | FIELDS[line["kind"]], line
    injected = [(e["fault"], e["target"]) for e in events if e["kind"] == "fault_injected"]
    assert injected[:2] == [("bounce", "broker-1"), ("kill", "broker-1")]

    # acknowledged by Kafka's producer: acks=all, idempotent, each value the run's own
    acked = [e for e in history if e["kind"] == "produce_acked" and e["topic"] == "chaos"]
    prefix = value_prefix(run_dir.name)
    assert len(acked) > 800 and all(e["acks"] == "all" and e["idempotent"] for e in acked)
    assert all(e["value"].startswith(f"{prefix}.") for e in acked)
    assert {e["partition"] for e in acked} == set(range(6)), "keyed records reach every partition"
    assert events[-1]["kind"] == "run_finished"
    assert events[-1]["acked"] == sum(e["kind"] == "produce_acked" for e in history)
    # ... and what it printed is kept, down to the last lines its SIGTERM hook prints
    producer = raw(run_dir, "verifiable-producer")
    assert [x["name"] for x in producer[-2:]] == ["shutdown_complete", "tool_data"]
    assert producer[-1]["acked"] == len(acked) == sum(x["name"] == "producer_send_success" for x in producer)

    # read back where acknowledged, and consumed by Kafka's consumer group
    places = {(e["partition"], e["offset"], e["value"]) for e in history if e["kind"] == "consumed"}
    assert all((e["partition"], e["offset"], e["value"]) in places for e in acked)
    group_values = {e["value"] for e in history if e["kind"] == "group_consumed"}
    assert {e["value"] for e in acked} <= group_values, "acknowledged, never consumed by Kafka's consumer"
    committers = {e["member"] for e in history if e["kind"] == "group_committed"}
    assert committers == {"member-0", "member-1", "member-2"}
    for member in range(3):
        assert raw(run_dir, f"verifiable-consumer-{member}")[-1]["name"] == "shutdown_complete"
    assert "ok: every acknowledged record was read back once" in captured.out
