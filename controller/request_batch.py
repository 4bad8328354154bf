"""Turns state-machine decisions into per-broker LeaderAndIsr, UpdateMetadata and StopReplica requests.

Requests are collected per broker, then encoded once the batch is complete, in the versions and the
dialect of the controller's wire (``protocol.ibp.control_wire`` of ``inter.broker.protocol.version``):

- the seeds' wire (seed 002): every request carries the cluster's ``max_broker_epoch``, so the
  UpdateMetadata of a change is the same for every broker: it is encoded once and the very same
  ``bytes`` object goes to every destination;
- KIP-380's per-broker wire (LeaderAndIsr v2, UpdateMetadata v5, StopReplica v1) and Apache Kafka
  3.9's (v7, v8, v4 in Kafka's layout): each broker's copy carries its own epoch and is encoded
  separately, as Apache Kafka does. Kafka 3.9's adds what its ZooKeeper-mode controller sends: topic
  ids, ``type`` UNKNOWN, ``is_kraft_controller`` false, adding/removing replicas and the leader
  recovery state, and StopReplica with a leader epoch and a delete flag per partition (-2 as the
  epoch for a topic being deleted), one request per broker.
"""

from __future__ import annotations

import enum
import functools
import operator
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from controller.context import ControllerContext
from controller.model import TopicPartition
from protocol import (
    DEFAULT_DIALECT,
    LEADER_DURING_DELETE,
    ApiKey,
    WireDialect,
    encode_request_body,
    epoch_field,
)
from protocol.ibp import PER_BROKER, SEEDS, ControlWire
from protocol.messages import MAX_BROKER_EPOCH_VERSIONS, PER_BROKER_EPOCH_VERSIONS
from protocol.registry import api_spec
from zkstore.znodes import Endpoint

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
"""Kafka's security protocol ids, as UpdateMetadata endpoints carry them."""

UPDATE_TYPE_UNKNOWN = 0
"""LeaderAndIsr v5+'s and UpdateMetadata v8's ``type`` as Kafka's ZooKeeper-mode controller sends it:
UNKNOWN. INCREMENTAL (1) and FULL (2) are set only by a KRaft controller migrating a cluster."""
EPOCH_DURING_DELETE = -2
"""StopReplica's leader epoch for a partition whose topic is being deleted (Kafka's EpochDuringDelete)."""
NO_EPOCH = -1
"""StopReplica's leader epoch for a partition without leadership (Kafka's NoEpoch)."""
NO_TOPIC_ID = uuid.UUID(int=0)

FIRST_TOPIC_ID = {ApiKey.LEADER_AND_ISR: 5, ApiKey.UPDATE_METADATA: 7}
FIRST_KRAFT_FLAG = {ApiKey.LEADER_AND_ISR: 7, ApiKey.UPDATE_METADATA: 8, ApiKey.STOP_REPLICA: 4}
FIRST_REASSIGNING_REPLICAS = 3
"""LeaderAndIsr's ``adding_replicas`` and ``removing_replicas``."""
FIRST_RECOVERY_STATE = 6
"""LeaderAndIsr's ``leader_recovery_state``."""
FIRST_PARTITION_STATES = 3
"""StopReplica's ``topic_states`` with a leader epoch and a delete flag per partition."""


class EpochProtocol(enum.Enum):
    """Which broker-epoch field the control requests carry (``inter.broker.protocol.version``)."""

    PER_BROKER = "per-broker"
    """KIP-380 and Kafka 3.9: each request carries the target's ``broker_epoch``."""
    MAX_BROKER_EPOCH = "max-broker-epoch"
    """Seed 002: LeaderAndIsr v5, UpdateMetadata v7, StopReplica v4, all with the cluster maximum."""

    @classmethod
    def of(cls, wire: ControlWire) -> EpochProtocol:
        return cls.MAX_BROKER_EPOCH if wire.max_broker_epoch else cls.PER_BROKER

    @property
    def wire(self) -> ControlWire:
        """The wire of this protocol's first IBP: the seeds' (2.3-IV2) or KIP-380's (2.2)."""
        return SEEDS if self is EpochProtocol.MAX_BROKER_EPOCH else PER_BROKER

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
    dialect: WireDialect = DEFAULT_DIALECT
    """The dialect the body is written in, and its response read in."""
    deleting: frozenset[TopicPartition] = frozenset()
    """StopReplica: the partitions it deletes, whose answers drive topic deletion."""


