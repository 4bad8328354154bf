"""What the controller answers clients that take it for a broker hosting no partition (Kafka 3.9 clusters).

On Kafka 3.9's wire UpdateMetadata lists the controller among the live brokers, so Kafka's brokers tell
their clients about it: Metadata names it as ``controller_id``, and clients send it the controller-bound
Admin API (CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders, the reassignment APIs) and, as
to any broker they picked as least loaded, Metadata, DescribeCluster, FindCoordinator, InitProducerId,
ListGroups, DescribeConfigs and DescribeLogDirs. Everything is answered from the controller's context
(brokers, topics, leaders and ISRs as it last decided them) and ZooKeeper, on the listener the request
came in on. The controller hosts no partition and no group: it lists itself among the brokers, leads
nothing, coordinates nothing, and points FindCoordinator at the leader of the group's partition.

A candidate that is not the active controller knows no cluster: it closes a client's connection
(clients then ask another broker they know) and answers the topic requests NOT_CONTROLLER.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

from admin.topic_requests import NO_TOPIC_ID, TopicRequests
from controller.channel import ChannelManager, Marks
from controller.context import ControllerContext
from network.server import CloseConnection
from protocol import ApiKey, ErrorCode
from protocol.consumer_offsets import partition_for
from protocol.messages.metadata import AUTHORIZED_OPERATIONS_OMITTED
from zkstore import entity_configs
from zkstore.aio import AsyncZooKeeper
from zkstore.cluster_id import read_cluster_id
from zkstore.producer_id_blocks import ProducerIdManager
from zkstore.znodes import Endpoint, TopicPartition

log = logging.getLogger("controller.clients")

Body = dict[str, Any]
Answer = Callable[[str, int, Body], Awaitable[Body]]
"""A client request's answer from (listener, version, body)."""

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_TOPIC})
KEY_TYPES = {0: OFFSETS_TOPIC, 1: TRANSACTION_TOPIC}
"""FindCoordinator's key types: group, transaction; each names the topic whose leaders coordinate."""
TOPIC_RESOURCE = 2
TOPIC_CONFIG_SOURCE = 1
"""DescribeConfigs' DYNAMIC_TOPIC_CONFIG: an override from ``/config/topics``."""

TOPIC_APIS = frozenset({ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS})
CLIENT_APIS = TOPIC_APIS | frozenset(
    {
        ApiKey.METADATA,
        ApiKey.DESCRIBE_CLUSTER,
        ApiKey.FIND_COORDINATOR,
        ApiKey.INIT_PRODUCER_ID,
        ApiKey.LIST_GROUPS,
        ApiKey.DESCRIBE_CONFIGS,
        ApiKey.DESCRIBE_LOG_DIRS,
    }
)
"""The requests clients send a broker they do not know to be a controller, answered here."""


def refuse_topics(key: ApiKey, body: Body, code: ErrorCode, message: str) -> Body:
    """CreateTopics, DeleteTopics or CreatePartitions refused topic by topic, as Kafka answers them."""
    if key == ApiKey.DELETE_TOPICS:
        names = body.get("topic_names") or [t["name"] for t in body.get("topics") or ()]
        return {"throttle_time_ms": 0, "responses": [_refused(n, code, message) for n in names]}
    refused = [_refused(t["name"], code, message) for t in body["topics"]]
    if key == ApiKey.CREATE_PARTITIONS:
        return {"throttle_time_ms": 0, "results": refused}
    created = [{**r, "topic_id": NO_TOPIC_ID, "num_partitions": -1, "replication_factor": -1, "configs": None}
               for r in refused]  # fmt: skip
    return {"throttle_time_ms": 0, "topics": created}


def _refused(name: str, code: ErrorCode, message: str) -> Body:
    return {"name": name, "error_code": code, "error_message": message}


