"""The controller's RPC listener answers ApiVersions, as Kafka's brokers ask first on their channel to
the controller, with the versions of what it serves; no ZooKeeper needed (only the listener runs)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator

import pytest

from controller import config as controller_config
from controller.daemon import RPC_APIS, ControllerDaemon
from network.connection import KafkaConnection
from protocol import SUPPORTED_VERSIONS, ApiKey, ErrorCode

ENV = {"KAFKA_CONTROLLER_ID": "1001", "KAFKA_ZOOKEEPER_CONNECT": "127.0.0.1:1/none"}


@pytest.fixture
async def rpc_port() -> AsyncIterator[int]:
    """A controller daemon's RPC listener alone, on a free port."""
    daemon = ControllerDaemon(controller_config.load(None, environ=ENV))
    try:
        yield await daemon.rpc.start("127.0.0.1", 0)
    finally:
        await daemon.rpc.close()


@pytest.fixture
async def rpc(rpc_port: int) -> AsyncIterator[KafkaConnection]:
    connection = await KafkaConnection.open(
        "127.0.0.1", rpc_port, client_id="kafka-broker-0", connect_timeout=5
    )
    try:
        yield connection
    finally:
        await connection.close()


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_api_versions_lists_every_rpc_api_with_the_versions_served(
    rpc: KafkaConnection, version: int
) -> None:
    _, answer = await rpc.send(ApiKey.API_VERSIONS, version, {}, timeout=5)
    assert answer["error_code"] == ErrorCode.NONE
    served = {e["api_key"]: (e["min_version"], e["max_version"]) for e in answer["api_keys"]}
    assert set(served) == {int(k) for k in RPC_APIS}
    assert served[ApiKey.ALTER_PARTITION] == (0, 3)  # v3: KIP-903, what Kafka 3.9's brokers send
    assert served[ApiKey.CONTROLLED_SHUTDOWN] == (2, 3)
    assert all(served[k] == (min(SUPPORTED_VERSIONS[k]), max(SUPPORTED_VERSIONS[k])) for k in RPC_APIS)


async def test_a_newer_api_versions_than_served_is_refused_in_v0_so_the_client_asks_again(
    rpc_port: int,
) -> None:
    """Kafka's NetworkClient sends its newest ApiVersions (v3+, flexible) first; UNSUPPORTED_VERSION in
    v0's layout makes it ask again at the version the answer lists, else v0. The codec has no v3, so
    the request is spelled here: header v2, then v3's compact client name and version and tags."""
    client = b"kafka-broker-0"
    header = struct.pack(">hhih", ApiKey.API_VERSIONS, 3, 7, len(client)) + client + b"\x00"
    body = b"\x0dapache-kafka" + b"\x063.9.0" + b"\x00"
    reader, writer = await asyncio.open_connection("127.0.0.1", rpc_port)
    try:
        writer.write(struct.pack(">i", len(header + body)) + header + body)
        await writer.drain()
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        correlation_id, error_code = struct.unpack_from(">ih", await reader.readexactly(size))
    finally:
        writer.close()
    assert (correlation_id, error_code) == (7, ErrorCode.UNSUPPORTED_VERSION)
