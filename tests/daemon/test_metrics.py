"""Metric names and kinds: every name the dashboards query comes from one declaration, and a timer's
quantiles cover a recent window."""

from __future__ import annotations

import pytest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

from daemon.metric_names import exported_names
from daemon.metrics import Metrics
from daemon.quantiles import WindowedQuantiles
from tests.support.metrics import registry_samples


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def names(domain: str, mbean_type: str, name: str, kind: str) -> list[tuple[str, str]]:
    return [(n.name, n.type) for n in exported_names(domain, mbean_type, name, kind)]


def test_a_meter_is_counted_under_the_jmx_name_and_strimzis_name_without_per_sec() -> None:
    assert names("kafka.server", "ReplicaManager", "IsrShrinksPerSec", "meter") == [
        ("kafka_server_replicamanager_isrshrinkspersec_total", "counter"),
        ("kafka_server_replicamanager_isrshrinks_total", "counter"),
    ]
    assert names("kafka.network", "RequestMetrics", "RequestsPerSec", "meter")[1] == (
        "kafka_network_requestmetrics_requests_total",
        "counter",
    )


def test_a_meter_not_named_per_sec_has_only_its_jmx_name() -> None:
    assert names("kafka.network", "SocketServer", "ConnectionsClosed", "meter") == [
        ("kafka_network_socketserver_connectionsclosed_total", "counter")
    ]


def test_a_percent_gauge_also_gets_strimzis_percent_suffix() -> None:
    assert names("kafka.server", "KafkaRequestHandlerPool", "RequestHandlerAvgIdlePercent", "gauge") == [
        ("kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent", "gauge"),
        ("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent", "gauge"),
    ]
    assert names("kafka.controller", "KafkaController", "OfflinePartitionsCount", "gauge") == [
        ("kafka_controller_kafkacontroller_offlinepartitionscount", "gauge")
    ]


def test_mbean_names_that_are_not_identifiers_are_made_safe() -> None:
    assert names("kafka.server", "KafkaServer", "linux-disk-read-bytes", "gauge") == [
        ("kafka_server_kafkaserver_linux_disk_read_bytes", "gauge")
    ]


def test_a_timer_is_a_summary_under_its_jmx_name_and_a_histogram_beside_it() -> None:
    assert names("kafka.network", "RequestMetrics", "TotalTimeMs", "timer") == [
        ("kafka_network_requestmetrics_totaltimems", "summary"),
        ("kafka_network_requestmetrics_totaltimems_histogram", "histogram"),
    ]


def test_one_meter_counts_under_both_names() -> None:
    metrics = Metrics()
    shrinks = metrics.meter("kafka.server", "ReplicaManager", "IsrShrinksPerSec", "shrinks")
    shrinks.inc()
    shrinks.inc(2)
    scraped = registry_samples(metrics)
    assert scraped["kafka_server_replicamanager_isrshrinkspersec_total"] == 3
    assert scraped["kafka_server_replicamanager_isrshrinks_total"] == 3


def test_a_per_topic_meter_keeps_the_all_topics_series_without_a_label() -> None:
    metrics = Metrics()
    bytes_in = metrics.meter(
        "kafka.server", "BrokerTopicMetrics", "BytesInPerSec", "in", ("topic",), unlabelled=True
    )
    for topic, size in (("a", 10), ("b", 5), ("a", 1)):
        bytes_in.inc(size)
        bytes_in.labels(topic).inc(size)
    scraped = registry_samples(metrics)
    assert scraped["kafka_server_brokertopicmetrics_bytesin_total"] == 16
    assert scraped['kafka_server_brokertopicmetrics_bytesin_total{topic="a"}'] == 11
    assert scraped['kafka_server_brokertopicmetrics_bytesinpersec_total{topic="b"}'] == 5


def test_a_labelled_meter_without_the_unlabelled_series_refuses_a_bare_inc() -> None:
    requests = Metrics().meter("kafka.network", "RequestMetrics", "RequestsPerSec", "r", ("request",))
    with pytest.raises(ValueError, match="labels"):
        requests.inc()
    with pytest.raises(ValueError, match="up"):
        requests.labels("Produce").inc(-1)


