"""ChannelManager against fake brokers: asyncio servers on 127.0.0.1 that decode control requests."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from controller.channel import ChannelManager
from controller.request_batch import OutgoingRequest
from daemon.eventlog import EventLog
from daemon.frames import read_frame
from daemon.metrics import Metrics
from protocol import (
    DEFAULT_MAX_FRAME_SIZE,
    ApiKey,
    RequestHeader,
    decode_request,
    decode_request_header,
    encode_request_body,
    encode_response,
)
from tests.support import requests as bodies
from tests.support.waiting import wait_until

FAST = {"socket_timeout_s": 1.0, "reconnect_backoff_s": 0.01}
QUEUE_SIZE = "kafka_controller_controllerchannelmanager_queuesize"
TOTAL_QUEUE_SIZE = "kafka_controller_controllerchannelmanager_totalqueuesize"
QUEUE_TIME = "kafka_controller_controllerchannelmanager_requestrateandqueuetimems"


@dataclass
class Received:
    header: RequestHeader
    body: dict[str, Any]
    raw_body: bytes
    connection: int


class FakeBroker:
    """Reads requests as soon as they arrive (so pipelining would show) and answers them in order.

    ``hold()`` makes it wait for one ``release()`` per answer; ``drop_next`` makes it close the
    connection after reading that many requests, without answering them.
    """

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.outstanding = 0
        self.max_outstanding = 0
        self.connections = 0
        self.open_connections = 0
        self.drop_next = 0
        self.responses: dict[int, dict[str, Any]] = {
            ApiKey.LEADER_AND_ISR: {"error_code": 0, "partition_errors": []},
            ApiKey.UPDATE_METADATA: {"error_code": 0},
            ApiKey.STOP_REPLICA: {"error_code": 0, "partition_errors": []},
        }
        self._releases: asyncio.Semaphore | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self, port: int = 0) -> int:
        self._server = await asyncio.start_server(self._connected, "127.0.0.1", port)
        return self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    def hold(self) -> None:
        self._releases = asyncio.Semaphore(0)

    def release(self, count: int = 1) -> None:
        assert self._releases is not None
        for _ in range(count):
            self._releases.release()

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._tasks.add(asyncio.current_task())  # type: ignore[arg-type]
        self.connections += 1
        self.open_connections += 1
        connection = self.connections
        to_answer: asyncio.Queue[RequestHeader] = asyncio.Queue()
        answering = asyncio.create_task(self._answer(to_answer, writer))
        try:
            while True:
                frame = await read_frame(reader, DEFAULT_MAX_FRAME_SIZE)
                header, body = decode_request(frame)
                _, offset = decode_request_header(frame)
                self.received.append(Received(header, body, frame[offset:], connection))
                self.outstanding += 1
                self.max_outstanding = max(self.max_outstanding, self.outstanding)
                if self.drop_next:
                    self.drop_next -= 1
                    self.outstanding -= 1
                    return
                to_answer.put_nowait(header)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            answering.cancel()
            writer.close()
            self.outstanding -= to_answer.qsize()
            self.open_connections -= 1

    async def _answer(self, to_answer: asyncio.Queue[RequestHeader], writer: asyncio.StreamWriter) -> None:
        while True:
            header = await to_answer.get()
            if self._releases is not None:
                await self._releases.acquire()
            self.outstanding -= 1
            body = self.responses[header.api_key]
            writer.write(encode_response(header.api_key, header.api_version, header.correlation_id, body))


def leader_and_isr(broker_id: int, topic: str = "orders") -> OutgoingRequest:
    partition = bodies.lai_partition(
        0, leader=broker_id, leader_epoch=3, replicas=[broker_id], controller_epoch=5
    )
    body = bodies.leader_and_isr(2, 42, {topic: [partition]}, controller_epoch=5)
    raw = encode_request_body(ApiKey.LEADER_AND_ISR, 2, body)
    summary = {"partitions": 1, "controller_epoch": 5, "broker_epoch": 42}
    return OutgoingRequest(broker_id, ApiKey.LEADER_AND_ISR, 2, raw, summary)


def update_metadata(broker_id: int, raw: bytes | None = None) -> OutgoingRequest:
    body = bodies.update_metadata(5, 42, {}, controller_epoch=5, live=[broker_id])
    raw = raw if raw is not None else encode_request_body(ApiKey.UPDATE_METADATA, 5, body)
    return OutgoingRequest(broker_id, ApiKey.UPDATE_METADATA, 5, raw, {"partitions": 0, "broker_epoch": 42})


def stop_replica(broker_id: int) -> OutgoingRequest:
    body = bodies.stop_replica(1, 42, {"orders": [0]}, delete=True, controller_epoch=5)
    raw = encode_request_body(ApiKey.STOP_REPLICA, 1, body)
    return OutgoingRequest(broker_id, ApiKey.STOP_REPLICA, 1, raw, {"partitions": 1, "delete": True})


class Responses:
    """A callback that records what it was called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[OutgoingRequest, dict[str, Any]]] = []

    def __call__(self, request: OutgoingRequest, response: dict[str, Any]) -> None:
        self.calls.append((request, response))


