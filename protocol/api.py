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
    API_VERSIONS = 18
    OFFSET_FOR_LEADER_EPOCH = 23
    ALTER_PARTITION = 56


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
