"""The mntr exporter serves ZooKeeper's values under its Prometheus provider's names and the JMX
exporter's, from a real server."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from kazoo.client import KazooClient
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

from tests.support.metrics import registry_samples, scrape_text
from zkserver.exporter import JMX_NAMES, MntrCollector, families, parse_mntr
from zkserver.ports import find_free_port
from zkserver.server import ZooKeeperServer


def mntr(**values: object) -> str:
    """An mntr answer: ``zk_<key>\\t<value>`` lines."""
    return "".join(f"zk_{key}\t{value}\n" for key, value in values.items())


def summary(name: str, count: int, total: int, p50: int, p99: int) -> dict[str, int]:
    """The mntr lines of one of ZooKeeper's summaries."""
    return {
        f"avg_{name}": total // max(count, 1),
        f"min_{name}": 0,
        f"max_{name}": p99,
        f"cnt_{name}": count,
        f"sum_{name}": total,
        f"p50_{name}": p50,
        f"p95_{name}": p99,
        f"p99_{name}": p99,
        f"p999_{name}": p99,
    }


def scrape(collector: MntrCollector) -> dict[str, float]:
    """Every sample the collector gives, keyed without the ``server`` label."""
    registry = CollectorRegistry()
    registry.register(collector)
    return registry_samples(registry, without=("server",))


def test_plain_values_keep_the_providers_names_and_text_values_are_skipped() -> None:
    values = parse_mntr(mntr(version="3.9.5-abc, built on …", server_state="leader", znode_count=42))
    assert [(f.name, f.samples[0].value) for f in families(values, "zk:2181")][:1] == [("znode_count", 42.0)]
    assert {f.name for f in families(values, "zk:2181")} == {
        "znode_count",
        "zookeeper_inmemorydatatree_nodecount",
    }


def test_a_summary_becomes_quantiles_count_and_sum() -> None:
    values = parse_mntr(mntr(**summary("readlatency", count=10, total=50, p50=3, p99=20), avg_latency=5))
    by_name = {f.name: f for f in families(values, "zk:2181")}
    assert set(by_name) == {"readlatency", "avg_latency", "zookeeper_avgrequestlatency"}
    read = {(s.name, s.labels.get("quantile")): s.value for s in by_name["readlatency"].samples}
    assert read[("readlatency", "0.5")] == 3 and read[("readlatency", "0.99")] == 20
    assert read[("readlatency_count", None)] == 10 and read[("readlatency_sum", None)] == 50
    assert by_name["avg_latency"].samples[0].value == 5  # a gauge, though it starts like a summary's line


def test_a_server_that_does_not_answer_is_down_and_the_others_still_count() -> None:
    def ask(host: str, port: int, word: str, timeout: float) -> str:
        if port == 1:
            raise ConnectionRefusedError("nobody there")
        return mntr(server_state="follower", znode_count=7)

    collector = MntrCollector(["127.0.0.1:1", "127.0.0.1:2181"], ask=ask)
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    assert 'zookeeper_up{server="127.0.0.1:1"} 0.0' in text
    assert 'zookeeper_up{server="127.0.0.1:2181"} 1.0' in text
    assert 'zookeeper_server_state{server="127.0.0.1:2181",state="follower"} 1.0' in text
    assert 'znode_count{server="127.0.0.1:2181"} 7.0' in text


@pytest.mark.zookeeper
def test_a_real_servers_mntr_is_served_under_both_names(
    zk_server: ZooKeeperServer, zk_client: KazooClient
) -> None:
    for i in range(5):
        zk_client.create(f"/exported-{i}", b"x")
    zk_client.get("/exported-0", watch=lambda event: None)
    collector = MntrCollector([zk_server.connect_string])
    scraped = scrape(collector)
    assert scraped["zookeeper_up"] == 1
    assert scraped['zookeeper_server_state{state="standalone"}'] == 1
    assert scraped["znode_count"] >= 5 + 1  # ours, the chroot, and ZooKeeper's own
    assert scraped["zookeeper_inmemorydatatree_nodecount"] == scraped["znode_count"]
    assert scraped["zookeeper_inmemorydatatree_watchcount"] >= 1
    assert scraped["zookeeper_numaliveconnections"] >= 1
    assert scraped["readlatency_count"] >= 1
    assert 'readlatency{quantile="0.99"}' in scraped
    # What Strimzi's ZooKeeper dashboard queries, except the quorum size (ensembles only).
    for name in set(JMX_NAMES.values()) - {"zookeeper_quorumsize"}:
        assert name in scraped, name
    registry = CollectorRegistry()
    registry.register(collector)
    assert list(parse_openmetrics(openmetrics(registry).decode()))  # valid for Prometheus's preferred format


@pytest.mark.zookeeper
def test_python_m_zkstore_exporter_serves_metrics(zk_server: ZooKeeperServer) -> None:
    port = find_free_port()
    exporter = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "zkserver.exporter",
            "--zookeeper",
            zk_server.connect_string,
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                text = scrape_text(port)
                break
            except OSError:
                assert exporter.poll() is None, exporter.stderr.read().decode() if exporter.stderr else ""
                assert time.monotonic() < deadline, "the exporter never served"
                time.sleep(0.1)
        assert f'zookeeper_up{{server="{zk_server.connect_string}"}} 1.0' in text
        assert "zookeeper_avgrequestlatency" in text
    finally:
        exporter.terminate()
        assert exporter.wait(10) == 0
