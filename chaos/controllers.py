"""Who held ``/controller`` during a run, and of which implementation: sampled by the run itself.

In a cluster shared with Apache Kafka brokers, the active controller may be one of our candidates or
a Kafka broker's KafkaController, which writes no event log of ours; so the run reads ``/controller``
and ``/controller_epoch`` twice a second and records each new holder (``controller_seen``). Our
candidates' ids lie above ``reserved.broker.max.id``, brokers' ids at or below it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from kazoo.exceptions import KazooException

from daemon.config import RESERVED_BROKER_MAX_ID
from daemon.eventlog import EventLog
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper

SAMPLE_S = 0.5


def implementation(controller_id: int) -> str:
    """``ours`` for a controller candidate's id, ``kafka`` for a broker's (a Kafka broker's controller)."""
    return "ours" if controller_id > RESERVED_BROKER_MAX_ID.default else "kafka"


async def _holder(zk: AsyncZooKeeper) -> tuple[int, int] | None:
    try:
        data, _ = await zk.get(znodes.CONTROLLER)
        epoch, _ = await zk.get(znodes.CONTROLLER_EPOCH)
        return int(epoch), int(json.loads(data)["brokerid"])
    except (KazooException, ValueError, KeyError, TypeError):
        return None  # nobody holds it now, or ZooKeeper is being broken


async def _watch(zk: AsyncZooKeeper, events: EventLog) -> None:
    last: tuple[int, int] | None = None
    while True:
        held = await _holder(zk)
        if held is not None and held != last:
            epoch, controller_id = held
            events.emit(
                "controller_seen",
                controller_id=controller_id,
                controller_epoch=epoch,
                implementation=implementation(controller_id),
            )
            last = held
        await asyncio.sleep(SAMPLE_S)


@contextlib.asynccontextmanager
async def watching(zk: AsyncZooKeeper, events: EventLog) -> AsyncIterator[None]:
    """Record every new holder of ``/controller`` while the body runs."""
    task = asyncio.create_task(_watch(zk, events), name="controller-watch")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def held_by(run_lines: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Implementation -> how many controller epochs of the run it held (as sampled)."""
    counts: dict[str, int] = {"ours": 0, "kafka": 0}
    for line in run_lines:
        if line.get("kind") == "controller_seen":
            counts[str(line["implementation"])] += 1
    return counts
