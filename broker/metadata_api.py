"""ApiVersions and Metadata: how clients discover what this broker speaks and where partitions live.

Metadata answers from the metadata cache with the endpoints of the listener the request came in on
(Kafka's rule, so clients stay on the network they used). A broker whose cache is still cold lists
itself and answers LEADER_NOT_AVAILABLE for the topics asked, so a client retries instead of
waiting on an empty cluster.

Each topic entry is encoded as soon as it is built, with a checkpoint between topics: a response
for thousands of partitions then never holds the GIL for longer than one topic takes while a
control request waits (KIP-291 in one interpreter), and no tree of dicts for the whole response is
ever built.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from broker.apis import api_versions_entries
from broker.group.config import OFFSETS_TOPIC
from broker.metadata_cache import MetadataCache, Snapshot
from broker.request_channel import Request
from protocol import DEFAULT_DIALECT, ApiKey, Encoded, ErrorCode, WireDialect, message_codec
from protocol.messages.metadata import AUTHORIZED_OPERATIONS_OMITTED

INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC})
"""Flagged internal so consumers' pattern subscriptions leave them out, as in Kafka."""


def admin_node(snapshot: Snapshot, own_id: int) -> int:
    """The ``controller_id`` clients are told: the controller when UpdateMetadata lists it among the live
    brokers (Kafka 3.9's wire, where it serves the Admin API as Kafka's controller broker does), else
    the lowest live broker id (this broker while the cache is cold). Clients send the requests Kafka
    serves on its controller broker (InitProducerId for kafkajs, admin requests) there; a controller
    on the seed's wire is a separate daemon that speaks no client API, and every broker serves those
    requests, so a broker must be named, and the same one by all."""
    if snapshot.controller_id in snapshot.brokers:
        return snapshot.controller_id
    return min(snapshot.brokers, default=own_id)


class MetadataApis:
    def __init__(
        self,
        broker_id: int,
        cache: MetadataCache,
        own_endpoints: Callable[[], dict[str, tuple[str, int]]],
        cluster_id: Callable[[], str | None],
        served: Callable[[], Collection[int]],
        checkpoint: Callable[[], None] | None = None,
        auto_create: Callable[[str], ErrorCode] | None = None,
        dialect: WireDialect = DEFAULT_DIALECT,
    ) -> None:
        self.broker_id = broker_id
        self.dialect = dialect
        """The broker's wire dialect: ApiVersions lists the control-plane versions read in it."""
        self.cache = cache
        self.own_endpoints = own_endpoints
        self.cluster_id = cluster_id
        self.served = served
        self.auto_create = auto_create
        """Creates an unknown topic a request names (auto.create.topics.enable) and returns the error
        to answer meanwhile; None: never."""
        self.checkpoint = checkpoint or (lambda: None)
        """Called between topics: lets a control request in flight go first (KIP-291 in one interpreter)."""

    def api_versions(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "error_code": ErrorCode.NONE,
            "api_keys": api_versions_entries(self.served(), self.dialect),
            "throttle_time_ms": 0,
        }

    def metadata(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        snapshot = self.cache.snapshot
        listener = request.listener
        version = request.header.api_version
        cold = not snapshot.brokers
        requested = body["topics"]
        if requested is None:
            listable = request.describable
            names = sorted(n for n in snapshot.topics if listable is None or listable(n))
        else:
            names = [t["name"] for t in requested]
        # v1-v3 have no such field: Kafka lets them create topics
        create = requested is not None and not cold and body.get("allow_auto_topic_creation", True)
        encode = message_codec(ApiKey.METADATA, version, "response").element_encoder("topics")
        topics: list[Encoded] = []
        for name in names:
            self.checkpoint()
            topic = self._topic(snapshot, name, version, cold)
            if create and name not in snapshot.topics and self.auto_create is not None:
                topic["error_code"] = self.auto_create(name)
            topics.append(encode(topic))
        response = {
            "throttle_time_ms": 0,
            "brokers": self._brokers(snapshot, listener, cold),
            "cluster_id": self.cluster_id(),
            "controller_id": admin_node(snapshot, self.broker_id),
            "topics": topics,
        }
        if version >= 8:  # authorization is not implemented: Kafka's "not requested" value
            response["cluster_authorized_operations"] = AUTHORIZED_OPERATIONS_OMITTED
        return response

    def _brokers(self, snapshot: Snapshot, listener: str, cold: bool) -> list[dict[str, Any]]:
        if cold:
            host, port = self.own_endpoints()[listener]
            return [{"node_id": self.broker_id, "host": host, "port": port, "rack": None}]
        out = []
        for broker_id, broker in sorted(snapshot.brokers.items()):
            endpoint = broker.endpoints.get(listener)
            if endpoint is not None:
                out.append(
                    {"node_id": broker_id, "host": endpoint[0], "port": endpoint[1], "rack": broker.rack}
                )
        return out

    def _topic(self, snapshot: Snapshot, name: str, version: int, cold: bool) -> dict[str, Any]:
        topic: dict[str, Any] = {
            "error_code": ErrorCode.NONE,
            "name": name,
            "is_internal": name in INTERNAL_TOPICS,
        }
        if version >= 8:
            topic["topic_authorized_operations"] = AUTHORIZED_OPERATIONS_OMITTED
        partitions = snapshot.topics.get(name)
        if partitions is None:
            unknown = ErrorCode.LEADER_NOT_AVAILABLE if cold else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            topic["error_code"] = unknown
            topic["partitions"] = []
            return topic
        entries = []
        for index, state in sorted(partitions.items()):
            alive = state.leader in snapshot.brokers
            entries.append(
                {
                    "error_code": ErrorCode.NONE if alive else ErrorCode.LEADER_NOT_AVAILABLE,
                    "partition_index": index,
                    "leader_id": state.leader if alive else -1,
                    "leader_epoch": state.leader_epoch,
                    "replica_nodes": list(state.replicas),
                    "isr_nodes": list(state.isr),
                    "offline_replicas": list(state.offline_replicas),
                }
            )
        topic["partitions"] = entries
        return topic
