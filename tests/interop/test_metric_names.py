"""The dashboard's metric names on Apache Kafka and on ours (issue 28): name by name, label by label.

Every metric that the shipped Grafana dashboard and the Prometheus alert rules query is looked up in
two sets of scrapes taken side by side, each cluster in its own chroot of the session's ZooKeeper:

* a Kafka 3.9 broker, alone and so its cluster's controller, exporting its MBeans through the
  Prometheus JMX exporter's Java agent with Strimzi's rules (``kafkapeer.jmx_exporter``);
* our broker and our controller (the dashboard reads both jobs), the controller active.

A metric matches when both export it, with the same label names, with a series for every value the
queries match with ``=``, and as a counter on both sides or on neither (``rate()`` needs one). The
differences are listed in :data:`DIFFERENCES`: a deliberate one is asserted as it is (ours exports the
name, Kafka does not, and where Kafka has another name for it both export that one); a gap to close is
a strict xfail named ``gap: …``. docs/metrics.md's table "Dashboard names on Kafka" must say what this
run saw.

The jars come from ``make kafka`` (Kafka's and the agent's): without them this fails, never skips.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from prometheus_client.parser import text_string_to_metric_families

from cluster.processes import BrokerProcess, ControllerProcess, DaemonProcess
from kafkapeer.broker import KafkaBroker
from kafkapeer.jars import JarsMissing
from kafkapeer.jmx_exporter import agent_options
from zkserver.ports import free_ports
from zkserver.server import ZooKeeperServer

pytestmark = pytest.mark.zookeeper

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "deploy" / "grafana" / "dashboards" / "kafka-control-plane.json"
ALERT_RULES = sorted((REPO / "deploy" / "prometheus" / "rules").glob("*.yml"))
DOC = REPO / "docs" / "metrics.md"
DOC_TABLE = re.compile(r"<!-- metric-names:dashboard -->\n(.*?)<!-- /metric-names:dashboard -->", re.S)

START_TIMEOUT_S = 60.0
"""A Kafka broker's cold JVM start, election and first UpdateMetadata on a busy 2-core machine."""

TARGET_LABELS = frozenset({"instance", "job", "service"})
"""Labels Prometheus attaches to every series of a target (prometheus.yml): no daemon exports them."""

NOT_A_DAEMON = {
    "up": "Prometheus's own series for each scrape",
    "zookeeper_up": "the ZooKeeper exporter's (zkserver.exporter), not a broker's or controller's",
}
"""Names the dashboard or the alerts query that neither a Kafka broker nor our daemons export."""


@dataclass(frozen=True, slots=True)
class Difference:
    """A dashboard metric that is not the same on both sides, and why."""

    why: str
    """What docs/metrics.md's table says in its "same?" column."""
    instead: str | None = None
    """The name Kafka's exporter gives the same measurement, which ours exports too."""
    gap: bool = False
    """A gap to close (a strict xfail); otherwise deliberate, and asserted as it is."""


_HISTOGRAM = "ours only: a Kafka timer has quantiles, no buckets"
_NOT_IN_KAFKA = "ours only: no such MBean in Kafka 3.9"

DIFFERENCES: dict[str, Difference] = {
    "kafka_controller_controllereventmanager_eventqueuetimems_histogram_bucket": Difference(
        _HISTOGRAM, "kafka_controller_controllereventmanager_eventqueuetimems"
    ),
    "kafka_network_requestmetrics_totaltimems_histogram_bucket": Difference(
        _HISTOGRAM, "kafka_network_requestmetrics_totaltimems"
    ),
    "kafka_controller_kafkacontroller_brokerepoch": Difference(_NOT_IN_KAFKA),
    "kafka_controller_kafkacontroller_controllerepoch": Difference(_NOT_IN_KAFKA),
    "kafka_server_kafkaserver_brokerepoch": Difference(_NOT_IN_KAFKA),
    "kafka_server_sessionexpirelistener_sessionstate": Difference(
        "ours only: Kafka's SessionState is a string, which the exporter skips"
    ),
}


# ---------------------------------------------------------------- what the dashboard and alerts query


@dataclass(frozen=True, slots=True)
class Query:
    """One metric the dashboard or an alert selects, with what the expressions use of its labels."""

    metric: str
    labels: frozenset[str]
    """Label names matched on or grouped by (Prometheus's target labels left out)."""
    values: frozenset[tuple[str, str]]
    """``(label, value)`` of each ``label="value"`` matcher."""