class ContextView:
    """:class:`admin.topic_requests.TopicView` over the controller's context: the brokers that can host
    replicas (live, not shutting down) and each partition's leader, shown once the brokers were told.

    A topic request is answered when this view shows its outcome; Kafka's AdminClient then asks a
    broker, so a leader counts here only after every control request queued by the time it was
    decided has been answered (the controller idle, so the decision's requests were queued)."""

    def __init__(self, context: ControllerContext, channel: ChannelManager, idle: Callable[[], bool]) -> None:
        self.context = context
        self.channel = channel
        self.idle = idle
        self._told: dict[str, Marks] = {}
        """Topics led, with where the channels' queues ended once they were."""

    def broker_ids(self) -> Collection[int]:
        return sorted(self.context.live_broker_ids)

    def partition_leaders(self, topic: str) -> Mapping[int, int] | None:
        leaders = self._decided(topic)
        if leaders is None or min(leaders.values(), default=-1) < 0:
            self._told.pop(topic, None)
            return leaders
        marks = self._told.get(topic)
        if marks is None and self.idle():
            marks = self._told[topic] = self.channel.marks()
        if marks is None or not self.channel.delivered(marks):
            return dict.fromkeys(leaders, -1)
        return leaders

    def _decided(self, topic: str) -> dict[int, int] | None:
        assignment = self.context.assignments.get(topic)
        if assignment is None:
            return None
        leadership = self.context.leadership
        return {
            p: (state.leader_and_isr.leader if (state := leadership.get(TopicPartition(topic, p))) else -1)
            for p in assignment
        }


