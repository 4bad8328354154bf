"""The compose test's own logic, without a Docker engine: what counts as fenced and as whole, which
broker each fault takes, and that a failing step still takes the cluster down.

``make compose-test`` runs the real thing.
"""

from __future__ import annotations

from typing import Any

import pytest

from deploy import compose_test
from deploy.compose import Compose, daemon_role, session_timeout_s, stop_grace_s
from deploy.compose_test import CheckFailed, Metadata, Run, execute, wait_until
from tests.support.compose import compose_model


def metadata(brokers: set[int], leaders: list[int], isrs: list[set[int]]) -> Metadata:
    return Metadata(
        brokers=frozenset(brokers),
        leaders=dict(enumerate(leaders)),
        isrs={p: frozenset(isr) for p, isr in enumerate(isrs)},
    )


def healthy_metadata() -> Metadata:
    return metadata({1, 2, 3}, [1, 2, 3, 1, 2, 1], [{1, 2, 3}] * 6)


def test_a_whole_cluster_has_every_broker_a_leader_and_a_full_isr_everywhere() -> None:
    assert healthy_metadata().whole(3)
    assert not metadata({1, 2}, [1, 2, 1, 1, 2, 1], [{1, 2, 3}] * 6).whole(3)
    assert not metadata({1, 2, 3}, [1, 2, 3, 1, 2, -1], [{1, 2, 3}] * 6).whole(3)
    assert not metadata({1, 2, 3}, [1, 2, 3, 1, 2, 1], [{1, 2, 3}] * 5 + [{1, 2}]).whole(3)


def test_a_fenced_broker_is_out_of_the_metadata_every_leadership_and_every_isr() -> None:
    assert metadata({1, 3}, [1, 1, 3, 1, 3, 1], [{1, 3}] * 6).fenced(2)
    assert not metadata({1, 3}, [1, 2, 3, 1, 3, 1], [{1, 3}] * 6).fenced(2), "still leads partition 1"
    assert not metadata({1, 3}, [1, 1, 3, 1, 3, 1], [{1, 2, 3}] + [{1, 3}] * 5).fenced(2), "still in an ISR"
    assert not metadata({1, 2, 3}, [1, 1, 3, 1, 3, 1], [{1, 3}] * 6).fenced(2), "still a live broker"


def test_each_fault_takes_a_broker_no_fault_took_and_that_leads_the_most() -> None:
    run = Run(Compose(environment={}))
    views = iter(
        [
            metadata({1, 2, 3}, [2, 2, 3, 1, 2, 3], [{1, 2, 3}] * 6),
            metadata({1, 2, 3}, [1, 3, 3, 1, 3, 3], [{1, 2, 3}] * 6),
            metadata({1, 2, 3}, [1, 1, 1, 1, 1, 1], [{1, 2, 3}] * 6),
        ]
    )
    run.metadata = lambda: next(views)  # type: ignore[method-assign]
    assert [compose_test._next_broker(run) for _ in range(3)] == [2, 3, 1]


def test_waiting_retries_through_errors_and_names_the_last_one_when_time_runs_out(monkeypatch: Any) -> None:
    monkeypatch.setattr(compose_test, "POLL_S", 0.0)
    answers = iter([RuntimeError("refused"), 1, 2])

    def read() -> int:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def broken() -> int:
        raise ValueError("boom")

    assert wait_until("two", read, lambda n: n == 2, timeout=5) == 2
    with pytest.raises(CheckFailed, match=r"waiting for never .*last error: boom"):
        wait_until("never", broken, bool, timeout=0)


def test_the_session_timeout_is_the_daemons_as_compose_sets_it() -> None:
    broker = compose_model()["services"]["broker-1"]
    assert session_timeout_s(broker) == 18.0  # the daemons' default: compose sets none
    broker["environment"]["KAFKA_ZOOKEEPER_SESSION_TIMEOUT_MS"] = "6000"
    assert session_timeout_s(broker) == 6.0


def test_each_service_is_known_by_what_it_runs() -> None:
    services = compose_model()["services"]
    roles = {name: daemon_role(service) for name, service in services.items()}
    assert roles == {
        "zookeeper-1": None,
        "zookeeper-2": None,
        "zookeeper-3": None,
        "controller-1001": "controller",
        "controller-1002": "controller",
        "broker-1": "broker",
        "broker-2": "broker",
        "broker-3": "broker",
        "zookeeper-exporter": None,
        "prometheus": None,
        "grafana": None,
    }
    assert stop_grace_s(services["broker-1"]) == 30.0
    assert stop_grace_s(services["prometheus"]) == 10.0, "Docker's default when the file sets none"
    assert stop_grace_s({"stop_grace_period": "1m30s"}) == 90.0


class FakeCompose(Compose):
    def __init__(self) -> None:
        super().__init__(environment={})
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, *args: str, check: bool = True, timeout: float = 600) -> str:
        self.calls.append(args)
        return ""


def test_a_failing_step_stops_the_run_and_the_cluster_still_goes_down(monkeypatch: Any) -> None:
    downs: list[bool] = []
    monkeypatch.setattr(compose_test, "step_down", lambda run: downs.append(True) or "down")
    run = Run(FakeCompose())

    def touch(run: Run) -> str:
        run.cluster_touched = True
        return "touched"

    def fail(run: Run) -> str:
        raise CheckFailed("no leader")

    def never(run: Run) -> str:
        raise AssertionError("a step after a failure ran")

    assert not execute(run, [("touch", touch), ("fail", fail), ("never", never)])
    assert downs == [True]
    assert [(s.name, s.ok) for s in run.steps] == [("touch", True), ("fail", False), ("down", True)]
    assert ("logs", "--no-color", "--tail", "30") in run.compose.calls  # type: ignore[attr-defined]


def test_nothing_is_taken_down_before_compose_was_used(monkeypatch: Any) -> None:
    monkeypatch.setattr(compose_test, "step_down", lambda run: pytest.fail("down without a cluster"))

    def fail(run: Run) -> str:
        raise CheckFailed("no engine")

    assert not execute(Run(FakeCompose()), [("engine", fail)])
