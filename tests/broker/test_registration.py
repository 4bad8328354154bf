"""Registration per KIP-380: the czxid is the epoch, and a new session means a new epoch."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss

from broker import server as server_module
from broker.config import load
from broker.server import BrokerServer
from network.connection import KafkaConnection
from protocol import ApiKey, ErrorCode
from tests.support.requests import CONTROLLER_ID, lai_partition, leader_and_isr, update_metadata
from tests.support.waiting import wait_until
from tests.support.zookeeper import expire_session, session, stand_in_controller
from zkstore import znodes

pytestmark = pytest.mark.zookeeper


@pytest.fixture
async def broker(zk_connect: str, tmp_path: Path) -> AsyncIterator[BrokerServer]:
    """Broker 7, told what to do by the test, which stands in for the controller (epoch 1)."""
    async with stand_in_controller(zk_connect, CONTROLLER_ID) as epoch:
        assert epoch == 1
        async for server in _broker(zk_connect, tmp_path):
            yield server


async def _broker(zk_connect: str, tmp_path: Path) -> AsyncIterator[BrokerServer]:
    config = load(
        None,
        {
            "KAFKA_BROKER_ID": "7",
            "KAFKA_ZOOKEEPER_CONNECT": zk_connect,
            "KAFKA_LISTENERS": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "KAFKA_CONTROL_PLANE_LISTENER_NAME": "CONTROLLER",
            "KAFKA_LOG_DIRS": str(tmp_path / "logs"),
            "KAFKA_ZOOKEEPER_SESSION_TIMEOUT_MS": "6000",
            "KAFKA_CONTROLLED_SHUTDOWN_ENABLE": "false",
        },
    )
    server = BrokerServer(config)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def send(
    server: BrokerServer, body: dict[str, Any], api: ApiKey = ApiKey.UPDATE_METADATA, version: int = 5
) -> dict[str, Any]:
    endpoint = next(e for e in server.advertised if e.listener_name == "CONTROLLER")
    connection = await KafkaConnection.open(endpoint.host, endpoint.port, client_id="test", connect_timeout=5)
    try:
        _, response = await connection.send(api, version, body, timeout=10)
        return response
    finally:
        await connection.close()


async def test_registration_publishes_every_listener_and_the_epoch_is_the_czxid(
    broker: BrokerServer, zk_connect: str
) -> None:
    zk = await session(zk_connect)
    try:
        data, stat = await zk.get(znodes.broker_path(7))
    finally:
        await zk.close()
    registration = znodes.decode_broker_registration(data, znodes.broker_path(7))
    assert registration is not None
    assert {e.listener_name for e in registration.endpoints} == {"PLAINTEXT", "CONTROLLER"}
    assert registration.endpoints == broker.advertised
    assert registration.listener_security_protocol_map == {
        "PLAINTEXT": "PLAINTEXT",
        "CONTROLLER": "PLAINTEXT",
    }
    assert broker.identity.epoch == stat.czxid


async def test_after_a_session_expiry_the_broker_registers_again_and_fences_the_old_epoch(
    broker: BrokerServer,
) -> None:
    # UpdateMetadata v5 (per-broker epoch) naming only broker 7, from the stand-in controller, epoch 1
    naming_7 = partial(update_metadata, 5, topics={}, live=[7])
    old_epoch = broker.identity.epoch
    assert (await send(broker, naming_7(old_epoch)))["error_code"] == ErrorCode.NONE
    await expire_session(broker.zk)
    await wait_until(lambda: broker.identity.epoch != old_epoch, timeout=30, what="a new registration")
    new_epoch = broker.identity.epoch
    assert new_epoch > old_epoch
    assert any(e["kind"] == "registered" and e["broker_epoch"] == new_epoch for e in broker.events.recent)
    assert (await send(broker, naming_7(old_epoch)))["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    assert (await send(broker, naming_7(new_epoch)))["error_code"] == ErrorCode.NONE
    assert (await send(broker, naming_7(-1)))["error_code"] == ErrorCode.NONE


async def test_high_watermark_checkpoints_go_on_after_a_session_expiry(broker: BrokerServer) -> None:
    """Kafka starts checkpointing at the first LeaderAndIsr and never stops: a re-registration does
    not wait for another one (the controller may have nothing to say to this broker)."""
    lai = leader_and_isr(2, broker.identity.epoch, {"t": [lai_partition(0, leader=7, replicas=(7,))]})
    assert (await send(broker, lai, ApiKey.LEADER_AND_ISR, 2))["error_code"] == ErrorCode.NONE
    assert broker.replica_manager.checkpoint_high_watermarks()
    old_epoch = broker.identity.epoch
    await expire_session(broker.zk)
    await wait_until(lambda: broker.identity.epoch != old_epoch, timeout=30, what="a new registration")
    assert broker.replica_manager.checkpoint_high_watermarks(), "checkpoints stopped after the expiry"


async def test_a_failed_re_registration_is_made_again(
    broker: BrokerServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A registration after an expiry can fail (ZooKeeper trouble again); the broker must not stay
    unregistered, up but out of the cluster."""
    real = server_module.register_broker
    attempts = 0

    async def flaky(*args: Any, **kwargs: Any) -> int:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise ConnectionLoss("lost while registering")
        return await real(*args, **kwargs)

    monkeypatch.setattr(server_module, "register_broker", flaky)
    old_epoch = broker.identity.epoch
    await expire_session(broker.zk)
    await wait_until(lambda: broker.identity.epoch != old_epoch, timeout=30, what="a new registration")
    assert attempts == 2
