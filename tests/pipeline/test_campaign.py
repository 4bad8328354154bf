"""A directory of many clusters (a campaign's ``seed-N/``, a night of CI): every check keys on the
cluster, the report sums up across runs, ``--since``/``--runs`` choose runs, and the availability
windows (leaderless, under min ISR, without a controller, to full recovery) per fault kind."""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pipeline.__main__ import main
from pipeline.load import InputError, find_inputs
from tests.pipeline.conftest import RUN, START, ClusterLog, chaos_run, healthy_cluster

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PLANTED_IN = {"one_controller_per_epoch": "seed-2", "replicas_consistent": "seed-1"}


def broken_and_mended(log: ClusterLog) -> dict[str, float]:
    """After a healthy life, a chaos run kills brokers 2, 3 and then 1 (min.insync.replicas 2): the
    partitions fall under min ISR, then lose their leader, broker 1 (from the kill, before the
    controller writes leader -1); all three come back and the ISRs fill up again. Returns the
    windows' lengths in seconds, by the scenario's clock."""
    healthy_cluster(log)  # ends with partition 0 leaderless and both ISRs at [1]
    c1 = "controller-1"
    for broker in (1, 2, 3):
        log.emit(f"broker-{broker}", "broker_started", broker_id=broker, min_insync_replicas=2)
    log.elected(c1, 3)
    log.broker_change(c1, 3, {1: 10, 2: 30, 3: 50}, new=(1, 2, 3))
    log.isr_write(c1, 3, 0, 1, [1, 2, 3], "offline election", leader_epoch=2, partition_epoch=8)
    log.isr_write(c1, 3, 1, 1, [1, 2, 3], "AlterPartition from broker 1", leader_epoch=2, partition_epoch=7)
    log.chaos("run_started", run_id=RUN, topic="demo", partitions=2, faults=["kill"])
    injected = log.chaos("fault_injected", fault="kill", target="broker-2", role="broker", detail=None)
    log.wait(1)
    log.broker_change(c1, 3, {1: 10, 3: 50}, dead=(2,), previous={2: 30})
    log.isr_write(c1, 3, 0, 1, [1, 3], "replica 2 offline", leader_epoch=2, partition_epoch=9)
    degraded = log.clock
    log.isr_write(c1, 3, 1, 1, [1, 3], "replica 2 offline", leader_epoch=2, partition_epoch=8)
    log.chaos("fault_injected", fault="kill", target="broker-3", role="broker", detail=None)
    log.broker_change(c1, 3, {1: 10}, dead=(3,), previous={3: 50})
    log.isr_write(c1, 3, 0, 1, [1], "replica 3 offline", leader_epoch=2, partition_epoch=10)
    under = {0: log.clock}
    log.isr_write(c1, 3, 1, 1, [1], "replica 3 offline", leader_epoch=2, partition_epoch=9)
    under[1] = log.clock
    leader_killed = log.chaos("fault_injected", fault="kill", target="broker-1", role="broker", detail=None)
    log.wait(1)
    log.broker_change(c1, 3, {}, dead=(1,), previous={1: 10})
    log.isr_write(c1, 3, 0, -1, [1], "replica 1 offline", leader_epoch=3, partition_epoch=11)
    log.isr_write(c1, 3, 1, -1, [1], "replica 1 offline", leader_epoch=3, partition_epoch=10)
    log.wait(2)
    for broker in (1, 2, 3):
        log.chaos("fault_healed", fault="kill", target=f"broker-{broker}", role="broker")
    for broker, epoch in ((1, 60), (2, 62), (3, 64)):
        log.registered(broker, epoch)
    log.broker_change(c1, 3, {1: 60, 2: 62, 3: 64}, new=(1, 2, 3))
    log.isr_write(c1, 3, 0, 1, [1], "offline election", leader_epoch=4, partition_epoch=12)
    led = {0: log.clock}
    log.isr_write(c1, 3, 1, 1, [1], "offline election", leader_epoch=4, partition_epoch=11)
    led[1] = log.clock
    log.isr_write(c1, 3, 0, 1, [1, 2, 3], "AlterPartition from broker 1", leader_epoch=4, partition_epoch=13)
    filled = {0: log.clock}
    log.isr_write(c1, 3, 1, 1, [1, 2, 3], "AlterPartition from broker 1", leader_epoch=4, partition_epoch=12)
    filled[1] = log.clock
    log.chaos("run_finished", run_id=RUN, acked=0, failed=0, consumed=0, duration_s=5.0)

    def s(a: dt.datetime, b: dt.datetime) -> float:
        return round((b - a).total_seconds(), 3)

    killed = dt.datetime.fromisoformat(leader_killed["ts"])
    return {
        "leaderless_0": s(killed, led[0]),
        "leaderless_1": s(killed, led[1]),
        "under_min_isr_0": s(under[0], filled[0]),
        "under_min_isr_1": s(under[1], filled[1]),
        "full_recovery": s(dt.datetime.fromisoformat(injected["ts"]), filled[1]),
        "degraded_after": s(dt.datetime.fromisoformat(injected["ts"]), degraded),
    }


