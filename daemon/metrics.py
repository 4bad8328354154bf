"""Prometheus metrics under the names Kafka dashboards query, declared by Kafka's MBean coordinates.

Every metric is declared once, as ``domain``, ``type`` and ``name`` of its Kafka MBean, and exported
under each name that the usual JMX-exporter configurations give that MBean (see ``docs/metrics.md``):

* the JMX name: domain, type and name joined by underscores and lower-cased, MBean keys such as
  ``broker-id`` as labels (``kafka.controller:type=KafkaController,name=ActiveControllerCount`` becomes
  ``kafka_controller_kafkacontroller_activecontrollercount``);
* Strimzi's rules (also the Prometheus JMX exporter's example Kafka rules): a meter ``…PerSec`` counts as
  ``kafka_<domain>_<type>_<name without PerSec>_total`` (``kafka_server_replicamanager_isrshrinks_total``)
  beside the JMX name plus ``_total`` (``…_isrshrinkspersec_total``); a gauge ``…Percent`` is also
  ``kafka_<domain>_<type>_<name without Percent>_percent``; a timer or histogram is a summary under its
  JMX name with Yammer's percentiles as ``quantile`` labels (``"0.50"`` … ``"0.999"``) over a recent
  window, with ``_count`` and ``_sum``, and the Prometheus histogram is kept as ``<JMX name>_histogram``
  (``_bucket``, ``_count``, ``_sum``; milliseconds).

Each daemon owns one registry (several daemons can live in one test process), which also carries the
standard process, platform and garbage-collector collectors (``process_*``, ``python_info``,
``python_gc_*``). Every declaration is kept in ``catalogue``, from which ``docs/metrics.md`` is written.
"""

from __future__ import annotations

import bisect
import logging
import random
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    start_http_server,
)
from prometheus_client.core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

__all__ = [
    "MS_BUCKETS",
    "QUANTILES",
    "QUANTILE_WINDOW_S",
    "Documented",
    "ExportedName",
    "Gauge",
    "Meter",
    "Metrics",
    "Timer",
    "WindowedQuantiles",
    "exported_names",
    "jmx_name",
]

log = logging.getLogger("daemon.metrics")

MS_BUCKETS = (1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, float("inf"))

QUANTILES: tuple[tuple[str, float], ...] = (
    ("0.50", 0.50),
    ("0.75", 0.75),
    ("0.95", 0.95),
    ("0.98", 0.98),
    ("0.99", 0.99),
    ("0.999", 0.999),
)
"""Yammer's percentile attributes (``50thPercentile`` … ``999thPercentile``) as the rules label them:
``quantile="0.$N"``, hence ``"0.50"`` and not ``"0.5"``."""

QUANTILE_WINDOW_S = 60.0
"""How far back the quantiles look. Kafka's timers keep an exponentially decaying sample biased to the
last five minutes; a minute makes an alert on ``quantile="0.99"`` follow a change sooner."""

_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")
_KAFKA_DOMAIN = re.compile(r"kafka\.(\w+)")
_METER = re.compile(r"(.+)PerSec\w*")
_PERCENT = re.compile(r"(.+)Percent\w*")


def jmx_name(domain: str, mbean_type: str, name: str) -> str:
    """The JMX exporter's metric name for ``domain:type=mbean_type,name=name``."""
    return _UNSAFE.sub("_", f"{domain}_{mbean_type}_{name}").lower()


def _label(key: str) -> str:
    return _UNSAFE.sub("_", key)


@dataclass(frozen=True, slots=True)
class ExportedName:
    """One metric family as the text exposition's ``# TYPE`` line names it."""

    name: str
    type: str
    """``gauge``, ``counter``, ``summary`` or ``histogram``."""
    scheme: str
    """Whose naming it follows: ``jmx`` (the JMX name; what every rule set gives a plain gauge),
    ``strimzi`` (Strimzi's rules) or ``histogram`` (this project's Prometheus histogram of a timer)."""


