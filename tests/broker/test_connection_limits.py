"""Connection limits on a real broker: max.connections (the control plane exempt) and
connections.max.idle.ms closing idle and stalled connections; the broker keeps serving."""

from __future__ import annotations

import asyncio
import struct

import pytest

from network.connection_quotas import ConnectionQuotas
from protocol import ApiKey
from tests.support.cluster import Cluster
from tests.support.metrics import scrape
from tests.support.waiting import wait_until

CLOSED = "kafka_network_socketserver_connectionsclosed_total"


def test_per_ip_and_broker_wide_limits_with_cluster_listeners_exempt() -> None:
    refused: list[tuple[str, str]] = []
    quotas = ConnectionQuotas(
        max_connections=2,
        max_per_ip=3,
        exempt_listeners={"CONTROLLER"},
        on_refused=lambda *r: refused.append(r),
    )
    assert quotas.admit("PLAINTEXT", "10.0.0.1") is None
    assert quotas.admit("PLAINTEXT", "10.0.0.2") is None
    assert "max.connections" in (quotas.admit("PLAINTEXT", "10.0.0.3") or "")
    assert quotas.admit("CONTROLLER", "10.0.0.1") is None, "cluster traffic does not count"
    assert quotas.admit("CONTROLLER", "10.0.0.1") is None
    assert "max.connections.per.ip" in (quotas.admit("CONTROLLER", "10.0.0.1") or "")
    quotas.release("PLAINTEXT", "10.0.0.2")
    assert quotas.admit("PLAINTEXT", "10.0.0.3") is None
    assert refused == [("PLAINTEXT", "quota"), ("CONTROLLER", "quota")]


async def closed_by_broker(reader: asyncio.StreamReader, within: float = 15.0) -> bool:
    """Whether the daemon closed the connection (EOF) within ``within`` seconds."""
    try:
        return await asyncio.wait_for(reader.read(1), within) == b""
    except (ConnectionError, TimeoutError):
        return False


@pytest.mark.zookeeper
async def test_a_client_over_max_connections_and_idle_or_stalled_ones_are_closed(cluster: Cluster) -> None:
    settings = {"max.connections": "2", "connections.max.idle.ms": "1500", "metrics.port": "0"}
    await cluster.start((1,), {1: settings})
    broker = cluster.brokers[1]
    host, port = broker.endpoint("PLAINTEXT")
    metrics_port = (await broker.wait_kind("broker_started"))["metrics_port"]

    first = await asyncio.open_connection(host, port)
    second = await asyncio.open_connection(host, port)
    third = await asyncio.open_connection(host, port)
    assert await closed_by_broker(third[0], within=5), "the third client connection is refused"
    # the first two serve until they idle out; a half-sent frame does not hold one open either
    second[1].write(struct.pack(">i", 64) + b"\x00\x12\x00")
    await second[1].drain()
    assert await closed_by_broker(first[0]) and await closed_by_broker(second[0])
    for _, writer in (first, second, third):
        writer.close()

    async def counted() -> bool:
        samples = await asyncio.get_running_loop().run_in_executor(None, scrape, metrics_port)
        return (
            samples.get(f'{CLOSED}{{listener="PLAINTEXT",reason="quota"}}', 0) >= 1
            and samples.get(f'{CLOSED}{{listener="PLAINTEXT",reason="idle"}}', 0) >= 2
        )

    await wait_until(counted, what="the closings counted by reason", timeout=10)
    # still serving, and cluster traffic was never refused
    answer = await broker.request("PLAINTEXT", ApiKey.API_VERSIONS, 0, {})
    assert answer["error_code"] == 0
    await cluster.topic("still", {0: (1,)})


@pytest.mark.zookeeper
async def test_the_controller_rpc_listener_closes_idle_connections_too(cluster: Cluster) -> None:
    controller = cluster.start_controller(1001, connections_max_idle_ms=1000, metrics_port=0)
    started = await controller.wait_kind("controller_started")
    reader, writer = await asyncio.open_connection(*controller.rpc_address())
    assert await closed_by_broker(reader)
    writer.close()

    async def counted() -> bool:
        samples = await asyncio.get_running_loop().run_in_executor(None, scrape, started["metrics_port"])
        return samples.get(f'{CLOSED}{{listener="controller-rpc",reason="idle"}}', 0) >= 1

    await wait_until(counted, what="the idle closing counted", timeout=10)
