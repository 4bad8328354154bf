"""API keys and the per-API description (versions, flexibility, schemas) the codec dispatches on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

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


CONTROL_APIS = frozenset({ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA})
"""The requests only a controller sends; KIP-291 gives them a listener and queue of their own."""

UNKNOWN_BROKER_EPOCH = -1
"""KIP-380's "no epoch": what a sender that does not know the broker's epoch puts in ``broker_epoch``."""

LEADER_DURING_DELETE = -2
"""The leader id an UpdateMetadata partition state carries to make brokers forget a partition being
deleted (Kafka's LeaderAndIsr.LeaderDuringDelete)."""


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One API: the versions implemented, which of them are flexible, and a schema per version.

    ``request`` and ``response`` map a version to its construct schema; they are called once per
    version (the registry caches them).
    """

    key: ApiKey
    name: str
    versions: tuple[int, ...]
    flexible_versions: frozenset[int]
    request: Callable[[int], Construct]
    response: Callable[[int], Construct]
