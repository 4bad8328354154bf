"""The control-latency benchmark's settings, and the identities and versions its requests carry.

``bench.control_latency``, ``bench.kafka_control_latency`` and ``bench.tls`` share them: the benchmark
plays controller 1001 at epoch 1 towards broker 1, with LeaderAndIsr v5, UpdateMetadata v7 and Metadata
v1 unless told another wire. The two control-latency benchmarks also share their probe and load options
(:func:`add_probe_options`, :func:`probe_settings`), so that the same flags mean the same in both.
"""

from __future__ import annotations

import argparse
import uuid
from dataclasses import dataclass

__all__ = [
    "BROKER_ID",
    "CONTROLLER_EPOCH",
    "CONTROLLER_ID",
    "LEADER_AND_ISR_VERSION",
    "METADATA_VERSION",
    "PROBE_TIMEOUT_S",
    "PROBE_TOPIC",
    "PROBE_TOPIC_ID",
    "UPDATE_METADATA_VERSION",
    "Settings",
    "add_probe_options",
    "probe_settings",
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
PROBE_TOPIC_ID = uuid.UUID("6b61666b-612d-6269-6e67-2d70726f6265")
"""The probe topic's id where a request version carries topic ids (Kafka's LeaderAndIsr v5+ and
UpdateMetadata v7+)."""
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


def add_probe_options(parser: argparse.ArgumentParser, brokers_under_test: str = "the broker's") -> None:
    """The probe's timing, the warm-up UpdateMetadata's size and the data-plane load, as
    :func:`probe_settings` reads them."""
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of probing per phase")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 5 s per phase")
    parser.add_argument("--interval-ms", type=float, default=50.0, help="time between probe requests")
    parser.add_argument("--partitions", type=int, default=20_000, help="in the warm-up UpdateMetadata")
    parser.add_argument("--brokers", type=int, default=50, help="live brokers in every UpdateMetadata")
    parser.add_argument("--io-threads", type=int, default=2, help=f"{brokers_under_test} num.io.threads")
    parser.add_argument("--queued-max-requests", type=int, default=50, help="the data-plane queue capacity")
    parser.add_argument("--connections", type=int, default=64, help="load connections (Metadata and Produce)")
    parser.add_argument("--pipeline-depth", type=int, default=3, help="requests written ahead per connection")
    parser.add_argument(
        "--load-processes", type=int, default=1, help="processes the connections are split over"
    )


def probe_settings(
    args: argparse.Namespace,
    *,
    produce_connections: int | None = None,
    saturation_timeout_s: float = 60.0,
    switch_interval_ms: float | None = None,
) -> Settings:
    """The settings of :func:`add_probe_options`' options: ``--quick`` probes 5 s per phase, and half the
    connections send Produce unless ``produce_connections`` says how many."""
    return Settings(
        partitions=args.partitions,
        brokers=args.brokers,
        io_threads=args.io_threads,
        queued_max_requests=args.queued_max_requests,
        connections=args.connections,
        pipeline_depth=args.pipeline_depth,
        load_processes=args.load_processes,
        produce_connections=args.connections // 2 if produce_connections is None else produce_connections,
        interval_ms=args.interval_ms,
        duration_s=5.0 if args.quick else args.duration,
        saturation_timeout_s=saturation_timeout_s,
        switch_interval_ms=switch_interval_ms,
    )
