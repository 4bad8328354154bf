"""Write a cluster's ZooKeeper state fast, as a previous controller would have left it.

Benchmarks of failover and controlled shutdown need 10k-100k partitions in ZooKeeper before the
controller starts; creating them through the controller (one topic creation at a time) would measure
the wrong thing and take minutes. This writes, in 500-op multis pipelined on one session:

* ``/brokers/topics/T``: a v3 TopicAssignment with a topic id, RF replicas round-robin over the brokers;
* ``/brokers/topics/T/partitions``, ``.../partitions/P`` and ``.../partitions/P/state``: a LeaderIsrState
  with leader epoch 0, controller epoch 1 and the full replica set in sync;
* ``/controller_epoch`` = 1 when missing.

The leader is each partition's preferred (first) replica, or with ``leader=X`` broker X for every
partition it hosts. A chroot in the connect string is created first.

    .venv/bin/python -m bench.zk_populate --zookeeper HOST:PORT[/chroot] --partitions 100000
        --brokers 3 [--first-id 1] [--leader X] [--per-topic 100] [--replication-factor 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from kazoo.exceptions import NodeExistsError

from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.ops import Create, Op
from zkstore.znodes import LeaderIsrState, TopicAssignment

__all__ = ["Cluster", "Populated", "commit_pipelined", "ensure_chroot", "layout", "populate"]

BATCH_OPS = 500
IN_FLIGHT = 4
CONTROLLER_EPOCH = 1


@dataclass(frozen=True, slots=True)
class Cluster:
    """What to write: ``partitions`` spread over topics of ``per_topic``, replicas over ``brokers``."""

    partitions: int
    brokers: tuple[int, ...]
    replication_factor: int = 3
    per_topic: int = 100
    leader: int | None = None
    """Lead every partition this broker hosts; None: the preferred replica leads."""
    topic_prefix: str = "bench"

    def topic(self, index: int) -> str:
        return f"{self.topic_prefix}-{index:05d}"

    def replicas(self, index: int) -> tuple[int, ...]:
        """Partition number ``index`` of the cluster (over all topics), round-robin like Kafka's."""
        n = len(self.brokers)
        return tuple(self.brokers[(index + k) % n] for k in range(self.replication_factor))

    def leader_of(self, replicas: tuple[int, ...]) -> int:
        return self.leader if self.leader in replicas else replicas[0]


@dataclass(frozen=True, slots=True)
class Populated:
    topics: int
    partitions: int
    znodes: int
    seconds: float


def layout(cluster: Cluster) -> list[Op]:
    """Create ops, parents before children."""
    if cluster.replication_factor > len(cluster.brokers):
        raise ValueError(f"replication factor {cluster.replication_factor} > {len(cluster.brokers)} brokers")
    ops: list[Op] = []
    topics = -(-cluster.partitions // cluster.per_topic)
    for t in range(topics):
        name = cluster.topic(t)
        first = t * cluster.per_topic
        count = min(cluster.per_topic, cluster.partitions - first)
        assignment = {p: cluster.replicas(first + p) for p in range(count)}
        data = TopicAssignment(name, assignment, topic_id=znodes.new_topic_id()).encode()
        ops += [Create(znodes.topic_path(name), data), Create(znodes.partitions_path(name))]
        for p, replicas in assignment.items():
            state = LeaderIsrState(cluster.leader_of(replicas), 0, CONTROLLER_EPOCH, replicas)
            ops.append(Create(znodes.partition_path(name, p)))
            ops.append(Create(znodes.partition_state_path(name, p), state.encode()))
    return ops


async def commit_pipelined(zk: AsyncZooKeeper, ops: Sequence[Op], in_flight: int) -> None:
    """Multis of BATCH_OPS, ``in_flight`` at a time; a session's requests apply in order, parents first.
    Raises RuntimeError with the first failure."""
    pending: list[asyncio.Future[list[object]]] = []

    async def settle(done: asyncio.Future[list[object]]) -> None:
        failed = [r for r in await done if isinstance(r, Exception)]
        if failed:
            raise RuntimeError(f"writing ZooKeeper failed: {failed[0]!r}")

    for i in range(0, len(ops), BATCH_OPS):
        pending.append(asyncio.ensure_future(zk.multi(ops[i : i + BATCH_OPS])))
        if len(pending) >= in_flight:
            await settle(pending.pop(0))
    for done in pending:
        await settle(done)


async def populate(zk: AsyncZooKeeper, cluster: Cluster, *, in_flight: int = IN_FLIGHT) -> Populated:
    """Write ``cluster`` (its topics must not exist yet); ``/controller_epoch`` is created if missing."""
    started = time.perf_counter()
    await zk.ensure_path(znodes.BROKER_TOPICS)
    with contextlib.suppress(NodeExistsError):
        await zk.create(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(CONTROLLER_EPOCH))
    ops = layout(cluster)
    await commit_pipelined(zk, ops, in_flight)
    topics = -(-cluster.partitions // cluster.per_topic)
    return Populated(topics, cluster.partitions, len(ops), time.perf_counter() - started)


async def ensure_chroot(connect: str) -> None:
    """Create the chroot of ``host:port[,...]/chroot`` (kazoo does not), if there is one."""
    hosts, slash, chroot = connect.partition("/")
    if not slash or not chroot.strip("/"):
        return
    zk = AsyncZooKeeper(hosts)
    await zk.start()
    try:
        await zk.ensure_path("/" + chroot.strip("/"))
    finally:
        await zk.close()


async def _main(args: argparse.Namespace) -> None:
    cluster = Cluster(
        partitions=args.partitions,
        brokers=tuple(range(args.first_id, args.first_id + args.brokers)),
        replication_factor=args.replication_factor,
        per_topic=args.per_topic,
        leader=args.leader,
        topic_prefix=args.topic_prefix,
    )
    await ensure_chroot(args.zookeeper)
    zk = AsyncZooKeeper(args.zookeeper)
    await zk.start()
    try:
        done = await populate(zk, cluster)
    finally:
        await zk.close()
    print(
        json.dumps(
            {
                "topics": done.topics,
                "partitions": done.partitions,
                "znodes": done.znodes,
                "seconds": round(done.seconds, 3),
            }
        )
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.zk_populate", description=__doc__.split("\n")[0])
    parser.add_argument("--zookeeper", required=True, help="ZooKeeper connect string (a chroot allowed)")
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--brokers", type=int, required=True, help="broker ids first-id .. first-id+N-1")
    parser.add_argument("--first-id", type=int, default=1)
    parser.add_argument("--leader", type=int, help="this broker leads every partition it hosts")
    parser.add_argument("--per-topic", type=int, default=100, help="partitions per topic")
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument("--topic-prefix", default="bench")
    args = parser.parse_args(argv)
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
