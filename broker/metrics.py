"""The broker's Prometheus metrics under the JMX exporter's names for Kafka's broker MBeans.

RequestChannel queue sizes per plane (``kafka_network_requestchannel_requestqueuesize`` and
``…_controlplanerequestqueuesize``), handler idle shares per plane, per-API request counts and
times labelled ``request`` as Kafka's RequestMetrics are, ReplicaManager counts and ISR change rates,
waiting requests per purgatory, BrokerTopicMetrics byte and record rates, and two additions without
a Kafka MBean: the broker epoch and rejected control requests by API and error.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from broker.authorization import Denial
from broker.log import AppendInfo
from broker.network import Request, RequestChannel
from broker.replica_manager import ReplicaManager
from daemon.connection_quotas import connections_closed_meter
from daemon.metrics import Metrics
from protocol import ErrorCode
from protocol.registry import api_spec


class BrokerMetrics:
    """Gauges read the parts they are given; the broker feeds the meters through the methods below."""

    def __init__(
        self,
        metrics: Metrics,
        *,
        data: RequestChannel,
        control: RequestChannel | None,
        replicas: ReplicaManager,
        epoch: Callable[[], int],
    ) -> None:
        self.metrics = metrics
        network, server = "kafka.network", "kafka.server"
        self.connections_closed = connections_closed_meter(metrics)
        metrics.gauge_fn(
            network, "RequestChannel", "RequestQueueSize", "Data-plane requests queued", lambda: data.size
        )
        metrics.gauge_fn(
            network,
            "RequestChannel",
            "ControlPlaneRequestQueueSize",
            "Control-plane requests queued (0 without a control-plane listener)",
            lambda: control.size if control else 0,
        )
        metrics.gauge_fn(
            server,
            "KafkaRequestHandlerPool",
            "RequestHandlerAvgIdlePercent",
            "Share of data-plane handler time spent idle since the last scrape",
            data.idle_fraction,
        )
        metrics.gauge_fn(
            server,
            "KafkaRequestHandlerPool",
            "ControlPlaneRequestHandlerAvgIdlePercent",
            "Share of the control-plane handler's time spent idle since the last scrape",
            lambda: control.idle_fraction() if control else 1.0,
        )
        rm = replicas
        metrics.gauge_fn(server, "ReplicaManager", "LeaderCount", "Partitions led here", rm.leader_count)
        metrics.gauge_fn(
            server, "ReplicaManager", "PartitionCount", "Partitions hosted here", rm.partition_count
        )
        metrics.gauge_fn(
            server,
            "ReplicaManager",
            "UnderReplicatedPartitions",
            "Partitions led here whose ISR is smaller than their replica set",
            rm.under_replicated_count,
        )
        metrics.gauge_fn(
            server,
            "KafkaServer",
            "BrokerEpoch",
            "This broker's epoch (czxid of its registration)",
            epoch,
        )
        metrics.gauge_fn(
            server,
            "ReplicaManager",
            "UnderMinIsrPartitionCount",
            "Partitions led here whose ISR is below min.insync.replicas",
            rm.under_min_isr_count,
        )
        self.isr_shrinks = metrics.meter(
            server, "ReplicaManager", "IsrShrinksPerSec", "Committed ISR shrinks"
        )
        self.isr_expands = metrics.meter(
            server, "ReplicaManager", "IsrExpandsPerSec", "Committed ISR expansions"
        )
        purgatory = metrics.gauge(
            server,
            "DelayedOperationPurgatory",
            "NumDelayedOperations",
            "Requests waiting (acks=all produces, long-polling fetches)",
            ("delayedOperation",),
        )
        purgatory.labels("Produce").set_function(rm.produce_purgatory.size)
        purgatory.labels("Fetch").set_function(rm.fetch_purgatory.size)
        topics = "BrokerTopicMetrics"
        self.messages_in = metrics.meter(server, topics, "MessagesInPerSec", "Records appended by producers")
        self.bytes_in = metrics.meter(server, topics, "BytesInPerSec", "Record bytes appended by producers")
        self.bytes_out = metrics.meter(server, topics, "BytesOutPerSec", "Record bytes fetched by consumers")
        self.replication_bytes_out = metrics.meter(
            server, topics, "ReplicationBytesOutPerSec", "Record bytes fetched by followers"
        )
        labels = ("request",)
        self.requests = metrics.meter(network, "RequestMetrics", "RequestsPerSec", "Requests handled", labels)
        self.queue_time = metrics.timer(
            network, "RequestMetrics", "RequestQueueTimeMs", "Time queued (ms)", labels
        )
        self.local_time = metrics.timer(
            network, "RequestMetrics", "LocalTimeMs", "Time handling (ms)", labels
        )
        self.total_time = metrics.timer(
            network, "RequestMetrics", "TotalTimeMs", "Time from read to response written (ms)", labels
        )
        self.send_time = metrics.timer(
            network, "RequestMetrics", "ResponseSendTimeMs", "Time from handled to written (ms)", labels
        )
        self.errors = metrics.meter(
            network, "RequestMetrics", "ErrorsPerSec", "Responses by top-level error", ("request", "error")
        )
        self.denied = metrics.meter(
            server,
            "AuthorizerMetrics",
            "AuthorizationDeniedPerSec",
            "Operations the ACL authorizer refused",
            ("request", "operation", "resource_type"),
        )

    def authorization_denied(self, request: Request, denial: Denial) -> None:
        self.denied.labels(
            request=api_spec(request.header.api_key).name,
            operation=denial.operation.name,
            resource_type=denial.resource_type.name,
        ).inc()

    def connection_closed(self, listener: str, reason: str) -> None:
        self.connections_closed.labels(listener=listener, reason=reason).inc()

    def isr_changed(self, expanded: bool) -> None:
        (self.isr_expands if expanded else self.isr_shrinks).inc()

    def appended(self, info: AppendInfo) -> None:
        self.messages_in.inc(info.records)
        self.bytes_in.inc(info.bytes)

    def fetched(self, record_bytes: int, replication: bool) -> None:
        (self.replication_bytes_out if replication else self.bytes_out).inc(record_bytes)

    def request_handled(self, request: Request, error: int) -> None:
        """Called on the handler thread once a request has been handled."""
        name = api_spec(request.header.api_key).name
        self.requests.labels(name).inc()
        self.queue_time.labels(name).observe((request.dequeued_at - request.received_at) * 1000)
        done = time.monotonic()
        self.local_time.labels(name).observe(max(0.0, done - request.dequeued_at) * 1000)
        if error:
            self.errors.labels(name, ErrorCode.name_of(error)).inc()

    def response_sent(self, request: Request) -> None:
        """Called on the event loop once the response is written (or dropped, for acks=0)."""
        name = api_spec(request.header.api_key).name
        now = time.monotonic()
        self.send_time.labels(name).observe(max(0.0, now - (request.handled_at or now)) * 1000)
        self.total_time.labels(name).observe(max(0.0, now - request.received_at) * 1000)
