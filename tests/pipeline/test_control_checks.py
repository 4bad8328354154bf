"""The control-plane checks pass on a healthy cluster's log and catch each crafted violation."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pipeline.checks import broker_epochs_increase, one_controller_per_epoch, stale_requests_rejected
from pipeline.isr import ineligible_never_in_isr
from tests.pipeline.conftest import ClusterLog, healthy_cluster

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipeline.load import Logs

Read = Callable[[ClusterLog], "Logs"]


@pytest.fixture(scope="module")
def healthy(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Logs]:
    from pipeline.load import find_inputs, load

    log = ClusterLog(tmp_path_factory.mktemp("healthy"))
    healthy_cluster(log)
    logs = load(spark, find_inputs(log.root))
    yield logs
    logs.release()


def broken(log: ClusterLog, damage: Callable[[ClusterLog], None]) -> ClusterLog:
    healthy_cluster(log)
    damage(log)
    return log


# -- one controller per epoch


def test_a_healthy_log_has_one_controller_per_epoch(healthy: Logs) -> None:
    result = one_controller_per_epoch(healthy.events)
    assert (result.verdict, result.checked, result.violations) == ("passed", 2, 0)


def test_an_epoch_won_twice_a_falling_epoch_and_a_usurped_epoch_fail(
    cluster_log: ClusterLog, read: Read
) -> None:
    def damage(log: ClusterLog) -> None:
        for epoch in (2, 1):
            log.emit("controller-1", "controller_elected", controller_id=1, controller_epoch=epoch)
        log.isr_write("controller-2", 1, 0, 1, [1], "preferred election")

    result = one_controller_per_epoch(read(broken(cluster_log, damage)).events)
    assert (result.verdict, result.violations) == ("failed", 4)
    by_rule: dict[str, list[dict[str, object]]] = {}
    for example in result.examples:
        by_rule.setdefault(str(example.pop("rule")), []).append(example)
    twice = [(e["controller_epoch"], e["nodes"]) for e in by_rule["epoch won more than once"]]
    assert twice == [(1, ["controller-1", "controller-1"]), (2, ["controller-1", "controller-2"])]
    (falling,) = by_rule["epoch lower than the previous election's"]
    assert falling | {"ts": None} == {
        "ts": None,
        "node": "controller-1",
        "controller_epoch": 1,
        "previous_epoch": 2,
        "previous_node": "controller-1",
    }
    (usurped,) = by_rule["acted with an epoch another controller won"]
    assert (usurped["node"], usurped["controller_epoch"], usurped["nodes"]) == (
        "controller-2",
        1,
        ["controller-1"],
    )
    assert usurped["kinds"] == ["leader_and_isr_change"]


# -- broker epochs (KIP-380)


def test_a_healthy_log_has_rising_broker_epochs(healthy: Logs) -> None:
    result = broker_epochs_increase(healthy.events)
    assert (result.verdict, result.checked, result.violations) == ("passed", 6, 0)


def test_a_registration_without_a_higher_epoch_fails(cluster_log: ClusterLog, read: Read) -> None:
    def damage(log: ClusterLog) -> None:
        log.registered(2, 30, previous=30)  # the same czxid again
        log.broker_change("controller-2", 2, {2: 25}, bounced=(2,), previous={2: 30})

    result = broker_epochs_increase(read(broken(cluster_log, damage)).events)
    assert result.verdict == "failed"
    rules = {e["rule"]: e for e in result.examples}
    assert rules.keys() == {
        "registered without a higher epoch",
        "bounce without a higher epoch",
        "a controller saw the epoch go back",
    }
    registration = rules["registered without a higher epoch"]
    assert (
        registration["node"],
        registration["broker_epoch"],
        registration["previous_registration_epoch"],
    ) == (
        "broker-2",
        30,
        30,
    )
    bounce = rules["bounce without a higher epoch"]
    assert (bounce["broker"], bounce["broker_epoch"], bounce["previous_epoch"]) == (2, 25, 30)


# -- stale requests (KIP-380, seed 002)


def test_a_healthy_log_refuses_exactly_the_stale_requests(healthy: Logs) -> None:
    result = stale_requests_rejected(healthy.events)
    assert (result.verdict, result.checked, result.violations) == ("passed", 7, 0)
    assert result.details == {"stale_refused": 1, "without_epochs": 0}


def test_stale_requests_accepted_and_current_ones_refused_fail(cluster_log: ClusterLog, read: Read) -> None:
    crafted: list[tuple[dict[str, Any], str]] = [
        ({"max_broker_epoch": 10, "error": "NONE"}, "stale request accepted"),
        ({"max_broker_epoch": -1, "error": "NONE"}, "stale request accepted"),  # seed 002: -1 is stale
        ({"broker_epoch": 12, "error": "NONE"}, "stale request accepted"),
        ({"max_broker_epoch": 50, "error": "STALE_BROKER_EPOCH"}, "current request refused as stale"),
        ({"broker_epoch": -1, "error": "STALE_BROKER_EPOCH"}, "current request refused as stale"),  # KIP-380
    ]

    def damage(log: ClusterLog) -> None:
        for fields, _ in crafted:
            log.handled(3, 50, **fields)

    result = stale_requests_rejected(read(broken(cluster_log, damage)).events)
    assert (result.verdict, result.violations) == ("failed", 5)
    assert [(e["rule"], e["error"], e["broker_epoch_now"]) for e in result.examples] == [
        (rule, fields["error"], 50) for fields, rule in crafted
    ]
    assert [e.get("max_broker_epoch", e.get("broker_epoch")) for e in result.examples] == [
        fields.get("max_broker_epoch", fields.get("broker_epoch")) for fields, _ in crafted
    ]


# -- ineligible replicas (KIP-841)


def test_a_healthy_log_never_lets_an_ineligible_broker_into_an_isr(healthy: Logs) -> None:
    result = ineligible_never_in_isr(healthy.events)
    assert (result.verdict, result.checked, result.violations) == ("passed", 15, 0)
    # controller-2's first write comes before its first broker_change; the last ISR member of a
    # leaderless partition stays, as in Kafka
    assert result.details == {"writes_before_registration_view": 1, "ineligible_members_carried_over": 1}


def test_ineligible_brokers_let_into_an_isr_fail(cluster_log: ClusterLog, read: Read) -> None:
    def damage(log: ClusterLog) -> None:
        c1 = "controller-1"
        log.elected(c1, 3)  # no broker_change yet: only shutting down can be judged
        log.shutdown_started(c1, 3, 2, 62)
        log.isr_write(c1, 3, 0, 1, [1, 2], "AlterPartition from broker 1", partition_epoch=8)
        log.isr_write(c1, 3, 0, 2, [2, 1], "offline election", partition_epoch=9)
        log.broker_change(c1, 3, {1: 60, 2: 62}, new=(1, 2))
        log.isr_write(c1, 3, 1, 1, [1, 3], "AlterPartition from broker 1", partition_epoch=7)
        log.isr_write(c1, 3, 1, 1, [1, 3], "replica 3 offline", partition_epoch=8)

    result = ineligible_never_in_isr(read(broken(cluster_log, damage)).events)
    assert (result.verdict, result.violations) == ("failed", 4)
    added, kept_by_election, dead_added, offline_kept = result.examples
    assert (added["rule"], added["partition"], added["broker"], added["why"]) == (
        "ineligible broker added to the ISR",
        0,
        2,
        "shutting down",
    )
    assert "registered" not in added, "registration unknown before the epoch's first broker_change"
    assert (kept_by_election["rule"], kept_by_election["broker"], kept_by_election["reason"]) == (
        "write kept an ineligible broker in the ISR",
        2,
        "offline election",
    )
    assert dead_added | {"ts": None} == {
        "ts": None,
        "node": "controller-1",
        "controller_epoch": 3,
        "topic": "demo",
        "partition": 1,
        "rule": "ineligible broker added to the ISR",
        "broker": 3,
        "why": "not registered",
        "leader": 1,
        "isr": [1, 3],
        "previous_isr": [1],
        "reason": "AlterPartition from broker 1",
        "registered": [1, 2],
    }
    assert (offline_kept["rule"], offline_kept["broker"], offline_kept["isr"]) == (
        "offline replica kept in the ISR",
        3,
        [1, 3],
    )


def test_the_checks_skip_a_log_without_their_events(cluster_log: ClusterLog, read: Read) -> None:
    cluster_log.emit("broker-1", "logs_loaded", logs=0, seconds=0.0, log_dir="/tmp")
    events = read(cluster_log).events
    for check in (
        one_controller_per_epoch,
        broker_epochs_increase,
        stale_requests_rejected,
        ineligible_never_in_isr,
    ):
        result = check(events)
        assert (result.verdict, result.passed) == ("skipped", True), check.__name__
        assert result.details["skipped"]


def test_failover_decisions_are_judged_with_the_brokers_failover_loaded(
    cluster_log: ClusterLog, read: Read
) -> None:
    """brokers_loaded is the controller's view from failover on: an election during failover that
    lets in an unregistered broker is caught before any broker_change."""
    c1 = "controller-1"
    cluster_log.elected(c1, 4)
    cluster_log.emit(c1, "brokers_loaded", controller_epoch=4, epochs={"1": 60, "2": 62})
    cluster_log.isr_write(c1, 4, 0, 1, [1, 2], "new partition", partition_epoch=0)
    cluster_log.isr_write(c1, 4, 1, 1, [1, 3], "new partition", partition_epoch=0)
    result = ineligible_never_in_isr(read(cluster_log).events)
    assert (result.verdict, result.violations) == ("failed", 1)
    (example,) = result.examples
    assert (example["partition"], example["broker"], example["why"]) == (1, 3, "not registered")
    assert example["registered"] == [1, 2]
    assert result.details.get("writes_before_registration_view", 0) == 0


def test_each_writer_is_held_to_the_filter_it_applies(cluster_log: ClusterLog, read: Read) -> None:
    """A controlled-shutdown election drops only brokers shutting down, so a dead member it carries
    is allowed; an AlterPartition commit never carries an ineligible member."""
    c1 = "controller-1"
    cluster_log.elected(c1, 5)
    cluster_log.emit(c1, "brokers_loaded", controller_epoch=5, epochs={"1": 60, "2": 62, "3": 64})
    cluster_log.isr_write(c1, 5, 0, 1, [1, 2, 3], "new partition", partition_epoch=0)
    cluster_log.broker_change(c1, 5, {1: 60, 2: 62}, dead=(3,))
    cluster_log.shutdown_started(c1, 5, 1, 60)
    cluster_log.isr_write(c1, 5, 0, 2, [2, 3], "controlled_shutdown election", partition_epoch=1)
    cluster_log.isr_write(c1, 5, 0, 2, [2, 3], "AlterPartition from broker 2", partition_epoch=2)
    result = ineligible_never_in_isr(read(cluster_log).events)
    assert (result.verdict, result.violations) == ("failed", 1)
    (example,) = result.examples
    assert (example["rule"], example["broker"], example["reason"]) == (
        "write kept an ineligible broker in the ISR",
        3,
        "AlterPartition from broker 2",
    )


def test_the_audit_judges_staleness_exactly_as_the_broker_does(spark: SparkSession) -> None:
    """stale_epoch_expected (over logged fields) against protocol/control_requests.py
    broker_epoch_is_stale (over the request body), for both epoch protocols and every position
    relative to the broker's epoch."""
    from pipeline.checks import stale_epoch_expected
    from protocol import ApiKey
    from protocol.control_requests import broker_epoch_is_stale
    from protocol.messages import MAX_BROKER_EPOCH_VERSIONS, PER_BROKER_EPOCH_VERSIONS, epoch_field

    own = 50
    cases = []
    for versions in (PER_BROKER_EPOCH_VERSIONS, MAX_BROKER_EPOCH_VERSIONS):
        for api, version in versions.items():
            field = epoch_field(ApiKey(api), version)
            for epoch in (-1, 0, own - 1, own, own + 1):
                expected = broker_epoch_is_stale(api, version, {field: epoch}, own)
                cases.append((field, epoch, expected))
    frame = spark.createDataFrame(
        [
            (e if f == "broker_epoch" else None, e if f == "max_broker_epoch" else None, own)
            for f, e, _ in cases
        ],
        "broker_epoch bigint, max_broker_epoch bigint, broker_epoch_now bigint",
    )
    judged = [r["stale"] for r in frame.select(stale_epoch_expected().alias("stale")).collect()]
    assert judged == [expected for _, _, expected in cases]