@pytest.fixture
async def broker() -> Any:
    fake = FakeBroker()
    yield fake
    await fake.stop()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def read_events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_each_control_api_is_sent_and_its_callback_gets_the_response(broker: FakeBroker) -> None:
    port = await broker.start()
    manager = ChannelManager(1, **FAST)
    manager.add_broker(1, "127.0.0.1", port)
    responses = Responses()
    requests = [leader_and_isr(1), update_metadata(1), stop_replica(1)]
    for request in requests:
        manager.send(request, responses)
    await wait_until(lambda: len(responses.calls) == 3, "three responses")
    await manager.shutdown()

    assert [request for request, _ in responses.calls] == requests
    assert [r.header.api_key for r in broker.received] == [4, 6, 5]
    assert {r.header.client_id for r in broker.received} == {"controller-1"}
    assert [r.raw_body for r in broker.received] == [r.body for r in requests]
    assert responses.calls[0][1] == {"error_code": 0, "partition_errors": []}


async def test_only_one_request_is_in_flight_per_broker(broker: FakeBroker) -> None:
    broker.hold()
    port = await broker.start()
    manager = ChannelManager(1, **FAST)
    manager.add_broker(1, "127.0.0.1", port)
    responses = Responses()
    requests = [leader_and_isr(1, f"t{i}") for i in range(4)]
    for request in requests:
        manager.send(request, responses)

    await wait_until(lambda: len(broker.received) == 1, "the first request")
    assert manager.queue_size(1) == 3  # the other three have not left the queue
    for sent in range(1, 4):
        broker.release()
        await wait_until(lambda sent=sent: len(broker.received) == sent + 1, f"request {sent + 1}")
        assert manager.queue_size(1) == 3 - sent
    broker.release()
    await wait_until(lambda: len(responses.calls) == 4, "four responses")
    await manager.shutdown()

    assert broker.max_outstanding == 1
    assert [r.body["topic_states"][0]["topic_name"] for r in broker.received] == ["t0", "t1", "t2", "t3"]
    assert [request for request, _ in responses.calls] == requests


async def test_a_request_whose_connection_drops_is_resent_with_the_same_bytes(broker: FakeBroker) -> None:
    broker.drop_next = 1
    port = await broker.start()
    manager = ChannelManager(1, **FAST)
    manager.add_broker(1, "127.0.0.1", port)
    responses = Responses()
    request = update_metadata(1)
    manager.send(request, responses)
    await wait_until(lambda: len(responses.calls) == 1, "the response")
    await manager.shutdown()

    assert len(responses.calls) == 1
    assert [r.connection for r in broker.received] == [1, 2]
    assert [r.raw_body for r in broker.received] == [request.body, request.body]


async def test_a_request_without_a_response_is_resent_after_the_socket_timeout(broker: FakeBroker) -> None:
    broker.hold()
    port = await broker.start()
    manager = ChannelManager(1, socket_timeout_s=0.2, reconnect_backoff_s=0.01)
    manager.add_broker(1, "127.0.0.1", port)
    responses = Responses()
    manager.send(leader_and_isr(1), responses)
    await wait_until(lambda: len(broker.received) == 2, "the request to be resent")
    broker.release()
    await wait_until(lambda: len(responses.calls) == 1, "the response")
    await manager.shutdown()

    assert [r.connection for r in broker.received] == [1, 2]
    assert len(responses.calls) == 1


async def test_a_request_reaches_a_broker_whose_listener_comes_up_later(tmp_path: Path) -> None:
    port = free_port()
    events = EventLog(tmp_path / "events.jsonl", "controller-1")
    manager = ChannelManager(1, events=events, **FAST)
    manager.add_broker(1, "127.0.0.1", port)
    responses = Responses()
    manager.send(leader_and_isr(1), responses)
    await wait_until(lambda: any(e["kind"] == "request_failed" for e in events.recent), "a failed connect")

    late = FakeBroker()
    await late.start(port)
    try:
        await wait_until(lambda: len(responses.calls) == 1, "the response")
        await manager.shutdown()
    finally:
        await late.stop()
        events.close()
    assert len(late.received) == 1


