"""The workload checks over chaos run histories: nothing acknowledged lost, nothing duplicated."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.workload import workload_no_duplicates, workload_no_loss
from tests.pipeline.conftest import RUN, ClusterLog, chaos_run

if TYPE_CHECKING:
    from pipeline.load import Logs

Read = Callable[[ClusterLog], "Logs"]


def test_a_run_that_consumed_every_acknowledged_value_passes_both(tmp_path: Path, read: Read) -> None:
    cluster_log = ClusterLog(tmp_path / "odd [dir] {1}+x")  # Hadoop glob characters and URL escapes
    chaos_run(cluster_log)
    cluster_log.workload(
        "produce_failed", topic="chaos", partition=None, value=f"{RUN}-x", error="_MSG_TIMED_OUT"
    )
    for offset in (5, 6):  # records without a value (not the producer's) are no duplicates of each other
        cluster_log.workload("consumed", topic="chaos", partition=1, offset=offset, value=None)
    logs = read(cluster_log)
    lost = workload_no_loss(logs.history, logs.events)
    assert (lost.verdict, lost.checked, lost.violations) == ("passed", 6, 0)
    assert lost.details == {"runs": [RUN]}
    duplicated = workload_no_duplicates(logs.history)
    assert (duplicated.verdict, duplicated.checked, duplicated.violations) == ("passed", 8, 0)


def test_an_acknowledged_value_never_consumed_is_lost(cluster_log: ClusterLog, read: Read) -> None:
    chaos_run(cluster_log)
    gone = cluster_log.workload(
        "produce_acked", topic="chaos", partition=1, offset=3, value=f"{RUN}-000099", latency_ms=41.5
    )
    logs = read(cluster_log)
    result = workload_no_loss(logs.history, logs.events)
    assert (result.verdict, result.checked, result.violations) == ("failed", 7, 1)
    assert result.examples == [
        {
            "run": RUN,
            "value": gone["value"],
            "topic": "chaos",
            "partition": 1,
            "offset": 3,
            "acked_at": gone["ts"],
            "latency_ms": 41.5,
        }
    ]
    assert result.details["lost_by_run"] == {RUN: 1}


def test_duplicated_divergent_and_misplaced_values_fail(cluster_log: ClusterLog, read: Read) -> None:
    acked = chaos_run(cluster_log)
    first, second = acked[0], acked[1]
    # the first value again at another offset; a second value at the second one's place
    cluster_log.workload("consumed", topic="chaos", partition=0, offset=7, value=first["value"])
    cluster_log.workload("consumed", topic="chaos", partition=1, offset=0, value=f"{RUN}-000042")
    result = workload_no_duplicates(read(cluster_log).history)
    assert (result.verdict, result.violations) == ("failed", 3)
    by_rule = {e.pop("rule"): e for e in result.examples}
    assert by_rule["value consumed at more than one place"] == {
        "run": RUN,
        "value": first["value"],
        "places": [
            {"topic": "chaos", "partition": 0, "offset": 0},
            {"topic": "chaos", "partition": 0, "offset": 7},
        ],
    }
    assert by_rule["one place consumed with several values"] == {
        "run": RUN,
        "topic": "chaos",
        "partition": 1,
        "offset": 0,
        "values": sorted([second["value"], f"{RUN}-000042"]),
    }
    assert by_rule["acknowledged place holds another value"] == {
        "run": RUN,
        "topic": "chaos",
        "partition": 1,
        "offset": 0,
        "acked_value": second["value"],
        "value": f"{RUN}-000042",
    }


def test_a_run_without_its_final_read_is_not_audited_for_loss(cluster_log: ClusterLog, read: Read) -> None:
    cluster_log.emit("broker-1", "registered", broker_epoch=10, previous_epoch=-1)
    cluster_log.workload("produce_acked", topic="chaos", partition=0, offset=0, value="v", latency_ms=1.0)
    cluster_log.workload("produce_acked", topic="chaos", partition=0, offset=1, value="w", latency_ms=1.0)
    # a read-back that failed part way: one line, no run_finished
    cluster_log.workload("consumed", topic="chaos", partition=0, offset=0, value="v")
    logs = read(cluster_log)
    result = workload_no_loss(logs.history, logs.events)
    assert result.verdict == "skipped"
    assert result.details == {
        "skipped": "no run reached its final read",
        "runs": [RUN],
        "incomplete_runs": [RUN],
    }
    assert workload_no_duplicates(logs.history).verdict == "passed"


def test_a_copy_resent_by_the_client_is_counted_not_failed(tmp_path: Path, read: Read) -> None:
    """Both copies in one partition, the acknowledged one last: a resend by librdkafka after the old
    leader had appended the first copy (see chaos/verdict.py). Copies in two partitions are a fault."""
    resent = f"{RUN}-resent"
    for name, partitions in (("one-partition", (0, 0)), ("two-partitions", (0, 1))):
        cluster_log = ClusterLog(tmp_path / name)
        chaos_run(cluster_log)
        cluster_log.workload(
            "produce_acked", topic="chaos", partition=partitions[1], offset=4, value=resent, latency_ms=9.0
        )
        for partition, offset in zip(partitions, (3, 4), strict=True):
            cluster_log.workload("consumed", topic="chaos", partition=partition, offset=offset, value=resent)
        result = workload_no_duplicates(read(cluster_log).history)
        if name == "one-partition":
            assert (result.verdict, result.violations, result.details) == ("passed", 0, {"resent": 1})
        else:
            assert (result.verdict, result.violations) == ("failed", 1)
            assert result.examples[0]["rule"] == "value consumed at more than one place"


def test_an_idempotent_producers_copies_are_never_explained_as_resends(
    cluster_log: ClusterLog, read: Read
) -> None:
    chaos_run(cluster_log)
    twice = f"{RUN}-twice"
    cluster_log.workload(
        "produce_acked", topic="chaos", partition=0, offset=4, value=twice, latency_ms=9.0, idempotent=True
    )
    for offset in (3, 4):
        cluster_log.workload("consumed", topic="chaos", partition=0, offset=offset, value=twice)
    result = workload_no_duplicates(read(cluster_log).history)
    assert (result.verdict, result.violations) == ("failed", 1)
    assert result.details == {"resent": 0}


def test_an_acknowledged_value_read_back_only_elsewhere_is_misplaced(
    cluster_log: ClusterLog, read: Read
) -> None:
    chaos_run(cluster_log)
    moved = f"{RUN}-moved"
    cluster_log.workload("produce_acked", topic="chaos", partition=0, offset=9, value=moved, latency_ms=2.0)
    cluster_log.workload("consumed", topic="chaos", partition=1, offset=5, value=moved)
    result = workload_no_duplicates(read(cluster_log).history)
    assert (result.verdict, result.violations) == ("failed", 1)
    (example,) = result.examples
    assert example["rule"] == "acknowledged value read back only at another place"
    assert (example["acked_value"], example["partition"], example["offset"]) == (moved, 0, 9)
    assert example["read_at"] == {"topic": "chaos", "partition": 1, "offset": 5}


def test_acks1_losses_are_counted_not_failed(cluster_log: ClusterLog, read: Read) -> None:
    chaos_run(cluster_log)
    for i, kept in ((0, True), (1, False)):
        value = f"{RUN}-acks1-{i:06d}"
        cluster_log.workload(
            "produce_acked", topic="chaos-acks1", acks="1", partition=0, offset=i, value=value, latency_ms=1.0
        )
        cluster_log.workload(
            "consumed", topic="chaos-acks1", partition=0, offset=i, value=value if kept else "rewritten"
        )
    logs = read(cluster_log)
    lost = workload_no_loss(logs.history, logs.events)
    assert (lost.verdict, lost.violations) == ("passed", 0)
    assert (lost.details["acks1_acked"], lost.details["acks1_lost"]) == (2, 1)
    assert workload_no_duplicates(logs.history).verdict == "passed"


def test_a_run_that_found_a_diverging_replica_fails_replicas_consistent(
    cluster_log: ClusterLog, read: Read
) -> None:
    from pipeline.workload import replicas_consistent

    chaos_run(cluster_log)
    cluster_log.chaos(
        "replicas_verified", partitions=6, consistent=5, divergences=["chaos-1: replica 2 at offset 40"]
    )
    result = replicas_consistent(read(cluster_log).events)
    assert (result.verdict, result.checked, result.violations) == ("failed", 6, 1)
    assert result.examples[0]["divergence"] == "chaos-1: replica 2 at offset 40"


def test_only_the_values_and_places_a_rule_could_break_are_suspects(tmp_path: Path, read: Read) -> None:
    """pipeline.suspects: a healthy run has none. A lost value is a suspect value and place; a value read
    twice is a suspect value (its second place, read once, is in order); a place read back with
    another value than acknowledged is found through the acknowledged value, a suspect (never read
    back): the place's counts and the value read there are in order, yet its lines are taken."""
    from pipeline.suspects import Suspects

    chaos_run(healthy_log := ClusterLog(tmp_path / "healthy"))
    healthy = Suspects(read(healthy_log).history)
    values, places = healthy.keys()
    assert (values.count(), places.count()) == (0, 0)
    healthy.release()
    acked = chaos_run(cluster_log := ClusterLog(tmp_path / "broken"))
    lost = cluster_log.workload("produce_acked", topic="chaos", partition=1, offset=3, value=f"{RUN}-lost")
    cluster_log.workload("consumed", topic="chaos", partition=0, offset=7, value=acked[0]["value"])
    cluster_log.workload("produce_acked", topic="chaos", partition=2, offset=9, value=f"{RUN}-here")
    cluster_log.workload("consumed", topic="chaos", partition=2, offset=9, value=f"{RUN}-other")
    suspects = Suspects(read(cluster_log).history)
    values, places = suspects.keys()
    assert sorted(r["value"] for r in values.collect()) == sorted(
        [lost["value"], acked[0]["value"], f"{RUN}-here"]
    )
    assert sorted((r["partition"], r["offset"]) for r in places.collect()) == [(1, 3)]
    # the lost line, the first value's three, and the two at partition 2's offset 9
    assert suspects.lines(broadcast=True).count() == suspects.lines(broadcast=False).count() == 6
    suspects.release()
