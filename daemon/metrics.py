"""Prometheus metrics under the names the Prometheus JMX exporter gives Apache Kafka's MBeans.

``kafka.controller:type=KafkaController,name=ActiveControllerCount`` becomes
``kafka_controller_kafkacontroller_activecontrollercount``: domain, type and name joined by
underscores and lower-cased, with MBean keys such as ``broker-id`` as labels. Dashboards written for
Kafka keep working. Meters (``…PerSec``) are counters (``…_total``); timers (``…RateAndTimeMs``,
``…TimeMs``) are histograms in milliseconds (``_count``, ``_sum``, ``_bucket``). Each daemon owns one
registry, so several daemons can live in one test process.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.registry import Collector

__all__ = ["MS_BUCKETS", "Metrics", "jmx_name"]

MS_BUCKETS = (1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, float("inf"))

_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")


def jmx_name(domain: str, mbean_type: str, name: str) -> str:
    """The JMX exporter's metric name for ``domain:type=mbean_type,name=name``."""
    return _UNSAFE.sub("_", f"{domain}_{mbean_type}_{name}").lower()


def _label(key: str) -> str:
    return _UNSAFE.sub("_", key)


class Metrics:
    """One daemon's registry, with constructors that take Kafka's MBean coordinates."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._server: object | None = None

    def gauge(self, domain: str, mbean_type: str, name: str, doc: str, labels: Sequence[str] = ()) -> Gauge:
        return Gauge(
            jmx_name(domain, mbean_type, name), doc, [_label(k) for k in labels], registry=self.registry
        )

    def gauge_fn(self, domain: str, mbean_type: str, name: str, doc: str, fn: Callable[[], float]) -> Gauge:
        """A gauge read from ``fn`` at scrape time, so it never goes stale."""
        gauge = self.gauge(domain, mbean_type, name, doc)
        gauge.set_function(fn)
        return gauge

    def meter(self, domain: str, mbean_type: str, name: str, doc: str, labels: Sequence[str] = ()) -> Counter:
        return Counter(
            jmx_name(domain, mbean_type, name), doc, [_label(k) for k in labels], registry=self.registry
        )

    def timer(
        self, domain: str, mbean_type: str, name: str, doc: str, labels: Sequence[str] = ()
    ) -> Histogram:
        return Histogram(
            jmx_name(domain, mbean_type, name),
            doc,
            [_label(k) for k in labels],
            buckets=MS_BUCKETS,
            registry=self.registry,
        )

    def register(self, collector: Collector) -> None:
        """A custom collector, for families whose label sets change (per-broker gauges)."""
        self.registry.register(collector)

    def serve(self, port: int, host: str = "0.0.0.0") -> int:
        """Serve ``/metrics`` on ``port`` (0 picks a free one); returns the bound port."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._server = server
        return server.server_address[1]

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()  # type: ignore[attr-defined]
            self._server.server_close()  # type: ignore[attr-defined]
            self._server = None