async def test_remove_broker_drops_queued_requests_and_their_callbacks(broker: FakeBroker) -> None:
    broker.hold()
    port = await broker.start()
    manager = ChannelManager(1, **FAST)
    manager.add_broker(1, "127.0.0.1", port)
    responses = Responses()
    for i in range(3):
        manager.send(leader_and_isr(1, f"t{i}"), responses)
    await wait_until(lambda: len(broker.received) == 1, "the first request")

    manager.remove_broker(1)
    assert manager.broker_ids == set()
    assert manager.queue_size(1) == manager.total_queue_size() == 0
    await wait_until(lambda: broker.open_connections == 0, "the connection to close")
    broker.release(3)
    await manager.shutdown()

    assert responses.calls == []
    assert len(broker.received) == 1


async def test_re_adding_a_broker_starts_over_with_a_fresh_queue_and_connection(broker: FakeBroker) -> None:
    broker.hold()
    port = await broker.start()
    manager = ChannelManager(1, **FAST)
    manager.add_broker(1, "127.0.0.1", port)
    responses = Responses()
    manager.send(leader_and_isr(1, "old-1"), responses)
    manager.send(leader_and_isr(1, "old-2"), responses)
    await wait_until(lambda: len(broker.received) == 1, "the first request")

    manager.add_broker(1, "127.0.0.1", port)
    assert manager.queue_size(1) == 0
    manager.send(leader_and_isr(1, "new"), responses)
    await wait_until(lambda: len(broker.received) == 2, "the request on the new connection")
    broker.release(2)
    await wait_until(lambda: len(responses.calls) == 1, "the response")
    await manager.shutdown()

    assert [(r.connection, r.body["topic_states"][0]["topic_name"]) for r in broker.received] == [
        (1, "old-1"),
        (2, "new"),
    ]
    assert [request.summary for request, _ in responses.calls] == [leader_and_isr(1).summary]


async def test_a_request_for_an_unknown_broker_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    manager = ChannelManager(1, **FAST)
    with caplog.at_level(logging.INFO, logger="controller.channel"):
        manager.send(leader_and_isr(7), Responses())
    assert manager.total_queue_size() == 0
    assert "not sending LeaderAndIsr v2 to broker 7 since it is offline" in caplog.text


async def test_only_control_requests_are_accepted() -> None:
    manager = ChannelManager(1, **FAST)
    request = OutgoingRequest(1, ApiKey.CONTROLLED_SHUTDOWN, 2, b"", {})
    with pytest.raises(ValueError, match="control requests"):
        manager.send(request)


async def test_a_failing_callback_does_not_stop_the_sender(
    broker: FakeBroker, caplog: pytest.LogCaptureFixture
) -> None:
    port = await broker.start()
    manager = ChannelManager(1, **FAST)
    manager.add_broker(1, "127.0.0.1", port)
    responses = Responses()

    def explode(request: OutgoingRequest, response: dict[str, Any]) -> None:
        raise RuntimeError("callback bug")

    with caplog.at_level(logging.ERROR, logger="controller.channel"):
        manager.send(leader_and_isr(1), explode)
        manager.send(update_metadata(1), responses)
        await wait_until(lambda: len(responses.calls) == 1, "the second response")
    await manager.shutdown()

    assert "callback for LeaderAndIsr to broker 1 failed" in caplog.text
    assert "callback bug" in caplog.text


async def test_one_shared_body_reaches_two_brokers_unchanged() -> None:
    brokers = [FakeBroker(), FakeBroker()]
    manager = ChannelManager(1, **FAST)
    responses = Responses()
    shared = update_metadata(1).body
    try:
        for broker_id, fake in enumerate(brokers, start=1):
            manager.add_broker(broker_id, "127.0.0.1", await fake.start())
            manager.send(update_metadata(broker_id, shared), responses)
        await wait_until(lambda: len(responses.calls) == 2, "both responses")
        await manager.shutdown()
    finally:
        for fake in brokers:
            await fake.stop()
    assert [r.raw_body for fake in brokers for r in fake.received] == [shared, shared]


async def test_events_describe_sent_failed_and_answered_requests(broker: FakeBroker, tmp_path: Path) -> None:
    broker.drop_next = 1
    broker.responses[ApiKey.LEADER_AND_ISR] = {
        "error_code": 0,
        "partition_errors": [
            {"topic_name": "orders", "partition_index": 0, "error_code": 77},
            {"topic_name": "orders", "partition_index": 1, "error_code": 0},
        ],
    }
    port = await broker.start()
    path = tmp_path / "events.jsonl"
    events = EventLog(path, "controller-1")
    manager = ChannelManager(1, events=events, **FAST)
    manager.add_broker(1, "127.0.0.1", port)
    responses = Responses()
    manager.send(leader_and_isr(1), responses)
    await wait_until(lambda: len(responses.calls) == 1, "the response")
    await manager.shutdown()
    events.close()

    lines = read_events(path)
    assert [e["kind"] for e in lines] == [
        "request_sent",
        "request_failed",
        "request_sent",
        "response_received",
    ]
    first, failed, resent, received = lines
    identity = {"node": "controller-1", "api": "LeaderAndIsr", "api_version": 2, "broker": 1}
    summary = {"partitions": 1, "controller_epoch": 5, "broker_epoch": 42}
    assert first.items() >= {**identity, **summary, "correlation_id": 0}.items()
    assert failed.items() >= {**identity, "correlation_id": 0, "resend_after_ms": 10.0}.items()
    assert "closed by the server" in failed["reason"]
    assert resent.items() >= {**identity, **summary, "correlation_id": 0}.items()
    assert received.items() >= {**identity, **summary, "error": "NONE", "partition_errors": 1}.items()
    assert received["latency_ms"] >= 0 and received["queue_ms"] >= 0


