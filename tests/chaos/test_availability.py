"""Availability figures over crafted logs: gaps without a controller and partitions without a
working leader, each put down to the fault in force when it began."""

from __future__ import annotations

from typing import Any

import pytest

from chaos.availability import availability

T0 = "2026-11-24T10:00:{:02d}.000000Z"


def at(second: int, node: str, kind: str, **fields: Any) -> dict[str, Any]:
    return {"ts": T0.format(second), "node": node, "kind": kind, **fields}


def change(second: int, leader: int, epoch: int) -> dict[str, Any]:
    return at(
        second,
        "controller-1",
        "leader_and_isr_change",
        topic="t",
        partition=0,
        leader=leader,
        leader_epoch=epoch,
    )


RUN = [at(1, "chaos", "run_started"), at(59, "chaos", "run_finished")]


def test_a_killed_active_controller_leaves_the_cluster_without_one_until_the_next_election() -> None:
    daemons = [
        at(0, "controller-1", "controller_elected"),
        at(15, "controller-1", "controller_started"),
        at(17, "controller-2", "controller_elected"),
    ]
    run = [
        *RUN,
        at(10, "chaos", "fault_injected", fault="kill", target="controller-1"),
        at(13, "chaos", "fault_healed", fault="kill", target="controller-1"),
    ]
    assert availability(daemons, run)["kill"]["without_controller_s"] == pytest.approx(7.0)


def test_a_partition_led_by_a_paused_broker_is_leaderless_until_a_newer_epoch() -> None:
    daemons = [at(0, "controller-1", "controller_elected"), change(2, 1, 0), change(18, 2, 1)]
    run = [
        *RUN,
        at(10, "chaos", "fault_injected", fault="pause", target="broker-1"),
        at(19, "chaos", "fault_healed", fault="pause", target="broker-1"),
    ]
    figures = availability(daemons, run)
    assert figures["pause"] == {"without_controller_s": 0.0, "leaderless_s": 8.0}


def test_an_offline_partition_counts_until_a_leader_is_named_and_a_cut_not_disabling_nothing() -> None:
    daemons = [
        at(0, "controller-1", "controller_elected"),
        change(2, 1, 0),
        change(20, -1, 1),
        change(30, 1, 2),
    ]
    run = [
        *RUN,
        at(19, "chaos", "fault_injected", fault="isolate-followers", target="broker-1"),
        at(28, "chaos", "fault_healed", fault="isolate-followers", target="broker-1"),
    ]
    figures = availability(daemons, run)
    assert figures["isolate-followers"]["leaderless_s"] == pytest.approx(10.0)


def test_a_campaign_reports_the_worst_figures_over_its_runs() -> None:
    from chaos.campaign import worst

    rows = [
        {"availability": {"kill": {"without_controller_s": 5.0, "leaderless_s": 1.0}}},
        {
            "availability": {
                "kill": {"without_controller_s": 2.0, "leaderless_s": 7.5},
                "pause": {"without_controller_s": 0.0, "leaderless_s": 3.0},
            }
        },
    ]
    assert worst(rows) == {
        "kill": {"without_controller_s": 5.0, "leaderless_s": 7.5},
        "pause": {"without_controller_s": 0.0, "leaderless_s": 3.0},
    }


def test_a_controller_and_a_leader_whose_sessions_outlived_a_cut_count_again_once_it_is_healed() -> None:
    """A cut shorter than the session (or a quorum loss meanwhile) leaves them in place: what they
    could not do ends with the fault, not with the run."""
    daemons = [at(0, "controller-1", "controller_elected"), change(2, 1, 0), at(50, "broker-9", "noise")]
    run = [
        *RUN,
        at(10, "chaos", "fault_injected", fault="isolate-zookeeper", target="controller-1"),
        at(14, "chaos", "fault_healed", fault="isolate-zookeeper", target="controller-1"),
        at(20, "chaos", "fault_injected", fault="isolate", target="broker-1"),
        at(25, "chaos", "fault_healed", fault="isolate", target="broker-1"),
    ]
    figures = availability(daemons, run)
    assert figures["isolate-zookeeper"]["without_controller_s"] == pytest.approx(4.0)
    assert figures["isolate"]["leaderless_s"] == pytest.approx(5.0)


def test_a_bounced_leader_handed_its_partitions_back_at_failover_is_working_again() -> None:
    """A new controller does not see a bounce it missed: its failover sends the restarted broker its
    partitions in the epoch they had, and no newer epoch is written."""
    daemons = [
        at(0, "controller-1", "controller_elected"),
        change(2, 3, 4),
        at(20, "controller-2", "controller_elected"),
        at(21, "broker-3", "become_leader", topic="t", partition=0, leader=3, leader_epoch=4),
    ]
    run = [*RUN, at(10, "chaos", "fault_injected", fault="bounce", target="broker-3")]
    assert availability(daemons, run)["bounce"]["leaderless_s"] == pytest.approx(11.0)


def test_a_kafka_broker_holding_controller_is_a_controller_until_a_fault_takes_it_down() -> None:
    """The run's samples of /controller stand for a Kafka broker's controller, which logs nothing of
    ours; killing that broker leaves the cluster without one until the next holder is seen."""
    daemons = [
        at(0, "controller-1", "controller_elected"),
        at(5, "controller-1", "controller_resigned"),
        at(30, "controller-1", "controller_elected"),
    ]
    run = [
        *RUN,
        at(4, "chaos", "fault_injected", fault="pause", target="controller-1"),
        at(6, "chaos", "controller_seen", controller_id=4, implementation="kafka"),
        at(14, "chaos", "fault_healed", fault="pause", target="controller-1"),
        at(20, "chaos", "fault_injected", fault="kill", target="kafka-4"),
        at(23, "chaos", "fault_healed", fault="kill", target="kafka-4"),
        at(30, "chaos", "controller_seen", controller_id=1001, implementation="ours"),
    ]
    figures = availability(daemons, run)
    assert figures["pause"]["without_controller_s"] == pytest.approx(2.0)  # paused at 4, Kafka's from 6
    assert figures["kill"]["without_controller_s"] == pytest.approx(10.0)  # killed at 20, ours at 30
