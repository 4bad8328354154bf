"""KafkaConnection against small asyncio servers on 127.0.0.1 that speak just enough of the protocol."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from daemon import frames
from network.connection import KafkaConnection
from protocol import (
    DEFAULT_MAX_FRAME_SIZE,
    ApiKey,
    ProtocolError,
    RequestHeader,
    decode_request,
    decode_request_header,
    encode_request_body,
    encode_response,
)

LAI = ApiKey.LEADER_AND_ISR
LAI_VERSION = 2
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def lai_body(topic: str = "orders") -> dict[str, Any]:
    partition = {
        "partition_index": 0,
        "controller_epoch": 5,
        "leader": 1,
        "leader_epoch": 3,
        "isr": [1, 2],
        "partition_epoch": 7,
        "replicas": [1, 2],
        "is_new": False,
    }
    return {
        "controller_id": 9,
        "controller_epoch": 5,
        "broker_epoch": 42,
        "topic_states": [{"topic_name": topic, "partition_states": [partition]}],
        "live_leaders": [{"broker_id": 1, "host_name": "broker-1", "port": 9092}],
    }


def lai_response(topic: str) -> dict[str, Any]:
    """A response that names ``topic``, so a test can tell which request it answers."""
    return {
        "error_code": 0,
        "partition_errors": [{"topic_name": topic, "partition_index": 0, "error_code": 0}],
    }


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    """The fake server's side: the next request frame."""
    return await frames.read_frame(reader, DEFAULT_MAX_FRAME_SIZE)


def answer(
    writer: asyncio.StreamWriter, header: RequestHeader, body: dict[str, Any], *, cid: int | None = None
):
    cid = header.correlation_id if cid is None else cid
    writer.write(encode_response(header.api_key, header.api_version, cid, body))