def test_dead_brokers_count_as_live_until_the_controller_removes_them(
    cluster_log: ClusterLog, read: Read
) -> None:
    """Kafka's order: a change's new brokers are handled while its dead ones are still live, so an
    election then may keep a dead member; once brokers_removed is written it may not."""
    c1 = "controller-1"
    cluster_log.elected(c1, 6)
    cluster_log.emit(c1, "brokers_loaded", controller_epoch=6, epochs={"1": 60, "2": 62, "3": 64})
    cluster_log.isr_write(c1, 6, 0, 1, [1, 3], "new partition", partition_epoch=0)
    cluster_log.broker_change(c1, 6, {1: 60, 2: 62, 4: 70}, dead=(3,), new=(4,))
    cluster_log.isr_write(c1, 6, 0, 3, [1, 3], "offline election", partition_epoch=1)
    cluster_log.emit(
        c1, "brokers_removed", controller_epoch=6, brokers=[3], epochs={"1": 60, "2": 62, "4": 70}
    )
    cluster_log.isr_write(c1, 6, 0, 1, [1, 3], "offline election", partition_epoch=2)
    result = ineligible_never_in_isr(read(cluster_log).events)
    assert (result.verdict, result.violations) == ("failed", 1)
    (example,) = result.examples
    assert (example["rule"], example["broker"], example["registered"]) == (
        "write kept an ineligible broker in the ISR",
        3,
        [1, 2, 4],
    )


