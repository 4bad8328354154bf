"""The broker's Prometheus metrics, declared by Kafka's broker MBeans (names: ``daemon.metric_names``).

RequestChannel queue sizes per plane (``kafka_network_requestchannel_requestqueuesize`` and
``…_controlplanerequestqueuesize``), handler idle shares per plane, per-API request counts, errors and
times labelled ``request`` as Kafka's RequestMetrics are, ReplicaManager counts and ISR change rates,
per-partition ISR gauges (``kafka.cluster:type=Partition``) and log sizes (``kafka.log:type=Log``), the
log cleaner's (``kafka.log:type=LogCleaner`` and ``LogCleanerManager``),
waiting requests per purgatory, BrokerTopicMetrics for all topics and per topic, the process's disk
I/O as Kafka's LinuxIoMetricsCollector reads it, and two additions without a Kafka MBean: the broker
epoch and closed connections by listener and reason.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from broker.authorization import Denial
from broker.log import AppendInfo
from broker.replica_manager import ReplicaManager
from broker.request_channel import Request, RequestChannel
from daemon.metric_kinds import Meter
from daemon.metrics import Metrics
from network.connection_quotas import connections_closed_meter
from protocol import ApiKey, ErrorCode
from protocol.registry import api_spec

PRODUCE_ERRORS_NOT_FAILED = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)
"""Partition errors Kafka's ReplicaManager answers a produce with without marking
FailedProduceRequestsPerSec: the client's or the cluster's state, not a broker failure."""

FETCH_ERRORS_NOT_FAILED = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.OFFSET_OUT_OF_RANGE,
        ErrorCode.INCONSISTENT_TOPIC_ID,
    }
)
"""Likewise for FailedFetchRequestsPerSec."""

PROC_IO = Path("/proc/self/io")


def linux_io(field: str, path: Path = PROC_IO) -> float:
    """``read_bytes`` or ``write_bytes`` of this process from ``/proc/self/io``: bytes that reached
    (or came from) the storage layer, not the page cache."""
    for line in path.read_text().splitlines():
        key, _, value = line.partition(":")
        if key == field:
            return float(value)
    raise KeyError(field)


class BrokerMetrics:
    """Gauges read the parts they are given; the broker feeds the meters through the methods below.

    Each family is declared by one builder, in the order ``docs/metrics.md`` lists them.
    """

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
        self.replicas = replicas
        self.connections_closed = connections_closed_meter(metrics)
        self._request_channel_gauges(data, control)
        self._replica_manager_gauges(epoch)
        self._partition_gauges()
        self._log_gauges()
        self._cleaner_gauges()
        self._disk_io_gauges()
        self._isr_meters()
        self._purgatory_gauges()
        self._topic_meters()
        self._request_meters()
        self._authorizer_meters()

    def _request_channel_gauges(self, data: RequestChannel, control: RequestChannel | None) -> None:
        """Queue sizes and handler idle shares, per plane (KIP-291)."""
        metrics, network, server = self.metrics, "kafka.network", "kafka.server"
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
            "Share of data-plane handler time spent idle since the last scrape (0 to 1)",
            data.idle_fraction,
        )
        metrics.gauge_fn(
            server,
            "KafkaRequestHandlerPool",
            "ControlPlaneRequestHandlerAvgIdlePercent",
            "Share of the control-plane handler's time spent idle since the last scrape (0 to 1)",
            lambda: control.idle_fraction() if control else 1.0,
        )

    def _replica_manager_gauges(self, epoch: Callable[[], int]) -> None:
        """ReplicaManager's partition counts, and the broker epoch (an addition)."""
        metrics, server, rm = self.metrics, "kafka.server", self.replicas
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
            addition=True,
        )
        metrics.gauge_fn(
            server,
            "ReplicaManager",
            "UnderMinIsrPartitionCount",
            "Partitions led here whose ISR is below min.insync.replicas",
            rm.under_min_isr_count,
        )
        metrics.gauge_fn(
            server,
            "ReplicaManager",
            "AtMinIsrPartitionCount",
            "Partitions led here whose ISR is exactly min.insync.replicas",
            lambda: sum(at_min for _, _, _, _, _, at_min in self._partition_rows()),
        )

    def _log_gauges(self) -> None:
        """``kafka.log:type=Log,name=Size``, one series per partition hosted here."""
        rm = self.replicas
        self.metrics.gauge_family(
            "kafka.log",
            "Log",
            "Size",
            "Bytes in this partition's log on this broker",
            ("topic", "partition"),
            lambda: (((tp.topic, tp.partition), size) for tp, size in sorted(rm.log_manager.sizes().items())),
        )

    def _cleaner_gauges(self) -> None:
        """``kafka.log:type=LogCleaner`` and ``type=LogCleanerManager``: the last cleaning of each
        thread, the dirtiest log, and the logs whose cleaning failed (per log directory, as Kafka)."""
        manager_type, log_manager = "LogCleanerManager", self.replicas.log_manager
        cleaner = log_manager.cleaner
        log_dir = str(log_manager.log_dir.absolute())
        for name, doc, read in (
            (
                "max-buffer-utilization-percent",
                "The fullest key map of the threads' last cleanings (percent)",
                cleaner.max_buffer_utilization_percent,
            ),
            (
                "cleaner-recopy-percent",
                "Bytes written over bytes read by the threads' last cleanings (percent)",
                cleaner.recopy_percent,
            ),
            (
                "max-clean-time-secs",
                "The longest of the threads' last cleanings (s)",
                cleaner.max_clean_secs,
            ),
            (
                "max-compaction-delay-secs",
                "How long past max.compaction.lag.ms the latest dirty log waited, at the threads' last "
                "choices (s)",
                cleaner.max_compaction_delay_secs,
            ),
            (
                "DeadThreadCount",
                "Cleaner threads that died of an unexpected error",
                cleaner.dead_threads,
            ),
        ):
            self.metrics.gauge_fn("kafka.log", "LogCleaner", name, doc, read)
        for name, doc, read in (
            (
                "max-dirty-percent",
                "The dirty share of the dirtiest compacted log at the last choice (percent)",
                cleaner.max_dirty_percent,
            ),
            (
                "time-since-last-run-ms",
                "Time since a cleaner thread last chose a log",
                cleaner.time_since_last_run_ms,
            ),
        ):
            self.metrics.gauge_fn("kafka.log", manager_type, name, doc, read)
        manager = cleaner.manager

        def per_directory(read: Callable[[], float]) -> Callable[[], list[tuple[tuple[str], float]]]:
            return lambda: [((log_dir,), float(read()))]

        self.metrics.gauge_family(
            "kafka.log",
            manager_type,
            "uncleanable-partitions-count",
            "Compacted logs whose cleaning failed, left alone until deleted",
            ("logDirectory",),
            per_directory(lambda: manager.uncleanable_count),
        )
        self.metrics.gauge_family(
            "kafka.log",
            manager_type,
            "uncleanable-bytes",
            "The dirty bytes of those logs",
            ("logDirectory",),
            per_directory(manager.uncleanable_bytes),
        )

    def _disk_io_gauges(self) -> None:
        """The process's storage I/O as Kafka's LinuxIoMetricsCollector reads it (where it can be read)."""
        if not _readable(PROC_IO):
            return
        for field in ("read_bytes", "write_bytes"):
            self.metrics.gauge_fn(
                "kafka.server",
                "KafkaServer",
                f"linux-disk-{field.replace('_', '-')}",
                f"This process's {field} from /proc/self/io (storage I/O, not page-cache hits)",
                partial(linux_io, field),
            )

    def _isr_meters(self) -> None:
        server = "kafka.server"
        self.isr_shrinks = self.metrics.meter(
            server, "ReplicaManager", "IsrShrinksPerSec", "Committed ISR shrinks"
        )
        self.isr_expands = self.metrics.meter(
            server, "ReplicaManager", "IsrExpandsPerSec", "Committed ISR expansions"
        )

    def _purgatory_gauges(self) -> None:
        rm = self.replicas
        purgatory = self.metrics.gauge(
            "kafka.server",
            "DelayedOperationPurgatory",
            "NumDelayedOperations",
            "Requests waiting (acks=all produces, long-polling fetches)",
            ("delayedOperation",),
        )
        purgatory.labels("Produce").set_function(rm.produce_purgatory.size)
        purgatory.labels("Fetch").set_function(rm.fetch_purgatory.size)

    def _topic_meters(self) -> None:
        """BrokerTopicMetrics: all topics without a label, each topic with one."""
        metrics, server, topics, per_topic = self.metrics, "kafka.server", "BrokerTopicMetrics", ("topic",)

        def topic_meter(name: str, doc: str) -> Meter:
            return metrics.meter(
                server,
                topics,
                name,
                doc + "; all topics without a label, each topic with one",
                per_topic,
                unlabelled=True,
            )

        self.messages_in = topic_meter("MessagesInPerSec", "Records appended by producers")
        self.bytes_in = topic_meter("BytesInPerSec", "Record bytes appended by producers")
        self.bytes_out = topic_meter("BytesOutPerSec", "Record bytes fetched by consumers")
        self.replication_bytes_out = metrics.meter(
            server, topics, "ReplicationBytesOutPerSec", "Record bytes fetched by followers"
        )
        self.produce_requests = topic_meter(
            "TotalProduceRequestsPerSec", "Partition appends asked for (one per partition of a produce)"
        )
        self.failed_produce_requests = topic_meter(
            "FailedProduceRequestsPerSec",
            "Partition appends that failed with an error Kafka counts as a failure "
            "(not leader, unknown partition, too large or corrupt records are not)",
        )
        self.fetch_requests = topic_meter(
            "TotalFetchRequestsPerSec", "Partition reads asked for by consumers and followers"
        )
        self.failed_fetch_requests = topic_meter(
            "FailedFetchRequestsPerSec",
            "Partition reads that failed with an error Kafka counts as a failure "
            "(not leader, fenced epoch, offset out of range are not)",
        )

    def _request_meters(self) -> None:
        """RequestMetrics: rates, times and errors labelled ``request`` as Kafka's are."""
        metrics, network, network_type = self.metrics, "kafka.network", "RequestMetrics"
        self.requests = metrics.meter(
            network, network_type, "RequestsPerSec", "Requests handled", ("request", "version")
        )
        labels = ("request",)
        self.queue_time = metrics.timer(
            network, network_type, "RequestQueueTimeMs", "Time queued (ms)", labels
        )
        self.local_time = metrics.timer(network, network_type, "LocalTimeMs", "Time handling (ms)", labels)
        self.total_time = metrics.timer(
            network, network_type, "TotalTimeMs", "Time from read to response written (ms)", labels
        )
        self.send_time = metrics.timer(
            network, network_type, "ResponseSendTimeMs", "Time from handled to written (ms)", labels
        )
        self.errors = metrics.meter(
            network,
            network_type,
            "ErrorsPerSec",
            "Responses by their top-level error code, NONE included",
            ("request", "error"),
        )

    def _authorizer_meters(self) -> None:
        self.denied = self.metrics.meter(
            "kafka.server",
            "AuthorizerMetrics",
            "AuthorizationDeniedPerSec",
            "Operations the ACL authorizer refused",
            ("request", "operation", "resource_type"),
            addition=True,
        )

    def _partition_rows(self) -> Iterator[tuple[str, int, int, int, int, int]]:
        """(topic, partition, ISR size, replicas, under min ISR, at min ISR) of each partition led here."""
        rm = self.replicas
        for p in list(rm.partitions.values()):
            if p.is_leader:
                isr, min_isr = len(p.isr), rm.min_insync_for(p.tp.topic)
                yield (
                    p.tp.topic,
                    p.tp.partition,
                    isr,
                    len(p.replicas),
                    int(isr < min_isr),
                    int(isr == min_isr),
                )

    def _partition_gauges(self) -> None:
        """Kafka's per-partition gauges: one series per hosted partition, 0 unless this broker leads it."""
        rm = self.replicas

        def per_partition(
            pick: Callable[[int, int, int, int], int],
        ) -> Callable[[], Iterator[tuple[tuple[str, int], float]]]:
            def read() -> Iterator[tuple[tuple[str, int], float]]:
                led = {(t, p): (isr, n, under, at) for t, p, isr, n, under, at in self._partition_rows()}
                for tp in sorted(rm.partitions):
                    row = led.get((tp.topic, tp.partition))
                    yield (tp.topic, tp.partition), float(pick(*row) if row else 0)

            return read

        keys = ("topic", "partition")
        for name, doc, pick in (
            (
                "UnderReplicated",
                "1 if led here with an ISR smaller than the replicas",
                lambda i, n, u, a: int(i < n),
            ),
            ("InSyncReplicasCount", "ISR size, where led here", lambda i, n, u, a: i),
            ("ReplicasCount", "Replica count, where led here", lambda i, n, u, a: n),
            ("UnderMinIsr", "1 if led here with an ISR below min.insync.replicas", lambda i, n, u, a: u),
            ("AtMinIsr", "1 if led here with an ISR of exactly min.insync.replicas", lambda i, n, u, a: a),
        ):
            self.metrics.gauge_family("kafka.cluster", "Partition", name, doc, keys, per_partition(pick))

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

    def appended(self, topic: str, info: AppendInfo) -> None:
        self.messages_in.inc(info.records)
        self.messages_in.labels(topic).inc(info.records)
        self.bytes_in.inc(info.bytes)
        self.bytes_in.labels(topic).inc(info.bytes)

    def produced(self, topic: str, error: int) -> None:
        """One partition's append was asked for and ended with ``error``. A topic's series all exist
        from its first request on, as Kafka creates a topic's meters together."""
        self.produce_requests.inc()
        self.produce_requests.labels(topic).inc()
        failed = self.failed_produce_requests.labels(topic)
        if error != ErrorCode.NONE and error not in PRODUCE_ERRORS_NOT_FAILED:
            self.failed_produce_requests.inc()
            failed.inc()

    def fetched(self, response: dict[str, Any], replication: bool) -> None:
        """An answered fetch: its partitions and record bytes, per topic."""
        record_bytes = 0
        for entry in response["responses"]:
            topic, partitions = entry["topic"], entry["partitions"]
            self.fetch_requests.inc(len(partitions))
            self.fetch_requests.labels(topic).inc(len(partitions))
            failed = sum(
                1 for p in partitions if p["error_code"] and p["error_code"] not in FETCH_ERRORS_NOT_FAILED
            )
            self.failed_fetch_requests.inc(failed)
            self.failed_fetch_requests.labels(topic).inc(failed)
            in_topic = sum(len(p["records"] or b"") for p in partitions)
            record_bytes += in_topic
            if not replication:
                self.bytes_out.labels(topic).inc(in_topic)
        (self.replication_bytes_out if replication else self.bytes_out).inc(record_bytes)

    def request_handled(self, request: Request, error: int) -> None:
        """Called on the handler thread once a request has been handled."""
        name = metric_name(request)
        self.requests.labels(name, request.header.api_version).inc()
        self.queue_time.labels(name).observe((request.dequeued_at - request.received_at) * 1000)
        done = time.monotonic()
        self.local_time.labels(name).observe(max(0.0, done - request.dequeued_at) * 1000)
        self.errors.labels(api_spec(request.header.api_key).name, ErrorCode.name_of(error)).inc()

    def response_sent(self, request: Request) -> None:
        """Called on the event loop once the response is written (or dropped, for acks=0)."""
        name = metric_name(request)
        now = time.monotonic()
        self.send_time.labels(name).observe(max(0.0, now - (request.handled_at or now)) * 1000)
        self.total_time.labels(name).observe(max(0.0, now - request.received_at) * 1000)


def metric_name(request: Request) -> str:
    """The ``request`` label of a request's rate and times: the API's name, except that Kafka tells
    consumers' fetches (``FetchConsumer``) from followers' (``FetchFollower``); errors stay ``Fetch``."""
    api_key = request.header.api_key
    if api_key == ApiKey.FETCH and len(request.frame) >= request.body_offset + 4:
        # replica_id, the first field of every Fetch version served here (4 to 11): >= 0 for a follower
        (replica_id,) = struct.unpack_from(">i", request.frame, request.body_offset)
        return "FetchFollower" if replica_id >= 0 else "FetchConsumer"
    return api_spec(api_key).name


def _readable(path: Path) -> bool:
    try:
        path.read_text()
    except OSError:
        return False
    return True
