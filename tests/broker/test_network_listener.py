"""A broker listener on loopback: bad peers lose only their connection, unsupported versions and APIs
are answered in-band, and answers that wait (acks=all) go back in request order.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from pathlib import Path

import pytest

from broker.apis import KafkaApis
from protocol import CONTROL_APIS, SUPPORTED_VERSIONS, ApiKey, ErrorCode, encode_request
from tests.broker.network_builders import (
    MAX_FRAME,
    TIMEOUT,
    Deferring,
    Recorder,
    Serve,
    broker_serving,
    channel,
    make_apis,
    pipelined,
    update_metadata,
)
from tests.support.raw_client import RawClient, raw_frame
from tests.support.waiting import wait_until


@pytest.fixture
def apis(tmp_path: Path) -> KafkaApis:
    return make_apis(tmp_path)


@pytest.fixture
def serve(apis: KafkaApis) -> Serve:
    return broker_serving(apis)


# ---------------------------------------------------------------- bad peers


@pytest.mark.parametrize("announced", [MAX_FRAME + 1, 2**31 - 1, -1])
async def test_oversized_size_prefix_closes_only_that_connection(
    serve: Serve, announced: int, caplog: pytest.LogCaptureFixture
) -> None:
    handler = Recorder()
    async with serve(channel(handler)) as listener:
        bystander = await RawClient.connect(listener.port)
        assert await update_metadata(bystander, 1) == {"error_code": ErrorCode.NONE}
        offender = await RawClient.connect(listener.port)
        with caplog.at_level(logging.WARNING, logger="broker.network"):
            await offender.send(struct.pack(">i", announced))
            assert await offender.closed_by_server()
        assert "socket.request.max.bytes" in caplog.text
        assert await update_metadata(bystander, 2) == {"error_code": ErrorCode.NONE}
        assert handler.correlation_ids() == [1, 2]
        bystander.close()
        offender.close()


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(struct.pack(">hhih", 999, 0, 1, -1), id="unknown-api-key"),
        pytest.param(b"\x00\x06", id="truncated-header"),
    ],
)
async def test_malformed_header_closes_the_connection_without_reaching_a_handler(
    serve: Serve, payload: bytes
) -> None:
    handler = Recorder()
    async with serve(channel(handler)) as listener:
        offender = await RawClient.connect(listener.port)
        await offender.send(raw_frame(payload))
        assert await offender.closed_by_server()
        other = await RawClient.connect(listener.port)
        assert await update_metadata(other, 5) == {"error_code": ErrorCode.NONE}
        assert handler.correlation_ids() == [5]
        offender.close()
        other.close()


# ---------------------------------------------------------------- answers in-band


async def test_unsupported_version_is_answered_and_the_connection_stays_usable(serve: Serve) -> None:
    handler = Recorder()
    async with serve(channel(handler)) as listener:
        client = await RawClient.connect(listener.port)
        # LeaderAndIsr v0 with a v1 header (null client id): a known API at a version not implemented.
        await client.send(raw_frame(struct.pack(">hhih", ApiKey.LEADER_AND_ISR, 0, 41, -1) + b"\x00" * 8))
        oldest = min(SUPPORTED_VERSIONS[ApiKey.LEADER_AND_ISR])
        correlation_id, body = await client.read_answer(ApiKey.LEADER_AND_ISR, oldest)
        assert (correlation_id, body["error_code"]) == (41, ErrorCode.UNSUPPORTED_VERSION)
        assert handler.count == 0
        assert await update_metadata(client, 42) == {"error_code": ErrorCode.NONE}
        assert handler.correlation_ids() == [42]
        client.close()


def api_versions_v3_frame(correlation_id: int) -> bytes:
    """ApiVersions v3 as current clients send it first: request header v2 and a flexible body."""
    client_id = b"rdkafka"
    header = (
        struct.pack(">hhih", ApiKey.API_VERSIONS, 3, correlation_id, len(client_id)) + client_id + b"\x00"
    )
    name, version = b"librdkafka", b"2.3.0"
    body = bytes([len(name) + 1]) + name + bytes([len(version) + 1]) + version + b"\x00"
    return raw_frame(header + body)


@pytest.mark.skipif(
    ApiKey.API_VERSIONS not in SUPPORTED_VERSIONS, reason="ApiVersions is not implemented by the codec yet"
)
async def test_api_versions_newer_than_implemented_is_answered_with_what_is_served(
    serve: Serve, apis: KafkaApis
) -> None:
    """Kafka answers an ApiVersions version it lacks in v0 with the versions it has, so the client retries."""
    if 3 in SUPPORTED_VERSIONS[ApiKey.API_VERSIONS]:
        pytest.skip("ApiVersions v3 is implemented")
    handler = Recorder()
    apis.register(ApiKey.API_VERSIONS, lambda request, body: {})
    async with serve(channel(handler)) as listener:
        client = await RawClient.connect(listener.port)
        await client.send(api_versions_v3_frame(7))
        correlation_id, body = await client.read_answer(ApiKey.API_VERSIONS, 0)
        assert (correlation_id, body["error_code"]) == (7, ErrorCode.UNSUPPORTED_VERSION)
        listed = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
        served = {int(k): (min(SUPPORTED_VERSIONS[k]), max(SUPPORTED_VERSIONS[k])) for k in apis.api_keys}
        assert listed == served
        assert ApiKey.API_VERSIONS in listed
        assert handler.count == 0
        assert await update_metadata(client, 8) == {"error_code": ErrorCode.NONE}
        client.close()


async def test_control_only_listener_rejects_other_apis_without_calling_the_handler(serve: Serve) -> None:
    handler = Recorder()
    async with serve(channel(handler, prefix="control-plane"), accepts=CONTROL_APIS) as listener:
        client = await RawClient.connect(listener.port)
        shutdown = {"broker_id": 1, "broker_epoch": 5}
        await client.send(encode_request(ApiKey.CONTROLLED_SHUTDOWN, 2, 3, "test", shutdown))
        correlation_id, body = await client.read_answer(ApiKey.CONTROLLED_SHUTDOWN, 2)
        assert (correlation_id, body) == (
            3,
            {"error_code": ErrorCode.INVALID_REQUEST, "remaining_partitions": []},
        )
        assert handler.count == 0
        assert await update_metadata(client, 4) == {"error_code": ErrorCode.NONE}
        assert handler.correlation_ids() == [4]
        client.close()


# ---------------------------------------------------------------- answers that wait


async def test_requests_waiting_for_their_answer_do_not_stop_the_next_from_being_handled(
    serve: Serve,
) -> None:
    handler = Deferring()
    plane = channel(handler, capacity=10, threads=2)
    async with serve(plane, max_waiting=3) as listener:
        client = await RawClient.connect(listener.port)
        answers = asyncio.create_task(pipelined(client, [1, 2, 3, 4]))
        await wait_until(lambda: handler.handled == [1, 2, 3], "three handled while none is answered")
        assert not answers.done()
        handler.complete(2)  # out of order: the answers still go back in request order
        handler.complete(1)
        await wait_until(lambda: handler.handled == [1, 2, 3, 4], "room for the fourth once one was answered")
        handler.complete(4)
        handler.complete(3)
        async with asyncio.timeout(TIMEOUT):
            assert await answers == [1, 2, 3, 4]
        client.close()


async def test_by_default_the_next_request_waits_for_the_previous_answer(serve: Serve) -> None:
    handler = Deferring()
    plane = channel(handler, capacity=10, threads=2)
    async with serve(plane) as listener:
        client = await RawClient.connect(listener.port)
        answers = asyncio.create_task(pipelined(client, [1, 2]))
        await wait_until(lambda: handler.handled == [1], "the first request handled")
        other = await RawClient.connect(listener.port)
        other_answer = asyncio.create_task(pipelined(other, [9]))
        await wait_until(lambda: handler.handled == [1, 9], "another connection's request handled meanwhile")
        handler.complete(9)
        async with asyncio.timeout(TIMEOUT):
            assert await other_answer == [9]
        assert handler.handled == [1, 9], "Kafka's muted channel: nothing more until the answer is written"
        handler.complete(1)
        await wait_until(lambda: handler.handled == [1, 9, 2], "the second request after the first answer")
        handler.complete(2)
        async with asyncio.timeout(TIMEOUT):
            assert await answers == [1, 2]
        client.close()
        other.close()