@pytest.fixture(scope="module")
def campaign(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two clusters with the same node names, epochs and run name, audited together: seed-1 breaks and
    mends and has one replica found diverged by verify-replicas; seed-2 has a controller epoch won
    twice, and a chaos run with a clean transactional workload."""
    from pipeline.load import find_inputs
    from pipeline.report import audit

    root = tmp_path_factory.mktemp("campaign")
    one, two = ClusterLog(root / "seed-1"), ClusterLog(root / "seed-2")
    # The same partition led in the same leader epoch by another broker of each cluster, and broker 1
    # of seed-2 taking an epoch below the one broker 1 of seed-1 took earlier: no split brain either.
    become = {"topic": "demo", "partition": 0, "partition_epoch": 8}
    one.emit("broker-1", "become_leader", leader=1, leader_epoch=5, **become)
    lengths = broken_and_mended(one)
    one.emit(
        "verify-replicas",
        "replicas_verified",
        partitions=2,
        consistent=1,
        divergences=["demo-0: replica 3 differs at offset 4"],
        topics=[],
    )
    healthy_cluster(two)
    two.emit("broker-2", "become_leader", leader=2, leader_epoch=5, **become)
    two.emit("broker-1", "become_follower", leader=2, leader_epoch=3, **become)
    two.elected("controller-1", 2)  # planted: epoch 2 was controller-2's
    chaos_run(two, transactions=True)
    return {"report": audit(spark, find_inputs(root)), "lengths": lengths}


def test_each_cluster_is_judged_on_its_own(campaign: dict[str, Any]) -> None:
    """Node names, epochs, czxids and the run's name repeat across the two clusters without any false
    violation; each planted one is found in its cluster only, and its example says which."""
    checks = {c["name"]: c for c in campaign["report"]["checks"]}
    for name, check in checks.items():
        if name in PLANTED_IN:
            assert check["verdict"] == "failed", check
            assert check["violations"] == 1, check
            assert check["details"]["violations_by_cluster"] == {PLANTED_IN[name]: 1}
            assert check["examples"][0]["cluster"] == PLANTED_IN[name]
        else:
            assert check["verdict"] == "passed", check
    assert checks["replicas_consistent"]["examples"][0]["node"] == "verify-replicas"
    for name in ("txn_isolation", "txn_durability", "eos_exactly_once"):
        assert checks[name]["details"]["runs"] == [f"seed-2/{RUN}"], "seed-1's run has no history"


def test_the_summary_across_runs_and_clusters(campaign: dict[str, Any]) -> None:
    report = campaign["report"]
    summary = report["summary"]
    assert summary["clusters"] == ["seed-1", "seed-2"]
    assert summary["runs"] == 2
    assert summary["violations_by_cluster"] == {
        "seed-1": {"replicas_consistent": 1},
        "seed-2": {"one_controller_per_epoch": 1},
    }
    assert set(summary["by_run"]) == {f"seed-1/{RUN}", f"seed-2/{RUN}"}
    assert summary["by_run"][f"seed-1/{RUN}"]["faults"] == 3
    assert summary["by_run"][f"seed-2/{RUN}"]["acked"] == 6
    assert summary["by_fault"]["kill"]["fault_to_full_recovery_s"]["count"] == 1
    clusters = report["stats"]["clusters"]
    assert set(clusters) == {"seed-1", "seed-2"}
    # healthy_cluster elects twice; seed-1's run once more, seed-2's planted election too
    assert clusters["seed-1"]["controller_elections"] == 3
    assert clusters["seed-2"]["controller_elections"] == 3
    assert report["stats"]["cluster"]["controller_elections"] == 6


def test_the_table_and_the_page_say_it_across_runs(campaign: dict[str, Any], tmp_path: Path) -> None:
    from rich.console import Console

    from pipeline.html import page
    from pipeline.report import render
    from pipeline.timeline import Timelines

    out = io.StringIO()
    render(campaign["report"], Console(file=out, width=200), tmp_path / "audit.json")
    assert (
        "across 2 chaos runs in 2 clusters: violations in seed-1: replicas_consistent 1; "
        "seed-2: one_controller_per_epoch 1"
    ) in out.getvalue()
    html = page(campaign["report"], Timelines([], []))
    assert "<h2>Across runs</h2>" in html and "Per fault kind, over every run" in html
    assert f"<a href='#seed-1/{RUN}'>seed-1/{RUN}</a>" in html
    assert "fault_to_full_recovery_s" in html


def test_availability_windows_per_fault_kind(campaign: dict[str, Any]) -> None:
    """Leaderless and under-min-ISR windows are keyed by the fault whose window holds their start;
    those that end the healthy life's last spells (no fault) are apart. A partition is leaderless
    from the kill of its leader, not from the controller's leader -1 a second later, to its election;
    full recovery runs from the first kill to the last ISR filled up."""
    lengths = campaign["lengths"]
    figures = campaign["report"]["stats"]["clusters"]["seed-1"]["availability"]
    leaderless = figures["leaderless_window_s"]
    assert leaderless["kill"] == {
        "count": 2,
        "p50": lengths["leaderless_0"],
        "p99": lengths["leaderless_1"],
        "max": lengths["leaderless_1"],
    }
    assert leaderless["no_fault"]["count"] == 1  # healthy_cluster's last write left partition 0 leaderless
    under = figures["under_min_isr_window_s"]
    assert under["kill"]["count"] == 2
    assert under["kill"]["max"] == max(lengths["under_min_isr_0"], lengths["under_min_isr_1"])
    assert under["no_fault"]["count"] == 2
    assert figures["fault_to_full_recovery_s"] == {
        "kill": {
            "count": 1,
            "p50": lengths["full_recovery"],
            "p99": lengths["full_recovery"],
            "max": lengths["full_recovery"],
        }
    }
    # controller-1 resigned and controller-2 won 2 s later; controller-2 shut down, controller-1 won
    assert figures["controller_gap_s"]["no_fault"]["count"] == 2
    run = campaign["report"]["stats"]["runs"][f"seed-1/{RUN}"]["availability"]
    assert run["leaderless_window_s"] == {"kill": leaderless["kill"]}
    two = campaign["report"]["stats"]["clusters"]["seed-2"]["availability"]
    assert "leaderless_window_s" not in two  # its partition 0 is still leaderless when its log ends


def test_since_and_runs_choose_chaos_runs(tmp_path: Path) -> None:
    """Filters pick runs by start; the daemon logs of the clusters they ran on come with them."""
    one, two = ClusterLog(tmp_path / "seed-1"), ClusterLog(tmp_path / "seed-2")
    one.registered(1, 10)
    chaos_run(one)
    chaos_run(one, run="run-late")
    two.clock = START + dt.timedelta(hours=1)
    two.registered(1, 10)
    chaos_run(two)

    def files(inputs: Any) -> list[str]:
        return [
            p.relative_to(tmp_path.resolve()).as_posix() for p in (*inputs.event_files, *inputs.history_files)
        ]

    latest = find_inputs(tmp_path, last=1)
    assert latest.runs == [f"seed-2/{RUN}"]
    assert files(latest) == [
        "seed-2/broker-1/events.jsonl",
        f"seed-2/chaos/{RUN}/events.jsonl",
        f"seed-2/chaos/{RUN}/history.jsonl",
    ]
    assert find_inputs(tmp_path, last=2).runs == ["seed-1/run-late", f"seed-2/{RUN}"]
    since = find_inputs(tmp_path, since=START + dt.timedelta(minutes=30))
    assert since.runs == [f"seed-2/{RUN}"]
    assert find_inputs(tmp_path, f"seed-1/{RUN}").runs == [f"seed-1/{RUN}"]
    assert find_inputs(tmp_path, RUN).runs == [f"seed-1/{RUN}", f"seed-2/{RUN}"]
    assert find_inputs(tmp_path).clusters == ["seed-1", "seed-2"]
    with pytest.raises(InputError, match="matches the filters"):
        find_inputs(tmp_path, since=START + dt.timedelta(days=1))
    for bad in (["--runs", "0"], ["--since", "yesterday"]):
        assert main(["audit", "--dir", str(tmp_path), *bad]) == 2