_PROMQL_WORDS = frozenset({"and", "or", "unless", "bool", "offset", "inf", "nan"})
_STRING = re.compile(r'"(?:\\.|[^"\\])*"')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_SELECTOR = re.compile(r"([A-Za-z_:][\w:]*)\s*(\{[^}]*\})?")
_MATCHER = re.compile(r'([A-Za-z_]\w*)\s*(=~|!~|!=|=)\s*("(?:\\.|[^"\\])*")')


def selected(expr: str) -> dict[str, Query]:
    """The metrics ``expr`` selects; grouping labels (``by (…)``) count for each of them."""
    strings: list[str] = []

    def keep(match: re.Match[str]) -> str:  # strings out of the way, matchers keep their values
        strings.append(json.loads(match[0]))
        return f'"{len(strings) - 1}"'

    text = _STRING.sub(keep, expr)
    grouping = {label.strip() for labels in _GROUPING.findall(text) for label in labels.split(",")}
    text = re.sub(r"\[[^\]]*\]", "", _GROUPING.sub(" ", text))  # ranges and subqueries
    found: dict[str, Query] = {}
    for match in _SELECTOR.finditer(text):
        name, matchers = match[1], _MATCHER.findall(match[2] or "")
        if text[match.end() :].lstrip().startswith("(") or name.lower() in _PROMQL_WORDS:
            continue  # a function, an aggregation or a keyword
        labels = ({label for label, _, _ in matchers} | grouping) - {""} - TARGET_LABELS
        values = {(label, strings[int(v.strip('"'))]) for label, op, v in matchers if op == "="}
        old = found.get(name, Query(name, frozenset(), frozenset()))
        found[name] = Query(name, old.labels | labels, old.values | {v for v in values if v[0] in labels})
    return found


def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for item in items:
        yield item
        yield from panels(item.get("panels", []))


def expressions() -> list[str]:
    """Every dashboard target's expression and every alert rule's."""
    dashboard = json.loads(DASHBOARD.read_text())
    found = [target["expr"] for panel in panels(dashboard["panels"]) for target in panel.get("targets", [])]
    for path in ALERT_RULES:
        found += [expr.strip() for expr in re.findall(r"^\s+expr: (.+)$", path.read_text(), re.M)]
    block = [expr for expr in found if expr.startswith((">", "|"))]
    assert not block, f"an alert's expr is a YAML block; read it whole: {block}"
    return found


def queries() -> dict[str, Query]:
    """Each metric queried (but :data:`NOT_A_DAEMON`'s), with what all expressions use of it."""
    merged: dict[str, Query] = {}
    for expr in expressions():
        for name, query in selected(expr).items():
            old = merged.get(name, Query(name, frozenset(), frozenset()))
            merged[name] = Query(name, old.labels | query.labels, old.values | query.values)
    return {name: merged[name] for name in sorted(merged) if name not in NOT_A_DAEMON}


# ---------------------------------------------------------------- what a /metrics text exports


@dataclass(slots=True)
class Exported:
    """One sample name of a scrape: its family's type, whether PromQL may ``rate()`` it, its labels."""

    family_type: str
    counter: bool
    values: set[tuple[str, str]] = field(default_factory=set)

    @property
    def labels(self) -> set[str]:
        return {label for label, _ in self.values}


def exported(*texts: str) -> dict[str, Exported]:
    """Every sample name in text-format scrapes, the series of one name merged."""
    out: dict[str, Exported] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                suffix = sample.name[len(family.name) :]
                counter = family.type == "counter" or (
                    family.type in ("summary", "histogram") and suffix in ("_count", "_sum", "_bucket")
                )
                entry = out.setdefault(sample.name, Exported(family.type, counter))
                entry.values.update(sample.labels.items())
    return out


def mismatch(name: str, query: Query | None, kafka: dict[str, Exported], ours: dict[str, Exported]) -> str:
    """Why ``name`` is not the same on both sides ("" when it is)."""
    theirs, mine = kafka.get(name), ours.get(name)
    if theirs is None or mine is None:
        return "absent from " + " and ".join(
            side for side, entry in (("Kafka's", theirs), ("ours", mine)) if entry is None
        )
    if theirs.labels != mine.labels:
        return f"labels: Kafka's {sorted(theirs.labels)}, ours {sorted(mine.labels)}"
    if theirs.counter != mine.counter:
        return f"kind: Kafka's {theirs.family_type}, ours {mine.family_type}"
    if query is not None:
        unused = query.labels - mine.labels
        if unused:
            return f"the queries use labels neither side has: {sorted(unused)}"
        missing = {side: query.values - entry.values for side, entry in (("Kafka's", theirs), ("ours", mine))}
        if any(missing.values()):
            return f"no series for the queries' label values: {missing}"
    return ""