def test_labels_are_given_by_position_or_by_sanitised_name() -> None:
    metrics = Metrics()
    queue = metrics.timer(
        "kafka.controller", "ControllerChannelManager", "RequestRateAndQueueTimeMs", "q", ["broker-id"]
    )
    queue.labels("1").observe(3)
    queue.labels(broker_id=1).observe(5)
    assert (
        registry_samples(metrics)[
            'kafka_controller_controllerchannelmanager_requestrateandqueuetimems_count{broker_id="1"}'
        ]
        == 2
    )
    queue.remove("1")
    assert not any("broker_id" in name for name in registry_samples(metrics))


def test_a_function_gauge_is_read_once_per_scrape_whatever_its_names() -> None:
    """Idle shares reset on each read: a second read for the alias would report a different value."""
    reads = []
    metrics = Metrics()
    metrics.gauge_fn(
        "kafka.server",
        "KafkaRequestHandlerPool",
        "RequestHandlerAvgIdlePercent",
        "idle",
        lambda: reads.append(1) or 0.25,
    )
    scraped = registry_samples(metrics)
    assert len(reads) == 1
    assert scraped["kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent"] == 0.25
    assert scraped["kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent"] == 0.25


def test_a_failing_gauge_loses_its_sample_not_the_scrape() -> None:
    metrics = Metrics()
    metrics.gauge_fn("kafka.server", "ReplicaManager", "LeaderCount", "leaders", lambda: 1 / 0)
    metrics.gauge_fn("kafka.server", "ReplicaManager", "PartitionCount", "partitions", lambda: 3)
    scraped = registry_samples(metrics)
    assert "kafka_server_replicamanager_leadercount" not in scraped
    assert scraped["kafka_server_replicamanager_partitioncount"] == 3


def test_a_gauge_family_follows_its_subjects() -> None:
    metrics = Metrics()
    sizes = {("t", 0): 10.0, ("t", 1): 20.0}
    metrics.gauge_family("kafka.log", "Log", "Size", "bytes", ("topic", "partition"), lambda: sizes.items())
    assert registry_samples(metrics)['kafka_log_log_size{partition="1",topic="t"}'] == 20
    del sizes[("t", 1)]
    assert 'kafka_log_log_size{partition="1",topic="t"}' not in registry_samples(metrics)


def test_an_alias_that_clashes_with_another_metric_is_refused() -> None:
    metrics = Metrics()
    metrics.meter("kafka.server", "ReplicaManager", "IsrShrinksPerSec", "shrinks")
    with pytest.raises(ValueError, match="Duplicated"):
        metrics.meter("kafka.server", "ReplicaManager", "IsrShrinks", "the Strimzi name of the meter above")


def test_a_timer_exports_quantiles_count_and_sum_beside_its_histogram() -> None:
    clock = Clock()
    metrics = Metrics(clock=clock)
    total = metrics.timer("kafka.network", "RequestMetrics", "TotalTimeMs", "total", ("request",))
    for ms in range(1, 101):
        total.labels("Produce").observe(ms)
    scraped = registry_samples(metrics)
    base = "kafka_network_requestmetrics_totaltimems"
    assert scraped[f'{base}{{quantile="0.50",request="Produce"}}'] == 50
    assert scraped[f'{base}{{quantile="0.99",request="Produce"}}'] == 99
    assert scraped[f'{base}{{quantile="0.999",request="Produce"}}'] == 100
    assert {name.split("quantile=")[1].split('"')[1] for name in scraped if "quantile" in name} == {
        "0.50",
        "0.75",
        "0.95",
        "0.98",
        "0.99",
        "0.999",
    }
    assert scraped[f'{base}_count{{request="Produce"}}'] == 100
    assert scraped[f'{base}_sum{{request="Produce"}}'] == 5050
    assert scraped[f'{base}_histogram_bucket{{le="100.0",request="Produce"}}'] == 100
    assert scraped[f'{base}_histogram_bucket{{le="50.0",request="Produce"}}'] == 50
    assert scraped[f'{base}_histogram_count{{request="Produce"}}'] == 100


