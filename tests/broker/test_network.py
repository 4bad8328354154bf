"""The broker's network planes on loopback: back-pressure, KIP-291 isolation, and per-connection failures.

No ZooKeeper: real sockets, a real RequestChannel and Listener, and handlers written for each test.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterable
from concurrent.futures import Future
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from broker.apis import BrokerIdentity, KafkaApis
from broker.metadata_cache import MetadataCache
from broker.network import ControlPriority, Listener, Outcome, Request, RequestChannel, Result
from broker.replica_manager import ReplicaManager
from daemon.eventlog import EventLog
from protocol import (
    CONTROL_APIS,
    SUPPORTED_VERSIONS,
    ApiKey,
    ErrorCode,
    RequestHeader,
    UnsupportedVersionError,
    encode_request,
    encode_response,
    error_response_body,
)
from tests.support.raw_client import RawClient, raw_frame
from tests.support.waiting import wait_until

TIMEOUT = 10.0
MAX_FRAME = 4096
UPDATE_METADATA_V7 = (ApiKey.UPDATE_METADATA, 7)
BROKER_EPOCH = 50

Handle = Callable[[Request], Result]


# ---------------------------------------------------------------- requests and answers


def update_metadata_body(controller_epoch: int = 1) -> dict[str, Any]:
    """An UpdateMetadata v7 body for the broker of ``make_apis`` (max_broker_epoch = its epoch)."""
    return {
        "controller_id": 100,
        "controller_epoch": controller_epoch,
        "max_broker_epoch": BROKER_EPOCH,
        "topic_states": [],
        "live_brokers": [
            {
                "id": 1,
                "endpoints": [
                    {"port": 9092, "host": "127.0.0.1", "listener": "PLAINTEXT", "security_protocol": 0}
                ],
                "rack": None,
            }
        ],
    }


def request_frame(correlation_id: int) -> bytes:
    return encode_request(*UPDATE_METADATA_V7, correlation_id, "test", update_metadata_body())


async def update_metadata(client: RawClient, correlation_id: int) -> dict[str, Any]:
    """One UpdateMetadata v7 round trip."""
    return await client.call(*UPDATE_METADATA_V7, correlation_id, update_metadata_body())


def answer(header: RequestHeader) -> bytes:
    """An error-free response to whatever ``header`` asked."""
    body = error_response_body(header.api_key, header.api_version, ErrorCode.NONE)
    return encode_response(header.api_key, header.api_version, header.correlation_id, body)


def reject(header: RequestHeader) -> bytes:
    """What the broker answers for an API its control-plane listener does not serve."""
    body = error_response_body(header.api_key, header.api_version, ErrorCode.INVALID_REQUEST)
    return encode_response(header.api_key, header.api_version, header.correlation_id, body)


class Recorder:
    """A handler that answers NONE, optionally after waiting for ``gate``; it records what it saw.

    ``fail_on`` names a correlation id whose handling raises, as a handler bug would.
    """

    def __init__(self, gate: threading.Event | None = None, fail_on: int | None = None) -> None:
        self.gate = gate
        self.fail_on = fail_on
        self._lock = threading.Lock()
        self.seen: list[tuple[str, int]] = []
        self.threads: list[str] = []

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.seen)

    def correlation_ids(self) -> list[int]:
        with self._lock:
            return [cid for _, cid in self.seen]

    def __call__(self, request: Request) -> Result:
        with self._lock:
            self.seen.append((request.peer, request.header.correlation_id))
            self.threads.append(threading.current_thread().name)
        if self.gate is not None:
            self.gate.wait(TIMEOUT)  # bounded, so a failing test cannot hang the run
        if request.header.correlation_id == self.fail_on:
            raise RuntimeError("handler bug")
        return answer(request.header)


def channel(
    handle: Handle, *, capacity: int = 10, threads: int = 1, prefix: str = "data-plane"
) -> RequestChannel:
    return RequestChannel(
        f"test-{prefix}", capacity=capacity, threads=threads, thread_prefix=prefix, handle=handle
    )


@contextlib.asynccontextmanager
async def serving(
    plane: RequestChannel,
    *,
    unsupported: Callable[[UnsupportedVersionError], bytes],
    accepts: Collection[int] | None = None,
    max_frame_size: int = MAX_FRAME,
    release: Iterable[threading.Event] = (),
    priority: ControlPriority | None = None,
    max_waiting: int = 1,
) -> AsyncIterator[Listener]:
    """Start ``plane`` and a listener on it; on exit open ``release`` gates so the threads can end."""
    plane.start()
    listener = Listener(
        "TEST",
        plane,
        accepts=accepts,
        reject=reject,
        unsupported=unsupported,
        max_frame_size=max_frame_size,
        priority=priority,
        max_waiting=max_waiting,
    )
    await listener.start("127.0.0.1", 0)
    try:
        yield listener
    finally:
        for gate in release:
            gate.set()
        await listener.close()
        await plane.stop()


def make_apis(log_dir: Path) -> KafkaApis:
    """A broker's request handling with nothing hosted yet (broker 1, epoch BROKER_EPOCH)."""
    events = EventLog(None, "broker-1")
    identity = BrokerIdentity(1, epoch=BROKER_EPOCH)
    return KafkaApis(identity, ReplicaManager(1, log_dir, events), MetadataCache(), events)


@pytest.fixture
def apis(tmp_path: Path) -> KafkaApis:
    return make_apis(tmp_path)


