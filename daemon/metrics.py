"""One daemon's metrics registry, whose constructors take Kafka's MBean coordinates.

Each metric is declared by the ``domain``, ``type`` and ``name`` of its Kafka MBean and exported under
every name the usual JMX-exporter configurations give it (``daemon.metric_names``), as one of the
kinds of ``daemon.metric_kinds``. Each daemon owns one registry (several daemons can live in one test
process), which also carries the standard process, platform and garbage-collector collectors
(``process_*``, ``python_info``, ``python_gc_*``). Every declaration is kept in ``catalogue``, from
which ``docs/metrics.md`` is written.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    start_http_server,
)
from prometheus_client.registry import Collector

from daemon.metric_kinds import Gauge, GaugeFamily, Meter, Timer
from daemon.metric_names import Documented, ExportedName, exported_names, label_name, mbean_text
from daemon.quantiles import QUANTILE_WINDOW_S

__all__ = ["Metrics"]


class Metrics:
    """One daemon's registry, with constructors that take Kafka's MBean coordinates.

    ``addition=True`` marks a metric Kafka does not have (the project's own, such as broker epochs);
    it is named by the same rules.
    """

    def __init__(
        self, *, window_s: float = QUANTILE_WINDOW_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.window_s = window_s
        self.clock = clock
        self.catalogue: list[Documented] = []
        """Every metric declared here, in declaration order (``docs/metrics.md`` is written from it)."""
        self._server: object | None = None
        # The standard collectors, each reading this process: ``process_*`` (Linux), ``python_info``,
        # ``python_gc_*``. The default registry's instances are shared objects, registered here too.
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            self.registry.register(collector)

    def _declare(
        self,
        domain: str,
        mbean_type: str,
        name: str,
        kind: str,
        doc: str,
        labels: Sequence[str],
        addition: bool,
    ) -> tuple[tuple[ExportedName, ...], tuple[str, ...]]:
        names = exported_names(domain, mbean_type, name, kind)
        labelnames = tuple(label_name(key) for key in labels)
        mbean = mbean_text(domain, mbean_type, name, labels)
        self.catalogue.append(Documented(mbean, kind, labelnames, doc, names, not addition))
        return names, labelnames

    def gauge(
        self,
        domain: str,
        mbean_type: str,
        name: str,
        doc: str,
        labels: Sequence[str] = (),
        *,
        addition: bool = False,
    ) -> Gauge:
        names, labelnames = self._declare(domain, mbean_type, name, "gauge", doc, labels, addition)
        gauge = Gauge([n.name for n in names], doc, labelnames)
        self.registry.register(gauge)
        return gauge

    def gauge_fn(
        self,
        domain: str,
        mbean_type: str,
        name: str,
        doc: str,
        fn: Callable[[], float],
        *,
        addition: bool = False,
    ) -> Gauge:
        """A gauge read from ``fn`` at scrape time (once, whatever the number of names), so it never
        goes stale."""
        gauge = self.gauge(domain, mbean_type, name, doc, addition=addition)
        gauge.set_function(fn)
        return gauge

    def gauge_family(
        self,
        domain: str,
        mbean_type: str,
        name: str,
        doc: str,
        labels: Sequence[str],
        read: Callable[[], Iterable[tuple[Sequence[object], float]]],
        *,
        addition: bool = False,
    ) -> None:
        """Gauges whose label values come and go (one per partition, per broker): ``read`` gives
        ``(label values, value)`` pairs at scrape time, so a series disappears with its subject."""
        names, labelnames = self._declare(domain, mbean_type, name, "gauge", doc, labels, addition)
        self.registry.register(GaugeFamily([n.name for n in names], doc, labelnames, read))

    def meter(
        self,
        domain: str,
        mbean_type: str,
        name: str,
        doc: str,
        labels: Sequence[str] = (),
        *,
        unlabelled: bool = False,
        addition: bool = False,
    ) -> Meter:
        """A counter under the JMX name plus ``_total`` and, for ``…PerSec``, Strimzi's name.

        ``unlabelled``: a labelled meter that also has the series without labels (see :class:`Meter`).
        """
        names, labelnames = self._declare(domain, mbean_type, name, "meter", doc, labels, addition)
        meter = Meter([n.name.removesuffix("_total") for n in names], doc, labelnames, unlabelled=unlabelled)
        self.registry.register(meter)
        return meter

    def timer(
        self,
        domain: str,
        mbean_type: str,
        name: str,
        doc: str,
        labels: Sequence[str] = (),
        *,
        addition: bool = False,
        kind: str = "timer",
    ) -> Timer:
        """Durations in milliseconds: a summary with recent quantiles under the JMX name and a
        histogram under the JMX name plus ``_histogram``."""
        names, labelnames = self._declare(domain, mbean_type, name, kind, doc, labels, addition)
        summary, histogram = (n.name for n in names)
        timer = Timer(summary, histogram, doc, labelnames, window_s=self.window_s, clock=self.clock)
        self.registry.register(timer)
        return timer

    def histogram(
        self,
        domain: str,
        mbean_type: str,
        name: str,
        doc: str,
        labels: Sequence[str] = (),
        *,
        addition: bool = False,
    ) -> Timer:
        """A Yammer histogram (Kafka's ``newHistogram``), exported as a timer is."""
        return self.timer(domain, mbean_type, name, doc, labels, addition=addition, kind="histogram")

    def register(self, collector: Collector) -> None:
        """A custom collector (prefer ``gauge_family``: it is documented)."""
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
