"""The kinds of metric, as Prometheus collectors: Kafka's meters, gauges and timers, labelled or not.

Each is exported under every name it is given (see ``daemon.metric_names``); handler threads update
them while the scrape thread collects, so every change and every read takes the metric's lock.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from prometheus_client.core import Metric
from prometheus_client.utils import floatToGoString

from daemon.quantiles import QUANTILE_WINDOW_S, QUANTILES, WindowedQuantiles, quantiles_of

__all__ = ["MS_BUCKETS", "Gauge", "GaugeFamily", "Meter", "Timer"]

log = logging.getLogger("daemon.metrics")
"""Named after the registry's module, as the metrics' log lines always were."""

MS_BUCKETS = (1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, float("inf"))

_bucket_label: Callable[[float], str] = floatToGoString
"""A bucket bound as the ``le`` label spells it (``2.5``, ``+Inf``); prometheus_client's, typed here."""


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


class GaugeFamily:
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
                    self.histogram_name + "_bucket", {**labels, "le": _bucket_label(bound)}, cumulative
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
