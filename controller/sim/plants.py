"""Bugs the project fixed once, put back on demand: a simulator that finds nothing proves nothing.

Each plant undoes one fix for the length of a ``with planted(name)`` block, by replacing the one
step the fix added with what the code did before it:

* ``lost-election-reply`` (fixed in 568904e): a candidate whose winning multi-op lost its reply with
  the connection took the NodeExists of its own retry for another controller's win, and left
  ``/controller`` held by a session that was not active;
* ``deletions-at-failover`` (fixed with KAFKA-style ``TopicDeletionManager.init``): with
  ``delete.topic.enable=false``, deletion requests queued while no controller was active were carried
  out by the next controller's failover;
* ``silent-broker-death`` (fixed in b22d75b): when a broker died and every election it caused
  failed, no UpdateMetadata told the remaining brokers it was gone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

from controller.handlers.brokers import BrokerChanges
from controller.handlers.topic_deletion import TopicDeletions

__all__ = ["PLANTS", "planted"]


async def _never_won_before(zk: Any, new_epoch: int) -> None:
    return None


async def _keep_requests(self: TopicDeletions, requested: list[str]) -> bool:
    return False


def _announce_nothing(self: BrokerChanges) -> None:
    return None


PLANTS: dict[str, Callable[[], Any]] = {
    "lost-election-reply": lambda: mock.patch("zkstore.election.won_before", _never_won_before),
    "deletions-at-failover": lambda: mock.patch.object(
        TopicDeletions, "drop_disabled_requests", _keep_requests
    ),
    "silent-broker-death": lambda: mock.patch.object(BrokerChanges, "announce_departures", _announce_nothing),
}
"""Each plant's name and the patch that puts its bug back."""


@contextlib.contextmanager
def planted(name: str | None) -> Iterator[None]:
    """Run the block with the bug ``name`` put back (None: as the code is)."""
    if name is None:
        yield
        return
    with PLANTS[name]():
        yield
