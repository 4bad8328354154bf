"""Turns state-machine decisions into per-broker LeaderAndIsr, UpdateMetadata and StopReplica requests.

Requests are collected per broker, then encoded once the batch is complete. With the seed 002
protocol every request carries the cluster's ``max_broker_epoch``, so the UpdateMetadata of a change is
the same for every broker: it is encoded once and the very same ``bytes`` object goes to every
destination. With KIP-380's per-broker protocol each broker's copy carries its own epoch and is
encoded separately, as Apache Kafka does.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from controller.context import ControllerContext
from controller.model import TopicPartition
from protocol import LEADER_DURING_DELETE, ApiKey, encode_request_body, epoch_field
from protocol.messages import MAX_BROKER_EPOCH_VERSIONS, PER_BROKER_EPOCH_VERSIONS

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
"""Kafka's security protocol ids, as UpdateMetadata endpoints carry them."""


class EpochProtocol(enum.Enum):
    """Which broker-epoch field the control requests carry (``inter.broker.protocol.version``)."""

    PER_BROKER = "per-broker"
    """KIP-380: LeaderAndIsr v2, UpdateMetadata v5, StopReplica v1, each with the target's epoch."""
    MAX_BROKER_EPOCH = "max-broker-epoch"
    """Seed 002: LeaderAndIsr v5, UpdateMetadata v7, StopReplica v4, all with the cluster maximum."""

    def version(self, api_key: ApiKey) -> int:
        table = (
            MAX_BROKER_EPOCH_VERSIONS if self is EpochProtocol.MAX_BROKER_EPOCH else PER_BROKER_EPOCH_VERSIONS
        )
        return table[api_key]


@dataclass(frozen=True, slots=True)
class OutgoingRequest:
    """One encoded request body for one broker; ``summary`` describes it for the event log."""

    broker_id: int
    api_key: ApiKey
    api_version: int
    body: bytes
    summary: dict[str, Any]


