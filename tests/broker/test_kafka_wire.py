"""The broker's control-plane wire follows ``inter.broker.protocol.version`` (``protocol/ibp.py``).

The key itself, listeners reading control requests in its dialect, ApiVersions, the registration, and
the AlterPartition and ControlledShutdown versions sent to a controller (a recording server on
loopback)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest

from broker.alter_partition_manager import AlterPartitionManager, Outcome, Proposal
from broker.apis import BrokerIdentity, KafkaApis
from broker.config import load
from broker.controlled_shutdown import ControlledShutdown
from broker.controller_address import ControllerAddress
from broker.listener import Listener
from broker.metadata_api import MetadataApis
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from broker.server import BrokerServer
from daemon.config import env_var_name
from daemon.endpoint import Endpoint
from daemon.eventlog import EventLog
from network.server import RequestServer
from protocol import (
    ApiKey,
    ErrorCode,
    RequestHeader,
    WireDialect,
    decode_response,
    encode_request,
    supported_versions,
)
from protocol.ibp import DEFAULT_IBP, KAFKA_3_9, SEEDS
from tests.broker.network_builders import channel
from tests.support.daemon_start import start_with
from tests.support.raw_client import RawClient
from tests.support.requests import leader_and_isr, stop_replica, topic_id_of, update_metadata
from tests.support.waiting import wait_until
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.znodes import TopicPartition

REQUIRED = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181/kafka"}
KAFKA, SEED = WireDialect.KAFKA, WireDialect.SEED
EPOCH = 50


def environ(properties: dict[str, str]) -> dict[str, str]:
    return {env_var_name(key): value for key, value in {**REQUIRED, **properties}.items()}


# ---------------------------------------------------------------- the key


def test_the_default_ibp_keeps_the_seeds_wire() -> None:
    config = load(None, environ=environ({}))
    assert (config.inter_broker_protocol_version, config.control_wire) == (DEFAULT_IBP, SEEDS)


@pytest.mark.parametrize("ibp", ["3.9", "3.5-IV1", "3.9-IV0"])
def test_ibp_39_reads_kafkas_dialect_and_sends_alter_partition_v3_and_controlled_shutdown_v3(
    ibp: str,
) -> None:
    config = load(None, environ=environ({"inter.broker.protocol.version": ibp}))
    assert config.control_wire == KAFKA_3_9
    wire = config.control_wire
    assert (wire.dialect, wire.alter_partition, wire.controlled_shutdown) == (KAFKA, 3, 3)


@pytest.mark.parametrize("ibp", ["2.1", "4.0", "latest"])
def test_a_bad_ibp_is_refused_at_start_naming_the_key(tmp_path: Path, ibp: str) -> None:
    properties = f"broker.id=1\nzookeeper.connect=127.0.0.1:1/unused\ninter.broker.protocol.version={ibp}\n"
    done = start_with("broker", properties, tmp_path)
    assert done.returncode == 2, done.stderr
    assert "inter.broker.protocol.version" in done.stderr


def test_the_registration_is_the_json_a_kafka_39_controller_reads(tmp_path: Path) -> None:
    """What a real Kafka 3.9 broker writes (version 5, ``features`` {} as ``/feature``'s, a rack when
    configured), key for key (``tests/interop/test_kafka_controller.py`` compares with a live one)."""
    config = load(None, environ=environ({"log.dirs": str(tmp_path), "broker.rack": "r1"}))
    server = BrokerServer(config)
    server.advertised = (Endpoint("PLAINTEXT", "127.0.0.1", 9092),)
    written = json.loads(server.registration().encode())
    assert set(written) == {
        "features", "listener_security_protocol_map", "endpoints", "rack", "jmx_port", "port", "host",
        "version", "timestamp",
    }  # fmt: skip
    assert (written["version"], written["features"], written["rack"]) == (5, {}, "r1")
    assert written["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"]
    assert written["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert isinstance(written["timestamp"], str)
    server.events.close()


# ---------------------------------------------------------------- listeners in the broker's dialect


def make_apis(log_dir: Path, dialect: WireDialect) -> KafkaApis:
    events = EventLog(None, "broker-1")
    identity = BrokerIdentity(1, epoch=EPOCH)
    return KafkaApis(identity, ReplicaManager(1, log_dir, events), MetadataCache(), events, dialect=dialect)


@pytest.fixture
async def kafka_listener(tmp_path: Path) -> AsyncIterator[tuple[KafkaApis, RawClient]]:
    """A control-plane listener of a broker at IBP 3.9, and a connection to it."""
    apis = make_apis(tmp_path, KAFKA)
    served = MetadataApis(1, apis.metadata_cache, dict, lambda: None, lambda: apis.api_keys, dialect=KAFKA)
    apis.register(ApiKey.API_VERSIONS, served.api_versions)
    plane = channel(apis.handle, prefix="control-plane")
    plane.start()
    listener = Listener(
        "CONTROLLER",
        plane,
        accepts=None,
        unsupported=apis.unsupported_version_response,
        max_frame_size=1 << 20,
        api_versions=apis.api_versions_response,
        dialect=KAFKA,
    )
    await listener.start("127.0.0.1", 0)
    client = await RawClient.connect(listener.port)
    try:
        yield apis, client
    finally:
        client.writer.close()
        await listener.close()
        await plane.stop()


async def call(
    client: RawClient, api_key: ApiKey, version: int, body: dict[str, Any], cid: int
) -> dict[str, Any]:
    await client.send(encode_request(api_key, version, cid, "controller", body, dialect=KAFKA))
    got, response = decode_response(api_key, version, await client.read_frame(), dialect=KAFKA)
    assert got == cid
    return response


async def test_a_kafka_dialect_listener_reads_kafkas_v7_v8_and_v4(
    kafka_listener: tuple[KafkaApis, RawClient],
) -> None:
    apis, client = kafka_listener
    assert await call(client, ApiKey.UPDATE_METADATA, 8, update_metadata(8, EPOCH, dialect=KAFKA), 1) == {
        "error_code": ErrorCode.NONE
    }
    answer = await call(client, ApiKey.LEADER_AND_ISR, 7, leader_and_isr(7, EPOCH, dialect=KAFKA), 2)
    assert answer["topics"] == [
        {"topic_id": topic_id_of("t"), "partition_errors": [{"partition_index": 0, "error_code": 0}]}
    ]
    body = stop_replica(4, EPOCH, delete=True, leader_epoch=1, dialect=KAFKA)
    assert await call(client, ApiKey.STOP_REPLICA, 4, body, 3) == {
        "error_code": ErrorCode.NONE,
        "partition_errors": [{"topic_name": "t", "partition_index": 0, "error_code": ErrorCode.NONE}],
    }
    assert apis.replica_manager.partitions == {}


@pytest.mark.parametrize(("api_key", "version"), [(ApiKey.LEADER_AND_ISR, 5), (ApiKey.UPDATE_METADATA, 7)])
async def test_the_seeds_versions_are_unsupported_in_kafkas_dialect_and_never_misread(
    kafka_listener: tuple[KafkaApis, RawClient], api_key: ApiKey, version: int
) -> None:
    apis, client = kafka_listener
    seed_body = (leader_and_isr if api_key == ApiKey.LEADER_AND_ISR else update_metadata)(version, EPOCH)
    await client.send(encode_request(api_key, version, 9, "controller", seed_body, dialect=SEED))
    lowest = min(supported_versions(KAFKA)[api_key])
    got, response = decode_response(api_key, lowest, await client.read_frame(), dialect=KAFKA)
    assert (got, response["error_code"]) == (9, ErrorCode.UNSUPPORTED_VERSION)
    assert apis.replica_manager.partitions == {} and not apis.metadata_cache.snapshot.brokers


async def test_api_versions_lists_the_dialects_control_versions(
    kafka_listener: tuple[KafkaApis, RawClient],
) -> None:
    apis, client = kafka_listener
    response = await client.call(ApiKey.API_VERSIONS, 2, 4, {})
    served = {e["api_key"]: (e["min_version"], e["max_version"]) for e in response["api_keys"]}
    assert served[ApiKey.LEADER_AND_ISR] == (2, 7)
    assert served[ApiKey.UPDATE_METADATA] == (5, 8)
    assert served[ApiKey.STOP_REPLICA] == (1, 4)
    header = RequestHeader(ApiKey.API_VERSIONS, 2, 5, "sasl-client", 1)
    _, before_sasl = decode_response(ApiKey.API_VERSIONS, 2, apis.api_versions_response(header))
    assert before_sasl["api_keys"] == response["api_keys"]


# ---------------------------------------------------------------- what the broker sends the controller


class Controller:
    """A controller's RPC listener on loopback that records AlterPartition and ControlledShutdown."""

    def __init__(self) -> None:
        self.received: list[tuple[RequestHeader, dict[str, Any]]] = []
        self.server = RequestServer(
            self.handle, name="controller", api_keys=(ApiKey.ALTER_PARTITION, ApiKey.CONTROLLED_SHUTDOWN)
        )

    async def handle(self, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        self.received.append((header, body))
        if header.api_key == ApiKey.CONTROLLED_SHUTDOWN:
            return {"error_code": ErrorCode.NONE, "remaining_partitions": []}
        topic = body["topics"][0]
        partition = topic["partitions"][0]
        isr = [m["broker_id"] for m in partition["new_isr_with_epochs"]] if header.api_version >= 3 else []
        answer = {
            "partition_index": partition["partition_index"],
            "error_code": ErrorCode.NONE,
            "leader_id": body["broker_id"],
            "leader_epoch": partition["leader_epoch"],
            "isr": isr or partition.get("new_isr", []),
            "leader_recovery_state": 0,
            "partition_epoch": partition["partition_epoch"] + 1,
        }
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NONE,
            "topics": [{"topic_id": topic["topic_id"], "partitions": [answer]}],
        }

    async def address(self) -> ControllerAddress:
        return ControllerAddress(9, "127.0.0.1", self.server.port)


