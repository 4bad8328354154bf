"""FindCoordinator: which broker coordinates a group or a transactional id (key types 0 and 1).

The coordinator of a key is the leader of its partition of the internal topic (``__consumer_offsets``
for groups, ``__transaction_state`` for transactional ids), the partition being Kafka's
``abs(hashCode) % partitions``. The topic is created the first time a key asks for it (answering
COORDINATOR_NOT_AVAILABLE meanwhile, which clients retry), as Kafka does; v4 answers many keys at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from broker.metadata_cache import MetadataCache
from broker.request_channel import Request
from protocol import ErrorCode

__all__ = ["CoordinatorKind", "FindCoordinatorApi"]

Body = dict[str, Any]
KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


@dataclass(frozen=True)
class CoordinatorKind:
    """What one key type is coordinated by."""

    topic: str
    partition_of: Callable[[str], int]
    create: Callable[[], Coroutine[Any, Any, None]]
    """Creates the internal topic (on the event loop)."""
    what: str
    """How an empty key is named in the error message ("group id")."""


class FindCoordinatorApi:
    def __init__(
        self,
        cache: MetadataCache,
        loop: Callable[[], asyncio.AbstractEventLoop],
        kinds: dict[int, CoordinatorKind],
    ) -> None:
        self.cache = cache
        self.loop = loop
        self.kinds = kinds
        self._creating: dict[str, Future[None]] = {}

    def handle(self, request: Request, body: Body) -> Body:
        version = request.header.api_version
        key_type = body.get("key_type", KEY_TYPE_GROUP)
        keys = body["coordinator_keys"] if version >= 4 else [body["key"]]
        found = [self._coordinator_for(request, key, key_type) for key in keys]
        if version >= 4:
            return {"throttle_time_ms": 0, "coordinators": found}
        only = found[0]
        return {
            "throttle_time_ms": 0,
            "error_code": only["error_code"],
            "error_message": only["error_message"],
            "node_id": only["node_id"],
            "host": only["host"],
            "port": only["port"],
        }

    def _coordinator_for(self, request: Request, key: str, key_type: int) -> Body:
        answer: Body = {"key": key, "node_id": -1, "host": "", "port": -1, "error_message": None}
        kind = self.kinds.get(key_type)
        if kind is None:
            return {
                **answer,
                "error_code": ErrorCode.INVALID_REQUEST,
                "error_message": f"key type {key_type}",
            }
        if not key:
            return {**answer, "error_code": ErrorCode.INVALID_REQUEST, "error_message": f"empty {kind.what}"}
        snapshot = self.cache.snapshot
        partitions = snapshot.topics.get(kind.topic)
        if partitions is None:
            self._create(kind)
            return {**answer, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
        state = partitions.get(kind.partition_of(key))
        broker = snapshot.brokers.get(state.leader) if state is not None else None
        endpoint = broker.endpoints.get(request.listener) if broker is not None else None
        if state is None or endpoint is None:
            return {**answer, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
        return {
            **answer,
            "error_code": ErrorCode.NONE,
            "node_id": state.leader,
            "host": endpoint[0],
            "port": endpoint[1],
        }

    def _create(self, kind: CoordinatorKind) -> None:
        """One creation per topic in flight at a time; its outcome shows in the next answer."""
        creating = self._creating.get(kind.topic)
        if creating is not None and not creating.done():
            return
        self._creating[kind.topic] = asyncio.run_coroutine_threadsafe(kind.create(), self.loop())
