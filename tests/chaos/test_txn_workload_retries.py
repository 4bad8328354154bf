"""The transform loop through a moving group coordinator: its rewind asks for the committed offsets
again (CI once failed a chaos run on one NOT_COORDINATOR), and a send_offsets_to_transaction that
outlasts its own timeout is given up on (a netns chaos run once hung there for good)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, cast

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from chaos import txn_workload
from chaos.txn_workload import committed_offsets
from daemon.eventlog import EventLog


class Consumer:
    """Answers ``committed`` with the given errors first, then with the offsets."""

    def __init__(self, *errors: int) -> None:
        self.errors = list(errors)
        self.calls = 0

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        self.calls += 1
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))
        return [TopicPartition(tp.topic, tp.partition, 7) for tp in partitions]


def test_a_moving_coordinator_is_asked_again() -> None:
    consumer: Any = Consumer(KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
    got = committed_offsets(consumer, [TopicPartition("t", 0)], pause_s=0.01)
    assert [(tp.topic, tp.partition, tp.offset) for tp in got] == [("t", 0, 7)]
    assert consumer.calls == 3


def test_an_error_that_will_not_pass_is_raised() -> None:
    consumer: Any = Consumer(KafkaError.GROUP_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException):
        committed_offsets(consumer, [TopicPartition("t", 0)], pause_s=0.01)
    assert consumer.calls == 1


def test_a_coordinator_that_never_comes_back_is_given_up_on() -> None:
    consumer: Any = Consumer(*[KafkaError.NOT_COORDINATOR] * 100)
    with pytest.raises(KafkaException):
        committed_offsets(consumer, [TopicPartition("t", 0)], deadline_s=0.05, pause_s=0.01)
    assert 1 < consumer.calls < 100


class Message:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes:
        return f"v{self._offset}".encode()


class StuckProducer:
    """A transactional producer whose send_offsets_to_transaction never returns, as librdkafka's does
    when the group's coordinator left the metadata (it then ignores the call's own timeout)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def begin_transaction(self) -> None:
        pass

    def produce(self, topic: str, value: bytes, partition: int) -> None:
        pass

    def send_offsets_to_transaction(
        self, offsets: list[TopicPartition], metadata: object, timeout: float
    ) -> None:
        self.release.wait()


def test_a_call_that_outlasts_its_timeout_leaves_the_outcome_unknown_and_a_new_producer_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(txn_workload, "STUCK_AFTER_S", 0.2)
    history = EventLog(tmp_path / "history.jsonl", "workload")
    loop = txn_workload.TransformLoop("127.0.0.1:9", "in", "out", "r1", history)
    stuck = StuckProducer()
    loop.transactor.producer = cast(Any, stuck)
    try:
        started = time.monotonic()
        loop._transform([Message(3), Message(4)])
        assert time.monotonic() - started < 5
    finally:
        stuck.release.set()
    [ended] = [e for e in history.recent if e["kind"] == "eos_ended"]
    assert ended["outcome"] == "unknown"
    assert "send_offsets_to_transaction" in ended["error"]
    assert loop.transactor.producer is None, "the next transaction starts a new producer, fencing this one"
    assert loop.committed == {}
