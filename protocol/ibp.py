"""Which control-plane wire an ``inter.broker.protocol.version`` gives: the one place it is decided.

Both daemons read it: the controller for the versions it sends, the broker for the dialect it reads
control requests in and the versions it sends the controller. Three worlds, by IBP:

- **2.2 to 2.3-IV1**: Apache Kafka's per-broker-epoch versions (KIP-380), which Kafka 3.9 still
  speaks: LeaderAndIsr v2, UpdateMetadata v5, StopReplica v1.
- **2.3-IV2 to 3.3** (the default, ``2.3-IV2``): the seeds' world. Seed 002's LeaderAndIsr v5,
  UpdateMetadata v7 and StopReplica v4 carry ``max_broker_epoch``; their numbers are Kafka's for
  other layouts, so this range reads them in the SEED dialect. Apache Kafka's 2.4 to 3.3 send other
  versions; the seeds win here, as ``docs/protocol.md`` says.
- **3.4 to 3.9**: Apache Kafka 3.9's wire, for clusters shared with Kafka brokers: LeaderAndIsr v7,
  UpdateMetadata v8, StopReplica v4 in Kafka's layout, AlterPartition v3 from 3.5-IV1 (KIP-903's broker
  epochs in the ISR), ControlledShutdown v3. ``3.9`` is the value a mixed cluster uses.

Later versions have no ZooKeeper mode and are refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from protocol.api import WireDialect

__all__ = ["DEFAULT_IBP", "MIXED_CLUSTER_IBP", "ControlWire", "control_wire"]

DEFAULT_IBP = "2.3-IV2"
"""The seeds' world: the cached UpdateMetadata with ``max_broker_epoch`` (seed 002)."""
MIXED_CLUSTER_IBP = "3.9"
"""What a cluster shared with Apache Kafka 3.9 brokers sets on every node."""

_IBP = re.compile(r"(?P<major>\d+)\.(?P<minor>\d+)(?:\.\d+)?(?:-IV(?P<iv>\d+))?")


@dataclass(frozen=True, slots=True)
class ControlWire:
    """The control-plane versions of one IBP, and the dialect control requests are read in."""

    dialect: WireDialect
    leader_and_isr: int
    update_metadata: int
    stop_replica: int
    alter_partition: int
    controlled_shutdown: int

    @property
    def max_broker_epoch(self) -> bool:
        """Whether control requests carry the cluster's ``max_broker_epoch`` (seed 002) instead of
        each broker's own epoch."""
        return self.dialect is WireDialect.SEED


PER_BROKER = ControlWire(WireDialect.KAFKA, 2, 5, 1, alter_partition=2, controlled_shutdown=2)
"""2.2 to 2.3-IV1. AlterPartition came with Kafka 2.7; this project's brokers send v2 to a controller of
theirs at every IBP instead of writing ISR change notifications."""
SEEDS = ControlWire(WireDialect.SEED, 5, 7, 4, alter_partition=2, controlled_shutdown=2)
KAFKA_3_4 = ControlWire(WireDialect.KAFKA, 7, 8, 4, alter_partition=2, controlled_shutdown=3)
KAFKA_3_9 = ControlWire(WireDialect.KAFKA, 7, 8, 4, alter_partition=3, controlled_shutdown=3)


def control_wire(ibp: str) -> ControlWire:
    """The wire of ``ibp`` (``2.2``, ``2.3-IV2``, ``3.9``, ``3.5-IV1``...); ValueError naming the reason."""
    match = _IBP.fullmatch(ibp.strip())
    if match is None:
        raise ValueError("expected a version such as 2.2, 2.3-IV2 or 3.9")
    release = (int(match["major"]), int(match["minor"]))
    iv = None if match["iv"] is None else int(match["iv"])
    if release < (2, 2):
        raise ValueError("broker epochs (KIP-380) need 2.2 or later")
    if release > (3, 9):
        raise ValueError("Apache Kafka has no ZooKeeper mode after 3.9")
    if release == (2, 2) or (release == (2, 3) and iv is not None and iv < 2):
        return PER_BROKER
    if release < (3, 4):
        return SEEDS
    kip_903 = release > (3, 5) or (release == (3, 5) and (iv is None or iv >= 1))
    return KAFKA_3_9 if kip_903 else KAFKA_3_4