@dataclass
class RequestBatch:
    """Collects one decision's requests; ``build`` encodes them: LeaderAndIsr, UpdateMetadata, StopReplica."""

    context: ControllerContext
    protocol: EpochProtocol
    inter_broker_listener: str
    leader_and_isr: dict[int, dict[TopicPartition, dict[str, Any]]] = field(default_factory=dict)
    update_metadata_brokers: set[int] = field(default_factory=set)
    update_metadata_partitions: set[TopicPartition] = field(default_factory=set)
    update_metadata_everyone: bool = False
    """Send UpdateMetadata to every live or shutting-down broker known when the batch is built."""
    stop_replica: dict[int, dict[TopicPartition, bool]] = field(default_factory=dict)
    """Broker -> partition -> whether to delete it."""
    encodes: int = 0
    bytes_encoded: int = 0

    @property
    def empty(self) -> bool:
        return not (
            self.leader_and_isr
            or self.update_metadata_brokers
            or self.update_metadata_everyone
            or self.stop_replica
        )

    # -- collecting

    def add_leader_and_isr(
        self, broker_ids: Iterable[int], tp: TopicPartition, *, is_new: bool = False
    ) -> None:
        """LeaderAndIsr with ``tp``'s current leadership to ``broker_ids``; UpdateMetadata for it to all."""
        info = self.context.leadership[tp]
        state = info.leader_and_isr
        # One entry shared by every recipient (entries are never modified once added).
        entry = {
            "partition_index": tp.partition,
            "controller_epoch": info.controller_epoch,
            "leader": state.leader,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
            "partition_epoch": state.partition_epoch,
            "replicas": list(self.context.replicas(tp)),
            "is_new": is_new,
        }
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            per_broker = self.leader_and_isr.setdefault(broker_id, {})
            previous = per_broker.get(tp)
            per_broker[tp] = {**entry, "is_new": True} if previous and previous["is_new"] else entry
        self.update_metadata_everyone = True  # cheaper than adding every broker id per partition
        self.update_metadata_partitions.add(tp)

    def add_stop_replica(self, broker_ids: Iterable[int], tp: TopicPartition, *, delete: bool) -> None:
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            per_broker = self.stop_replica.setdefault(broker_id, {})
            per_broker[tp] = delete or per_broker.get(tp, False)

    def add_update_metadata(
        self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition] = ()
    ) -> None:
        """UpdateMetadata to ``broker_ids``; every recipient gets all partitions added to this batch."""
        self.update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        self.update_metadata_partitions.update(tp for tp in partitions if tp in self.context.leadership)

    # -- encoding

    def _encode(self, api_key: ApiKey, body: dict[str, Any]) -> bytes:
        raw = encode_request_body(api_key, self.protocol.version(api_key), body)
        self.encodes += 1
        self.bytes_encoded += len(raw)
        return raw

    def _common(self, api_key: ApiKey, broker_id: int) -> dict[str, Any]:
        """The fields every control request starts with; the epoch field is named by the API version."""
        if self.protocol is EpochProtocol.MAX_BROKER_EPOCH:
            epoch = self.context.max_broker_epoch
        else:
            epoch = self.context.brokers[broker_id].epoch
        return {
            "controller_id": self.context.controller_id,
            "controller_epoch": self.context.epoch,
            epoch_field(api_key, self.protocol.version(api_key)): epoch,
        }

    def build(self) -> list[OutgoingRequest]:
        """Encode everything collected, in Kafka's order, skipping brokers that are gone; then reset."""
        requests = [
            *self._build_leader_and_isr(),
            *self._build_update_metadata(),
            *self._build_stop_replica(),
        ]
        self.leader_and_isr, self.stop_replica = {}, {}
        self.update_metadata_brokers, self.update_metadata_partitions = set(), set()
        self.update_metadata_everyone = False
        return requests

    def _build_leader_and_isr(self) -> list[OutgoingRequest]:
        out = []
        brokers = self.context.brokers
        for broker_id, partitions in sorted(self.leader_and_isr.items()):
            if broker_id not in brokers:
                continue
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for tp, state in partitions.items():
                by_topic.setdefault(tp.topic, []).append(state)
            leaders = sorted({s["leader"] for s in partitions.values() if s["leader"] in brokers})
            live_leaders = []
            for leader in leaders:
                endpoint = brokers[leader].registration.endpoint(self.inter_broker_listener)
                if endpoint is not None:
                    live_leaders.append(
                        {"broker_id": leader, "host_name": endpoint.host, "port": endpoint.port}
                    )
            body = {
                **self._common(ApiKey.LEADER_AND_ISR, broker_id),
                "topic_states": [{"topic_name": t, "partition_states": s} for t, s in by_topic.items()],
                "live_leaders": live_leaders,
            }
            summary = {"partitions": len(partitions), **self._summary_epochs(body)}
            out.append(
                OutgoingRequest(
                    broker_id,
                    ApiKey.LEADER_AND_ISR,
                    self.protocol.version(ApiKey.LEADER_AND_ISR),
                    self._encode(ApiKey.LEADER_AND_ISR, body),
                    summary,
                )
            )
        return out

    def _live_brokers(self) -> list[dict[str, Any]]:
        out = []
        for broker_id, info in sorted(self.context.brokers.items()):
            registration = info.registration
            endpoints = [
                {
                    "port": e.port,
                    "host": e.host,
                    "listener": e.listener_name,
                    "security_protocol": SECURITY_PROTOCOL_IDS.get(registration.security_protocol(e), 0),
                }
                for e in registration.endpoints
            ]
            out.append({"id": broker_id, "endpoints": endpoints, "rack": registration.rack})
        return out

    def _update_metadata_topic_states(self) -> list[dict[str, Any]]:
        context = self.context
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp in sorted(self.update_metadata_partitions):
            info = context.leadership[tp]
            state = info.leader_and_isr
            deleting = context.is_topic_queued_for_deletion(tp.topic)
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "controller_epoch": info.controller_epoch,
                    "leader": LEADER_DURING_DELETE if deleting else state.leader,
                    "leader_epoch": state.leader_epoch,
                    "isr": list(state.isr),
                    "zk_version": state.partition_epoch,
                    "replicas": list(context.replicas(tp)),
                    "offline_replicas": list(context.offline_replicas(tp)),
                }
            )
        return [{"topic_name": t, "partition_states": s} for t, s in by_topic.items()]

    def _build_update_metadata(self) -> list[OutgoingRequest]:
        wanted = self.update_metadata_brokers
        if self.update_metadata_everyone:
            wanted = wanted | self.context.live_or_shutting_down_ids
        targets = sorted(b for b in wanted if b in self.context.brokers)
        if not targets:
            return []
        shared = {"topic_states": self._update_metadata_topic_states(), "live_brokers": self._live_brokers()}
        version = self.protocol.version(ApiKey.UPDATE_METADATA)
        partitions = len(self.update_metadata_partitions)
        if self.protocol is EpochProtocol.MAX_BROKER_EPOCH:
            body = {**self._common(ApiKey.UPDATE_METADATA, targets[0]), **shared}
            raw = self._encode(ApiKey.UPDATE_METADATA, body)  # once, for every broker
            summary = {"partitions": partitions, **self._summary_epochs(body)}
            return [OutgoingRequest(b, ApiKey.UPDATE_METADATA, version, raw, summary) for b in targets]
        out = []
        for broker_id in targets:
            body = {**self._common(ApiKey.UPDATE_METADATA, broker_id), **shared}
            summary = {"partitions": partitions, **self._summary_epochs(body)}
            out.append(
                OutgoingRequest(
                    broker_id,
                    ApiKey.UPDATE_METADATA,
                    version,
                    self._encode(ApiKey.UPDATE_METADATA, body),
                    summary,
                )
            )
        return out

    def _build_stop_replica(self) -> list[OutgoingRequest]:
        out = []
        version = self.protocol.version(ApiKey.STOP_REPLICA)
        for broker_id, partitions in sorted(self.stop_replica.items()):
            if broker_id not in self.context.brokers:
                continue
            for delete in (True, False):  # v1/v4 carry one delete flag per request
                chosen = sorted(tp for tp, d in partitions.items() if d is delete)
                if not chosen:
                    continue
                by_topic: dict[str, list[int]] = {}
                for tp in chosen:
                    by_topic.setdefault(tp.topic, []).append(tp.partition)
                body = {
                    **self._common(ApiKey.STOP_REPLICA, broker_id),
                    "delete_partitions": delete,
                    "topics": [{"name": t, "partition_indexes": p} for t, p in by_topic.items()],
                }
                summary = {"partitions": len(chosen), "delete": delete, **self._summary_epochs(body)}
                out.append(
                    OutgoingRequest(
                        broker_id,
                        ApiKey.STOP_REPLICA,
                        version,
                        self._encode(ApiKey.STOP_REPLICA, body),
                        summary,
                    )
                )
        return out

    @staticmethod
    def _summary_epochs(body: dict[str, Any]) -> dict[str, Any]:
        keys = ("controller_epoch", "broker_epoch", "max_broker_epoch")
        return {k: body[k] for k in keys if k in body}
