"""KIP-291 on loopback: the control plane is served while the data plane is full, and data-plane work
gives way while a control request is pending, from its first byte to its answer.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path

import pytest

from broker.apis import KafkaApis
from broker.control_priority import ControlPriority
from broker.request_channel import Request, Result
from protocol import CONTROL_APIS, ErrorCode
from tests.broker.network_builders import (
    TIMEOUT,
    UPDATE_METADATA_V7,
    Recorder,
    Serve,
    answer,
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


# ---------------------------------------------------------------- isolation


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


# ---------------------------------------------------------------- priority


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


def test_a_long_busy_period_stops_holding_the_data_plane_back() -> None:
    """Within PRIORITY_BUDGET_S of a busy period's start the data plane waits; after it, a huge control
    request (a million-partition UpdateMetadata) shares the interpreter instead."""
    priority = ControlPriority()
    waits: list[float] = []

    class Recording:
        def wait(self, timeout: float) -> bool:
            waits.append(timeout)
            return False

        def set(self) -> None:
            pass

    recording = Recording()
    priority._done = recording  # type: ignore[assignment]
    try:
        priority.begin()
        priority.checkpoint()
        assert waits == [ControlPriority.MAX_PAUSE_S], "a fresh control request holds the data plane"
        priority._busy_since -= ControlPriority.PRIORITY_BUDGET_S  # the budget is spent
        priority.checkpoint()
        assert waits == [ControlPriority.MAX_PAUSE_S], "past the budget the data plane goes on"
        priority.end()
        priority._done = recording  # type: ignore[assignment]
        priority.begin()  # a new busy period: priority again
        priority.checkpoint()
        assert len(waits) == 2
    finally:
        priority.close()
