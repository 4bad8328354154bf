"""The connection front-end on loopback: quotas, idle closing, SASL over a socket, the per-connection
watch and answers that wait, in request order."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from network.connection import KafkaConnection
from network.connection_quotas import ConnectionQuotas
from network.frontend import Answer, Close, FrontEnd, IncomingRequest, Ready
from network.server import RequestServer, current_request
from protocol import ApiKey, ErrorCode, RequestHeader, encode_request, encode_response, error_response_body
from security.client import AuthenticationError
from security.config import ClientSecurity, ListenerSecurity
from tests.support.raw_client import RawClient
from tests.support.waiting import wait_until

LEADER_AND_ISR_V2 = {
    "controller_id": 1,
    "controller_epoch": 1,
    "broker_epoch": -1,
    "topic_states": [],
    "live_leaders": [],
}
SASL = ListenerSecurity(
    listener="SASL",
    protocol="SASL_PLAINTEXT",
    mechanisms=("PLAIN",),
    plain_users={"alice": "alice-secret"},
    failed_auth_delay_s=0.01,
)


def none_answer(header: RequestHeader) -> bytes:
    body = error_response_body(header.api_key, header.api_version, ErrorCode.NONE)
    return encode_response(header.api_key, header.api_version, header.correlation_id, body)


async def answer_at_once(request: IncomingRequest) -> Ready:
    return Ready(none_answer(request.header))


@pytest.fixture
async def started() -> AsyncIterator[Callable[..., Any]]:
    """Start front-ends on loopback; each is closed at the end of the test."""
    fronts: list[FrontEnd] = []

    async def start(dispatch: Any = answer_at_once, **options: Any) -> FrontEnd:
        front = FrontEnd("TEST", dispatch, **options)
        await front.start("127.0.0.1", 0)
        fronts.append(front)
        return front

    yield start
    for front in fronts:
        await front.close()


async def test_a_connection_over_the_per_ip_quota_is_closed_and_counted(started: Callable[..., Any]) -> None:
    refused: list[tuple[str, str]] = []
    quotas = ConnectionQuotas(
        max_connections=10, max_per_ip=1, exempt_listeners=(), on_refused=lambda *r: refused.append(r)
    )
    front = await started(quotas=quotas)
    first = await RawClient.connect(front.port)
    assert (await first.call(4, 2, 1, LEADER_AND_ISR_V2))["error_code"] == 0
    second = await RawClient.connect(front.port)
    assert await second.closed_by_server()
    assert refused == [("TEST", "quota")]
    first.close()
    await wait_until(lambda: not quotas.per_ip, "the first connection's slot released")
    third = await RawClient.connect(front.port)
    assert (await third.call(4, 2, 2, LEADER_AND_ISR_V2))["error_code"] == 0
    third.close()


async def test_an_idle_connection_is_closed_and_counted(started: Callable[..., Any]) -> None:
    closed: list[tuple[str, str]] = []
    front = await started(idle_s=0.2, on_closed=lambda *c: closed.append(c))
    client = await RawClient.connect(front.port)
    assert await client.closed_by_server()
    assert closed == [("TEST", "idle")]


class Pending:
    """A reply completed by the test, as a request waiting in a purgatory is."""

    def __init__(self, header: RequestHeader) -> None:
        self.header = header
        self.future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self.sent = False

    def answer(self) -> asyncio.Future[Answer]:
        return self.future

    def written(self) -> None:
        self.sent = True

    def complete(self) -> None:
        self.future.set_result(none_answer(self.header))


async def test_waiting_answers_go_out_in_request_order_up_to_max_waiting(started: Callable[..., Any]) -> None:
    pending: list[Pending] = []

    async def dispatch(request: IncomingRequest) -> Pending:
        pending.append(Pending(request.header))
        return pending[-1]

    front = await started(dispatch, max_waiting=2)
    client = await RawClient.connect(front.port)
    await client.send(*(encode_request(4, 2, i, "test", LEADER_AND_ISR_V2) for i in (1, 2, 3)))
    await wait_until(lambda: len(pending) == 2, "two requests taken")
    await asyncio.sleep(0.05)
    assert len(pending) == 2, "a third waits until an answer is written"
    pending[1].complete()
    pending[0].complete()
    assert [(await client.read_answer(4, 2))[0] for _ in range(2)] == [1, 2]
    await wait_until(lambda: len(pending) == 3, "the third request taken")
    pending[2].complete()
    assert (await client.read_answer(4, 2))[0] == 3
    assert all(p.sent for p in pending)
    client.close()


async def test_a_close_verdict_ends_the_connection_after_earlier_answers(started: Callable[..., Any]) -> None:
    async def dispatch(request: IncomingRequest) -> Ready:
        if request.header.correlation_id == 2:
            return Ready(Close("refused"))
        return Ready(none_answer(request.header))

    front = await started(dispatch, max_waiting=4)
    client = await RawClient.connect(front.port)
    await client.send(*(encode_request(4, 2, i, "test", LEADER_AND_ISR_V2) for i in (1, 2, 3)))
    assert (await client.read_answer(4, 2))[0] == 1
    assert await client.closed_by_server()


async def test_a_failing_dispatcher_closes_the_connection_instead_of_leaving_it_unanswered(
    started: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """A bug on the reading side (here the dispatcher raising) must end the connection, as Kafka's
    processor does: the client then sees the close at once, instead of waiting for an answer that
    never comes until its request timeout, with nothing logged."""

    async def dispatch(request: IncomingRequest) -> Ready:
        if request.header.correlation_id == 2:
            raise RuntimeError("a dispatcher bug")
        return Ready(none_answer(request.header))

    front = await started(dispatch, max_waiting=4)
    client = await RawClient.connect(front.port)
    assert (await client.call(4, 2, 1, LEADER_AND_ISR_V2))["error_code"] == 0
    await client.send(encode_request(4, 2, 2, "test", LEADER_AND_ISR_V2))
    assert await client.closed_by_server()
    assert "a dispatcher bug" in caplog.text
    await wait_until(lambda: front.connections == 0, "the connection released")


class Watch:
    """A ConnectionWatch that records what the front-end told it."""

    made: list[Watch] = []

    def __init__(self) -> None:
        self._reader = asyncio.StreamReader()
        self.calls: list[str] = []
        Watch.made.append(self)

    @property
    def reader(self) -> asyncio.StreamReader:
        return self._reader

    def authenticated(self, sock: socket.socket | None) -> None:
        self.calls.append("authenticated" if sock is not None else "no socket")

    def answered(self) -> None:
        self.calls.append("answered")

    def closed(self) -> None:
        self.calls.append("closed")


async def test_the_watch_hears_authentication_each_answer_and_the_close(started: Callable[..., Any]) -> None:
    Watch.made.clear()
    front = await started(watch=Watch)
    client = await RawClient.connect(front.port)
    for correlation_id in (1, 2):
        assert (await client.call(4, 2, correlation_id, LEADER_AND_ISR_V2))["error_code"] == 0
    client.close()
    (watch,) = Watch.made
    await wait_until(lambda: "closed" in watch.calls, "the connection closed")
    assert watch.calls == ["authenticated", "answered", "answered", "closed"]


# ---------------------------------------------------------------- SASL over a socket


@pytest.fixture
async def sasl_server() -> AsyncIterator[tuple[RequestServer, list[tuple[str, str]], list[str]]]:
    closed: list[tuple[str, str]] = []
    principals: list[str] = []

    async def handler(header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        principals.append(current_request.get().principal)
        return error_response_body(header.api_key, header.api_version, ErrorCode.NONE)

    server = RequestServer(
        handler,
        name="sasl",
        api_keys={ApiKey.LEADER_AND_ISR},
        security=SASL,
        on_closed=lambda *c: closed.append(c),
    )
    await server.start("127.0.0.1", 0)
    try:
        yield server, closed, principals
    finally:
        await server.close()


async def test_a_sasl_client_is_served_as_its_principal(
    sasl_server: tuple[RequestServer, list[tuple[str, str]], list[str]],
) -> None:
    server, closed, principals = sasl_server
    security = ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "alice", "alice-secret")
    connection = await KafkaConnection.open("127.0.0.1", server.port, client_id="t", security=security)
    try:
        _, body = await connection.send(ApiKey.LEADER_AND_ISR, 2, LEADER_AND_ISR_V2, timeout=10)
    finally:
        await connection.close()
    assert body["error_code"] == ErrorCode.NONE
    assert principals == ["User:alice"]
    assert closed == []


async def test_a_wrong_password_is_refused_and_counted(
    sasl_server: tuple[RequestServer, list[tuple[str, str]], list[str]],
) -> None:
    server, closed, principals = sasl_server
    security = ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "alice", "wrong")
    with pytest.raises(AuthenticationError, match="SASL_AUTHENTICATION_FAILED"):
        await KafkaConnection.open("127.0.0.1", server.port, client_id="t", security=security)
    await wait_until(lambda: bool(closed), "the failed authentication counted")
    assert closed == [("sasl", "authentication_sasl")]
    assert principals == []


async def test_an_ordinary_request_before_sasl_closes_the_connection(
    sasl_server: tuple[RequestServer, list[tuple[str, str]], list[str]],
) -> None:
    server, closed, principals = sasl_server
    client = await RawClient.connect(server.port)
    await client.send(encode_request(4, 2, 1, "test", LEADER_AND_ISR_V2))
    assert await client.closed_by_server()
    await wait_until(lambda: bool(closed), "the refusal counted")
    assert closed == [("sasl", "authentication_illegal_state")]
    assert principals == []
