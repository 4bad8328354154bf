"""The controller's side of the control-latency benchmark: its requests, and the probe that times them.

The probe sends one control request every ``interval`` over one persistent connection, one at a time
as a controller does, alternating LeaderAndIsr v5 (the probe partition, leader epoch rising) and a small
UpdateMetadata v7, and keeps a :class:`Sample` of each round trip.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from dataclasses import dataclass
from typing import Any

from bench.control_settings import (
    BROKER_ID,
    CONTROLLER_EPOCH,
    CONTROLLER_ID,
    LEADER_AND_ISR_VERSION,
    PROBE_TIMEOUT_S,
    PROBE_TOPIC,
    UPDATE_METADATA_VERSION,
)
from network.connection import KafkaConnection
from protocol import DEFAULT_DIALECT, ApiKey, ErrorCode, epoch_field

__all__ = ["ProbeRequests", "Sample", "leader_and_isr", "live_brokers", "probe", "update_metadata"]


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


def update_metadata(
    states: list[dict[str, Any]], brokers: list[dict[str, Any]], broker_epoch: int
) -> dict[str, Any]:
    return {
        "controller_id": CONTROLLER_ID,
        "controller_epoch": CONTROLLER_EPOCH,
        epoch_field(ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION): broker_epoch,
        "topic_states": states,
        "live_brokers": brokers,
    }


def leader_and_isr(leader_epoch: int, host: str, port: int, broker_epoch: int) -> dict[str, Any]:
    """Leadership of the probe partition for this broker with a newer leader epoch, so it is applied."""
    state = {
        "partition_index": 0,
        "controller_epoch": CONTROLLER_EPOCH,
        "leader": BROKER_ID,
        "leader_epoch": leader_epoch,
        "isr": [BROKER_ID],
        "partition_epoch": leader_epoch,
        "replicas": [BROKER_ID],
        "is_new": leader_epoch == 0,
    }
    return {
        "controller_id": CONTROLLER_ID,
        "controller_epoch": CONTROLLER_EPOCH,
        epoch_field(ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION): broker_epoch,
        "topic_states": [{"topic_name": PROBE_TOPIC, "partition_states": [state]}],
        "live_leaders": [{"broker_id": BROKER_ID, "host_name": host, "port": port}],
    }


class ProbeRequests:
    """LeaderAndIsr v5 and a small UpdateMetadata v7, alternately; the leader epoch keeps rising."""

    dialect = DEFAULT_DIALECT
    """The layouts ``next`` names its versions in (the seed's, here)."""

    def __init__(self, small_update: dict[str, Any], leader: tuple[str, int], broker_epoch: int) -> None:
        self.small_update = small_update
        self.leader = leader
        self.broker_epoch = broker_epoch
        """The only live broker's epoch, hence the ``max_broker_epoch`` a controller would send."""
        self.leader_epoch = 0
        self._turn = itertools.cycle((ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA))

    def next(self) -> tuple[ApiKey, int, dict[str, Any]]:
        api = next(self._turn)
        if api is ApiKey.UPDATE_METADATA:
            return api, UPDATE_METADATA_VERSION, self.small_update
        body = leader_and_isr(self.leader_epoch, *self.leader, self.broker_epoch)
        self.leader_epoch += 1
        return api, LEADER_AND_ISR_VERSION, body


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
            api, version, body, timeout=PROBE_TIMEOUT_S, dialect=requests.dialect
        )
        elapsed_ms = (time.perf_counter() - began) * 1000
        samples.append(Sample(api.name, correlation_id, elapsed_ms, response_error(response)))
        tick = max(tick + 1, math.ceil((loop.time() - start) / interval_s))
    return samples
