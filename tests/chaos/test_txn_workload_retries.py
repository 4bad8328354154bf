"""The transform loop's rewind asks for the group's committed offsets again while its coordinator
moves: a chaos run moves coordinators on purpose, and CI once failed a run on one NOT_COORDINATOR."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from chaos.txn_workload import committed_offsets


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