class ClientApis:
    def __init__(
        self,
        context: ControllerContext,
        zk: AsyncZooKeeper,
        is_active: Callable[[], bool],
        topics: TopicRequests,
        producer_ids: ProducerIdManager,
        *,
        own_endpoints: Callable[[], Mapping[str, Endpoint]],
        inter_broker_listener: str,
    ) -> None:
        self.context = context
        self.zk = zk
        self.is_active = is_active
        self.topics = topics
        self.producer_ids = producer_ids
        self.own_endpoints = own_endpoints
        """This controller's advertised endpoint under each listener name it is listed by."""
        self.inter_broker_listener = inter_broker_listener
        self._cluster_id: str | None = None
        self._answers: dict[ApiKey, Answer] = {
            ApiKey.CREATE_TOPICS: lambda _, version, body: topics.create_topics(body, version),
            ApiKey.DELETE_TOPICS: lambda _, version, body: topics.delete_topics(body, version),
            ApiKey.CREATE_PARTITIONS: lambda _, version, body: topics.create_partitions(body, version),
            ApiKey.METADATA: self.metadata,
            ApiKey.DESCRIBE_CLUSTER: self.describe_cluster,
            ApiKey.FIND_COORDINATOR: self.find_coordinator,
            ApiKey.INIT_PRODUCER_ID: self.init_producer_id,
            ApiKey.LIST_GROUPS: self.list_groups,
            ApiKey.DESCRIBE_CONFIGS: self.describe_configs,
            ApiKey.DESCRIBE_LOG_DIRS: self.describe_log_dirs,
        }

    async def handle(self, listener: str, key: ApiKey, version: int, body: Body) -> Body:
        """Answer one client request that came in on ``listener`` (a broker listener name)."""
        if not self.is_active():
            if key in TOPIC_APIS:
                return refuse_topics(key, body, ErrorCode.NOT_CONTROLLER, "not the active controller")
            raise CloseConnection("not the active controller: the client should ask a broker")
        return await self._answers[key](listener, version, body)

    async def list_groups(self, listener: str, version: int, body: Body) -> Body:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "groups": []}  # coordinates none

    async def describe_log_dirs(self, listener: str, version: int, body: Body) -> Body:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": []}  # hosts no log

    async def cluster_id(self) -> str:
        if self._cluster_id is None:
            self._cluster_id = await read_cluster_id(self.zk)
        return self._cluster_id

    # ------------------------------------------------------------------ brokers

    def _listener_name(self, listener: str) -> str:
        """The broker listener whose endpoints a client on ``listener`` is given: its own name, or the
        inter-broker listener's for the RPC listener (brokers' name for it)."""
        return listener if listener in self.own_endpoints() else self.inter_broker_listener

    def brokers(self, listener: str) -> list[Body]:
        """Every live broker with an endpoint on ``listener``, and this controller (hosting nothing)."""
        name = self._listener_name(listener)
        out = []
        for broker_id in sorted(self.context.live_or_shutting_down_ids):
            registration = self.context.brokers[broker_id].registration
            endpoint = registration.endpoint(name)
            if endpoint is not None:
                out.append(
                    {
                        "node_id": broker_id,
                        "host": endpoint.host,
                        "port": endpoint.port,
                        "rack": registration.rack,
                    }
                )
        own = self.own_endpoints().get(name)
        if own is not None:
            out.append(
                {"node_id": self.context.controller_id, "host": own.host, "port": own.port, "rack": None}
            )
        return out

    async def describe_cluster(self, listener: str, version: int, body: Body) -> Body:
        answer: Body = {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "endpoint_type": 1,
            "cluster_id": await self.cluster_id(),
            "controller_id": self.context.controller_id,
            "brokers": [],
            "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
        }
        endpoint_type = body.get("endpoint_type", 1)
        if endpoint_type != 1:
            mismatched = endpoint_type == 2
            answer["error_code"] = (
                ErrorCode.MISMATCHED_ENDPOINT_TYPE if mismatched else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
            )
            answer["error_message"] = "only brokers are described (endpoint type 1)"
            return answer
        answer["brokers"] = [
            {"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
            for b in self.brokers(listener)
        ]
        return answer

    # ------------------------------------------------------------------ Metadata

    async def metadata(self, listener: str, version: int, body: Body) -> Body:
        requested = body["topics"]
        names = sorted(self.context.assignments) if requested is None else [t["name"] for t in requested]
        create = requested is not None and body.get("allow_auto_topic_creation", True)
        topics = []
        for name in names:
            topic = self._topic(name, version)
            if create and name not in self.context.assignments:
                topic["error_code"] = await self.topics.auto_create(name)
            topics.append(topic)
        response: Body = {
            "throttle_time_ms": 0,
            "brokers": self.brokers(listener),
            "cluster_id": await self.cluster_id(),
            "controller_id": self.context.controller_id,
            "topics": topics,
        }
        if version >= 8:
            response["cluster_authorized_operations"] = AUTHORIZED_OPERATIONS_OMITTED
        return response

    def _topic(self, name: str, version: int) -> Body:
        topic: Body = {"error_code": ErrorCode.NONE, "name": name, "is_internal": name in INTERNAL_TOPICS}
        if version >= 8:
            topic["topic_authorized_operations"] = AUTHORIZED_OPERATIONS_OMITTED
        context = self.context
        assignment = context.assignments.get(name)
        if assignment is None or context.is_topic_queued_for_deletion(name):
            topic["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            topic["partitions"] = []
            return topic
        live = context.live_or_shutting_down_ids
        partitions = []
        for index, replicas in sorted(assignment.items()):
            tp = TopicPartition(name, index)
            state = context.leadership.get(tp)
            leader = state.leader_and_isr.leader if state is not None else -1
            led = leader in live
            partitions.append(
                {
                    "error_code": ErrorCode.NONE if led else ErrorCode.LEADER_NOT_AVAILABLE,
                    "partition_index": index,
                    "leader_id": leader if led else -1,
                    "leader_epoch": state.leader_and_isr.leader_epoch if state is not None else -1,
                    "replica_nodes": list(replicas),
                    "isr_nodes": list(state.leader_and_isr.isr) if state is not None else [],
                    "offline_replicas": list(context.offline_replicas(tp)),
                }
            )
        topic["partitions"] = partitions
        return topic

    # ------------------------------------------------------------------ coordinators and producer ids

    async def find_coordinator(self, listener: str, version: int, body: Body) -> Body:
        key_type = body.get("key_type", 0)
        keys = body["coordinator_keys"] if version >= 4 else [body["key"]]
        found = [self._coordinator(listener, key, key_type) for key in keys]
        if version >= 4:
            return {"throttle_time_ms": 0, "coordinators": found}
        only = found[0]
        return {"throttle_time_ms": 0, **{k: v for k, v in only.items() if k != "key"}}

    def _coordinator(self, listener: str, key: str, key_type: int) -> Body:
        """The leader of the coordinating partition for ``key``, as the broker that leads it serves it;
        COORDINATOR_NOT_AVAILABLE (retried) while the topic is missing or the partition unled: a broker
        that is asked next creates the topic, as Kafka's brokers do."""
        answer: Body = {"key": key, "node_id": -1, "host": "", "port": -1, "error_message": None}
        topic = KEY_TYPES.get(key_type)
        if topic is None or not key:
            return {
                **answer,
                "error_code": ErrorCode.INVALID_REQUEST,
                "error_message": f"key type {key_type}",
            }
        assignment = self.context.assignments.get(topic)
        if not assignment:
            return {**answer, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
        state = self.context.leadership.get(TopicPartition(topic, partition_for(key, len(assignment))))
        leader = state.leader_and_isr.leader if state is not None else -1
        broker = self.context.brokers.get(leader)
        endpoint = broker.registration.endpoint(self._listener_name(listener)) if broker is not None else None
        if endpoint is None:
            return {**answer, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
        return {
            **answer,
            "error_code": ErrorCode.NONE,
            "node_id": leader,
            "host": endpoint.host,
            "port": endpoint.port,
        }

    async def init_producer_id(self, listener: str, version: int, body: Body) -> Body:
        """A fresh producer id for an idempotent producer (from this controller's own block); a
        transactional id belongs to its coordinator, which this is not: NOT_COORDINATOR sends the client
        to FindCoordinator."""
        answer: Body = {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NONE,
            "producer_id": -1,
            "producer_epoch": -1,
        }
        if body["transactional_id"] is not None:
            return {**answer, "error_code": ErrorCode.NOT_COORDINATOR}
        try:
            return {**answer, "producer_id": await self.producer_ids.next_id(), "producer_epoch": 0}
        except Exception:
            log.exception("no producer id could be claimed")
            return {**answer, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}

    # ------------------------------------------------------------------ DescribeConfigs

    async def describe_configs(self, listener: str, version: int, body: Body) -> Body:
        """A topic's overrides from ``/config/topics`` (what Kafka's tools print); the controller has no
        broker configs of its own, so a broker resource is refused."""
        results = []
        for resource in body["resources"]:
            kind, name = resource["resource_type"], resource["resource_name"]
            result: Body = {
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "resource_type": kind,
                "resource_name": name,
                "configs": [],
            }
            if kind != TOPIC_RESOURCE:
                result.update(
                    error_code=ErrorCode.INVALID_REQUEST, error_message="the controller is no broker"
                )
            elif name not in self.context.assignments:
                result.update(
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=f"Topic {name} does not exist",
                )
            else:
                keys = resource["configuration_keys"]
                overrides = await entity_configs.read_topic_configs(self.zk, name)
                result["configs"] = [
                    {
                        "name": key,
                        "value": value,
                        "read_only": False,
                        "config_source": TOPIC_CONFIG_SOURCE,
                        "is_sensitive": False,
                        "synonyms": [],
                        "config_type": 0,
                        "documentation": None,
                    }
                    for key, value in sorted(overrides.items())
                    if keys is None or key in keys
                ]
            results.append(result)
        return {"throttle_time_ms": 0, "results": results}
