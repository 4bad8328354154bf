"""The control-latency benchmark's settings, and the identities and versions its requests carry.

``bench.control_latency`` and ``bench.tls`` share them: the benchmark plays controller 1001 at epoch 1
towards broker 1, with LeaderAndIsr v5, UpdateMetadata v7 and Metadata v1.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BROKER_ID",
    "CONTROLLER_EPOCH",
    "CONTROLLER_ID",
    "LEADER_AND_ISR_VERSION",
    "METADATA_VERSION",
    "PROBE_TIMEOUT_S",
    "PROBE_TOPIC",
    "UPDATE_METADATA_VERSION",
    "Settings",
]

BROKER_ID = 1
CONTROLLER_ID = 1001
CONTROLLER_EPOCH = 1
"""The benchmark plays the controller: it wins the election in a fresh ZooKeeper (epoch 1) as a
controller daemon would, so the broker confirms its epoch there (``controller.epoch.confirmation``)."""
LEADER_AND_ISR_VERSION = 5
UPDATE_METADATA_VERSION = 7
METADATA_VERSION = 1
PROBE_TOPIC = "control-latency-probe"
PROBE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Settings:
    """One run's sizes, load and timing, from the command line (``bench.tls`` fixes most of them)."""

    partitions: int
    brokers: int
    io_threads: int
    queued_max_requests: int
    connections: int
    pipeline_depth: int
    load_processes: int
    produce_connections: int
    """Of ``connections``, how many send Produce (acks=1, many small batches) instead of Metadata."""
    interval_ms: float
    duration_s: float
    saturation_timeout_s: float
    switch_interval_ms: float | None
    """If set, the broker runs with ``sys.setswitchinterval`` at this value (an experiment, not a config)."""
