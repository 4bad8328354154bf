"""The request channel on loopback: back-pressure without drops, one request per connection in a plane,
handler failures, idle shares and Kafka's thread names. No ZooKeeper: real sockets, a real
RequestChannel and Listener, and handlers written for each test.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

import pytest

from broker.apis import KafkaApis
from protocol import ErrorCode
from tests.broker.network_builders import (
    TIMEOUT,
    Recorder,
    Serve,
    broker_serving,
    channel,
    make_apis,
    pipelined,
    request_frame,
    update_metadata,
)
from tests.support.raw_client import RawClient
from tests.support.waiting import wait_until


@pytest.fixture
def apis(tmp_path: Path) -> KafkaApis:
    return make_apis(tmp_path)


@pytest.fixture
def serve(apis: KafkaApis) -> Serve:
    return broker_serving(apis)


# ---------------------------------------------------------------- back-pressure


async def test_full_queue_holds_back_connections_without_dropping_and_answers_in_order(serve: Serve) -> None:
    gate = threading.Event()
    handler = Recorder(gate)
    plane = channel(handler, capacity=2, threads=1)
    sizes: list[int] = []
    async with serve(plane, release=[gate]) as listener:

        async def sample() -> None:
            while True:
                sizes.append(plane.size)
                await asyncio.sleep(0)

        sampler = asyncio.create_task(sample())
        clients = [await RawClient.connect(listener.port) for _ in range(4)]
        ids = {i: [100 * i + n for n in range(3)] for i in range(len(clients))}
        answers = [asyncio.create_task(pipelined(c, ids[i])) for i, c in enumerate(clients)]
        await wait_until(lambda: handler.count == 1 and plane.size == 2, "one request handled, two queued")
        assert handler.count == 1, "the only handler thread is blocked, so nothing else was taken"
        gate.set()
        async with asyncio.timeout(TIMEOUT):
            got = await asyncio.gather(*answers)
        sampler.cancel()
        for client in clients:
            client.close()
    assert got == [ids[i] for i in range(len(clients))]
    assert sorted(handler.correlation_ids()) == sorted(cid for cids in ids.values() for cid in cids)
    by_peer: dict[str, list[int]] = {}
    for peer, cid in handler.seen:
        by_peer.setdefault(peer, []).append(cid)
    assert sorted(by_peer.values()) == sorted(ids.values()), "each connection's requests handled in order"
    assert max(sizes) <= 2


async def test_one_connection_has_at_most_one_request_in_the_plane(serve: Serve) -> None:
    """Kafka mutes a connection while its request is in flight: a pipelining client cannot fill the queue."""
    gate = threading.Event()
    handler = Recorder(gate)
    plane = channel(handler, capacity=10, threads=4)
    async with serve(plane, release=[gate]) as listener:
        client = await RawClient.connect(listener.port)
        answers = asyncio.create_task(pipelined(client, [1, 2, 3, 4, 5]))
        await wait_until(lambda: handler.count == 1, "the first request reached a handler")
        other = await RawClient.connect(listener.port)
        other_answer = asyncio.create_task(pipelined(other, [9]))
        await wait_until(lambda: handler.count == 2, "another connection is still served")
        assert handler.correlation_ids() == [1, 9]
        assert plane.size == 0
        gate.set()
        async with asyncio.timeout(TIMEOUT):
            assert await answers == [1, 2, 3, 4, 5]
            assert await other_answer == [9]
        client.close()
        other.close()


# ---------------------------------------------------------------- handler failures


async def test_handler_exception_closes_only_that_connection(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    handler = Recorder(fail_on=13)
    async with serve(channel(handler, threads=1)) as listener:
        bystander = await RawClient.connect(listener.port)
        offender = await RawClient.connect(listener.port)
        with caplog.at_level(logging.ERROR, logger="broker.network"):
            await offender.send(request_frame(13))
            assert await offender.closed_by_server()
        assert "handler bug" in caplog.text
        # The single handler thread survived the exception and serves the next request.
        assert await update_metadata(bystander, 14) == {"error_code": ErrorCode.NONE}
        assert handler.correlation_ids() == [13, 14]
        bystander.close()
        offender.close()


# ---------------------------------------------------------------- idle share and thread names


async def elapse(seconds: float) -> None:
    """Let wall time pass: an idle share is a ratio over an interval, so the interval must not be empty."""
    await asyncio.sleep(seconds)


async def test_idle_channel_reports_an_idle_fraction_near_one(serve: Serve) -> None:
    plane = channel(Recorder(), threads=2)
    async with serve(plane):
        plane.idle_fraction()
        await elapse(0.05)
        assert plane.idle_fraction() > 0.9


async def test_idle_fraction_drops_while_the_only_handler_is_busy(serve: Serve) -> None:
    gate = threading.Event()
    handler = Recorder(gate)
    plane = channel(handler, threads=1)
    async with serve(plane, release=[gate]) as listener:
        client = await RawClient.connect(listener.port)
        answer_task = asyncio.create_task(pipelined(client, [1]))
        await wait_until(lambda: handler.count == 1, "the handler is busy")
        plane.idle_fraction()
        await elapse(0.05)
        assert plane.idle_fraction() < 0.5
        gate.set()
        async with asyncio.timeout(TIMEOUT):
            await answer_task
        client.close()


def handler_threads() -> list[str]:
    return sorted(t.name for t in threading.enumerate() if "-kafka-request-handler-" in t.name)


async def test_handler_threads_are_named_as_in_kafka(serve: Serve) -> None:
    before = handler_threads()
    control_handler, data_handler = Recorder(), Recorder()
    control = channel(control_handler, threads=1, prefix="control-plane")
    data = channel(data_handler, threads=3, prefix="data-plane")
    async with serve(control) as control_listener, serve(data) as data_listener:
        started = [t for t in handler_threads() if t not in before]
        assert sorted(started) == [
            "control-plane-kafka-request-handler-0",
            "data-plane-kafka-request-handler-0",
            "data-plane-kafka-request-handler-1",
            "data-plane-kafka-request-handler-2",
        ]
        for port in (control_listener.port, data_listener.port):
            client = await RawClient.connect(port)
            await update_metadata(client, 1)
            client.close()
    assert control_handler.threads == ["control-plane-kafka-request-handler-0"]
    assert data_handler.threads[0].startswith("data-plane-kafka-request-handler-")
    assert handler_threads() == before, "stop() ends the handler threads"