def deletion_errors(request: OutgoingRequest, response: dict[str, Any]) -> dict[TopicPartition, int]:
    """A StopReplica answer's error code for each partition the request deleted (the others' answers do
    not move topic deletion), in every layout: the response names topics in all of them."""
    answered = (
        (TopicPartition(p["topic_name"], p["partition_index"]), p["error_code"])
        for p in response.get("partition_errors", ())
    )
    return {tp: error for tp, error in answered if tp in request.deleting}


@dataclass(frozen=True, slots=True)
class StopReplicaState:
    """One partition of a StopReplica: delete its log or not, and the leader epoch it is fenced by."""

    delete: bool
    leader_epoch: int


def controller_as_live_broker(
    controller_id: int,
    endpoint: Endpoint,
    security_protocol: str,
    listener_names: Iterable[str],
    clients: Iterable[tuple[Endpoint, str]] = (),
) -> dict[str, Any]:
    """UpdateMetadata's entry listing a controller among the live brokers: its RPC endpoint under each of
    ``listener_names``, the names Kafka's brokers look the controller up by (the control-plane
    listener, else the inter-broker one, for AlterPartition; the inter-broker one for
    ControlledShutdown), and each client listener (endpoint, security protocol) under its own name."""
    names = dict.fromkeys(listener_names)
    listed = [(name, endpoint, security_protocol) for name in names]
    listed += [(ep.listener_name, ep, protocol) for ep, protocol in clients if ep.listener_name not in names]
    endpoints = [
        {
            "port": ep.port,
            "host": ep.host,
            "listener": name,
            "security_protocol": SECURITY_PROTOCOL_IDS.get(protocol, 0),
        }
        for name, ep, protocol in listed
    ]
    return {"id": controller_id, "endpoints": endpoints, "rack": None}