def test_a_write_whose_predecessor_was_never_logged_is_not_judged_as_an_addition(
    cluster_log: ClusterLog, read: Read
) -> None:
    """A controller killed between its ZooKeeper commit and its log line leaves a gap in the partition
    epochs; the write after the gap cannot tell what it added, so rule 1 leaves it and counts it."""
    c1 = "controller-1"
    cluster_log.elected(c1, 7)
    cluster_log.emit(c1, "brokers_loaded", controller_epoch=7, epochs={"1": 60, "2": 62})
    cluster_log.isr_write(c1, 7, 0, 1, [1], "new partition", partition_epoch=0)
    # version 1 (an ISR of [1, 3] written while broker 3 was registered) never reached the log
    cluster_log.isr_write(c1, 7, 0, 1, [1, 3], "replica 2 offline", partition_epoch=2)
    result = ineligible_never_in_isr(read(cluster_log).events)
    assert (result.verdict, result.violations) == ("passed", 0)
    assert result.details["writes_with_unknown_previous_isr"] == 1


# -- partition leadership


def test_a_healthy_log_has_growing_leader_epochs(healthy: Logs) -> None:
    from pipeline.leadership import leader_epochs_grow

    result = leader_epochs_grow(healthy.events)
    assert (result.verdict, result.violations) == ("passed", 0) and result.checked > 0


