"""The shared request server on loopback: bad peers lose only their own connection, answers stay in order."""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest

from network.server import RequestServer, current_request
from protocol import (
    ApiKey,
    ErrorCode,
    RequestHeader,
    decode_response,
    encode_request,
    error_response_body,
)
from tests.support.raw_client import RawClient, raw_frame

TIMEOUT = 10.0
MAX_FRAME = 4096

LEADER_AND_ISR_V2 = {
    "controller_id": 1,
    "controller_epoch": 1,
    "broker_epoch": -1,
    "topic_states": [],
    "live_leaders": [],
}
STOP_REPLICA_V1 = {
    "controller_id": 1,
    "controller_epoch": 1,
    "broker_epoch": -1,
    "delete_partitions": False,
    "topics": [],
}


class Recorder:
    """A handler that answers NONE and remembers the requests it saw."""

    def __init__(self) -> None:
        self.calls: list[RequestHeader] = []

    async def __call__(self, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(header)
        return error_response_body(header.api_key, header.api_version, ErrorCode.NONE)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
async def server(recorder: Recorder) -> AsyncIterator[RequestServer]:
    srv = RequestServer(recorder, name="test", api_keys={ApiKey.LEADER_AND_ISR}, max_frame_size=MAX_FRAME)
    await srv.start("127.0.0.1", 0)
    try:
        yield srv
    finally:
        await srv.close()


async def test_start_returns_the_bound_port_and_close_drops_connections(server: RequestServer) -> None:
    assert server.port > 0
    client = await RawClient.connect(server.port)
    assert (await client.call(4, 2, 1, LEADER_AND_ISR_V2))["error_code"] == 0
    assert server.connections == 1
    await server.close()
    assert await client.closed_by_server()
    assert server.connections == 0
    with pytest.raises(OSError):
        await RawClient.connect(server.port)


@pytest.mark.parametrize("announced", [MAX_FRAME + 1, -1, 2**31 - 1])
async def test_bad_size_prefix_closes_only_that_connection(
    server: RequestServer, announced: int, caplog: pytest.LogCaptureFixture
) -> None:
    bystander = await RawClient.connect(server.port)
    offender = await RawClient.connect(server.port)
    with caplog.at_level(logging.WARNING, logger="network.server"):
        await offender.send(struct.pack(">i", announced))
        assert await offender.closed_by_server()
    assert "closing connection from 127.0.0.1:" in caplog.text
    assert (await bystander.call(4, 2, 9, LEADER_AND_ISR_V2))["error_code"] == 0
    bystander.close()


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(struct.pack(">hhih", 4, 2, 1, -1) + b"\x00\x01", id="truncated-body"),
        pytest.param(
            struct.pack(">hhih", 4, 2, 1, -1) + struct.pack(">iiq", 1, 1, -1) + b"\xff" * 9, id="garbage"
        ),
        pytest.param(struct.pack(">hhih", 999, 0, 1, -1), id="unknown-api-key"),
        pytest.param(b"\x00", id="truncated-header"),
    ],
)
async def test_malformed_request_closes_the_connection(
    server: RequestServer, recorder: Recorder, payload: bytes
) -> None:
    offender = await RawClient.connect(server.port)
    await offender.send(raw_frame(payload))
    assert await offender.closed_by_server()
    assert recorder.calls == []
    other = await RawClient.connect(server.port)
    assert (await other.call(4, 2, 2, LEADER_AND_ISR_V2))["error_code"] == 0
    other.close()


async def test_unsupported_version_is_answered_and_the_connection_stays_usable(
    server: RequestServer, recorder: Recorder
) -> None:
    client = await RawClient.connect(server.port)
    # LeaderAndIsr v0 with a v1 header (null client id): a known API at a version the codec lacks.
    await client.send(raw_frame(struct.pack(">hhih", 4, 0, 41, -1) + b"\x00" * 8))
    correlation_id, body = decode_response(4, 2, await client.read_frame())
    assert (correlation_id, body["error_code"]) == (41, ErrorCode.UNSUPPORTED_VERSION)
    assert recorder.calls == []
    assert (await client.call(4, 2, 42, LEADER_AND_ISR_V2))["error_code"] == 0
    assert [h.correlation_id for h in recorder.calls] == [42]
    client.close()