@contextlib.asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[int]:
    """Run ``handler`` for each connection on a fresh port; everything is torn down on exit."""
    tasks: set[asyncio.Task[Any]] = set()

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tasks.add(asyncio.current_task())  # type: ignore[arg-type]
        try:
            await handler(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(connected, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


async def open_to(port: int, **kwargs: Any) -> KafkaConnection:
    return await KafkaConnection.open("127.0.0.1", port, client_id="controller-9", **kwargs)


async def test_pipelined_requests_resolve_in_order() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        requests = [decode_request(await read_frame(reader)) for _ in range(3)]  # all three before any answer
        for header, body in requests:
            answer(writer, header, lai_response(body["topic_states"][0]["topic_name"]))
        await reader.read()

    async with serve(handler) as port:
        connection = await open_to(port)
        results = await asyncio.gather(
            *(connection.send(LAI, LAI_VERSION, lai_body(f"t{i}"), timeout=2) for i in range(3))
        )
        await connection.close()

    assert [cid for cid, _ in results] == [0, 1, 2]
    assert [body["partition_errors"][0]["topic_name"] for _, body in results] == ["t0", "t1", "t2"]


async def test_a_dict_body_arrives_as_a_valid_request_with_the_client_id() -> None:
    seen: list[tuple[RequestHeader, dict[str, Any]]] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        header, body = decode_request(await read_frame(reader))
        seen.append((header, body))
        answer(writer, header, lai_response("orders"))
        await reader.read()

    async with serve(handler) as port:
        connection = await open_to(port)
        await connection.send(LAI, LAI_VERSION, lai_body(), timeout=2)
        await connection.close()

    [(header, body)] = seen
    assert (header.api_key, header.api_version, header.client_id) == (LAI, LAI_VERSION, "controller-9")
    assert body == lai_body()


async def test_a_correlation_mismatch_closes_and_fails_every_pending_request() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        header, _ = decode_request(await read_frame(reader))
        await read_frame(reader)
        answer(writer, header, lai_response("x"), cid=header.correlation_id + 100)
        await reader.read()

    async with serve(handler) as port:
        connection = await open_to(port)
        results = await asyncio.gather(
            *(connection.send(LAI, LAI_VERSION, lai_body(), timeout=2) for _ in range(2)),
            return_exceptions=True,
        )
        assert connection.closed
        assert connection.in_flight == 0
        for result in results:
            assert isinstance(result, ConnectionError)
            assert isinstance(result.__cause__, ProtocolError)
            assert "correlation id 100" in str(result)
        with pytest.raises(ConnectionError):
            await connection.send(LAI, LAI_VERSION, lai_body(), timeout=2)
        await connection.close()


async def test_one_encoded_body_reaches_two_servers_byte_identical() -> None:
    received: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            frame = await read_frame(reader)
            received.append(frame)
            answer(writer, decode_request(frame)[0], lai_response("orders"))

    shared = encode_request_body(LAI, LAI_VERSION, lai_body())
    async with serve(handler) as port_a, serve(handler) as port_b:
        connections = [await open_to(port_a), await open_to(port_b)]
        written: list[tuple[bytes, ...]] = []
        for connection in connections:
            writer = connection._writer
            original = writer.writelines

            def record(parts: Any, original: Any = original) -> None:
                parts = tuple(parts)
                written.append(parts)
                original(parts)

            writer.writelines = record  # type: ignore[method-assign]
        await connections[1].send(LAI, LAI_VERSION, lai_body("warm-up"), timeout=2)
        for connection in connections:
            await connection.send(LAI, LAI_VERSION, shared, timeout=2)
            await connection.close()

    assert [parts[-1] is shared for parts in written[1:]] == [True, True]  # never copied per destination
    shared_frames = [frame for frame in received if decode_request(frame)[1] == lai_body()]
    assert len(shared_frames) == 2
    for frame in shared_frames:
        _, offset = decode_request_header(frame)
        assert frame[offset:] == shared
    headers = [decode_request(frame)[0] for frame in shared_frames]
    assert sorted(h.correlation_id for h in headers) == [0, 1]  # each connection numbers its own


async def test_a_timeout_raises_and_closes_the_connection() -> None:
    server_saw_close = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_frame(reader)  # and never answer
        await reader.read()
        server_saw_close.set()

    async with serve(handler) as port:
        connection = await open_to(port)
        with pytest.raises(TimeoutError):
            await connection.send(LAI, LAI_VERSION, lai_body(), timeout=0.1)
        assert connection.closed
        await asyncio.wait_for(server_saw_close.wait(), 2)
        with pytest.raises(ConnectionError):
            await connection.send(LAI, LAI_VERSION, lai_body(), timeout=2)
        await connection.close()


async def test_the_server_closing_fails_the_pending_request_with_connection_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_frame(reader)

    async with serve(handler) as port:
        connection = await open_to(port)
        with pytest.raises(ConnectionError, match="closed by the server") as caught:
            await connection.send(LAI, LAI_VERSION, lai_body(), timeout=2)
        assert isinstance(caught.value.__cause__, asyncio.IncompleteReadError)
        assert connection.closed
        await connection.close()


async def test_a_response_frame_above_the_maximum_closes_the_connection() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_frame(reader)
        writer.write(struct.pack(">i", 1_000_000))
        await reader.read()

    async with serve(handler) as port:
        connection = await open_to(port, max_frame_size=1024)
        with pytest.raises(ConnectionError, match=r"1000000 bytes .* outside 0\.\.1024 \(max_frame_size\)"):
            await connection.send(LAI, LAI_VERSION, lai_body(), timeout=2)
        assert connection.closed
        await connection.close()


async def test_correlation_ids_increase_and_wrap_at_int32() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            header, _ = decode_request(await read_frame(reader))
            answer(writer, header, lai_response("orders"))

    async with serve(handler) as port:
        connection = await open_to(port)
        assert (await connection.send(LAI, LAI_VERSION, lai_body(), timeout=2))[0] == 0
        assert connection.next_correlation_id == 1
        connection._next_correlation_id = 2**31 - 1
        assert (await connection.send(LAI, LAI_VERSION, lai_body(), timeout=2))[0] == 2**31 - 1
        assert (await connection.send(LAI, LAI_VERSION, lai_body(), timeout=2))[0] == 0
        await connection.close()


async def test_connecting_to_a_closed_port_fails_with_an_os_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(OSError):
        await open_to(port, connect_timeout=2)


async def test_close_fails_requests_still_in_flight() -> None:
    received = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_frame(reader)
        received.set()
        await reader.read()

    async with serve(handler) as port:
        connection = await open_to(port)
        pending = asyncio.create_task(connection.send(LAI, LAI_VERSION, lai_body(), timeout=2))
        await asyncio.wait_for(received.wait(), 2)
        await connection.close()
        with pytest.raises(ConnectionError, match="closed"):
            await pending