def test_a_leader_epoch_written_lower_fails_unless_the_topic_was_deleted_between(
    cluster_log: ClusterLog, read: Read
) -> None:
    from pipeline.leadership import leader_epochs_grow

    def damage(log: ClusterLog) -> None:
        log.isr_write("controller-2", 2, 1, 2, [2], "offline election", leader_epoch=1, partition_epoch=5)
        log.emit("controller-2", "topic_deleted", topic="gone", partitions=1)
        log.isr_write("controller-2", 2, 0, 1, [1], "new partition", topic="gone", leader_epoch=0)
        log.isr_write("controller-2", 2, 0, 1, [1], "new partition", topic="gone", leader_epoch=0)

    result = leader_epochs_grow(read(broken(cluster_log, damage)).events)
    assert (result.verdict, result.violations) == ("failed", 1)
    (example,) = result.examples
    assert (example["topic"], example["partition"], example["leader_epoch"], example["highest_before"]) == (
        "demo",
        1,
        1,
        2,
    )


def test_two_brokers_leading_one_leader_epoch_fail(cluster_log: ClusterLog, read: Read) -> None:
    from pipeline.leadership import one_leader_per_leader_epoch

    def damage(log: ClusterLog) -> None:
        for node, epoch in (("broker-1", 3), ("broker-2", 4), ("broker-3", 4)):
            log.emit(
                node, "become_leader", topic="demo", partition=0, leader=int(node[-1]), leader_epoch=epoch
            )

    result = one_leader_per_leader_epoch(read(broken(cluster_log, damage)).events)
    assert (result.verdict, result.checked, result.violations) == ("failed", 2, 1)
    assert result.examples[0]["nodes"] == ["broker-2", "broker-3"]


