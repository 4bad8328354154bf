"""Prometheus scrapes every daemon of docker-compose.yml, and the Grafana dashboard only asks for
metrics the daemons export: the names in its PromQL are compared with a scrape of the compose
cluster's daemons, run as in test_compose_cluster."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.compose import (
    REPO,
    Model,
    compose_model,
    daemon_services,
    exporter_services,
    zookeeper_services,
)
from tests.support.local_compose import LocalCompose, running_compose

DEPLOY = REPO / "deploy"
PROMETHEUS_DIR = DEPLOY / "prometheus"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "kafka-control-plane.json"
DATASOURCES = DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml"
DASHBOARD_PROVIDERS = DEPLOY / "grafana" / "provisioning" / "dashboards" / "kafka-control-plane.yml"

REQUIRED = {
    "active controllers": "kafka_controller_kafkacontroller_activecontrollercount",
    "controller epoch": "kafka_controller_kafkacontroller_controllerepoch",
    "offline partitions": "kafka_controller_kafkacontroller_offlinepartitionscount",
    "under-replicated partitions": "kafka_server_replicamanager_underreplicatedpartitions",
    "under-min-ISR partitions": "kafka_server_replicamanager_underminisrpartitioncount",
    "broker epochs": "kafka_server_kafkaserver_brokerepoch",
    "event queue size": "kafka_controller_controllereventmanager_eventqueuesize",
    "event queue time": "kafka_controller_controllereventmanager_eventqueuetimems_histogram_bucket",
    "channel queue per broker": "kafka_controller_controllerchannelmanager_queuesize",
    "data-plane queue": "kafka_network_requestchannel_requestqueuesize",
    "control-plane queue": "kafka_network_requestchannel_controlplanerequestqueuesize",
    "control request latency": "kafka_network_requestmetrics_totaltimems_histogram_bucket",
    "stale-epoch rejections": "kafka_network_requestmetrics_errors_total",
    "ISR shrinks": "kafka_server_replicamanager_isrshrinks_total",
    "ISR expands": "kafka_server_replicamanager_isrexpands_total",
    "leaders per broker": "kafka_server_replicamanager_leadercount",
    "unclean elections": "kafka_controller_controllerstats_uncleanleaderelections_total",
}

_PROMQL_WORDS = frozenset({"and", "or", "unless", "bool", "offset", "inf", "nan"})
_SAMPLE_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("_sum", "_count"),
}


# ---------------------------------------------------------------- reading the dashboard and Prometheus


def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for item in items:
        yield item
        yield from panels(item.get("panels", []))


def dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in panels(dashboard["panels"]) for t in p.get("targets", [])]


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are no function, keyword or label."""
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", text)  # label matchers, ranges
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][\w:]*", text):
        is_call = text[match.end() :].lstrip().startswith("(")
        if not is_call and match[0].lower() not in _PROMQL_WORDS:
            names.add(match[0])
    return names


def exported_names(exposition: str) -> set[str]:
    """Every sample name a /metrics text can carry, also for labelled families with no child yet."""
    names: set[str] = set()
    for family in text_string_to_metric_families(exposition):
        names |= {sample.name for sample in family.samples}
        names |= {family.name + suffix for suffix in _SAMPLE_SUFFIXES.get(family.type, ("",))}
    return names


def scrape_targets() -> dict[str, list[dict[str, Any]]]:
    """Target groups by job, from prometheus.yml's file_sd files (read from this repository)."""
    config = PROMETHEUS_DIR.joinpath("prometheus.yml").read_text()
    jobs = re.findall(r"job_name:\s*(\S+)\s+file_sd_configs:\s+- files: \[([^\]]+)\]", config)
    assert jobs, "prometheus.yml lists its scrape jobs with file_sd_configs"
    targets: dict[str, list[dict[str, Any]]] = {}
    for job, files in jobs:
        for path in (f.strip() for f in files.split(",")):
            assert path.startswith("/etc/prometheus/"), path
            local = PROMETHEUS_DIR / path.removeprefix("/etc/prometheus/")
            targets.setdefault(job, []).extend(json.loads(local.read_text()))
    return targets


