"""Small builders for the broker network-plane tests: UpdateMetadata requests, recording and deferring
handlers, and a RequestChannel served by a Listener on loopback (no ZooKeeper)."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import AsyncIterator, Callable, Collection, Iterable
from concurrent.futures import Future
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from broker.apis import BrokerIdentity, KafkaApis
from broker.control_priority import ControlPriority
from broker.listener import Listener
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from broker.request_channel import Outcome, Request, RequestChannel, Result
from daemon.eventlog import EventLog
from protocol import (
    ApiKey,
    ErrorCode,
    RequestHeader,
    UnsupportedVersionError,
    encode_request,
    encode_response,
    error_response_body,
)
from tests.support.raw_client import RawClient

TIMEOUT = 10.0
MAX_FRAME = 4096
UPDATE_METADATA_V7 = (ApiKey.UPDATE_METADATA, 7)
BROKER_EPOCH = 50

Handle = Callable[[Request], Outcome]


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


Serve = Callable[..., AbstractAsyncContextManager[Listener]]


def broker_serving(apis: KafkaApis) -> Serve:
    """``serving`` answering unsupported versions as the broker does."""
    return functools.partial(serving, unsupported=apis.unsupported_version_response)


async def pipelined(client: RawClient, correlation_ids: list[int]) -> list[int]:
    """Send every request at once and return the correlation ids of the answers, in arrival order."""
    await client.send(*(request_frame(cid) for cid in correlation_ids))
    return [(await client.read_answer(*UPDATE_METADATA_V7))[0] for _ in correlation_ids]


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
