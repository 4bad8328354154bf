"""docs/metrics.md is written from the daemons' registries and must not drift from them."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import generate_latest

from cluster import metrics_reference
from daemon.metrics import Metrics


@pytest.fixture(scope="module")
def tables() -> dict[str, str]:
    return metrics_reference.tables()


def test_the_committed_page_matches_what_the_daemons_register(tables: dict[str, str]) -> None:
    page = metrics_reference.PAGE.read_text(encoding="utf-8")
    assert metrics_reference.render(page, tables) == page, "run: python -m cluster.metrics_reference"


@pytest.mark.parametrize("daemon", metrics_reference.DAEMONS)
def test_every_declared_name_is_in_its_daemons_table(daemon: str, tables: dict[str, str]) -> None:
    page = metrics_reference.render(metrics_reference.PAGE.read_text(encoding="utf-8"), tables)
    documented = metrics_reference.documented_names(page, daemon)
    assert "process_open_fds" in documented and "python_info" in documented
    assert "kafka_server_sessionexpirelistener_zookeeperexpires_total" in documented
    assert "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms" in documented


def test_the_table_gives_mbean_names_type_labels_and_meaning() -> None:
    metrics = Metrics()
    metrics.timer("kafka.network", "RequestMetrics", "TotalTimeMs", "Time | total", ("request",))
    metrics.gauge_fn("kafka.server", "KafkaServer", "BrokerEpoch", "epoch", lambda: 1, addition=True)
    rows = metrics_reference.table(metrics).splitlines()
    assert rows[2] == (
        "| `kafka.network:type=RequestMetrics,name=TotalTimeMs,request=…` "
        "| `kafka_network_requestmetrics_totaltimems` {quantile}, _count, _sum (Strimzi)"
        "<br>`kafka_network_requestmetrics_totaltimems_histogram` _bucket, _count, _sum (histogram) "
        "| timer: summary, histogram | `request` | Time \\| total |"
    )
    assert rows[3].startswith("| `kafka.server:type=KafkaServer,name=BrokerEpoch` (not in Kafka) |")
    assert any(row.startswith("| — | `process_cpu_seconds_total` | counter |") for row in rows)


def test_documented_names_are_what_a_scrape_lists_in_its_type_lines() -> None:
    metrics = Metrics()
    metrics.meter("kafka.server", "ReplicaManager", "IsrShrinksPerSec", "shrinks")
    metrics.timer("kafka.network", "RequestMetrics", "TotalTimeMs", "total", ("request",))
    page = "<!-- metrics:broker -->\n<!-- /metrics:broker -->\n"
    page = metrics_reference.render(page, {"broker": metrics_reference.table(metrics)})
    scraped = metrics_reference.exposed_names(generate_latest(metrics.registry).decode())
    assert metrics_reference.documented_names(page, "broker") == scraped


def test_a_page_without_its_markers_is_an_error_not_a_silent_no_op() -> None:
    with pytest.raises(ValueError, match="metrics:broker"):
        metrics_reference.render("# Metrics\n", {"broker": "| x |"})


def test_check_mode_fails_on_a_stale_page(tmp_path: Path) -> None:
    page = tmp_path / "metrics.md"
    page.write_text(
        "".join(
            f"<!-- metrics:{name} -->\n| old |\n<!-- /metrics:{name} -->\n"
            for name in metrics_reference.DAEMONS
        )
    )
    assert metrics_reference.main(["--check", "--page", str(page)]) == 1
    assert metrics_reference.main(["--page", str(page)]) == 0
    assert metrics_reference.main(["--check", "--page", str(page)]) == 0