def exported_names(domain: str, mbean_type: str, name: str, kind: str) -> tuple[ExportedName, ...]:
    """Every family one Kafka metric is exported as; ``kind`` is ``gauge``, ``meter``, ``timer`` or
    ``histogram`` (a Yammer histogram, exported as a timer is)."""
    base = jmx_name(domain, mbean_type, name)
    kafka = _KAFKA_DOMAIN.fullmatch(domain)
    if kind == "gauge":
        names = [ExportedName(base, "gauge", "jmx")]
        percent = _PERCENT.fullmatch(name)
        if kafka and percent:
            alias = jmx_name(domain, mbean_type, percent.group(1)) + "_percent"
            names.append(ExportedName(alias, "gauge", "strimzi"))
        return tuple(names)
    if kind == "meter":
        names = [ExportedName(base + "_total", "counter", "jmx")]
        per_sec = _METER.fullmatch(name)
        if kafka and per_sec:
            alias = jmx_name(domain, mbean_type, per_sec.group(1)) + "_total"
            names.append(ExportedName(alias, "counter", "strimzi"))
        return tuple(names)
    if kind in ("timer", "histogram"):
        return (
            ExportedName(base, "summary", "strimzi"),
            ExportedName(base + "_histogram", "histogram", "histogram"),
        )
    raise ValueError(f"unknown metric kind {kind!r}")


@dataclass(frozen=True, slots=True)
class Documented:
    """What ``docs/metrics.md`` says of one metric."""

    mbean: str
    """``domain:type=T,name=N`` followed by its keys (``,request=…``)."""
    kind: str
    labels: tuple[str, ...]
    doc: str
    names: tuple[ExportedName, ...]
    in_kafka: bool = True
    """False for the project's additions, which have no Kafka MBean of that name."""


def _mbean(domain: str, mbean_type: str, name: str, labels: Sequence[str]) -> str:
    return f"{domain}:type={mbean_type},name={name}" + "".join(f",{key}=…" for key in labels)


def _label_values(
    labelnames: tuple[str, ...], values: Sequence[object], named: dict[str, object]
) -> tuple[str, ...]:
    if named:
        if values or set(named) != set(labelnames):
            raise ValueError(f"labels {sorted(named)} do not match {list(labelnames)}")
        return tuple(str(named[name]) for name in labelnames)
    if len(values) != len(labelnames):
        raise ValueError(f"{len(values)} label values for {list(labelnames)}")
    return tuple(str(value) for value in values)


# --------------------------------------------------------------------------- recent quantiles