@pytest.fixture
async def controller() -> AsyncIterator[Controller]:
    recording = Controller()
    await recording.server.start("127.0.0.1", 0)
    try:
        yield recording
    finally:
        await recording.server.close()


@pytest.mark.parametrize("version", [2, 3])
async def test_alter_partition_is_sent_at_the_wires_version_with_the_partitions_topic_id(
    controller: Controller, version: int
) -> None:
    """v3 (IBP 3.5-IV1+) names each ISR member with broker epoch -1, as Kafka's ZooKeeper-mode brokers
    do; the topic id is the one the LeaderAndIsr gave, so ZooKeeper is not read."""
    outcomes: list[Outcome] = []
    manager = AlterPartitionManager(
        cast(AsyncZooKeeper, None), 1, lambda: EPOCH, controller.address, outcomes.append, version=version
    )
    manager.start()
    try:
        topic_id = uuid.uuid4()
        manager.submit(Proposal(TopicPartition("t", 0), 4, (1, 2), 7, topic_id))
        await wait_until(lambda: outcomes, what="the controller's answer")
    finally:
        await manager.stop()
    ((header, body),) = controller.received
    assert (header.api_key, header.api_version) == (ApiKey.ALTER_PARTITION, version)
    assert (body["broker_id"], body["broker_epoch"]) == (1, EPOCH)
    (topic,) = body["topics"]
    (partition,) = topic["partitions"]
    assert topic["topic_id"] == topic_id
    assert (partition["leader_epoch"], partition["partition_epoch"]) == (4, 7)
    if version == 3:
        assert partition["new_isr_with_epochs"] == [
            {"broker_id": 1, "broker_epoch": -1},
            {"broker_id": 2, "broker_epoch": -1},
        ]
    else:
        assert partition["new_isr"] == [1, 2]
    assert (outcomes[0].error, outcomes[0].isr, outcomes[0].partition_epoch) == (ErrorCode.NONE, (1, 2), 8)