def test_a_timers_quantiles_forget_what_fell_out_of_the_window_but_its_count_does_not() -> None:
    clock = Clock()
    metrics = Metrics(clock=clock, window_s=60)
    queue = metrics.timer("kafka.controller", "ControllerEventManager", "EventQueueTimeMs", "queued")
    for _ in range(100):
        queue.observe(1000)
    clock.now += 30
    queue.observe(2)
    base = "kafka_controller_controllereventmanager_eventqueuetimems"
    assert registry_samples(metrics)[f'{base}{{quantile="0.50"}}'] == 1000
    clock.now += 45  # the slow ones are 75 s old, the fast one 45 s
    scraped = registry_samples(metrics)
    assert scraped[f'{base}{{quantile="0.99"}}'] == 2
    assert scraped[f"{base}_count"] == 101
    clock.now += 60
    assert registry_samples(metrics)[f'{base}{{quantile="0.99"}}'] == 0  # nothing in the window


def test_the_window_samples_a_burst_in_bounded_memory_and_keeps_its_shape() -> None:
    window = WindowedQuantiles(60, slices=6, per_slice=256, seed=7)
    for i in range(100_000):
        window.observe(i % 1000, now=5.0)
    assert window.count(now=5.0) == 100_000
    assert sum(len(kept) for _, _, kept in window._slices) == 256
    median, p99 = window.quantiles([0.5, 0.99], now=5.0)
    assert 400 <= median <= 600 and p99 >= 950


def test_slices_weigh_by_what_they_saw_not_by_what_they_kept() -> None:
    """A busy slice (1000 fast values, 10 kept) outweighs a quiet one (10 slow values)."""
    window = WindowedQuantiles(60, slices=6, per_slice=10, seed=1)
    for _ in range(1000):
        window.observe(1.0, now=0.0)
    for _ in range(10):
        window.observe(500.0, now=15.0)
    assert window.quantiles([0.5, 0.98, 0.995], now=15.0) == [1.0, 1.0, 500.0]


def test_the_exposition_parses_as_openmetrics_too() -> None:
    """Prometheus asks for OpenMetrics first: every family must be valid there."""
    metrics = Metrics()
    metrics.meter(
        "kafka.server", "BrokerTopicMetrics", "BytesInPerSec", "in", ("topic",), unlabelled=True
    ).inc()
    metrics.timer("kafka.network", "RequestMetrics", "TotalTimeMs", "t", ("request",)).labels(
        "Fetch"
    ).observe(1)
    metrics.gauge_fn(
        "kafka.server", "KafkaRequestHandlerPool", "RequestHandlerAvgIdlePercent", "i", lambda: 1
    )
    parsed = {family.name for family in parse_openmetrics(openmetrics(metrics.registry).decode())}
    assert {"kafka_server_brokertopicmetrics_bytesin", "kafka_network_requestmetrics_totaltimems"} <= parsed
    assert "process_cpu_seconds" in parsed and "python_gc_objects_collected" in parsed


def test_every_declaration_is_catalogued_with_its_mbean_and_names() -> None:
    metrics = Metrics()
    metrics.meter("kafka.network", "RequestMetrics", "ErrorsPerSec", "errors", ("request", "error"))
    metrics.gauge_fn("kafka.server", "KafkaServer", "BrokerEpoch", "epoch", lambda: 1, addition=True)
    errors, epoch = metrics.catalogue
    assert errors.mbean == "kafka.network:type=RequestMetrics,name=ErrorsPerSec,request=…,error=…"
    assert [n.name for n in errors.names] == [
        "kafka_network_requestmetrics_errorspersec_total",
        "kafka_network_requestmetrics_errors_total",
    ]
    assert errors.labels == ("request", "error") and errors.in_kafka
    assert not epoch.in_kafka
