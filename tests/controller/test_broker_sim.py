"""Simulated brokers against a real ZooKeeper: KIP-380 registration and a real broker's epoch checks."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from protocol import (
    MAX_BROKER_EPOCH_VERSIONS,
    PER_BROKER_EPOCH_VERSIONS,
    ApiKey,
    ErrorCode,
    encode_request,
)
from tests.support.broker_sim import (
    CONTROL_LISTENER,
    DATA_LISTENER,
    Received,
    SimulatedBroker,
    SimulatedCluster,
)
from tests.support.raw_client import CLIENT_ID, call_once
from tests.support.requests import (
    CONTROLLER_ID,
    lai_partition,
    leader_and_isr,
    stop_replica,
    um_partition,
    update_metadata,
)
from zkstore.znodes import Endpoint, broker_path, decode_broker_registration

pytestmark = pytest.mark.zookeeper

TIMEOUT = 15.0
REPO = Path(__file__).resolve().parents[2]

BUILDERS = {
    ApiKey.LEADER_AND_ISR: leader_and_isr,
    ApiKey.UPDATE_METADATA: update_metadata,
    ApiKey.STOP_REPLICA: partial(stop_replica, delete=True),
}


async def registration_stat(zk_client: KazooClient, broker_id: int) -> tuple[bytes, Any]:
    return await asyncio.to_thread(zk_client.get, broker_path(broker_id))


@pytest.fixture
async def broker(zk_connect: str) -> AsyncIterator[SimulatedBroker]:
    sim = SimulatedBroker(1, zk_connect)
    await sim.start()
    try:
        yield sim
    finally:
        await sim.stop()


# ---------------------------------------------------------------- registration


async def test_registration_advertises_both_listeners_and_the_epoch_is_the_czxid(
    broker: SimulatedBroker, zk_client: KazooClient
) -> None:
    data, stat = await registration_stat(zk_client, 1)
    assert broker.epoch == stat.czxid
    registration = decode_broker_registration(data, broker_path(1))
    assert registration is not None
    assert registration.endpoints == (
        Endpoint(CONTROL_LISTENER, "127.0.0.1", broker.control_port),
        Endpoint(DATA_LISTENER, "127.0.0.1", broker.port),
    )
    assert registration.listener_security_protocol_map == {
        "CONTROLLER": "PLAINTEXT",
        "PLAINTEXT": "PLAINTEXT",
    }
    assert registration.endpoints == broker.endpoints


async def test_without_control_plane_only_plaintext_is_advertised(
    zk_connect: str, zk_client: KazooClient
) -> None:
    sim = SimulatedBroker(4, zk_connect, control_plane=False)
    await sim.start()
    try:
        registration = decode_broker_registration((await registration_stat(zk_client, 4))[0], broker_path(4))
        assert registration is not None
        assert registration.endpoints == (Endpoint(DATA_LISTENER, "127.0.0.1", sim.port),)
        assert sim.control_port is None
        answer = await call_once(sim.port, ApiKey.UPDATE_METADATA, 7, update_metadata(7, sim.epoch))
        assert answer == {"error_code": ErrorCode.NONE}
        assert sim.received[-1].listener == DATA_LISTENER
    finally:
        await sim.stop()


async def test_stop_removes_the_registration(zk_connect: str, zk_client: KazooClient) -> None:
    sim = SimulatedBroker(2, zk_connect)
    await sim.start()
    await sim.stop()
    with pytest.raises(NoNodeError):
        await registration_stat(zk_client, 2)


# ---------------------------------------------------------------- accepted requests


async def test_accepted_requests_answer_none_per_partition_and_are_applied(broker: SimulatedBroker) -> None:
    port, epoch = broker.control_port, broker.epoch
    assert port is not None
    two = {"a": [lai_partition(0, leader_epoch=3)], "b": [lai_partition(1, leader_epoch=3)]}
    answer = await call_once(port, ApiKey.LEADER_AND_ISR, 2, leader_and_isr(2, epoch, two))
    assert answer == {
        "error_code": 0,
        "partition_errors": [
            {"topic_name": "a", "partition_index": 0, "error_code": 0},
            {"topic_name": "b", "partition_index": 1, "error_code": 0},
        ],
    }
    answer = await call_once(
        port, ApiKey.UPDATE_METADATA, 7, update_metadata(7, epoch, {"c": [um_partition(2)]})
    )
    assert answer == {"error_code": 0}
    learnt = broker.metadata()
    assert learnt["controller_id"] == CONTROLLER_ID
    assert learnt["controller_epoch"] == 1
    assert learnt["live_brokers"] == [1, 2]
    assert set(learnt["partitions"]) == {("a", 0), ("b", 1), ("c", 2)}
    assert learnt["partitions"][("a", 0)] == {"leader": 1, "leader_epoch": 3, "isr": [1, 2]}

    deleted = update_metadata(7, epoch, {"c": [um_partition(2, leader=-2)]})
    assert (await call_once(port, ApiKey.UPDATE_METADATA, 7, deleted))["error_code"] == 0
    answer = await call_once(port, ApiKey.STOP_REPLICA, 4, stop_replica(4, epoch, {"a": [0]}, delete=True))
    assert answer == {
        "error_code": 0,
        "partition_errors": [{"topic_name": "a", "partition_index": 0, "error_code": 0}],
    }
    kept = stop_replica(4, epoch, {"b": [1]}, delete=False)
    assert (await call_once(port, ApiKey.STOP_REPLICA, 4, kept))["error_code"] == 0
    assert set(broker.metadata()["partitions"]) == {("b", 1)}

    first = broker.received[0]
    assert (first.api_key, first.api_version, first.error, first.listener) == (4, 2, 0, CONTROL_LISTENER)
    expected_size = len(encode_request(4, 2, 1, CLIENT_ID, leader_and_isr(2, epoch, two)))
    assert first.raw_size == expected_size
    assert broker.stats.requests == {4: 1, 6: 2, 5: 2}
    assert broker.stats.bytes[4] == expected_size
    assert set(broker.stats.last_response_at) == {4, 5, 6}


async def test_validation_off_accepts_every_epoch(zk_connect: str) -> None:
    sim = SimulatedBroker(3, zk_connect, validate=False)
    await sim.start()
    try:
        body = leader_and_isr(5, sim.epoch - 1, controller_epoch=0)
        assert (await call_once(sim.port, ApiKey.LEADER_AND_ISR, 5, body))["error_code"] == 0
        assert ("t", 0) in sim.metadata()["partitions"]
    finally:
        await sim.stop()


# ---------------------------------------------------------------- rejected requests


async def test_stale_controller_epoch_is_rejected_and_nothing_applied(broker: SimulatedBroker) -> None:
    port, epoch = broker.port, broker.epoch
    newer = update_metadata(7, epoch, controller_epoch=5, live=[1])
    assert (await call_once(port, ApiKey.UPDATE_METADATA, 7, newer))["error_code"] == 0
    before = broker.metadata()

    stale = ErrorCode.STALE_CONTROLLER_EPOCH
    body = leader_and_isr(2, epoch, {"x": [lai_partition(0, controller_epoch=4)]}, controller_epoch=4)
    assert await call_once(port, ApiKey.LEADER_AND_ISR, 2, body) == {
        "error_code": stale,
        "partition_errors": [{"topic_name": "x", "partition_index": 0, "error_code": stale}],
    }
    body = update_metadata(
        7, epoch, {"y": [um_partition(0, controller_epoch=4)]}, controller_epoch=4, live=[1, 2, 3]
    )
    assert await call_once(port, ApiKey.UPDATE_METADATA, 7, body) == {"error_code": stale}
    body = stop_replica(4, epoch, delete=True, controller_epoch=4)
    assert await call_once(port, ApiKey.STOP_REPLICA, 4, body) == {
        "error_code": stale,
        "partition_errors": [],
    }

    assert broker.metadata() == before
    assert [r.error for r in broker.received] == [0, stale, stale, stale]
    assert broker.stats.rejected == {4: 1, 5: 1, 6: 1}
    same = update_metadata(7, epoch, controller_epoch=5)
    assert (await call_once(port, ApiKey.UPDATE_METADATA, 7, same))["error_code"] == 0


@pytest.mark.parametrize("api_key", list(PER_BROKER_EPOCH_VERSIONS))
async def test_per_broker_epoch_rejects_only_an_older_epoch(broker: SimulatedBroker, api_key: ApiKey) -> None:
    version = PER_BROKER_EPOCH_VERSIONS[api_key]
    build = BUILDERS[api_key]
    epoch = broker.epoch

    answer = await call_once(broker.port, api_key, version, build(version, epoch - 1))
    assert answer["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    assert broker.metadata()["partitions"] == {}
    assert broker.metadata()["controller_id"] == -1
    for accepted in (-1, epoch, epoch + 1):
        answer = await call_once(broker.port, api_key, version, build(version, accepted))
        assert answer["error_code"] == ErrorCode.NONE, accepted


@pytest.mark.parametrize("api_key", list(MAX_BROKER_EPOCH_VERSIONS))
async def test_max_broker_epoch_rejects_anything_below_own_epoch(
    broker: SimulatedBroker, api_key: ApiKey
) -> None:
    version = MAX_BROKER_EPOCH_VERSIONS[api_key]
    build = BUILDERS[api_key]
    epoch = broker.epoch
    for stale in (epoch - 1, -1):
        answer = await call_once(broker.port, api_key, version, build(version, stale))
        assert answer["error_code"] == ErrorCode.STALE_BROKER_EPOCH, stale
    assert broker.metadata()["controller_id"] == -1
    for accepted in (epoch, epoch + 1000):
        answer = await call_once(broker.port, api_key, version, build(version, accepted))
        assert answer["error_code"] == ErrorCode.NONE, accepted


async def test_stale_broker_epoch_is_checked_before_the_controller_epoch(broker: SimulatedBroker) -> None:
    epoch = broker.epoch
    assert (await call_once(broker.port, 6, 5, update_metadata(5, epoch, controller_epoch=3)))[
        "error_code"
    ] == 0
    body = update_metadata(5, epoch - 1, controller_epoch=2)
    assert (await call_once(broker.port, 6, 5, body))["error_code"] == ErrorCode.STALE_BROKER_EPOCH


# ---------------------------------------------------------------- bounce


async def test_bounce_gives_a_higher_epoch_and_fences_the_old_one(
    broker: SimulatedBroker, zk_client: KazooClient
) -> None:
    old = broker.epoch
    assert (await call_once(broker.port, 6, 7, update_metadata(7, old, controller_epoch=2)))[
        "error_code"
    ] == 0
    new = await broker.bounce()
    assert new > old
    assert broker.epoch == new
    assert (await registration_stat(zk_client, 1))[1].czxid == new
    assert broker.metadata()["controller_epoch"] == 0  # a restarted broker has learnt nothing yet

    answer = await call_once(broker.port, ApiKey.LEADER_AND_ISR, 2, leader_and_isr(2, old))
    assert answer["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    answer = await call_once(broker.port, ApiKey.UPDATE_METADATA, 7, update_metadata(7, old))
    assert answer["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    answer = await call_once(broker.port, ApiKey.LEADER_AND_ISR, 5, leader_and_isr(5, new))
    assert answer["error_code"] == ErrorCode.NONE


# ---------------------------------------------------------------- observing


async def test_wait_for_sees_past_and_future_requests_and_times_out_clearly(broker: SimulatedBroker) -> None:
    epoch = broker.epoch
    await call_once(broker.port, 6, 7, update_metadata(7, epoch), correlation_id=1)
    past = await broker.wait_for(lambda r: r.api_key == ApiKey.UPDATE_METADATA)
    assert past.correlation_id == 1

    def stop_replica_received(r: Received) -> bool:
        return r.api_key == ApiKey.STOP_REPLICA

    waiter = asyncio.create_task(broker.wait_for(stop_replica_received))
    await call_once(broker.port, 6, 7, update_metadata(7, epoch), correlation_id=2)
    assert not waiter.done()
    await call_once(broker.port, 5, 4, stop_replica(4, epoch, delete=True), correlation_id=3)
    future = await asyncio.wait_for(waiter, TIMEOUT)
    assert (future.api_key, future.correlation_id) == (ApiKey.STOP_REPLICA, 3)

    with pytest.raises(TimeoutError, match=r"broker 1 .*no matching request within 0.2 s; 3 received"):
        await broker.wait_for(lambda r: r.api_key == ApiKey.LEADER_AND_ISR, timeout=0.2)


# ---------------------------------------------------------------- many brokers


async def test_cluster_registers_over_one_session_and_counts_without_recording(
    zk_connect: str, zk_client: KazooClient
) -> None:
    cluster = SimulatedCluster(zk_connect, [1, 2, 3], record=False)
    await cluster.start()
    try:
        stats = [(await registration_stat(zk_client, b))[1] for b in (1, 2, 3)]
        assert [s.czxid for s in stats] == [cluster.brokers[b].epoch for b in (1, 2, 3)]
        assert len({s.ephemeralOwner for s in stats}) == 1

        two = cluster.brokers[2]
        max_epoch = max(b.epoch for b in cluster.brokers.values())
        for _ in range(3):
            body = update_metadata(7, max_epoch, live=[1, 2, 3])
            assert (await call_once(two.port, ApiKey.UPDATE_METADATA, 7, body))["error_code"] == 0
        assert two.received == []
        assert two.stats.requests == {ApiKey.UPDATE_METADATA: 3}
        assert two.stats.bytes[ApiKey.UPDATE_METADATA] > 0
        assert two.metadata()["live_brokers"] == [1, 2, 3]
        assert two.metadata()["partitions"] == {}
        with pytest.raises(RuntimeError, match="record=False"):
            await two.wait_for(lambda r: True)

        old = two.epoch
        assert await two.bounce() > old
        assert (await registration_stat(zk_client, 2))[1].czxid == two.epoch
        assert cluster.describe()["brokers"][2] == {
            "epoch": two.epoch,
            "control_port": two.control_port,
            "port": two.port,
        }
    finally:
        await cluster.stop()
    assert await asyncio.to_thread(zk_client.get_children, "/brokers/ids") == []


async def test_command_line_prints_its_brokers_and_stops_on_sigterm(
    zk_connect: str, zk_client: KazooClient
) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = ["-m", "tests.support.broker_sim", "--zookeeper", zk_connect, "--brokers", "2", "--first-id", "7"]
    process = await asyncio.create_subprocess_exec(
        sys.executable, *args, cwd=REPO, env=env, stdout=asyncio.subprocess.PIPE
    )
    try:
        async with asyncio.timeout(TIMEOUT * 2):
            ready = json.loads(await process.stdout.readline())  # type: ignore[union-attr]
        assert set(ready["brokers"]) == {"7", "8"}
        for broker_id, info in ready["brokers"].items():
            stat = (await registration_stat(zk_client, int(broker_id)))[1]
            assert info["epoch"] == stat.czxid
            body = update_metadata(7, info["epoch"])
            assert (await call_once(info["control_port"], 6, 7, body))["error_code"] == 0
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(TIMEOUT):
            rest, _ = await process.communicate()
        assert process.returncode == 0
        stats = json.loads(rest)["stats"]
        assert stats["7"]["requests"] == {"UPDATE_METADATA": 1}
        assert await asyncio.to_thread(zk_client.get_children, "/brokers/ids") == []
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
