"""Keeps the tables of ``docs/metrics.md`` equal to what the daemons register.

Each table is written from one daemon's registry: a broker and a controller are built (not started)
in a scratch directory, and every metric they declare (``Metrics.catalogue``: Kafka MBean, names,
labels, meaning) is listed, followed by the standard collectors' families read off the registry.
``python -m cluster.metrics_reference`` rewrites the tables in place; ``--check`` fails when they
differ, and the process tests compare a live scrape of each daemon with its table.
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Iterable
from functools import partial
from pathlib import Path

from cluster.doc_pages import page_command
from daemon.metric_names import Documented
from daemon.metrics import Metrics

PAGE = Path(__file__).resolve().parent.parent / "docs" / "metrics.md"
DAEMONS = ("broker", "controller")
TYPE_OF_KIND = {
    "gauge": "gauge",
    "meter": "meter: counter",
    "timer": "timer: summary, histogram",
    "histogram": "histogram: summary, histogram",
}
"""Kafka's kind of metric and the Prometheus types it is exported as."""
SCHEME_NOTE = {"jmx": "", "strimzi": " (Strimzi)", "histogram": " (histogram)"}
SUFFIXES = {"summary": " {quantile}, _count, _sum", "histogram": " _bucket, _count, _sum"}
_NAME = re.compile(r"^`([a-zA-Z_:][a-zA-Z0-9_:]*)`")


def _block(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- metrics:{name} -->\n)(?:.*?\n)?(<!-- /metrics:{name} -->)", re.S)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _names_cell(entry: Documented) -> str:
    parts = []
    for exported in entry.names:
        parts.append(f"`{exported.name}`{SUFFIXES.get(exported.type, '')}{SCHEME_NOTE[exported.scheme]}")
    return "<br>".join(parts)


def _kafka_row(entry: Documented) -> str:
    mbean = f"`{entry.mbean}`" + ("" if entry.in_kafka else " (not in Kafka)")
    labels = ", ".join(f"`{label}`" for label in entry.labels) or "—"
    return f"| {mbean} | {_names_cell(entry)} | {TYPE_OF_KIND[entry.kind]} | {labels} | {_cell(entry.doc)} |"


def _declared(metrics: Metrics) -> set[str]:
    return {exported.name for entry in metrics.catalogue for exported in entry.names}


def _other_rows(metrics: Metrics) -> Iterable[str]:
    """The standard collectors' families (process, platform, GC), as the registry gives them."""
    declared = _declared(metrics)
    for family in sorted(metrics.registry.collect(), key=lambda f: f.name):
        name = family.name + ("_total" if family.type == "counter" else "")
        if name in declared:
            continue
        labels = sorted({label for sample in family.samples for label in sample.labels})
        shown = ", ".join(f"`{label}`" for label in labels) or "—"
        yield f"| — | `{name}` | {family.type} | {shown} | {_cell(family.documentation)} |"


def table(metrics: Metrics) -> str:
    """The markdown table of every family ``metrics`` exports."""
    rows = ["| Kafka MBean | Prometheus names | type | labels | meaning |", "| --- | --- | --- | --- | --- |"]
    rows += [_kafka_row(entry) for entry in metrics.catalogue]
    rows += list(_other_rows(metrics))
    return "\n".join(rows)


def documented_names(page: str, daemon: str) -> set[str]:
    """The family names (as ``# TYPE`` lines of the text exposition show them) in ``daemon``'s table."""
    match = _block(daemon).search(page)
    if match is None:
        raise ValueError(f"no <!-- metrics:{daemon} --> … <!-- /metrics:{daemon} --> block")
    names = set()
    for line in match.group(0).splitlines():
        cells = line.split(" | ")
        if len(cells) < 2 or not cells[0].startswith("| "):
            continue
        for part in cells[1].split("<br>"):
            found = _NAME.match(part.strip())
            if found:
                names.add(found.group(1))
    return names


def exposed_names(text: str) -> set[str]:
    """The family names of a text-format scrape (its ``# TYPE`` lines)."""
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def render(page: str, tables: dict[str, str]) -> str:
    """``page`` with every marked table replaced; ValueError if a marker pair is missing."""
    for name, content in tables.items():
        pattern = _block(name)
        if not pattern.search(page):
            raise ValueError(f"no <!-- metrics:{name} --> … <!-- /metrics:{name} --> block")
        page = pattern.sub(partial(_fill, content), page)
    return page


def _fill(content: str, block: re.Match[str]) -> str:
    return block.group(1) + content + "\n" + block.group(2)


def daemon_registries(scratch: Path) -> dict[str, Metrics]:
    """A broker's and a controller's registries, from daemons built (never started) in ``scratch``."""
    from broker.config import load as broker_config
    from broker.server import BrokerServer
    from controller.config import load as controller_config
    from controller.daemon import ControllerDaemon

    unreachable = "127.0.0.1:1"  # nothing connects: the daemons are only constructed
    broker = BrokerServer(
        broker_config(
            None,
            {
                "KAFKA_BROKER_ID": "1",
                "KAFKA_ZOOKEEPER_CONNECT": unreachable,
                "KAFKA_LISTENERS": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
                "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "KAFKA_CONTROL_PLANE_LISTENER_NAME": "CONTROLLER",
                "KAFKA_LOG_DIRS": str(scratch / "logs"),
            },
        )
    )
    broker.events.close()
    controller = ControllerDaemon(
        controller_config(None, {"KAFKA_CONTROLLER_ID": "1001", "KAFKA_ZOOKEEPER_CONNECT": unreachable})
    )
    return {"broker": broker.metrics, "controller": controller.metrics}


def tables() -> dict[str, str]:
    with tempfile.TemporaryDirectory(prefix="metrics-reference-") as scratch:
        return {name: table(metrics) for name, metrics in daemon_registries(Path(scratch)).items()}


def main(argv: list[str] | None = None) -> int:
    return page_command("cluster.metrics_reference", __doc__, PAGE, lambda text: render(text, tables()), argv)


if __name__ == "__main__":
    sys.exit(main())
