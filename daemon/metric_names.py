"""Names a Kafka MBean is exported under in Prometheus, and the catalogue entry that documents it.

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
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Documented", "ExportedName", "exported_names", "jmx_name", "label_name", "mbean_text"]

_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")
_KAFKA_DOMAIN = re.compile(r"kafka\.(\w+)")
_METER = re.compile(r"(.+)PerSec\w*")
_PERCENT = re.compile(r"(.+)Percent\w*")


def jmx_name(domain: str, mbean_type: str, name: str) -> str:
    """The JMX exporter's metric name for ``domain:type=mbean_type,name=name``."""
    return _UNSAFE.sub("_", f"{domain}_{mbean_type}_{name}").lower()


def label_name(key: str) -> str:
    """An MBean key (``broker-id``) as a Prometheus label name (``broker_id``)."""
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


def mbean_text(domain: str, mbean_type: str, name: str, labels: Sequence[str]) -> str:
    """``domain:type=T,name=N`` followed by ``,key=…`` for each of ``labels``."""
    return f"{domain}:type={mbean_type},name={name}" + "".join(f",{key}=…" for key in labels)
