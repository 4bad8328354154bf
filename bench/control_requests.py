"""The controller's side of the control-latency benchmark: its requests, and the probe that times them.

The probe sends one control request every ``interval`` over one persistent connection, one at a time
as a controller does, alternating LeaderAndIsr (the probe partition, leader epoch rising) and a small
UpdateMetadata, and keeps a :class:`Sample` of each round trip. The requests are built for a
:class:`~protocol.ibp.ControlWire`: the seeds' LeaderAndIsr v5 and UpdateMetadata v7 by default
(``bench.control_latency``), Apache Kafka 3.9's v7 and v8 for ``bench.kafka_control_latency``.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
import uuid
from dataclasses import dataclass
from typing import Any

from bench.control_settings import (
    BROKER_ID,
    CONTROLLER_EPOCH,
    CONTROLLER_ID,
    PROBE_TIMEOUT_S,
    PROBE_TOPIC,
    PROBE_TOPIC_ID,
)
from network.connection import KafkaConnection
from protocol import (
    PER_BROKER_EPOCH_VERSIONS,
    ApiKey,
    ErrorCode,
    WireDialect,
    epoch_field,
    uses_max_broker_epoch,
)
from protocol.ibp import DEFAULT_IBP, ControlWire, control_wire
from protocol.messages.update_metadata import UNKNOWN_TYPE
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.election import try_elect

__all__ = [
    "SEED_WIRE",
    "ProbeRequests",
    "Sample",
    "elect",
    "leader_and_isr",
    "live_brokers",
    "probe",
    "probe_partition",
    "topic_id",
    "update_metadata",
]

SEED_WIRE = control_wire(DEFAULT_IBP)
"""The seeds' LeaderAndIsr v5 and UpdateMetadata v7 (``max_broker_epoch``): the builders' default."""


def live_brokers(count: int, own: dict[str, tuple[str, int]]) -> list[dict[str, Any]]:
    """``count`` brokers with PLAINTEXT and CONTROLLER endpoints; the broker under test has its real ones."""
    brokers = []
    for b in range(count):
        if b == BROKER_ID:
            endpoints = [
                {"port": port, "host": host, "listener": name, "security_protocol": 0}
                for name, (host, port) in sorted(own.items())
            ]
        else:
            endpoints = [
                {"port": port, "host": f"broker-{b}.kafka.local", "listener": name, "security_protocol": 0}
                for port, name in ((9092, "PLAINTEXT"), (9093, "CONTROLLER"))
            ]
        brokers.append({"id": b, "endpoints": endpoints, "rack": f"rack-{b % 3}"})
    return brokers


async def elect(zk: AsyncZooKeeper) -> None:
    """Take ``/controller`` (ephemeral, ``zk``'s session) at epoch 1 as a controller daemon would, so the
    broker confirms that epoch in ZooKeeper, and a Kafka broker's own KafkaController, started after,
    finds the seat taken and stays passive."""
    registration = znodes.ControllerRegistration(CONTROLLER_ID, int(time.time() * 1000))
    token = await try_elect(zk, CONTROLLER_ID, registration.encode())
    if token is None or token.epoch != CONTROLLER_EPOCH:
        raise RuntimeError(f"the benchmark could not become controller with epoch {CONTROLLER_EPOCH}")


def kafka_layout(api: ApiKey, version: int, dialect: WireDialect) -> int:
    """The Apache Kafka layout a request version is written in: a seed variant is Kafka's
    per-broker-epoch layout with its epoch renamed, so its fields are that version's."""
    return PER_BROKER_EPOCH_VERSIONS[api] if uses_max_broker_epoch(api, version, dialect) else version


def topic_id(name: str) -> uuid.UUID:
    """A topic's id, the same in every request: the probe topic's fixed one, else one from its name."""
    return PROBE_TOPIC_ID if name == PROBE_TOPIC else uuid.uuid5(uuid.NAMESPACE_URL, name)


def probe_partition(leader_epoch: int) -> dict[str, Any]:
    """What LeaderAndIsr's and UpdateMetadata's states of the probe partition share: led by the broker
    under test, alone in its ISR, at ``leader_epoch``."""
    return {
        "partition_index": 0,
        "controller_epoch": CONTROLLER_EPOCH,
        "leader": BROKER_ID,
        "leader_epoch": leader_epoch,
        "isr": [BROKER_ID],
    }


def update_metadata(
    states: list[dict[str, Any]],
    brokers: list[dict[str, Any]],
    broker_epoch: int,
    wire: ControlWire = SEED_WIRE,
) -> dict[str, Any]:
    """UpdateMetadata in ``wire``'s version, with the fields that version has: from v7 each topic's id
    (:func:`topic_id`), from v8 ``is_kraft_controller`` and ``type`` as a ZooKeeper-mode controller
    sends them."""
    layout = kafka_layout(ApiKey.UPDATE_METADATA, wire.update_metadata, wire.dialect)
    if layout >= 7:
        states = [{**t, "topic_id": topic_id(t["topic_name"])} for t in states]
    body: dict[str, Any] = {
        "controller_id": CONTROLLER_ID,
        "controller_epoch": CONTROLLER_EPOCH,
        epoch_field(ApiKey.UPDATE_METADATA, wire.update_metadata, wire.dialect): broker_epoch,
        "topic_states": states,
        "live_brokers": brokers,
    }
    if layout >= 8:
        body |= {"is_kraft_controller": False, "type": UNKNOWN_TYPE}
    return body


def leader_and_isr(
    leader_epoch: int, host: str, port: int, broker_epoch: int, wire: ControlWire = SEED_WIRE
) -> dict[str, Any]:
    """Leadership of the probe partition for this broker with a newer leader epoch, so it is applied,
    in ``wire``'s version with the fields that version has (v3 reassignment, v5 topic id and ``type``,
    v6 recovery state, v7 ``is_kraft_controller``)."""
    layout = kafka_layout(ApiKey.LEADER_AND_ISR, wire.leader_and_isr, wire.dialect)
    state = {**probe_partition(leader_epoch), "partition_epoch": leader_epoch, "replicas": [BROKER_ID]}
    if layout >= 3:
        state |= {"adding_replicas": [], "removing_replicas": []}
    state["is_new"] = leader_epoch == 0
    if layout >= 6:
        state["leader_recovery_state"] = 0
    topic: dict[str, Any] = {"topic_name": PROBE_TOPIC, "partition_states": [state]}
    body: dict[str, Any] = {
        "controller_id": CONTROLLER_ID,
        "controller_epoch": CONTROLLER_EPOCH,
        epoch_field(ApiKey.LEADER_AND_ISR, wire.leader_and_isr, wire.dialect): broker_epoch,
        "topic_states": [topic],
        "live_leaders": [{"broker_id": BROKER_ID, "host_name": host, "port": port}],
    }
    if layout >= 5:
        topic["topic_id"] = topic_id(PROBE_TOPIC)
        body["type"] = UNKNOWN_TYPE
    if layout >= 7:
        body["is_kraft_controller"] = False
    return body


class ProbeRequests:
    """LeaderAndIsr and a small UpdateMetadata in ``wire``'s versions, alternately; the leader epoch
    keeps rising."""

    def __init__(
        self,
        small_update: dict[str, Any],
        leader: tuple[str, int],
        broker_epoch: int,
        wire: ControlWire = SEED_WIRE,
    ) -> None:
        self.small_update = small_update
        self.leader = leader
        self.broker_epoch = broker_epoch
        """The only live broker's epoch, hence the ``max_broker_epoch`` a controller would send."""
        self.wire = wire
        self.leader_epoch = 0
        self._turn = itertools.cycle((ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA))

    def update(self) -> dict[str, Any]:
        """The next UpdateMetadata: here always ``small_update``, which keeps the cache's size."""
        return self.small_update

    def next(self) -> tuple[ApiKey, int, dict[str, Any]]:
        api = next(self._turn)
        if api is ApiKey.UPDATE_METADATA:
            return api, self.wire.update_metadata, self.update()
        body = leader_and_isr(self.leader_epoch, *self.leader, self.broker_epoch, self.wire)
        self.leader_epoch += 1
        return api, self.wire.leader_and_isr, body


@dataclass
class Sample:
    api: str
    correlation_id: int
    round_trip_ms: float
    error: str
    queue_ms: float | None = None
    handle_ms: float | None = None


def response_error(response: dict[str, Any]) -> str:
    """The first error of a control response: its own, else a partition's (LeaderAndIsr v5+ groups
    them by topic)."""
    by_topic = [p for t in response.get("topics", []) for p in t["partition_errors"]]
    codes = [response["error_code"], *(p["error_code"] for p in response.get("partition_errors", by_topic))]
    return ErrorCode.name_of(next((c for c in codes if c), 0))


async def probe(
    connection: KafkaConnection, requests: ProbeRequests, duration_s: float, interval_s: float
) -> list[Sample]:
    """One request in flight at a time, as a controller sends; ticks missed while waiting are skipped."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    samples = []
    tick = 0
    while tick * interval_s < duration_s:
        delay = start + tick * interval_s - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        api, version, body = requests.next()
        correlation_id = connection.next_correlation_id
        began = time.perf_counter()
        _, response = await connection.send(
            api, version, body, timeout=PROBE_TIMEOUT_S, dialect=requests.wire.dialect
        )
        elapsed_ms = (time.perf_counter() - began) * 1000
        samples.append(Sample(api.name, correlation_id, elapsed_ms, response_error(response)))
        tick = max(tick + 1, math.ceil((loop.time() - start) / interval_s))
    return samples
