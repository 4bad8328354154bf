"""A partition's identity, as every layer names it: requests, znodes, logs."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A partition's identity; a plain ``(topic, partition)`` tuple compares equal to it."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
