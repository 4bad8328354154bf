"""Waiting requests complete exactly once: when their condition holds at a check, or at their deadline."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from broker.purgatory import DelayedOperation, Purgatory

WAIT_S = 10.0


class Waiter(DelayedOperation):
    def __init__(self, timeout_s: float, condition: threading.Event) -> None:
        super().__init__(timeout_s)
        self.condition = condition
        self.replies = 0
        self._count = threading.Lock()

    def ready(self) -> bool:
        return self.condition.is_set()

    def reply(self) -> dict[str, Any]:
        with self._count:
            self.replies += 1
        return {"expired": self.expired}


@pytest.fixture
def purgatory() -> Iterator[Purgatory]:
    p = Purgatory("test")
    yield p
    p.shutdown()


def test_a_ready_operation_completes_at_once(purgatory: Purgatory) -> None:
    ready = threading.Event()
    ready.set()
    future = purgatory.watch(Waiter(60, ready), ["a"])
    assert future.done() and future.result() == {"expired": False}
    assert purgatory.size() == 0


def test_a_check_of_its_key_completes_it_once_the_condition_holds(purgatory: Purgatory) -> None:
    condition = threading.Event()
    op = Waiter(60, condition)
    future = purgatory.watch(op, ["a", "b"])
    assert not future.done() and purgatory.size() == 1
    assert purgatory.check("a") == 0, "the condition does not hold yet"
    condition.set()
    assert purgatory.check("other") == 0 and not future.done()
    assert purgatory.check("b") == 1
    assert future.result(0) == {"expired": False}
    assert purgatory.check("a") == 0, "already complete: not completed twice"
    assert op.replies == 1 and purgatory.size() == 0


def test_the_deadline_answers_with_expired(purgatory: Purgatory) -> None:
    op = Waiter(0.05, threading.Event())
    future = purgatory.watch(op, ["a"])
    assert future.result(WAIT_S) == {"expired": True}
    assert purgatory.check("a") == 0 and op.replies == 1


def test_racing_checks_and_expiry_complete_an_operation_once(purgatory: Purgatory) -> None:
    condition = threading.Event()
    ops = [Waiter(0.02, condition) for _ in range(200)]
    futures = [purgatory.watch(op, ["k"]) for op in ops]
    start = threading.Barrier(5)

    def checker() -> None:
        start.wait()
        condition.set()
        for _ in range(50):
            purgatory.check("k")

    threads = [threading.Thread(target=checker) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    for future in futures:
        future.result(WAIT_S)
    assert all(op.replies == 1 for op in ops)


def test_shutdown_answers_what_still_waits() -> None:
    purgatory = Purgatory("test")
    future = purgatory.watch(Waiter(600, threading.Event()), ["a"])
    purgatory.shutdown()
    assert future.result(0) == {"expired": True}
    late = purgatory.watch(Waiter(600, threading.Event()), ["a"])
    assert late.result(0) == {"expired": True}, "after shutdown nothing is kept waiting"