@dataclass
class RequestBatch:
    """Collects one decision's requests; ``build`` encodes them: LeaderAndIsr, UpdateMetadata, StopReplica."""

    context: ControllerContext
    wire: ControlWire
    inter_broker_listener: str
    controller_entry: dict[str, Any] | None = None
    """This controller among UpdateMetadata's live brokers (:func:`controller_as_live_broker`); None:
    not listed."""
    leader_and_isr: dict[int, dict[TopicPartition, dict[str, Any]]] = field(default_factory=dict)
    update_metadata_brokers: set[int] = field(default_factory=set)
    update_metadata_partitions: set[TopicPartition] = field(default_factory=set)
    update_metadata_everyone: bool = False
    """Send UpdateMetadata to every live or shutting-down broker known when the batch is built."""
    stop_replica: dict[int, dict[TopicPartition, StopReplicaState]] = field(default_factory=dict)
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

    # -- the wire

    def version(self, api_key: ApiKey) -> int:
        return _version(self.wire, api_key)

    def _kafka_since(self, api_key: ApiKey, first: int) -> bool:
        """Whether the wire sends Apache Kafka's layout of ``api_key`` at ``first`` or later."""
        return _kafka_since(self.wire, api_key, first)

    @functools.cached_property
    def _leader_and_isr_layout(self) -> tuple[bool, bool]:
        """Whether LeaderAndIsr's partitions carry adding/removing replicas, and a recovery state:
        asked once per batch, not once per partition."""
        return (
            self._kafka_since(ApiKey.LEADER_AND_ISR, FIRST_REASSIGNING_REPLICAS),
            self._kafka_since(ApiKey.LEADER_AND_ISR, FIRST_RECOVERY_STATE),
        )

    # -- collecting

    def add_leader_and_isr(
        self, broker_ids: Iterable[int], tp: TopicPartition, *, is_new: bool = False
    ) -> None:
        """LeaderAndIsr with ``tp``'s current leadership to ``broker_ids``; UpdateMetadata for it to all."""
        info = self.context.leadership[tp]
        state = info.leader_and_isr
        # One entry shared by every recipient (entries are never modified once added); the codec
        # takes tuples as arrays, so nothing is copied.
        entry: dict[str, Any] = {
            "partition_index": tp.partition,
            "controller_epoch": info.controller_epoch,
            "leader": state.leader,
            "leader_epoch": state.leader_epoch,
            "isr": state.isr,
            "partition_epoch": state.partition_epoch,
            "replicas": self.context.replicas(tp),
        }
        reassigning, recovery = self._leader_and_isr_layout
        if reassigning:
            moving = self.context.reassignments.get(tp)
            entry["adding_replicas"] = moving.adding if moving else ()
            entry["removing_replicas"] = moving.removing if moving else ()
        entry["is_new"] = is_new
        if recovery:
            entry["leader_recovery_state"] = int(state.leader_recovery_state)
        per_broker_entries = self.leader_and_isr
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            per_broker = per_broker_entries.get(broker_id)
            if per_broker is None:
                per_broker = per_broker_entries[broker_id] = {}
            previous = per_broker.get(tp)
            per_broker[tp] = {**entry, "is_new": True} if previous and previous["is_new"] else entry
        self.update_metadata_everyone = True  # cheaper than adding every broker id per partition
        self.update_metadata_partitions.add(tp)

    def add_stop_replica(self, broker_ids: Iterable[int], tp: TopicPartition, *, delete: bool) -> None:
        """StopReplica for ``tp``; its leader epoch is taken now, as Kafka's controller takes it."""
        epoch = self._stop_replica_epoch(tp)
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            per_broker = self.stop_replica.setdefault(broker_id, {})
            previous = per_broker.get(tp)
            per_broker[tp] = StopReplicaState(delete or (previous is not None and previous.delete), epoch)

    def _stop_replica_epoch(self, tp: TopicPartition) -> int:
        """-2 for a topic being deleted, else the leader epoch in force, else -1 (Kafka's rule)."""
        if self.context.is_topic_queued_for_deletion(tp.topic):
            return EPOCH_DURING_DELETE
        info = self.context.leadership.get(tp)
        return info.leader_and_isr.leader_epoch if info is not None else NO_EPOCH

    def add_update_metadata(
        self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition] = ()
    ) -> None:
        """UpdateMetadata to ``broker_ids``; every recipient gets all partitions added to this batch."""
        self.update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        self.update_metadata_partitions.update(tp for tp in partitions if tp in self.context.leadership)

    # -- encoding

    def _request(
        self, broker_id: int, api_key: ApiKey, body: dict[str, Any], summary: dict[str, Any], **extra: Any
    ) -> OutgoingRequest:
        version, dialect = self.version(api_key), self.wire.dialect
        raw = encode_request_body(api_key, version, body, dialect=dialect)
        self.encodes += 1
        self.bytes_encoded += len(raw)
        return OutgoingRequest(broker_id, api_key, version, raw, summary, dialect, **extra)

    def _common(self, api_key: ApiKey, broker_id: int) -> dict[str, Any]:
        """The fields every control request starts with; the epoch field is named by the API version."""
        epoch = (
            self.context.max_broker_epoch
            if self.wire.max_broker_epoch
            else self.context.brokers[broker_id].epoch
        )
        common: dict[str, Any] = {
            "controller_id": self.context.controller_id,
            "controller_epoch": self.context.epoch,
            epoch_field(api_key, self.version(api_key), self.wire.dialect): epoch,
        }
        if self._kafka_since(api_key, FIRST_KRAFT_FLAG[api_key]):
            common["is_kraft_controller"] = False
        return common

    def _topic_id(self, topic: str) -> uuid.UUID:
        return self.context.topic_ids.get(topic) or NO_TOPIC_ID

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
        """One LeaderAndIsr per broker. On the seeds' wire a body depends only on the partitions it
        carries, so brokers given the same partitions in the same order (every replica of a controlled
        shutdown's partitions) share one encoding, as UpdateMetadata's recipients do."""
        out = []
        brokers = self.context.brokers
        topic_ids = self._kafka_since(ApiKey.LEADER_AND_ISR, FIRST_TOPIC_ID[ApiKey.LEADER_AND_ISR])
        encoded: list[tuple[dict[TopicPartition, dict[str, Any]], OutgoingRequest]] = []
        for broker_id, partitions in sorted(self.leader_and_isr.items()):
            if broker_id not in brokers:
                continue
            same = next((r for p, r in encoded if _same_partitions(p, partitions)), None)
            if same is not None:
                out.append(replace(same, broker_id=broker_id))
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
            body = self._common(ApiKey.LEADER_AND_ISR, broker_id)
            if topic_ids:
                body["type"] = UPDATE_TYPE_UNKNOWN
            topic_states = []
            for topic, states in by_topic.items():
                ids = {"topic_id": self._topic_id(topic)} if topic_ids else {}
                topic_states.append({"topic_name": topic, **ids, "partition_states": states})
            body["topic_states"] = topic_states
            body["live_leaders"] = live_leaders
            summary = {"partitions": len(partitions), **self._summary_epochs(body)}
            out.append(self._request(broker_id, ApiKey.LEADER_AND_ISR, body, summary))
            if self.wire.max_broker_epoch:
                encoded.append((partitions, out[-1]))
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
        if self.controller_entry is not None and self.controller_entry["id"] not in self.context.brokers:
            out.append(self.controller_entry)
        return out

    def _update_metadata_topic_states(self) -> list[dict[str, Any]]:
        """Every partition of the batch, by topic in name order and by partition within each: built
        for a million partitions (no sort of partition tuples, one deletion check per topic, each
        replica set's offline replicas worked out once)."""
        context = self.context
        by_topic: dict[str, list[TopicPartition]] = {}
        for tp in self.update_metadata_partitions:
            partitions = by_topic.get(tp.topic)
            if partitions is None:
                by_topic[tp.topic] = [tp]
            else:
                partitions.append(tp)
        online = context.live_broker_ids
        offline: dict[tuple[int, ...], tuple[int, ...]] = {}
        leadership = context.leadership
        with_ids = self._kafka_since(ApiKey.UPDATE_METADATA, FIRST_TOPIC_ID[ApiKey.UPDATE_METADATA])
        topic_states = []
        for topic in sorted(by_topic):
            deleting = context.is_topic_queued_for_deletion(topic)
            assigned = context.assignments.get(topic, {})
            states = []
            for tp in sorted(by_topic[topic], key=_partition_index):
                info = leadership[tp]
                state = info.leader_and_isr
                replicas = assigned.get(tp.partition, ())
                gone = offline.get(replicas)
                if gone is None:
                    gone = offline[replicas] = tuple(r for r in replicas if r not in online)
                states.append(
                    {
                        "partition_index": tp.partition,
                        "controller_epoch": info.controller_epoch,
                        "leader": LEADER_DURING_DELETE if deleting else state.leader,
                        "leader_epoch": state.leader_epoch,
                        "isr": state.isr,
                        "zk_version": state.partition_epoch,
                        "replicas": replicas,
                        "offline_replicas": gone,
                    }
                )
            entry: dict[str, Any] = {"topic_name": topic}
            if with_ids:
                entry["topic_id"] = self._topic_id(topic)
            entry["partition_states"] = states
            topic_states.append(entry)
        return topic_states

    def _build_update_metadata(self) -> list[OutgoingRequest]:
        wanted = self.update_metadata_brokers
        if self.update_metadata_everyone:
            wanted = wanted | self.context.live_or_shutting_down_ids
        targets = sorted(b for b in wanted if b in self.context.brokers)
        if not targets:
            return []
        shared: dict[str, Any] = {
            "topic_states": self._update_metadata_topic_states(),
            "live_brokers": self._live_brokers(),
        }
        if self._kafka_since(ApiKey.UPDATE_METADATA, FIRST_KRAFT_FLAG[ApiKey.UPDATE_METADATA]):
            shared["type"] = UPDATE_TYPE_UNKNOWN
        partitions = len(self.update_metadata_partitions)
        if self.wire.max_broker_epoch:
            body = {**self._common(ApiKey.UPDATE_METADATA, targets[0]), **shared}
            summary = {"partitions": partitions, **self._summary_epochs(body)}
            once = self._request(targets[0], ApiKey.UPDATE_METADATA, body, summary)  # for every broker
            return [replace(once, broker_id=b) for b in targets]
        out = []
        for broker_id in targets:
            body = {**self._common(ApiKey.UPDATE_METADATA, broker_id), **shared}
            summary = {"partitions": partitions, **self._summary_epochs(body)}
            out.append(self._request(broker_id, ApiKey.UPDATE_METADATA, body, summary))
        return out

    def _build_stop_replica(self) -> list[OutgoingRequest]:
        out = []
        per_partition = self._kafka_since(ApiKey.STOP_REPLICA, FIRST_PARTITION_STATES)
        for broker_id, partitions in sorted(self.stop_replica.items()):
            if broker_id not in self.context.brokers:
                continue
            if per_partition:
                out.append(self._stop_replica_with_partition_states(broker_id, partitions))
                continue
            for delete in (True, False):  # v1 and the seed's v4 carry one delete flag per request
                chosen = sorted(tp for tp, s in partitions.items() if s.delete is delete)
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
                deleting = frozenset(chosen) if delete else frozenset()
                out.append(self._request(broker_id, ApiKey.STOP_REPLICA, body, summary, deleting=deleting))
        return out

    def _stop_replica_with_partition_states(
        self, broker_id: int, partitions: dict[TopicPartition, StopReplicaState]
    ) -> OutgoingRequest:
        """Kafka's v3+ layout: one request per broker, a leader epoch and a delete flag per partition."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp in sorted(partitions):
            state = partitions[tp]
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "leader_epoch": state.leader_epoch,
                    "delete_partition": state.delete,
                }
            )
        body = {
            **self._common(ApiKey.STOP_REPLICA, broker_id),
            "topic_states": [{"topic_name": t, "partition_states": s} for t, s in by_topic.items()],
        }
        deleting = frozenset(tp for tp, s in partitions.items() if s.delete)
        summary = {
            "partitions": len(partitions),
            "delete": bool(deleting),
            "deleted": len(deleting),
            **self._summary_epochs(body),
        }
        return self._request(broker_id, ApiKey.STOP_REPLICA, body, summary, deleting=deleting)

    @staticmethod
    def _summary_epochs(body: dict[str, Any]) -> dict[str, Any]:
        keys = ("controller_epoch", "broker_epoch", "max_broker_epoch")
        return {k: body[k] for k in keys if k in body}


def _version(wire: ControlWire, api_key: ApiKey) -> int:
    if api_key == ApiKey.LEADER_AND_ISR:
        return wire.leader_and_isr
    if api_key == ApiKey.UPDATE_METADATA:
        return wire.update_metadata
    if api_key == ApiKey.STOP_REPLICA:
        return wire.stop_replica
    raise KeyError(api_key)


def _same_partitions(
    a: dict[TopicPartition, dict[str, Any]], b: dict[TopicPartition, dict[str, Any]]
) -> bool:
    """Whether two brokers' LeaderAndIsr partitions are the same states in the same order (entries
    shared between recipients compare by identity first, so this is cheap)."""
    return len(a) == len(b) and a == b and list(a) == list(b)


_partition_index = operator.itemgetter(1)
"""A TopicPartition's partition number (it is a tuple)."""


@functools.cache
def _kafka_since(wire: ControlWire, api_key: ApiKey, first: int) -> bool:
    """Whether ``wire`` sends Apache Kafka's layout of ``api_key`` at ``first`` or later."""
    version = _version(wire, api_key)
    return version >= first and not api_spec(api_key).is_seed_layout(version, wire.dialect)