@pytest.mark.parametrize("version", [2, 3])
async def test_controlled_shutdown_is_sent_at_the_wires_version_with_the_broker_epoch(
    controller: Controller, version: int
) -> None:
    events = EventLog(None, "broker-1")
    shutdown = ControlledShutdown(
        1,
        lambda: EPOCH,
        controller.address,
        events,
        max_retries=1,
        retry_backoff_s=0,
        timeout_s=5,
        version=version,
    )
    started = time.monotonic()
    assert await shutdown.run()
    assert time.monotonic() - started < 5
    ((header, body),) = controller.received
    assert (header.api_key, header.api_version, header.version) == (
        ApiKey.CONTROLLED_SHUTDOWN,
        version,
        2 if version == 3 else 1,
    )
    assert body == {"broker_id": 1, "broker_epoch": EPOCH}
    attempt = events.recent[-1]
    assert (attempt["kind"], attempt["api_version"], attempt["error"]) == (
        "controlled_shutdown_attempt",
        version,
        "NONE",
    )


def test_znodes_format_is_what_partition_metadata_uses() -> None:
    """``partition.metadata`` and ``/brokers/topics/T`` spell ids alike (Kafka's base64url)."""
    topic_id = topic_id_of("t")
    assert znodes.parse_topic_id(znodes.format_topic_id(topic_id)) == topic_id