async def test_api_not_served_is_refused_without_calling_the_handler(
    server: RequestServer, recorder: Recorder
) -> None:
    client = await RawClient.connect(server.port)
    answer = await client.call(ApiKey.STOP_REPLICA, 1, 5, STOP_REPLICA_V1)
    assert answer == {"error_code": ErrorCode.INVALID_REQUEST, "partition_errors": []}
    assert recorder.calls == []
    assert (await client.call(4, 2, 6, LEADER_AND_ISR_V2))["error_code"] == 0
    client.close()


async def test_pipelined_requests_are_handled_one_at_a_time_and_answered_in_order() -> None:
    active = 0
    most_active = 0
    seen: list[int] = []

    async def handler(header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        nonlocal active, most_active
        active += 1
        most_active = max(most_active, active)
        seen.append(header.correlation_id)
        for _ in range(header.correlation_id % 3):
            await asyncio.sleep(0)  # let the loop run, so concurrent handling would interleave
        active -= 1
        return error_response_body(header.api_key, header.api_version, ErrorCode.NONE)

    srv = RequestServer(handler, name="pipeline", api_keys={4})
    await srv.start("127.0.0.1", 0)
    try:
        client = await RawClient.connect(srv.port)
        ids = list(range(50))
        await client.send(b"".join(encode_request(4, 2, i, None, LEADER_AND_ISR_V2) for i in ids))
        answered = [decode_response(4, 2, await client.read_frame())[0] for _ in ids]
        assert answered == ids
        assert seen == ids
        assert most_active == 1
        client.close()
    finally:
        await srv.close()


async def test_a_busy_connection_does_not_hold_up_another() -> None:
    release = asyncio.Event()

    async def handler(header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        if header.correlation_id == 1:
            await release.wait()
        return error_response_body(header.api_key, header.api_version, ErrorCode.NONE)

    srv = RequestServer(handler, name="independent", api_keys={4})
    await srv.start("127.0.0.1", 0)
    try:
        slow, fast = await RawClient.connect(srv.port), await RawClient.connect(srv.port)
        await slow.send(encode_request(4, 2, 1, None, LEADER_AND_ISR_V2))
        assert (await fast.call(4, 2, 2, LEADER_AND_ISR_V2))["error_code"] == 0
        release.set()
        assert decode_response(4, 2, await slow.read_frame())[0] == 1
        slow.close()
        fast.close()
    finally:
        await srv.close()


async def test_handler_failure_closes_that_connection_with_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def handler(header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        if header.correlation_id == 13:
            raise RuntimeError("boom")
        return error_response_body(header.api_key, header.api_version, ErrorCode.NONE)

    srv = RequestServer(handler, name="failing", api_keys={4})
    await srv.start("127.0.0.1", 0)
    try:
        victim, other = await RawClient.connect(srv.port), await RawClient.connect(srv.port)
        with caplog.at_level(logging.ERROR, logger="network.server"):
            await victim.send(encode_request(4, 2, 13, None, LEADER_AND_ISR_V2))
            assert await victim.closed_by_server()
        failure = next(r for r in caplog.records if r.levelno == logging.ERROR)
        assert failure.exc_info is not None and "boom" in str(failure.exc_info[1])
        assert (await other.call(4, 2, 14, LEADER_AND_ISR_V2))["error_code"] == 0
        other.close()
    finally:
        await srv.close()


async def test_handler_sees_the_frame_size_and_peer() -> None:
    contexts = []

    async def handler(header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        contexts.append(current_request.get())
        return error_response_body(header.api_key, header.api_version, ErrorCode.NONE)

    srv = RequestServer(handler, name="context", api_keys={4})
    await srv.start("127.0.0.1", 0)
    try:
        client = await RawClient.connect(srv.port)
        frame = encode_request(4, 2, 3, "me", LEADER_AND_ISR_V2)
        await client.send(frame)
        await client.read_frame()
        (context,) = contexts
        assert context.size == len(frame)
        assert context.peer.startswith("127.0.0.1:")
        client.close()
    finally:
        await srv.close()


def test_an_api_the_codec_lacks_cannot_be_served() -> None:
    async def handler(header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        return {}

    with pytest.raises(ValueError, match="999"):
        RequestServer(handler, name="bad", api_keys={4, 999})
