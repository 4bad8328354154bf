"""The single-consumer event queue: ordering, controller state, preemption, failures and timings.

Events are held at gates (asyncio.Event) instead of timed sleeps, and the clock the manager reads is a
fake one the tests advance, so every assertion is about a state the test brought about.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller import event_manager as event_manager_module
from controller import events
from controller.event_manager import EventManager
from controller.events import ControllerEvent, ControllerState
from protocol import ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe(ControllerEvent):
    """A test event: ``label`` names it in the record, ``fail`` makes processing raise."""

    label: str
    fail: bool = False
    state: ControllerState = ControllerState.TOPIC_CHANGE


@dataclass(frozen=True, slots=True, kw_only=True)
class BadPreempt(ControllerEvent):
    label: str = "bad-preempt"

    def preempt(self) -> None:
        raise RuntimeError("preempt failed")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@dataclass
class Timings:
    dequeued: list[tuple[str, ControllerState, float]] = field(default_factory=list)
    processed: list[tuple[str, ControllerState, float]] = field(default_factory=list)

    def event_dequeued(self, event: ControllerEvent, queue_ms: float) -> None:
        self.dequeued.append((label(event), event.state, queue_ms))

    def event_processed(self, event: ControllerEvent, processing_ms: float) -> None:
        self.processed.append((label(event), event.state, processing_ms))


def label(event: ControllerEvent) -> str:
    return getattr(event, "label", type(event).__name__)


class Harness:
    """Runs an EventManager whose processing records each event and the manager's state meanwhile.

    ``gate(label)`` makes that event wait inside processing until ``release(label)``; ``started`` and
    ``finished`` hold one asyncio.Event per label so a test can wait for exactly that moment.
    """

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.timings = Timings()
        self.manager = EventManager(self._process, self.timings)
        self.seen: list[tuple[str, ControllerState]] = []
        self.running = 0
        self.overlapped = False
        self.processing_cost_s = 0.0
        self._gates: dict[str, asyncio.Event] = {}
        self._started: dict[str, asyncio.Event] = {}
        self._finished: dict[str, asyncio.Event] = {}

    def _event(self, table: dict[str, asyncio.Event], name: str) -> asyncio.Event:
        return table.setdefault(name, asyncio.Event())

    def gate(self, name: str) -> None:
        self._event(self._gates, name)

    def release(self, name: str) -> None:
        self._gates[name].set()

    async def started(self, name: str) -> None:
        await self._event(self._started, name).wait()

    async def finished(self, name: str) -> None:
        await self._event(self._finished, name).wait()

    async def _process(self, event: ControllerEvent) -> None:
        name = label(event)
        self.running += 1
        self.overlapped |= self.running > 1
        self.seen.append((name, self.manager.state))
        self._event(self._started, name).set()
        try:
            gate = self._gates.get(name)
            if gate is not None:
                await gate.wait()
            self.clock.now += self.processing_cost_s
            if getattr(event, "fail", False):
                raise RuntimeError(f"{name} failed")
        finally:
            self.running -= 1
            self._event(self._finished, name).set()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(event_manager_module, "time", fake)
    return fake


@pytest.fixture
async def harness(clock: FakeClock) -> AsyncIterator[Harness]:
    h = Harness(clock)
    h.manager.start()
    yield h
    await h.manager.stop()


def reply_future() -> asyncio.Future[dict[str, Any]]:
    return asyncio.get_running_loop().create_future()


# -- ordering and state


async def test_events_are_processed_one_at_a_time_in_queue_order(harness: Harness) -> None:
    harness.gate("a")
    for name in "abc":
        harness.manager.put(Probe(label=name))
    await harness.started("a")
    assert [s for s, _ in harness.seen] == ["a"] and harness.manager.size == 2
    harness.release("a")
    await harness.finished("c")
    assert [s for s, _ in harness.seen] == ["a", "b", "c"]
    assert not harness.overlapped


async def test_state_is_the_events_controller_state_while_it_runs_and_idle_after(harness: Harness) -> None:
    assert harness.manager.state is ControllerState.IDLE
    harness.gate("shutdown")
    harness.manager.put(Probe(label="shutdown", state=ControllerState.CONTROLLED_SHUTDOWN))
    await harness.started("shutdown")
    assert harness.manager.state is ControllerState.CONTROLLED_SHUTDOWN
    harness.release("shutdown")
    harness.manager.put(Probe(label="isr", state=ControllerState.ISR_CHANGE))
    await harness.finished("isr")
    assert harness.seen == [
        ("shutdown", ControllerState.CONTROLLED_SHUTDOWN),
        ("isr", ControllerState.ISR_CHANGE),
    ]
    assert harness.manager.state is ControllerState.IDLE


async def test_an_event_put_while_the_consumer_waits_wakes_it(harness: Harness) -> None:
    harness.manager.put(Probe(label="first"))
    await harness.finished("first")
    harness.manager.put(Probe(label="later"))
    await harness.finished("later")
    assert [s for s, _ in harness.seen] == ["first", "later"]


# -- preemption


async def test_clear_and_put_preempts_queued_events_and_runs_the_new_one(harness: Harness) -> None:
    harness.gate("busy")
    harness.manager.put(Probe(label="busy"))
    await harness.started("busy")
    shutdown_reply, alter_reply = reply_future(), reply_future()
    harness.manager.put(events.ControlledShutdown(broker_id=1, broker_epoch=5, reply=shutdown_reply))
    harness.manager.put(events.AlterPartitionReceived(request={}, version=2, reply=alter_reply))
    harness.manager.put(Probe(label="dropped"))

    harness.manager.clear_and_put(Probe(label="expire", state=ControllerState.CONTROLLER_CHANGE))

    assert harness.manager.size == 1
    assert shutdown_reply.result() == {
        "error_code": ErrorCode.STALE_CONTROLLER_EPOCH,
        "remaining_partitions": [],
    }
    assert alter_reply.result() == {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NOT_CONTROLLER,
        "topics": [],
    }
    harness.release("busy")
    await harness.finished("expire")
    assert [s for s, _ in harness.seen] == ["busy", "expire"]


async def test_a_failing_preempt_does_not_stop_the_others_being_preempted(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    harness.gate("busy")
    harness.manager.put(Probe(label="busy"))
    await harness.started("busy")
    reply = reply_future()
    harness.manager.put(BadPreempt())
    harness.manager.put(events.ControlledShutdown(broker_id=1, broker_epoch=5, reply=reply))
    with caplog.at_level(logging.ERROR, logger="controller.events"):
        harness.manager.clear_and_put(Probe(label="next"))
    assert reply.result()["error_code"] == ErrorCode.STALE_CONTROLLER_EPOCH
    assert "preempting BadPreempt failed" in caplog.text
    harness.release("busy")
    await harness.finished("next")


async def test_preempting_an_already_answered_event_leaves_its_answer(harness: Harness) -> None:
    harness.gate("busy")
    harness.manager.put(Probe(label="busy"))
    await harness.started("busy")
    reply = reply_future()
    reply.set_result({"error_code": ErrorCode.NONE, "remaining_partitions": []})
    harness.manager.put(events.ControlledShutdown(broker_id=1, broker_epoch=5, reply=reply))
    harness.manager.clear_and_put(Probe(label="next"))
    assert reply.result()["error_code"] == ErrorCode.NONE
    harness.release("busy")


async def test_stop_preempts_what_is_queued_and_leaves_the_state_idle(clock: FakeClock) -> None:
    harness = Harness(clock)
    harness.manager.start()
    harness.gate("busy")
    harness.manager.put(Probe(label="busy", state=ControllerState.BROKER_CHANGE))
    await harness.started("busy")
    reply = reply_future()
    harness.manager.put(events.ControlledShutdown(broker_id=1, broker_epoch=5, reply=reply))
    await harness.manager.stop()
    assert reply.result()["error_code"] == ErrorCode.STALE_CONTROLLER_EPOCH
    assert harness.manager.size == 0 and harness.manager.state is ControllerState.IDLE
    assert [s for s, _ in harness.seen] == ["busy"]


async def test_stop_before_start_still_preempts_the_queue(clock: FakeClock) -> None:
    manager = EventManager(Harness(clock)._process)
    reply = reply_future()
    manager.put(events.AlterPartitionReceived(request={}, version=1, reply=reply))
    await manager.stop()
    assert reply.result()["error_code"] == ErrorCode.NOT_CONTROLLER


async def test_a_failing_preempt_during_stop_does_not_strand_the_events_behind_it(clock: FakeClock) -> None:
    manager = EventManager(Harness(clock)._process)
    reply = reply_future()
    manager.put(BadPreempt())
    manager.put(events.ControlledShutdown(broker_id=1, broker_epoch=5, reply=reply))
    try:
        await manager.stop()
    finally:
        assert reply.done()


# -- failures


async def test_an_exception_in_processing_is_logged_and_the_next_event_still_runs(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="controller.events"):
        harness.manager.put(Probe(label="boom", fail=True))
        harness.manager.put(Probe(label="after"))
        await harness.finished("after")
    assert [s for s, _ in harness.seen] == ["boom", "after"]
    failures = [r for r in caplog.records if r.name == "controller.events"]
    assert len(failures) == 1 and failures[0].getMessage() == "error processing Probe"
    assert failures[0].exc_info is not None and "boom failed" in str(failures[0].exc_info[1])
    assert harness.manager.state is ControllerState.IDLE


# -- timings


async def test_timings_get_queue_and_processing_time_for_the_events_state(harness: Harness) -> None:
    harness.processing_cost_s = 0.5
    harness.gate("busy")
    harness.manager.put(Probe(label="busy", state=ControllerState.BROKER_CHANGE))
    await harness.started("busy")
    harness.manager.put(Probe(label="waiting", state=ControllerState.ISR_CHANGE))
    harness.clock.now += 0.25  # busy holds the consumer; waiting sits in the queue
    harness.release("busy")
    await harness.finished("waiting")
    assert harness.timings.dequeued == [
        ("busy", ControllerState.BROKER_CHANGE, 0.0),
        ("waiting", ControllerState.ISR_CHANGE, pytest.approx(750.0)),
    ]
    assert harness.timings.processed == [
        ("busy", ControllerState.BROKER_CHANGE, pytest.approx(750.0)),
        ("waiting", ControllerState.ISR_CHANGE, pytest.approx(500.0)),
    ]


async def test_a_failed_event_still_reports_its_processing_time(harness: Harness) -> None:
    harness.processing_cost_s = 0.125
    harness.manager.put(Probe(label="boom", fail=True, state=ControllerState.TOPIC_DELETION))
    harness.manager.put(Probe(label="after"))
    await harness.finished("after")
    assert harness.timings.processed[0] == ("boom", ControllerState.TOPIC_DELETION, pytest.approx(125.0))


# -- ControllerState


def test_controller_state_values_are_kafkas_bytes() -> None:
    assert [s.value for s in ControllerState] == list(range(18))
    assert [s.kafka_name for s in ControllerState] == [
        "Idle",
        "ControllerChange",
        "BrokerChange",
        "TopicChange",
        "TopicDeletion",
        "AlterPartitionReassignment",
        "AutoLeaderBalance",
        "ManualLeaderBalance",
        "ControlledShutdown",
        "IsrChange",
        "LeaderAndIsrResponseReceived",
        "LogDirChange",
        "ControllerShutdown",
        "UncleanLeaderElectionEnable",
        "TopicUncleanLeaderElectionEnable",
        "ListPartitionReassignment",
        "UpdateMetadataResponseReceived",
        "UpdateFeatures",
    ]


@pytest.mark.parametrize(
    ("state", "timer"),
    [
        (ControllerState.BROKER_CHANGE, "LeaderElectionRateAndTimeMs"),
        (ControllerState.ALTER_PARTITION_REASSIGNMENT, "PartitionReassignmentRateAndTimeMs"),
        (ControllerState.ISR_CHANGE, "IsrChangeRateAndTimeMs"),
        (ControllerState.CONTROLLER_CHANGE, "ControllerChangeRateAndTimeMs"),
        (ControllerState.UPDATE_FEATURES, "UpdateFeaturesRateAndTimeMs"),
        (ControllerState.IDLE, None),
        (ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED, None),
    ],
)
def test_timer_name_uses_kafkas_historical_names(state: ControllerState, timer: str | None) -> None:
    assert state.timer_name == timer


def test_every_state_but_two_has_a_timer() -> None:
    untimed = [s for s in ControllerState if s.timer_name is None]
    assert untimed == [ControllerState.IDLE, ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED]


@pytest.mark.parametrize(
    ("event", "state"),
    [
        (events.Startup(), ControllerState.CONTROLLER_CHANGE),
        (events.Expire(), ControllerState.CONTROLLER_CHANGE),
        (events.Shutdown(), ControllerState.CONTROLLER_SHUTDOWN),
        (events.BrokerChange(), ControllerState.BROKER_CHANGE),
        (events.BrokerModifications(broker_id=1), ControllerState.BROKER_CHANGE),
        (events.TopicDeletion(), ControllerState.TOPIC_DELETION),
        (events.ZkPartitionReassignment(), ControllerState.ALTER_PARTITION_REASSIGNMENT),
        (events.AutoPreferredReplicaLeaderElection(), ControllerState.AUTO_LEADER_BALANCE),
        (events.ZkPreferredReplicaElection(), ControllerState.MANUAL_LEADER_BALANCE),
        (events.IsrChangeNotification(), ControllerState.ISR_CHANGE),
        (
            events.UpdateMetadataResponseReceived(broker_id=1, response={}),
            ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED,
        ),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, ControllerEvent) else v.name,
)
def test_events_run_in_kafkas_controller_state(event: ControllerEvent, state: ControllerState) -> None:
    assert event.state is state


async def test_rpc_events_run_in_their_states() -> None:
    reply = reply_future()
    assert (
        events.ControlledShutdown(broker_id=1, broker_epoch=1, reply=reply).state
        is ControllerState.CONTROLLED_SHUTDOWN
    )
    assert (
        events.AlterPartitionReceived(request={}, version=2, reply=reply).state is ControllerState.ISR_CHANGE
    )
