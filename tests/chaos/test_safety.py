"""Control-plane safety rules over crafted daemon logs: each rule catches its own violation."""

from __future__ import annotations

from typing import Any

from chaos.safety import violations

T0 = "2026-11-24T10:00:{:02d}.000000Z"


def at(second: int, node: str, kind: str, **fields: Any) -> dict[str, Any]:
    return {"ts": T0.format(second), "node": node, "kind": kind, **fields}


HEALED = [
    at(0, "chaos", "fault_injected", fault="pause", target="broker-1", role="broker"),
    at(1, "chaos", "fault_healed", fault="pause", target="broker-1", role="broker"),
]
ELECTED = [at(0, "controller-1", "controller_elected", controller_epoch=1), at(59, "broker-1", "registered")]


def test_a_clean_history_breaks_nothing() -> None:
    lines = [
        *ELECTED,
        at(2, "broker-1", "become_leader", topic="t", partition=0, leader_epoch=1),
        at(3, "broker-2", "become_leader", topic="t", partition=0, leader_epoch=2),
        at(2, "controller-1", "leader_and_isr_change", topic="t", partition=0, leader_epoch=1),
        at(3, "controller-1", "leader_and_isr_change", topic="t", partition=0, leader_epoch=2),
        at(4, "broker-1", "control_request_handled", api="LeaderAndIsr", error="NONE", controller_epoch=1),
    ]
    assert violations(lines, HEALED) == []


def test_two_leaders_in_one_leader_epoch() -> None:
    lines = [
        *ELECTED,
        at(2, "broker-1", "become_leader", topic="t", partition=0, leader_epoch=3),
        at(5, "broker-2", "become_leader", topic="t", partition=0, leader_epoch=3),
    ]
    assert violations(lines, HEALED) == ["t-0: broker-1, broker-2 all led leader epoch 3"]


def test_a_leader_epoch_that_goes_back() -> None:
    lines = [
        *ELECTED,
        at(2, "controller-2", "leader_and_isr_change", topic="t", partition=0, leader_epoch=4),
        at(3, "controller-1", "leader_and_isr_change", topic="t", partition=0, leader_epoch=3),
    ]
    [found] = violations(lines, HEALED)
    assert "wrote leader epoch 3 after controller-2 had written 4" in found


def test_an_older_controller_obeyed_but_a_restarted_broker_starts_afresh() -> None:
    handled = {"api": "UpdateMetadata", "error": "NONE"}
    lines = [
        *ELECTED,
        at(2, "broker-1", "control_request_handled", controller_epoch=5, **handled),
        at(3, "broker-1", "control_request_handled", controller_epoch=4, **handled),
        at(
            4,
            "broker-1",
            "control_request_handled",
            controller_epoch=3,
            api="LeaderAndIsr",
            error="STALE_CONTROLLER_EPOCH",
        ),
        at(5, "broker-1", "broker_started"),
        at(6, "broker-1", "control_request_handled", controller_epoch=4, **handled),
    ]
    assert violations(lines, HEALED) == [
        "broker-1 applied UpdateMetadata from controller epoch 4 after one from epoch 5"
    ]


def test_no_or_two_active_controllers_after_healing() -> None:
    zombie = [*ELECTED, at(10, "controller-2", "controller_elected", controller_epoch=2)]
    [two] = violations(zombie, HEALED)
    assert "2 controllers were active (controller-1, controller-2)" in two
    resigned = [*ELECTED, at(10, "controller-1", "controller_resigned", controller_epoch=1)]
    [none] = violations(resigned, HEALED)
    assert "0 controllers were active (none)" in none
    restarted = [*zombie, at(12, "controller-1", "controller_started")]
    assert violations(restarted, HEALED) == []


def test_a_heal_followed_by_another_fault_within_the_settling_time_is_not_judged() -> None:
    """In a mixed run, faults overlap: 30 s after a heal, another fault may rightly keep a zombie."""
    zombie = [*ELECTED, at(10, "controller-2", "controller_elected", controller_epoch=2)]
    busy = [
        *HEALED,
        at(20, "chaos", "fault_injected", fault="isolate", target="controller-1", role="controller"),
    ]
    assert violations(zombie, busy) == []


def test_a_kafka_broker_holding_controller_counts_as_the_one_active_controller() -> None:
    """In a cluster shared with Kafka brokers, the run's samples of /controller stand for Kafka's."""
    resigned = [*ELECTED, at(10, "controller-1", "controller_resigned", controller_epoch=1)]
    kafka_holds = [*HEALED, at(11, "chaos", "controller_seen", controller_id=4, implementation="kafka")]
    assert violations(resigned, kafka_holds) == []
    [both] = violations(ELECTED, kafka_holds)  # ours never resigned: two think they are in charge
    assert "Kafka broker 4 held /controller while ours considered themselves active (controller-1)" in both
    ours_again = [*kafka_holds, at(20, "chaos", "controller_seen", controller_id=1001, implementation="ours")]
    [none] = violations(resigned, ours_again)
    assert "0 controllers were active" in none
