"""A controller takeover seen from outside: cause it, read its election, count the ack brokers' answers.

Nothing here reads a controller's own log, so ``bench.failover`` times our controller and
``bench.kafka_anchor`` Apache Kafka's the same way: from the election's commit (``/controller_epoch``'s
mtime) to the last LeaderAndIsr or UpdateMetadata of that epoch the ack brokers answered.
"""

from __future__ import annotations

from typing import Any

from bench.ack_brokers import merge_progress
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper

Sent = dict[int, dict[str, list[int]]]
"""Control requests of one controller epoch, per broker and API: the partitions each carried."""

QUIET_S = 0.5
"""Silence (nothing logged, sent or answered) that, with every request answered, means the controller
has nothing queued."""

ACK_APIS = {"LeaderAndIsr": "LEADER_AND_ISR", "UpdateMetadata": "UPDATE_METADATA"}
"""Our event logs' API names -> the ack brokers'."""


async def delete_controller(connect: str) -> None:
    """Delete ``/controller``: the controller holding it resigns and runs for election again."""
    zk = AsyncZooKeeper(connect)
    await zk.start()
    try:
        await zk.delete(znodes.CONTROLLER)
    finally:
        await zk.close()


async def last_election(connect: str) -> tuple[int, float]:
    """The latest controller election in ``connect``'s chroot: its epoch and when ZooKeeper committed
    it (``/controller_epoch``'s mtime, in wall-clock seconds). Kafka's controller and ours both bump
    ``/controller_epoch`` in the multi-op that creates ``/controller``."""
    zk = AsyncZooKeeper(connect)
    await zk.start()
    try:
        data, stat = await zk.get(znodes.CONTROLLER_EPOCH)
    finally:
        await zk.close()
    epoch = znodes.decode_controller_epoch(data, znodes.CONTROLLER_EPOCH)
    assert epoch is not None, data
    return epoch, stat.mtime / 1000


def acknowledged(
    progress: dict[str, Any],
    epoch: int,
    brokers: tuple[int, ...],
    sent: Sent,
    partitions: int,
    elected_at: float,
) -> dict[str, Any]:
    """One takeover as the ack brokers saw it: from ``elected_at`` to their last answer of a
    LeaderAndIsr or UpdateMetadata of ``epoch``, and what those answered requests carried (``sent``:
    the controller's record of them, matched by count per broker and API).

    ``acked.leader_and_isr_partitions`` is every partition state of every simulated broker's
    LeaderAndIsr (RF x partitions when each replica was told); ``update_metadata_full_brokers`` counts
    the brokers that answered an UpdateMetadata carrying all ``partitions``. A request the controller
    sent but no broker answered makes ``unanswered`` non-zero."""
    answers = merge_progress(progress, epoch)
    last = [at for b in brokers for api, (_, at) in answers.get(b, {}).items() if api in ACK_APIS.values()]
    counts = {
        api: sum(int(answers.get(b, {}).get(wire, [0])[0]) for b in brokers) for api, wire in ACK_APIS.items()
    }
    unanswered = sum(
        len(sent.get(b, {}).get(api, [])) - int(answers.get(b, {}).get(wire, [0])[0])
        for b in brokers
        for api, wire in ACK_APIS.items()
    )
    return {
        "elected_to_last_ack_s": round(max(last) - elected_at, 3) if last else None,
        "acked": {
            "requests": counts,
            "unanswered": unanswered,
            "brokers": sum(1 for b in brokers if answers.get(b)),
            "leader_and_isr_partitions": sum(sum(sent.get(b, {}).get("LeaderAndIsr", [])) for b in brokers),
            "update_metadata_full_brokers": sum(
                1 for b in brokers if partitions in sent.get(b, {}).get("UpdateMetadata", [])
            ),
        },
    }
