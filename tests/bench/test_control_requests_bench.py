"""The control-latency benchmarks' requests in every wire they are sent in: each builder writes exactly
the fields its version has, so the bytes decode back to the body built (no field missing, none extra)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.codec import topic_states
from bench.control_requests import leader_and_isr, live_brokers, update_metadata
from bench.control_settings import PROBE_TOPIC, PROBE_TOPIC_ID
from protocol import ApiKey
from protocol.ibp import DEFAULT_IBP, MIXED_CLUSTER_IBP, ControlWire, control_wire
from protocol.registry import message_codec

WIRES = {ibp: control_wire(ibp) for ibp in ("2.2", DEFAULT_IBP, MIXED_CLUSTER_IBP)}


def round_trip(api: ApiKey, version: int, wire: ControlWire, body: dict[str, Any]) -> dict[str, Any]:
    codec = message_codec(api, version, "request", wire.dialect)
    return dict(codec.decode(codec.encode(body), 0))


@pytest.mark.parametrize("ibp", WIRES)
def test_each_builder_writes_the_fields_of_its_version(ibp: str) -> None:
    wire = WIRES[ibp]
    lai = leader_and_isr(3, "127.0.0.1", 9093, 41, wire)
    assert round_trip(ApiKey.LEADER_AND_ISR, wire.leader_and_isr, wire, lai) == lai
    states = topic_states(100, 3, {"zk_version": 0, "offline_replicas": []}, per_topic=50)
    um = update_metadata(states, live_brokers(3, {"PLAINTEXT": ("127.0.0.1", 9092)}), 41, wire)
    assert round_trip(ApiKey.UPDATE_METADATA, wire.update_metadata, wire, um) == um


def test_the_probe_topic_has_one_id_in_both_requests_of_kafkas_wire() -> None:
    wire = WIRES[MIXED_CLUSTER_IBP]
    [lai_topic] = leader_and_isr(0, "127.0.0.1", 9093, 41, wire)["topic_states"]
    probe_topic = {"topic_name": PROBE_TOPIC, "partition_states": []}
    [um_topic] = update_metadata([probe_topic], [], 41, wire)["topic_states"]
    assert lai_topic["topic_id"] == um_topic["topic_id"] == PROBE_TOPIC_ID