# ---------------------------------------------------------------- both sides, started once


@dataclass(frozen=True, slots=True)
class Scrapes:
    kafka: dict[str, Exported]
    ours: dict[str, Exported]
    """Our broker's and our controller's samples together."""


def scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def scrape_when(port: int, names: tuple[str, ...], what: str, alive: Callable[[], None]) -> str:
    """The scrape on ``port`` once it has samples of every one of ``names``."""
    deadline = time.monotonic() + START_TIMEOUT_S
    text = ""
    while time.monotonic() < deadline:
        alive()
        try:
            text = scrape(port)
        except (OSError, urllib.error.URLError):
            text = ""
        if text and all(name in exported(text) for name in names):
            return text
        time.sleep(0.5)
    raise AssertionError(f"{what}: no {names} within {START_TIMEOUT_S} s; last scrape:\n{text[-3000:]}")


def running(process: DaemonProcess) -> Callable[[], None]:
    def check() -> None:
        if process.process is not None and process.process.poll() is not None:
            raise AssertionError(f"{process.name} exited:\n{process.tail()}")

    return check


def active(text: str) -> bool:
    """Whether the scrape is an active controller's (ActiveControllerCount 1)."""
    return any(
        sample.name == "kafka_controller_kafkacontroller_activecontrollercount" and sample.value == 1
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    )


@pytest.fixture(scope="module")
def chroots(zk_server: ZooKeeperServer) -> Iterator[tuple[str, str]]:
    """Two clusters' connect strings: ours, and the Kafka broker's."""
    root = f"/test-metric-names-{uuid.uuid4().hex[:8]}"
    admin = KazooClient(hosts=zk_server.connect_string)
    admin.start(timeout=15)
    try:
        admin.ensure_path(f"{root}/ours")
        admin.ensure_path(f"{root}/kafka")
        yield f"{zk_server.connect_string}{root}/ours", f"{zk_server.connect_string}{root}/kafka"
    finally:
        try:
            admin.delete(root, recursive=True)
        finally:
            admin.stop()
            admin.close()


def kafka_broker(zk_connect: str, workdir: Path, agent_port: int) -> KafkaBroker:
    """Kafka with our brokers' listener names (a CONTROLLER control plane, hence the control-plane
    request queue gauge) and the JMX exporter's agent on ``agent_port``."""
    try:
        options = agent_options(agent_port, workdir / "jmx-exporter")
    except JarsMissing as exc:
        pytest.fail(f"the JMX exporter's agent is missing, so Kafka's names cannot be read: {exc}")
    plain, control = free_ports(2)
    settings = {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "control.plane.listener.name": "CONTROLLER",
    }
    listeners = f"PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{control}"
    broker = KafkaBroker(0, zk_connect, workdir, listeners, **settings)
    broker.java_options = options
    return broker


@pytest.fixture(scope="module")
def scrapes(
    kafka_jars: str, chroots: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Scrapes]:
    """Both sides once each controller is active and each broker has answered its first
    UpdateMetadata (so the errors meter has its ``request="UpdateMetadata",error="NONE"`` series)."""
    ours_zk, kafka_zk = chroots
    workdir = tmp_path_factory.mktemp("metric-names")
    agent_port, broker_port, controller_port = free_ports(3)
    kafka = kafka_broker(kafka_zk, workdir, agent_port)
    broker = BrokerProcess(1, ours_zk, workdir, metrics_port=broker_port)
    controller = ControllerProcess(1001, ours_zk, workdir, metrics_port=controller_port)
    daemons: list[DaemonProcess] = []
    try:
        kafka.start()
        daemons += [broker.start(), controller.start()]
        epochs = ("kafka_controller_kafkacontroller_brokerepoch",)
        controller_text = scrape_when(controller_port, epochs, "our controller", running(controller))
        errors = ("kafka_network_requestmetrics_errors_total",)
        broker_text = scrape_when(broker_port, errors, "our broker", running(broker))
        channel = ("kafka_controller_controllerchannelmanager_queuesize", *errors)
        kafka_text = scrape_when(agent_port, channel, "Kafka's broker", kafka.check_running)
        assert active(kafka_text), "Kafka's broker is not its cluster's controller"
        assert active(controller_text), "our controller is not active"
        yield Scrapes(exported(kafka_text), exported(broker_text, controller_text))
    except BaseException:
        print(f"--- {kafka.name} ({kafka.log_path}) ---\n{kafka.tail()}")
        raise
    finally:
        kafka.kill()
        for daemon in daemons:
            daemon.kill()


