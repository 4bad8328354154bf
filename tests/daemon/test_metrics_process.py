"""The names Strimzi's dashboards and alerts query move on a real broker: produce, fetch, and a ZooKeeper
session that expires while the broker is frozen."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from protocol import ApiKey, ErrorCode
from tests.support.cluster import Cluster, produce
from tests.support.metrics import scrape_async
from tests.support.waiting import wait_until

pytestmark = pytest.mark.zookeeper

SESSION_TIMEOUT_MS = 4000


def fetch(topic: str, partition: int, offset: int) -> dict[str, Any]:
    """A consumer's Fetch v4 for one partition, answered at once."""
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
                ],
            }
        ],
    }


async def test_strimzi_names_count_produces_fetches_and_a_session_expiry(cluster: Cluster) -> None:
    await cluster.start((1, 2), {1: {"metrics_port": 0, "zookeeper_session_timeout_ms": SESSION_TIMEOUT_MS}})
    await cluster.topic("moving", {0: (1, 2)})
    broker = cluster.brokers[1]
    port = (await broker.wait_kind("broker_started"))["metrics_port"]
    topic = '{topic="moving"}'

    assert (await produce(broker, "moving", 0, 5, acks=1))["error_code"] == ErrorCode.NONE
    first = await scrape_async(port)
    assert first[f"kafka_server_brokertopicmetrics_messagesin_total{topic}"] == 5
    assert (await produce(broker, "moving", 0, 7, acks=1))["error_code"] == ErrorCode.NONE
    second = await scrape_async(port)
    assert second[f"kafka_server_brokertopicmetrics_messagesin_total{topic}"] == 12
    assert second["kafka_server_brokertopicmetrics_messagesin_total"] == 12
    grown = second[f"kafka_server_brokertopicmetrics_bytesin_total{topic}"]
    assert grown > first[f"kafka_server_brokertopicmetrics_bytesin_total{topic}"] > 0
    assert second['kafka_network_requestmetrics_requests_total{request="Produce",version="7"}'] == 2
    produce_p99 = 'kafka_network_requestmetrics_totaltimems{quantile="0.99",request="Produce"}'
    assert second[produce_p99] > 0

    answer = await broker.request(broker.client_listener, ApiKey.FETCH, 4, fetch("moving", 0, 0))
    assert answer["responses"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
    fetched = await scrape_async(port)
    assert fetched[f"kafka_server_brokertopicmetrics_bytesout_total{topic}"] > 0
    assert fetched[f"kafka_server_brokertopicmetrics_totalfetchrequests_total{topic}"] >= 1
    assert fetched[f"kafka_server_brokertopicmetrics_failedfetchrequests_total{topic}"] == 0
    # Kafka times consumers' fetches apart from followers' (broker 2 follows moving-0 from broker 1).
    assert fetched['kafka_network_requestmetrics_requests_total{request="FetchConsumer",version="4"}'] == 1
    assert fetched['kafka_network_requestmetrics_totaltimems_count{request="FetchFollower"}'] >= 1
    assert fetched['kafka_network_requestmetrics_errors_total{error="NONE",request="Fetch"}'] >= 2
    assert fetched["kafka_server_sessionexpirelistener_zookeeperexpires_total"] == 0

    broker.pause()  # past the session timeout: ZooKeeper expires the session while the broker sleeps
    try:
        await asyncio.sleep(SESSION_TIMEOUT_MS / 1000 + 2)
    finally:
        broker.resume()
    await broker.wait_kind("session_expired", timeout=30)

    async def expiry_counted() -> dict[str, float] | None:
        samples = await scrape_async(port)
        connected = samples['kafka_server_sessionexpirelistener_sessionstate{state="CONNECTED"}'] == 1
        return (
            samples
            if connected and samples["kafka_server_sessionexpirelistener_zookeeperexpires_total"]
            else None
        )

    after = await wait_until(expiry_counted, "the expiry counted and a new session connected", timeout=30)
    assert after["kafka_server_sessionexpirelistener_zookeeperexpires_total"] == 1
    assert after["kafka_server_sessionexpirelistener_zookeepersyncconnects_total"] == 2
    assert (
        after["kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms_count"]
        > (first["kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms_count"])
    )