def bind_mounts(model: Model, service: str) -> dict[str, Path]:
    """Container path -> host path of a service's bind mounts."""
    mounts = model["services"][service]["volumes"]
    return {m["target"]: Path(m["source"]) for m in mounts if m["type"] == "bind"}


# ---------------------------------------------------------------- static checks


def test_metric_names_are_read_from_promql() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le, request) (rate(a_bucket{request=~"x|y"}[$__rate_interval])))'
        " / on(instance) group_left(service) max without (job) (b) or c > bool 1"
    )
    assert metric_names(expr) == {"a_bucket", "b", "c"}


def test_prometheus_scrapes_every_daemon_and_the_zookeeper_exporter_on_its_metrics_port() -> None:
    model = compose_model()
    assert bind_mounts(model, "prometheus")["/etc/prometheus"] == PROMETHEUS_DIR
    jobs = scrape_targets()
    groups = [group for job in jobs.values() for group in job]
    targets = [target for group in groups for target in group["targets"]]
    services = model["services"]
    scraped = daemon_services(model) + exporter_services(model)
    expected = [f"{n}:{services[n]['environment']['KAFKA_METRICS_PORT']}" for n in scraped]
    assert sorted(targets) == sorted(expected)
    assert [g["labels"]["service"] for g in jobs["zookeeper"]] == ["zookeeper-exporter"]
    command = services["zookeeper-exporter"]["command"]
    assert command[:3] == ["python", "-m", "zkserver.exporter"]
    servers = command[command.index("--zookeeper") + 1].split(",")
    assert sorted(s.partition(":")[0] for s in servers) == zookeeper_services(model)
    for name in zookeeper_services(model):  # the exporter reads mntr, which must be allowed
        assert "mntr" in services[name]["environment"]["ZOO_4LW_COMMANDS_WHITELIST"].split(",")
    for group in groups:  # the dashboard's legends name daemons by this label
        assert [group["labels"]["service"]] == [t.split(":")[0] for t in group["targets"]]


def test_grafana_provisions_the_datasource_and_dashboard_the_panels_use() -> None:
    mounts = bind_mounts(compose_model(), "grafana")
    assert mounts["/etc/grafana/provisioning"] == DEPLOY / "grafana" / "provisioning"
    (path,) = re.findall(r"path:\s*(\S+)", DASHBOARD_PROVIDERS.read_text())
    assert mounts[path] == DASHBOARD.parent
    (uid,) = re.findall(r"uid:\s*(\S+)", DATASOURCES.read_text())
    dashboard = json.loads(DASHBOARD.read_text())
    used = {p["datasource"]["uid"] for p in panels(dashboard["panels"]) if "datasource" in p}
    assert used == {uid}


def test_dashboard_has_a_panel_for_every_required_signal() -> None:
    used = set().union(*map(metric_names, dashboard_expressions()))
    missing = {what: name for what, name in REQUIRED.items() if name not in used}
    assert not missing
    dashboard = json.loads(DASHBOARD.read_text())
    epochs = next(p for p in panels(dashboard["panels"]) if p["title"] == "Broker epochs")
    assert epochs["fieldConfig"]["defaults"]["custom"]["lineInterpolation"] == "stepAfter"


# ---------------------------------------------------------------- against the running daemons


@pytest.fixture
async def cluster(zk_connect: str, tmp_path: Path) -> AsyncIterator[LocalCompose]:
    async with running_compose(zk_connect, tmp_path) as cluster:
        yield cluster


@pytest.mark.zookeeper
async def test_every_metric_in_the_dashboard_is_exported_by_the_daemons(cluster: LocalCompose) -> None:
    exported: set[str] = set()
    for name in daemon_services(cluster.model):
        exported |= exported_names(cluster.scrape(name))
    used = set().union(*map(metric_names, dashboard_expressions()))
    assert len(used) >= len(REQUIRED)
    assert sorted(used - exported) == []
