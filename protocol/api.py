"""API keys, the two wire dialects, and the per-API description (versions, flexibility, schemas) the
codec dispatches on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, IntEnum

from construct import Construct


class ApiKey(IntEnum):
    """Kafka's API keys for the requests this project speaks."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    ALTER_PARTITION = 56
    DESCRIBE_CLUSTER = 60
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67


CONTROL_APIS = frozenset({ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA})
"""The requests only a controller sends; KIP-291 gives them a listener and queue of their own."""

UNKNOWN_BROKER_EPOCH = -1
"""KIP-380's "no epoch": what a sender that does not know the broker's epoch puts in ``broker_epoch``."""

LEADER_DURING_DELETE = -2
"""The leader id an UpdateMetadata partition state carries to make brokers forget a partition being
deleted (Kafka's LeaderAndIsr.LeaderDuringDelete)."""


class WireDialect(Enum):
    """Which layout a control-plane version number names: Apache Kafka's, or the seed's where it has one.

    Seed 002 numbers its max-broker-epoch variants LeaderAndIsr v5, UpdateMetadata v7 and StopReplica
    v4, numbers Apache Kafka uses for other layouts, so a version number alone is ambiguous. Every codec
    entry point that maps (API key, version) to a schema takes the dialect; versions defined by Kafka
    alone read the same in both.
    """

    KAFKA = "kafka"
    """Apache Kafka's layout for every version number; the seed's numbers Kafka gives another layout
    that this codec does not implement (LeaderAndIsr v5, UpdateMetadata v7) are unsupported."""
    SEED = "seed"
    """The seed's layout for the numbers it defines (LeaderAndIsr v5, UpdateMetadata v7, StopReplica
    v4); Apache Kafka's for every other version implemented."""


DEFAULT_DIALECT = WireDialect.SEED
"""The dialect of callers that name none: the seed's, so LeaderAndIsr v5, UpdateMetadata v7 and
StopReplica v4 mean what they meant before the dialects were named."""


@dataclass(frozen=True, slots=True)
class SeedLayouts:
    """The seed's own layouts of an API: the versions it defines (never flexible) and their schemas."""

    versions: tuple[int, ...]
    request: Callable[[int], Construct]
    response: Callable[[int], Construct]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One API: Apache Kafka's versions implemented, which of them are flexible, a schema per version,
    and the seed's own layouts where it defines some (``seed``).

    ``request`` and ``response`` map one of ``versions`` to its construct schema as Kafka's JSON spec
    declares it; they are called once per version (the registry caches them). In the SEED dialect the
    seed's versions replace Kafka's of the same number (``versions_in``).
    """

    key: ApiKey
    name: str
    versions: tuple[int, ...]
    """Apache Kafka's layouts implemented: the KAFKA dialect's versions."""
    flexible_versions: frozenset[int]
    """Those of ``versions`` that are flexible (KIP-482)."""
    request: Callable[[int], Construct]
    response: Callable[[int], Construct]
    seed: SeedLayouts | None = None

    def is_seed_layout(self, version: int, dialect: WireDialect) -> bool:
        """Whether ``version`` names the seed's layout in ``dialect``."""
        return dialect is WireDialect.SEED and self.seed is not None and version in self.seed.versions

    def versions_in(self, dialect: WireDialect) -> tuple[int, ...]:
        """The versions implemented in ``dialect``, ascending."""
        if dialect is WireDialect.KAFKA or self.seed is None:
            return self.versions
        return tuple(sorted({*self.versions, *self.seed.versions}))

    def is_flexible(self, version: int, dialect: WireDialect) -> bool:
        """Whether ``version`` is flexible in ``dialect`` (the seed's layouts never are)."""
        return version in self.flexible_versions and not self.is_seed_layout(version, dialect)

    def schema(self, version: int, kind: str, dialect: WireDialect) -> Construct:
        """The request (``kind`` "request") or response schema of ``version`` in ``dialect``."""
        if self.seed is not None and self.is_seed_layout(version, dialect):
            return (self.seed.request if kind == "request" else self.seed.response)(version)
        return (self.request if kind == "request" else self.response)(version)