class WindowedQuantiles:
    """Quantiles of what was observed in the last ``window_s`` seconds, in bounded memory.

    Time is cut into ``slices`` slices of ``window_s / slices`` seconds; the current and previous
    ``slices - 1`` slices are kept, each with a uniform sample of at most ``per_slice`` values
    (reservoir sampling), so the window covers between ``window_s * (slices - 1) / slices`` and
    ``window_s`` seconds. A quantile is the nearest rank over the kept values, each standing for
    its slice's count divided by the values kept; an empty window gives 0, as an empty Yammer
    reservoir does. Not thread-safe: the owner locks.
    """

    __slots__ = ("_rng", "_slices", "per_slice", "slice_s", "slices")

    def __init__(
        self,
        window_s: float = QUANTILE_WINDOW_S,
        *,
        slices: int = 6,
        per_slice: int = 256,
        seed: int | None = None,
    ) -> None:
        if window_s <= 0 or slices < 1 or per_slice < 1:
            raise ValueError("window_s, slices and per_slice must be positive")
        self.slice_s = window_s / slices
        self.slices = slices
        self.per_slice = per_slice
        self._slices: deque[tuple[int, list[int], list[float]]] = deque()
        """(slice number, [values seen], kept values), oldest first."""
        self._rng = random.Random(seed)

    def _expire(self, now: float) -> int:
        current = int(now // self.slice_s)
        while self._slices and self._slices[0][0] <= current - self.slices:
            self._slices.popleft()
        return current

    def observe(self, value: float, now: float) -> None:
        current = self._expire(now)
        if not self._slices or self._slices[-1][0] != current:
            self._slices.append((current, [0], []))
        _, seen, kept = self._slices[-1]
        seen[0] += 1
        if len(kept) < self.per_slice:
            kept.append(value)
        else:
            slot = self._rng.randrange(seen[0])
            if slot < self.per_slice:
                kept[slot] = value

    def count(self, now: float) -> int:
        """Values observed in the window."""
        self._expire(now)
        return sum(seen[0] for _, seen, _ in self._slices)

    def snapshot(self, now: float) -> tuple[tuple[int, tuple[float, ...]], ...]:
        """(values seen, values kept) of each slice in the window: a copy, to rank outside a lock."""
        self._expire(now)
        return tuple((seen[0], tuple(kept)) for _, seen, kept in self._slices)

    def quantiles(self, qs: Sequence[float], now: float) -> list[float]:
        return quantiles_of(self.snapshot(now), qs)


def quantiles_of(slices: Iterable[tuple[int, Sequence[float]]], qs: Sequence[float]) -> list[float]:
    """Nearest-rank quantiles of sampled slices, each kept value weighing seen / kept (0 if empty)."""
    weighted = sorted((value, seen / len(kept)) for seen, kept in slices for value in kept)
    if not weighted:
        return [0.0 for _ in qs]
    cumulative: list[float] = []
    total = 0.0
    for _, weight in weighted:
        total += weight
        cumulative.append(total)
    answers = []
    for q in qs:
        rank = min(bisect.bisect_left(cumulative, q * total - 1e-9), len(weighted) - 1)
        answers.append(weighted[rank][0])
    return answers


# --------------------------------------------------------------------------- metric kinds


_C = TypeVar("_C")


class _Labelled:
    """Children by label values, created on first use; ``()`` is the series without labels."""

    def __init__(self, labelnames: tuple[str, ...]) -> None:
        self.labelnames = labelnames
        self._lock = threading.Lock()

    def _labels(self, values: Sequence[object], named: dict[str, object]) -> tuple[str, ...]:
        if not self.labelnames:
            raise ValueError("this metric has no labels")
        return _label_values(self.labelnames, values, named)

    def _child(
        self,
        values: Sequence[object],
        named: dict[str, object],
        store: dict[tuple[str, ...], Any],
        fresh: Callable[[], Any],
        children: dict[tuple[str, ...], _C],
        make: Callable[[tuple[str, ...]], _C],
    ) -> _C:
        """The child for these label values, its series (``fresh()``) and itself made on first use."""
        key = self._labels(values, named)
        child = children.get(key)
        if child is None:
            with self._lock:
                if key not in store:
                    store[key] = fresh()
                child = children.setdefault(key, make(key))
        return child

    def _sample_labels(self, key: tuple[str, ...]) -> dict[str, str]:
        return dict(zip(self.labelnames, key, strict=True)) if key else {}

    def _stores(self) -> tuple[dict[tuple[str, ...], Any], ...]:
        return ()

    def remove(self, *values: object) -> None:
        """Drop one labelled series: its subject is gone (a removed broker)."""
        key = tuple(str(value) for value in values)
        with self._lock:
            for store in self._stores():
                store.pop(key, None)


class Meter(_Labelled):
    """A Kafka meter: a count that only grows, exported as a counter under each of ``names``.

    With ``unlabelled`` a labelled meter also has the series without labels, as Kafka's
    BrokerTopicMetrics have an all-topics MBean beside the per-topic ones: ``inc`` counts that one,
    ``labels(…).inc`` a labelled one, and callers count both.
    """

    def __init__(
        self, names: Sequence[str], doc: str, labelnames: tuple[str, ...], *, unlabelled: bool
    ) -> None:
        super().__init__(labelnames)
        self.names = tuple(names)
        self.doc = doc
        self._counts: dict[tuple[str, ...], float] = {(): 0.0} if unlabelled or not labelnames else {}
        self._children: dict[tuple[str, ...], _MeterChild] = {}

    def _stores(self) -> tuple[dict[tuple[str, ...], Any], ...]:
        return self._counts, self._children

    def inc(self, amount: float = 1) -> None:
        if () not in self._counts:
            raise ValueError("a labelled meter counts through labels(...)")
        self.add((), amount)

    def labels(self, *values: object, **named: object) -> _MeterChild:
        return self._child(values, named, self._counts, float, self._children, lambda k: _MeterChild(self, k))

    def add(self, key: tuple[str, ...], amount: float) -> None:
        """Count ``amount`` on the series ``key`` (label values; ``()`` for none)."""
        if amount < 0:
            raise ValueError("a meter only counts up")
        with self._lock:
            self._counts[key] += amount

    def value(self, *values: object) -> float:
        """The count of one series (tests)."""
        return self._counts.get(tuple(str(v) for v in values), 0.0)

    def describe(self) -> Iterator[Metric]:
        for name in self.names:
            yield Metric(name, self.doc, "counter")

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            counts = sorted(self._counts.items())
        for name in self.names:
            family = Metric(name, self.doc, "counter")
            for key, count in counts:
                family.add_sample(name + "_total", self._sample_labels(key), count)
            yield family


class _MeterChild:
    __slots__ = ("_key", "_meter")

    def __init__(self, meter: Meter, key: tuple[str, ...]) -> None:
        self._meter = meter
        self._key = key

    def inc(self, amount: float = 1) -> None:
        self._meter.add(self._key, amount)


class Gauge(_Labelled):
    """A gauge exported under each of ``names``; a function-backed value is read once per scrape."""

    def __init__(self, names: Sequence[str], doc: str, labelnames: tuple[str, ...]) -> None:
        super().__init__(labelnames)
        self.names = tuple(names)
        self.doc = doc
        self._values: dict[tuple[str, ...], float | Callable[[], float]] = {} if labelnames else {(): 0.0}
        self._children: dict[tuple[str, ...], _GaugeChild] = {}

    def _stores(self) -> tuple[dict[tuple[str, ...], Any], ...]:
        return self._values, self._children

    def set(self, value: float) -> None:
        self.put((), float(value))

    def set_function(self, fn: Callable[[], float]) -> None:
        self.put((), fn)

    def labels(self, *values: object, **named: object) -> _GaugeChild:
        return self._child(values, named, self._values, float, self._children, lambda k: _GaugeChild(self, k))

    def put(self, key: tuple[str, ...], value: float | Callable[[], float]) -> None:
        """Set the series ``key`` to a value or to a function read at scrape time."""
        if key == () and self.labelnames:
            raise ValueError("a labelled gauge is set through labels(...)")
        with self._lock:
            self._values[key] = value

    def describe(self) -> Iterator[Metric]:
        for name in self.names:
            yield Metric(name, self.doc, "gauge")

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            values = sorted(self._values.items(), key=lambda item: item[0])
        read = [
            (key, value)
            for key, value in ((k, _read(self.names[0], v)) for k, v in values)
            if value is not None
        ]
        for name in self.names:
            family = Metric(name, self.doc, "gauge")
            for key, value in read:
                family.add_sample(name, self._sample_labels(key), value)
            yield family


def _read(name: str, value: float | Callable[[], float]) -> float | None:
    """A gauge's value; a failing function costs its sample, not the whole scrape."""
    if not callable(value):
        return value
    try:
        return float(value())
    except Exception:
        log.warning("gauge %s could not be read", name, exc_info=True)
        return None


class _GaugeChild:
    __slots__ = ("_gauge", "_key")

    def __init__(self, gauge: Gauge, key: tuple[str, ...]) -> None:
        self._gauge = gauge
        self._key = key

    def set(self, value: float) -> None:
        self._gauge.put(self._key, float(value))

    def set_function(self, fn: Callable[[], float]) -> None:
        self._gauge.put(self._key, fn)


class _GaugeFamily:
    """Gauges whose label sets are read at scrape time (per partition, per broker, …)."""

    def __init__(
        self,
        names: Sequence[str],
        doc: str,
        labelnames: tuple[str, ...],
        read: Callable[[], Iterable[tuple[Sequence[object], float]]],
    ) -> None:
        self.names = tuple(names)
        self.doc = doc
        self.labelnames = labelnames
        self.read = read

    def describe(self) -> Iterator[Metric]:
        for name in self.names:
            yield Metric(name, self.doc, "gauge")

    def collect(self) -> Iterator[Metric]:
        try:
            rows = [(tuple(str(v) for v in values), float(value)) for values, value in self.read()]
        except Exception:
            log.warning("gauges %s could not be read", self.names[0], exc_info=True)
            rows = []
        for name in self.names:
            family = Metric(name, self.doc, "gauge")
            for key, value in rows:
                family.add_sample(name, dict(zip(self.labelnames, key, strict=True)), value)
            yield family


class Timer(_Labelled):
    """A Kafka timer (or histogram) in milliseconds: a summary with recent quantiles under
    ``summary_name`` and a cumulative Prometheus histogram under ``histogram_name``."""

    def __init__(
        self,
        summary_name: str,
        histogram_name: str,
        doc: str,
        labelnames: tuple[str, ...],
        *,
        buckets: Sequence[float] = MS_BUCKETS,
        window_s: float = QUANTILE_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(labelnames)
        self.summary_name = summary_name
        self.histogram_name = histogram_name
        self.doc = doc
        self.buckets = tuple(float(b) for b in buckets)
        if self.buckets[-1] != float("inf"):
            self.buckets += (float("inf"),)
        self.window_s = window_s
        self.clock = clock
        self._series: dict[tuple[str, ...], _TimerSeries] = {}
        self._children: dict[tuple[str, ...], _TimerChild] = {}
        if not labelnames:
            self._series[()] = _TimerSeries(len(self.buckets), window_s)

    def _stores(self) -> tuple[dict[tuple[str, ...], Any], ...]:
        return self._series, self._children

    def observe(self, value_ms: float) -> None:
        if self.labelnames:
            raise ValueError("a labelled timer observes through labels(...)")
        self.observe_key((), value_ms)

    def labels(self, *values: object, **named: object) -> _TimerChild:
        def series() -> _TimerSeries:
            return _TimerSeries(len(self.buckets), self.window_s)

        return self._child(
            values, named, self._series, series, self._children, lambda k: _TimerChild(self, k)
        )

    def observe_key(self, key: tuple[str, ...], value: float) -> None:
        """Record ``value`` (ms) on the series ``key``."""
        now = self.clock()
        index = bisect.bisect_left(self.buckets, value)
        with self._lock:
            series = self._series[key]
            series.bucket_counts[index] += 1
            series.count += 1
            series.total += value
            series.window.observe(value, now)

    def describe(self) -> Iterator[Metric]:
        yield Metric(self.summary_name, self.doc, "summary")
        yield Metric(self.histogram_name, self.doc, "histogram")

    def collect(self) -> Iterator[Metric]:
        now = self.clock()
        qs = [q for _, q in QUANTILES]
        with self._lock:
            rows = [
                (key, s.count, s.total, list(s.bucket_counts), s.window.snapshot(now))
                for key, s in sorted(self._series.items(), key=lambda item: item[0])
            ]
        # Ranked outside the lock: handler threads keep observing meanwhile.
        summary = Metric(self.summary_name, self.doc, "summary")
        histogram = Metric(self.histogram_name, self.doc, "histogram")
        for key, count, total, bucket_counts, window in rows:
            quantiles = quantiles_of(window, qs)
            labels = self._sample_labels(key)
            for (label, _), value in zip(QUANTILES, quantiles, strict=True):
                summary.add_sample(self.summary_name, {**labels, "quantile": label}, value)
            summary.add_sample(self.summary_name + "_count", labels, count)
            summary.add_sample(self.summary_name + "_sum", labels, total)
            cumulative = 0
            for bound, in_bucket in zip(self.buckets, bucket_counts, strict=True):
                cumulative += in_bucket
                histogram.add_sample(
                    self.histogram_name + "_bucket", {**labels, "le": floatToGoString(bound)}, cumulative
                )
            histogram.add_sample(self.histogram_name + "_count", labels, count)
            histogram.add_sample(self.histogram_name + "_sum", labels, total)
        yield summary
        yield histogram


class _TimerSeries:
    __slots__ = ("bucket_counts", "count", "total", "window")

    def __init__(self, buckets: int, window_s: float) -> None:
        self.bucket_counts = [0] * buckets
        self.count = 0
        self.total = 0.0
        self.window = WindowedQuantiles(window_s)


class _TimerChild:
    __slots__ = ("_key", "_timer")

    def __init__(self, timer: Timer, key: tuple[str, ...]) -> None:
        self._timer = timer
        self._key = key

    def observe(self, value_ms: float) -> None:
        self._timer.observe_key(self._key, value_ms)


# --------------------------------------------------------------------------- the registry


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
        labelnames = tuple(_label(key) for key in labels)
        self.catalogue.append(
            Documented(_mbean(domain, mbean_type, name, labels), kind, labelnames, doc, names, not addition)
        )
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
        self.registry.register(_GaugeFamily([n.name for n in names], doc, labelnames, read))

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
