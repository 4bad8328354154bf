"""Small builders for controller unit tests: brokers, topics and contexts without long literals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controller.context import ControllerContext, LiveBroker
from controller.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from zkstore.znodes import BrokerRegistration, Endpoint


def broker(broker_id: int, epoch: int, *, rack: str | None = None) -> LiveBroker:
    registration = BrokerRegistration(
        broker_id=broker_id,
        endpoints=(
            Endpoint("PLAINTEXT", f"broker-{broker_id}", 9092),
            Endpoint("CONTROL_PLANE", f"broker-{broker_id}", 9093),
        ),
        listener_security_protocol_map={"PLAINTEXT": "PLAINTEXT", "CONTROL_PLANE": "PLAINTEXT"},
        timestamp=0,
        rack=rack,
    )
    return LiveBroker(registration, epoch)


def context(
    epochs: Mapping[int, int],
    topics: Mapping[str, Sequence[Sequence[int]]] = {},
    *,
    controller_epoch: int = 3,
) -> ControllerContext:
    """Brokers by id -> epoch; topics by name -> replica lists; leaders are the first live replicas."""
    ctx = ControllerContext(controller_id=100, epoch=controller_epoch)
    ctx.brokers = {b: broker(b, e) for b, e in epochs.items()}
    for topic, partitions in topics.items():
        ctx.assignments[topic] = {p: tuple(r) for p, r in enumerate(partitions)}
        for p, replicas in enumerate(partitions):
            live = tuple(r for r in replicas if r in ctx.brokers)
            leader = live[0] if live else -1
            state = LeaderAndIsr(
                leader=leader, leader_epoch=1, isr=live or tuple(replicas[:1]), partition_epoch=4
            )
            ctx.leadership[TopicPartition(topic, p)] = LeaderIsrAndControllerEpoch(state, controller_epoch)
    return ctx
