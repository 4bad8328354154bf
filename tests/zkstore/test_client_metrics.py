"""Kafka's ZooKeeper client metrics follow what the session does, on a real ZooKeeper."""

from __future__ import annotations

import pytest
from kazoo.exceptions import NoNodeError

from daemon.metrics import Metrics
from tests.support.metrics import registry_samples
from tests.support.waiting import wait_until
from tests.support.zookeeper import ConnectionCutter, expire_session
from zkstore.aio import AsyncZooKeeper
from zkstore.client_metrics import ZooKeeperClientMetrics

LISTENER = "kafka_server_sessionexpirelistener"


def state_of(metrics: Metrics) -> list[str]:
    scraped = registry_samples(metrics)
    return [
        name.split('state="')[1].rstrip('"}')
        for name, value in scraped.items()
        if "sessionstate" in name and value
    ]


def test_each_connection_state_marks_kafkas_meter_and_the_state_gauge() -> None:
    metrics = Metrics()
    observer = ZooKeeperClientMetrics(metrics)
    assert state_of(metrics) == ["NOT_CONNECTED"]
    for state in ("CONNECTED", "CONNECTING", "CONNECTED", "EXPIRED_SESSION", "CONNECTED", "AUTH_FAILED"):
        observer.session_state(state)
    scraped = registry_samples(metrics)
    assert scraped[f"{LISTENER}_zookeepersyncconnects_total"] == 3
    assert scraped[f"{LISTENER}_zookeeperdisconnects_total"] == 1
    assert scraped[f"{LISTENER}_zookeeperexpires_total"] == 1
    assert scraped[f"{LISTENER}_zookeeperexpirespersec_total"] == 1
    assert scraped[f"{LISTENER}_zookeeperauthfailures_total"] == 1
    assert scraped[f"{LISTENER}_zookeeperreadonlyconnects_total"] == 0
    assert state_of(metrics) == ["AUTH_FAILED"]
    observer.session_state("CLOSED")
    assert state_of(metrics) == ["CLOSED"]


def test_request_latency_is_a_histogram_in_milliseconds() -> None:
    metrics = Metrics()
    observer = ZooKeeperClientMetrics(metrics)
    observer.request_latency(0.004)
    scraped = registry_samples(metrics)
    base = "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms"
    assert scraped[f"{base}_count"] == 1
    assert scraped[f'{base}{{quantile="0.99"}}'] == pytest.approx(4)
    assert scraped[f'{base}_histogram_bucket{{le="5.0"}}'] == 1


@pytest.mark.zookeeper
async def test_a_real_session_connects_times_requests_and_expires(zk_connect: str) -> None:
    metrics = Metrics()
    zk = AsyncZooKeeper(zk_connect, session_timeout_ms=6000)
    ZooKeeperClientMetrics(metrics).watch(zk)
    await zk.start()
    try:
        await wait_until(lambda: state_of(metrics) == ["CONNECTED"], "the first connection counted")
        await zk.create("/timed", b"x")
        with pytest.raises(NoNodeError):  # an error answer is a round trip too
            await zk.get("/missing")
        latency = "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms_count"
        assert registry_samples(metrics)[latency] >= 2

        await expire_session(zk)  # the server drops the connection; reconnecting, kazoo learns of it
        await wait_until(
            lambda: registry_samples(metrics)[f"{LISTENER}_zookeeperexpires_total"] == 1, "the expiry counted"
        )
        await wait_until(lambda: state_of(metrics) == ["CONNECTED"], "a new session")
        assert registry_samples(metrics)[f"{LISTENER}_zookeepersyncconnects_total"] == 2
    finally:
        await zk.close()
    assert state_of(metrics) == ["CLOSED"]


@pytest.mark.zookeeper
async def test_a_dropped_connection_is_a_disconnect_not_an_expiry(zk_connect: str) -> None:
    server, _, chroot = zk_connect.partition("/")
    cutter = ConnectionCutter(server)
    port = await cutter.start()
    metrics = Metrics()
    zk = AsyncZooKeeper(f"127.0.0.1:{port}/{chroot}", session_timeout_ms=6000)
    ZooKeeperClientMetrics(metrics).watch(zk)
    await zk.start()
    try:
        cutter.cut(hold=False)
        await wait_until(
            lambda: registry_samples(metrics)[f"{LISTENER}_zookeeperdisconnects_total"] == 1,
            "the disconnect counted",
        )
        await wait_until(lambda: state_of(metrics) == ["CONNECTED"], "the session back")
        scraped = registry_samples(metrics)
        assert scraped[f"{LISTENER}_zookeeperexpires_total"] == 0
        assert scraped[f"{LISTENER}_zookeepersyncconnects_total"] == 2
    finally:
        await zk.close()
        await cutter.close()
