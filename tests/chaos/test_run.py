"""``python -m chaos``: its errors without a cluster, ``list``, and one short run with faults against a
real local cluster (ZooKeeper, 2 controllers, 3 brokers)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chaos.__main__ import main
from chaos.faults import _stopped
from cluster import launcher, node_control, state_file

TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
FIELDS = {
    "run_started": {
        "run_id",
        "topic",
        "partitions",
        "replication_factor",
        "faults",
        "seed",
        "duration_s",
        "rate",
        "interval_s",
        "overlap",
        "acks1_topic",
    },
    "fault_injected": {"fault", "target", "role", "detail"},
    "controller_seen": {"controller_id", "controller_epoch", "implementation"},
    "fault_healed": {"fault", "target", "role"},
    "run_finished": {"run_id", "acked", "failed", "consumed", "duration_s"},
    "availability": {"by_fault"},
    "replicas_verified": {"partitions", "consistent", "divergences"},
    "produce_acked": {"topic", "acks", "idempotent", "partition", "offset", "value", "latency_ms"},
    "produce_failed": {"topic", "acks", "partition", "value", "error", "latency_ms"},
    "consumed": {"topic", "partition", "offset", "value"},
    "group_consumed": {"member", "topic", "partition", "offset", "value"},
    "group_committed": {"member", "group", "topic", "partition", "offset"},
    "group_commit_failed": {"member", "group", "error", "partition"},
    "group_assigned": {"member", "group", "partitions"},
    "group_revoked": {"member", "group", "partitions"},
    "txn_ended": {"transactional_id", "topic", "txn", "values", "intended", "outcome", "error"},
    "eos_ended": {"group", "inputs", "outcome", "error"},
    "eos_group_committed": {"group", "offsets"},
    "txn_consumed": {"topic", "isolation", "partition", "offset", "value"},
}
"""docs/events.md#chaos-kinds: every line has exactly these fields after ts, node and kind."""


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_run_without_a_running_cluster_fails_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--dir", str(tmp_path)]) == 1
    assert capsys.readouterr().err.startswith(f"error: no cluster in {tmp_path}")
    stopped = {"pid": 2**22 + 1, "config": "-"}  # above PID_MAX_LIMIT (2**22): never a process
    processes = [
        {"name": n, "role": r, **stopped} for n, r in (("zookeeper-1", "zookeeper"), ("broker-1", "broker"))
    ]
    (tmp_path / "cluster.json").write_text(json.dumps({"version": 1, "processes": processes}))
    assert main(["run", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "is not running" in err and len(err.splitlines()) == 1


def test_unknown_faults_or_targets_are_usage_errors(tmp_path: Path) -> None:
    for flags in (["--faults", "kill,nuke"], ["--targets", "router"], ["--rate", "0"]):
        with pytest.raises(SystemExit) as exited:
            main(["run", "--dir", str(tmp_path), *flags])
        assert exited.value.code == 2


def test_list_shows_each_run_with_its_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "chaos" / "run-20260101T000000Z"
    run.mkdir(parents=True)
    (run / "events.jsonl").write_text(
        '{"kind":"run_started","seed":5}\n{"kind":"fault_injected","fault":"kill"}\n'
        '{"kind":"run_finished","duration_s":61.5}\n'
    )
    (run / "history.jsonl").write_text(
        '{"kind":"produce_acked","topic":"t","partition":0,"offset":0,"value":"a"}\n'
        '{"kind":"produce_acked","topic":"t","partition":0,"offset":1,"value":"b"}\n'
        '{"kind":"consumed","topic":"t","partition":0,"offset":0,"value":"a"}\n'
    )
    assert main(["list", "--dir", str(tmp_path)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "run-20260101T000000Z" in line)
    assert row.split() == [
        "run-20260101T000000Z",
        "62",
        "s",
        "2",
        "0",
        "1",
        "0",
        "1",
        "5",
    ]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "cluster"
    asyncio.run(launcher.up(directory, launcher.Layout(brokers=3, controllers=2)))
    try:
        yield directory
    finally:
        node_control.down(directory)


@pytest.mark.zookeeper
def test_a_short_run_with_faults_acknowledges_and_reads_back_every_record(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Seed 38 against this layout: kill controller-1001 after ~5.7 s, then pause broker-2 for 9 s (past
    # its 6 s session timeout); the third fault would start after the 22 s are over.
    argv = ["run", "--dir", str(cluster), "--duration", "22", "--interval", "5", "--rate", "100"]
    argv += ["--faults", "bounce,kill,pause", "--targets", "broker,controller", "--seed", "38"]
    status = main(argv)
    captured = capsys.readouterr()
    out = captured.out
    assert status == 0, out + captured.err
    [run_dir] = (cluster / "chaos").iterdir()
    assert f"run directory: {run_dir}" in out.replace("\n", "")

    events, history = lines(run_dir / "events.jsonl"), lines(run_dir / "history.jsonl")
    for line in events + history:
        assert TS.fullmatch(line["ts"]) and line["node"] == ("chaos" if line in events else "workload")
        assert set(line) == {"ts", "node", "kind"} | FIELDS[line["kind"]], line
    assert events[0]["kind"] == "run_started" and events[-1]["kind"] == "run_finished"
    assert events[0]["seed"] == 38 and events[0]["faults"] == ["bounce", "kill", "pause"]
    injected = [(e["fault"], e["target"]) for e in events if e["kind"] == "fault_injected"]
    healed = [(e["fault"], e["target"]) for e in events if e["kind"] == "fault_healed"]
    assert injected == [("kill", "controller-1001"), ("pause", "broker-2"), ("resume", "broker-2")]
    assert healed == [("kill", "controller-1001"), ("pause", "broker-2")]
    broker_2 = lines(Path(state_file.find(state_file.load_state(cluster), "broker-2")["events"]))
    assert any(e["kind"] == "session_expired" for e in broker_2), "the pause outlasted its session"

    acked = {e["value"]: (e["partition"], e["offset"]) for e in history if e["kind"] == "produce_acked"}
    consumed: dict[str, set[tuple[int, int]]] = {}
    for e in history:
        if e["kind"] == "consumed":
            consumed.setdefault(e["value"], set()).add((e["partition"], e["offset"]))
    must_survive = {e["value"] for e in history if e["kind"] == "produce_acked" and e["acks"] == "all"}
    finished = events[-1]
    assert len(acked) == finished["acked"] > 1000
    assert finished["consumed"] == sum(map(len, consumed.values())) >= len(must_survive)
    assert {e["topic"] for e in history if e["kind"] == "produce_acked"} == {"chaos", "chaos-acks1"}
    assert all(acked[v] in consumed.get(v, ()) for v in must_survive), (
        "acknowledged with acks=all, not read back"
    )
    # the consumer group went through the faults and received every acknowledged record
    group_values = {e["value"] for e in history if e["kind"] == "group_consumed"}
    assert must_survive <= group_values, "acknowledged with acks=all, never consumed by the group"
    assert {e["member"] for e in history if e["kind"] == "group_committed"} == {
        "member-0",
        "member-1",
        "member-2",
    }
    # the transactional workload went through the same faults: its verdict is part of the status
    outcomes = {e["outcome"] for e in history if e["kind"] == "txn_ended"}
    assert "committed" in outcomes and "aborted" in outcomes, outcomes
    assert any(e["kind"] == "eos_ended" and e["outcome"] == "committed" for e in history)
    assert "transactions:" in out and "each input once" in out
    processes = state_file.load_state(cluster)["processes"]
    assert all(state_file.alive(p["pid"]) and not _stopped(p["pid"]) for p in processes), "all running"