async def test_update_metadata_response_event_has_no_partition_error_count(broker: FakeBroker) -> None:
    broker.responses[ApiKey.UPDATE_METADATA] = {"error_code": 11}
    port = await broker.start()
    events = EventLog(None, "controller-1")
    manager = ChannelManager(1, events=events, **FAST)
    manager.add_broker(1, "127.0.0.1", port)
    responses = Responses()
    manager.send(update_metadata(1), responses)
    await wait_until(lambda: len(responses.calls) == 1, "the response")
    await manager.shutdown()

    received = [e for e in events.recent if e["kind"] == "response_received"]
    assert received[0]["error"] == "STALE_CONTROLLER_EPOCH"
    assert "partition_errors" not in received[0]


async def test_queue_size_gauges_follow_the_brokers(broker: FakeBroker) -> None:
    broker.hold()
    port = await broker.start()
    metrics = Metrics()
    registry = metrics.registry
    manager = ChannelManager(1, metrics=metrics, **FAST)
    manager.add_broker(1, "127.0.0.1", port)
    manager.add_broker(2, "127.0.0.1", free_port())
    for _ in range(3):
        manager.send(leader_and_isr(1))
    manager.send(leader_and_isr(2))
    await wait_until(lambda: len(broker.received) == 1, "the first request")
    await wait_until(lambda: manager.queue_size(2) == 0, "broker 2's request to be taken")

    assert registry.get_sample_value(QUEUE_SIZE, {"broker_id": "1"}) == 2
    assert registry.get_sample_value(QUEUE_SIZE, {"broker_id": "2"}) == 0
    assert registry.get_sample_value(TOTAL_QUEUE_SIZE) == 2
    assert registry.get_sample_value(QUEUE_TIME + "_count", {"broker_id": "1"}) == 1

    manager.remove_broker(1)
    assert registry.get_sample_value(QUEUE_SIZE, {"broker_id": "1"}) is None
    assert registry.get_sample_value(QUEUE_TIME + "_count", {"broker_id": "1"}) is None
    assert registry.get_sample_value(QUEUE_SIZE, {"broker_id": "2"}) == 0
    assert registry.get_sample_value(TOTAL_QUEUE_SIZE) == 0
    await manager.shutdown()
    assert registry.get_sample_value(QUEUE_SIZE, {"broker_id": "2"}) is None


async def test_shutdown_closes_every_connection(broker: FakeBroker) -> None:
    broker.hold()
    port = await broker.start()
    manager = ChannelManager(1, **FAST)
    for broker_id in (1, 2):
        manager.add_broker(broker_id, "127.0.0.1", port)
        manager.send(leader_and_isr(broker_id))
    await wait_until(lambda: broker.open_connections == 2, "two connections")
    await manager.shutdown()
    assert manager.broker_ids == set()
    await wait_until(lambda: broker.open_connections == 0, "every connection to close")


async def test_marks_are_delivered_once_every_request_queued_before_them_is_answered(
    broker: FakeBroker,
) -> None:
    """What a topic request waits on before it answers: the brokers told of the decision."""
    broker.hold()
    port = await broker.start()
    manager = ChannelManager(1, **FAST)
    manager.add_broker(1, "127.0.0.1", port)
    responses = Responses()
    manager.send(leader_and_isr(1, "t0"), responses)
    manager.send(update_metadata(1), responses)
    marks = manager.marks()
    manager.send(leader_and_isr(1, "later"), responses)  # queued after the marks: not waited for
    assert not manager.delivered(marks)
    broker.release()
    await wait_until(lambda: len(responses.calls) == 1, "the first answer")
    assert not manager.delivered(marks)
    broker.release()
    await wait_until(lambda: manager.delivered(marks), "both answers")
    assert len(responses.calls) == 2

    pending = manager.marks()  # "later" is still unanswered
    assert not manager.delivered(pending)
    manager.remove_broker(1)  # a broker that left has nothing left to be told
    assert manager.delivered(pending)
    broker.release()
    await manager.shutdown()