Serve = Callable[..., AbstractAsyncContextManager[Listener]]


@pytest.fixture
def serve(apis: KafkaApis) -> Serve:
    """``serving`` answering unsupported versions as the broker does."""
    return functools.partial(serving, unsupported=apis.unsupported_version_response)


async def pipelined(client: RawClient, correlation_ids: list[int]) -> list[int]:
    """Send every request at once and return the correlation ids of the answers, in arrival order."""
    await client.send(*(request_frame(cid) for cid in correlation_ids))
    return [(await client.read_answer(*UPDATE_METADATA_V7))[0] for _ in correlation_ids]


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


# ---------------------------------------------------------------- KIP-291


async def test_control_plane_is_served_while_the_data_plane_is_full(serve: Serve, apis: KafkaApis) -> None:
    gate = threading.Event()
    data_handler = Recorder(gate)
    data = channel(data_handler, capacity=1, threads=1)
    control = channel(apis.handle, capacity=20, threads=1, prefix="control-plane")
    async with (
        serve(data, release=[gate]) as data_listener,
        serve(control, accepts=CONTROL_APIS) as control_listener,
    ):
        stuck = [await RawClient.connect(data_listener.port) for _ in range(3)]
        pending = [asyncio.create_task(pipelined(c, [i])) for i, c in enumerate(stuck)]
        await wait_until(lambda: data_handler.count == 1 and data.size == 1, "data plane busy and full")

        controller = await RawClient.connect(control_listener.port)
        assert await update_metadata(controller, 77) == {"error_code": ErrorCode.NONE}
        assert apis.metadata_cache.snapshot.controller_id == 100

        assert data_handler.count == 1 and data.size == 1 and not any(p.done() for p in pending)
        gate.set()
        async with asyncio.timeout(TIMEOUT):
            assert await asyncio.gather(*pending) == [[0], [1], [2]]
        for client in [*stuck, controller]:
            client.close()


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


def test_data_plane_checkpoints_wait_only_while_a_control_request_is_in_flight() -> None:
    priority = ControlPriority()
    assert not priority.pending()  # nothing in flight: checkpoint() does not wait
    priority.checkpoint()
    priority.begin()
    assert priority.pending()
    priority.begin()
    priority.begin()
    priority.end()
    released = threading.Event()

    def data_plane() -> None:
        priority.checkpoint()
        released.set()

    worker = threading.Thread(target=data_plane)
    worker.start()
    assert not released.wait(ControlPriority.MAX_PAUSE_S / 4)  # held back while one is still in flight
    worker.join()  # the pause is bounded even if the control plane never finishes
    assert released.is_set()
    priority.end()
    released.clear()
    worker = threading.Thread(target=data_plane)
    worker.start()
    worker.join(5)
    assert released.is_set()


def test_unread_bytes_on_a_watched_connection_count_as_pending_control_work() -> None:
    priority = ControlPriority()
    ours, theirs = socket.socketpair()
    try:
        priority.watch(ours.fileno())
        assert not priority.pending()
        theirs.sendall(b"\x00\x00")
        assert priority.pending(), "bytes in the kernel are seen before the event loop reads them"
        started = time.monotonic()
        priority.checkpoint()  # nobody will answer: the pause ends at its bound
        assert time.monotonic() - started >= ControlPriority.MAX_PAUSE_S * 0.9
        assert ours.recv(2) == b"\x00\x00"
        assert not priority.pending()
        priority.unwatch(ours.fileno())
        theirs.sendall(b"\x00")
        assert not priority.pending(), "an unwatched connection does not count"
    finally:
        priority.close()
        ours.close()
        theirs.close()


async def test_a_control_request_is_pending_from_its_first_byte_to_its_answer(serve: Serve) -> None:
    priority = ControlPriority()
    gate = threading.Event()
    seen: list[bool] = []

    def handle(request: Request) -> Result:
        seen.append(priority.pending())
        gate.wait(TIMEOUT)
        return answer(request.header)

    control = channel(handle, capacity=20, threads=1, prefix="control-plane")
    async with serve(control, release=[gate], priority=priority) as listener:
        client = await RawClient.connect(listener.port)
        frame = request_frame(1)
        await client.send(frame[:3])  # not even a whole size prefix yet
        await wait_until(priority.pending, "the first bytes are announced")
        await client.send(frame[3:])
        await wait_until(lambda: bool(seen), "the request reaches its handler")
        assert seen == [True]
        gate.set()
        assert (await client.read_answer(*UPDATE_METADATA_V7))[0] == 1
        await wait_until(lambda: not priority.pending(), "the answer ends the control work")

        await client.send(frame[:5])  # a request cut short by a closed connection
        await wait_until(priority.pending, "the next request is announced")
        client.close()
        await wait_until(lambda: not priority.pending(), "a closed connection leaves nothing pending")
    priority.close()


class Deferring:
    """A handler whose answers wait (as acks=all produces do) until the test completes them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.waiting: dict[int, tuple[Future[Result], RequestHeader]] = {}
        self.handled: list[int] = []

    def __call__(self, request: Request) -> Outcome:
        reply: Future[Result] = Future()
        with self._lock:
            self.handled.append(request.header.correlation_id)
            self.waiting[request.header.correlation_id] = (reply, request.header)
        return reply

    def complete(self, correlation_id: int) -> None:
        with self._lock:
            reply, header = self.waiting.pop(correlation_id)
        reply.set_result(answer(header))


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