# ---------------------------------------------------------------- the table docs/metrics.md shows


def cell(entry: Exported | None) -> str:
    if entry is None:
        return "—"
    labels = ", ".join(f"`{label}`" for label in sorted(entry.labels))
    return f"{entry.family_type}: {labels}" if labels else entry.family_type


def table(scrapes: Scrapes) -> str:
    rows = [
        "| dashboard metric | Kafka (JMX exporter + Strimzi rules) | ours | same? |",
        "| --- | --- | --- | --- |",
    ]
    for name, query in queries().items():
        difference = DIFFERENCES.get(name)
        if difference is None:
            same = mismatch(name, query, scrapes.kafka, scrapes.ours) or "yes"
        else:
            instead = f"; Kafka's: `{difference.instead}`, ours too" if difference.instead else ""
            same = f"no: {difference.why}{instead}"
        kafka, ours = cell(scrapes.kafka.get(name)), cell(scrapes.ours.get(name))
        rows.append(f"| `{name}` | {kafka} | {ours} | {same} |")
    return "\n".join(rows) + "\n"


# ---------------------------------------------------------------- static checks


def test_promql_selectors_are_read_with_their_labels_and_values() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le, request) (rate(a_bucket{request=~"x|y"}[$__rate_interval])))'
        ' / on(instance) group_left(service) max without (job) (b{state="CONNECTED",job="j"})'
        " or (c or vector(0)) > bool 1"
    )
    found = selected(expr)
    assert sorted(found) == ["a_bucket", "b", "c"]
    assert found["a_bucket"].labels == {"le", "request"} and found["a_bucket"].values == set()
    assert found["b"].labels == {"le", "request", "state"}
    assert found["b"].values == {("state", "CONNECTED")}


def test_every_listed_difference_and_exception_is_queried() -> None:
    """An entry whose metric the dashboard and alerts no longer query is stale: drop it."""
    queried = set(queries())
    assert sorted(set(DIFFERENCES) - queried) == []
    names = {name for expr in expressions() for name in selected(expr)}
    assert sorted(set(NOT_A_DAEMON) - names) == []
    assert len(queried) >= 20


# ---------------------------------------------------------------- against the running daemons


def gap_marks(name: str) -> list[pytest.MarkDecorator]:
    difference = DIFFERENCES.get(name)
    if difference is None or not difference.gap:
        return []
    reason = f"gap: {name}: {difference.why} (Kafka: {difference.instead})"
    return [pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)]


@pytest.mark.parametrize("name", [pytest.param(name, marks=gap_marks(name)) for name in queries()])
def test_a_dashboard_metric_is_the_same_on_kafka_and_on_ours(name: str, scrapes: Scrapes) -> None:
    query = queries()[name]
    difference = DIFFERENCES.get(name)
    if difference is None or difference.gap:
        assert mismatch(name, query, scrapes.kafka, scrapes.ours) == ""
        return
    # A deliberate difference: ours exports what the dashboard queries, Kafka does not.
    assert name in scrapes.ours
    assert query.labels <= scrapes.ours[name].labels and query.values <= scrapes.ours[name].values
    assert name not in scrapes.kafka
    if difference.instead is not None:
        assert mismatch(difference.instead, None, scrapes.kafka, scrapes.ours) == ""


def test_names_both_export_have_the_same_labels_and_kind(scrapes: Scrapes) -> None:
    """Beyond the dashboard: every sample name in both scrapes has the same label names and kind."""
    shared = sorted(set(scrapes.kafka) & set(scrapes.ours))
    assert len(shared) > 50
    assert {name: why for name in shared if (why := mismatch(name, None, scrapes.kafka, scrapes.ours))} == {}


def test_the_docs_table_says_what_this_run_saw(scrapes: Scrapes) -> None:
    found = DOC_TABLE.search(DOC.read_text())
    assert found is not None, f"{DOC} has no <!-- metric-names:dashboard --> block"
    assert found[1] == table(scrapes), f"put this table in docs/metrics.md:\n{table(scrapes)}"
