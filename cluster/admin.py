"""Cluster administration through ZooKeeper, in Kafka's layout (what ``kafka-topics.sh --zookeeper`` does)."""

from __future__ import annotations

from zkstore import znodes
from zkstore.aio import AsyncZooKeeper


async def create_topic(zk: AsyncZooKeeper, topic: str, replicas: dict[int, tuple[int, ...]]) -> None:
    """Write the topic's assignment; the controller notices it and does the rest."""
    await zk.create(znodes.topic_path(topic), znodes.TopicAssignment(topic, replicas).encode(), makepath=True)