def test_a_broker_obeying_an_older_controller_fails_unless_it_started_again_between(
    cluster_log: ClusterLog, read: Read
) -> None:
    from pipeline.leadership import no_older_controller_obeyed

    def damage(log: ClusterLog) -> None:
        log.handled(1, 10, max_broker_epoch=10, controller_epoch=3)
        log.handled(1, 10, max_broker_epoch=10, controller_epoch=2)  # a deposed controller obeyed
        log.handled(1, 10, max_broker_epoch=10, controller_epoch=1, error="STALE_CONTROLLER_EPOCH")
        log.emit("broker-2", "broker_started", broker_id=2, broker_epoch=60)
        log.handled(2, 60, max_broker_epoch=60, controller_epoch=1)  # a new process knows no epoch yet

    result = no_older_controller_obeyed(read(broken(cluster_log, damage)).events)
    assert (result.verdict, result.violations) == ("failed", 1)
    (example,) = result.examples
    assert (example["node"], example["controller_epoch"], example["highest_before"]) == ("broker-1", 2, 3)


# -- partition epochs and the brokers' view


def test_a_healthy_log_writes_every_partition_epoch_once(healthy: Logs) -> None:
    from pipeline.epochs import partition_epochs_written_once

    result = partition_epochs_written_once(healthy.events)
    assert (result.verdict, result.violations, result.checked) == ("passed", 0, 15)


def test_one_partition_epoch_written_by_two_controllers_is_a_split_brain(
    cluster_log: ClusterLog, read: Read
) -> None:
    from pipeline.epochs import partition_epochs_written_once

    def damage(log: ClusterLog) -> None:
        # a zombie controller-1 still writes version 6 of partition 1, which controller-2 wrote too
        log.isr_write("controller-1", 1, 1, 2, [2], "offline election", leader_epoch=3, partition_epoch=6)
        # after a deletion the topic starts over: version 0 again is no violation
        log.emit("controller-2", "topic_deleted", topic="demo", partitions=2)
        log.isr_write("controller-2", 2, 0, 1, [1], "new partition")

    result = partition_epochs_written_once(read(broken(cluster_log, damage)).events)
    assert (result.verdict, result.violations) == ("failed", 1)
    (example,) = result.examples
    assert example["partition"] == 1 and example["partition_epoch"] == 6
    assert (example["nodes"], example["controller_epochs"], example["writes"]) == (
        ["controller-1", "controller-2"],
        [1, 2],
        2,
    )


def become(log: ClusterLog, broker: int, leader: int, leader_epoch: int, partition_epoch: int) -> None:
    kind = "become_leader" if leader == broker else "become_follower"
    log.emit(
        f"broker-{broker}",
        kind,
        topic="demo",
        partition=0,
        leader=leader,
        leader_epoch=leader_epoch,
        isr=[1, 2],
        partition_epoch=partition_epoch,
        was_leader=False,
    )


def test_each_brokers_view_of_a_partition_moves_only_forward(cluster_log: ClusterLog, read: Read) -> None:
    from pipeline.epochs import broker_epochs_move_forward

    log = cluster_log
    become(log, 1, 1, 0, 0)
    become(log, 1, 2, 1, 2)
    log.emit("broker-1", "broker_started", broker_id=1, broker_epoch=40)
    become(log, 1, 2, 1, 3)  # a new process may apply the epoch it had before
    become(log, 1, 1, 2, 4)
    become(log, 2, 1, 0, 0)
    log.emit("controller-1", "topic_deleted", topic="demo", partitions=1)
    become(log, 2, 2, 0, 0)  # the topic again, from epoch 0
    become(log, 1, 2, 1, 2)
    first = read(log)
    healthy = broker_epochs_move_forward(first.events)
    assert (healthy.verdict, healthy.checked, healthy.violations) == ("passed", 7, 0)
    first.release()  # the same files read again must not come from Spark's cache

    become(log, 2, 2, 0, 1)  # the same process applies leader epoch 0 twice
    become(log, 1, 1, 0, 3)  # broker 1 goes back to leader epoch 0
    become(log, 1, 1, 1, 1)  # and to partition epoch 1
    result = broker_epochs_move_forward(read(log).events)
    assert (result.verdict, result.violations) == ("failed", 3)
    assert [(e["node"], e["why"]) for e in result.examples] == [
        ("broker-2", "applied twice by one process"),
        ("broker-1", "leader epoch went back"),
        ("broker-1", "partition epoch went back"),
    ]
