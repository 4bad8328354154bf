"""The kazoo-shaped client of the simulated ZooKeeper: its requests and replies wait for the scheduler.

``AsyncZooKeeper`` drives it as it drives ``KazooClient``: the ``*_async`` requests, transactions,
the raw ``_call`` of multi-read, and the connection-state listeners. Requests wait in ``inbox`` until
the scheduler applies them (``apply_one``), replies and watch events in ``outbox`` until it delivers
them (``deliver_one``); ``disconnect``, ``reconnect`` and ``kill`` are what the network and a crash do.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, KazooException, SessionExpiredError
from kazoo.protocol.states import KazooState, KeeperState, WatchedEvent

from controller.sim.zookeeper import SimZooKeeper

__all__ = ["SimKazooClient", "SimResult"]

Watcher = Callable[[WatchedEvent], None]


class SimResult:
    """The part of kazoo's ``IAsyncResult`` that ``AsyncZooKeeper`` uses."""

    def __init__(self) -> None:
        self._done = False
        self._value: Any = None
        self._exception: BaseException | None = None
        self._links: list[Callable[[SimResult], None]] = []

    def ready(self) -> bool:
        return self._done

    def set(self, value: Any = None) -> None:
        self._settle(value, None)

    def set_exception(self, exception: BaseException) -> None:
        self._settle(None, exception)

    def _settle(self, value: Any, exception: BaseException | None) -> None:
        if self._done:
            return
        self._done, self._value, self._exception = True, value, exception
        links, self._links = self._links, []
        for link in links:
            link(self)

    def rawlink(self, callback: Callable[[SimResult], None]) -> None:
        if self._done:
            callback(self)
        else:
            self._links.append(callback)

    def get_nowait(self) -> Any:
        if self._exception is not None:
            raise self._exception
        return self._value


class _TransactionRequest:
    """kazoo's ``TransactionRequest``: ops collected, then committed as one request."""

    def __init__(self, client: SimKazooClient) -> None:
        self.client = client
        self.ops: list[tuple[Any, ...]] = []

    def create(
        self, path: str, value: bytes = b"", acl: Any = None, ephemeral: bool = False, sequence: bool = False
    ) -> None:
        self.ops.append(("create", path, value, ephemeral, sequence))

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        self.ops.append(("set", path, value, version))

    def delete(self, path: str, version: int = -1) -> None:
        self.ops.append(("delete", path, version))

    def check(self, path: str, version: int) -> None:
        self.ops.append(("check", path, version))

    def commit_async(self) -> SimResult:
        return self.client.send(("multi", list(self.ops)))


class _Handler:
    """kazoo's handler, for ``handler.async_result()``."""

    @staticmethod
    def async_result() -> SimResult:
        return SimResult()


class SimKazooClient:
    """What ``AsyncZooKeeper`` uses of ``KazooClient``, over a :class:`SimZooKeeper`."""

    def __init__(self, server: SimZooKeeper, name: str) -> None:
        self.server = server
        self.name = name
        self.chroot = ""
        self.handler = _Handler()
        self.session: int | None = None
        self.connected = False
        self.stopped = False
        self.client_state = KeeperState.CLOSED
        self._listeners: list[Callable[[KazooState], None]] = []
        self.waiting: deque[tuple[tuple[Any, ...], SimResult]] = deque()
        """Requests made while disconnected: sent once connected again."""
        self.inbox: deque[tuple[tuple[Any, ...], SimResult]] = deque()
        """Requests sent and not yet applied."""
        self.outbox: deque[tuple[Any, ...]] = deque()
        """Replies and watch events the ensemble sent and the client has not read yet."""

    # -- kazoo's lifecycle

    def add_listener(self, listener: Callable[[KazooState], None]) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[KazooState], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _state(self, keeper: KeeperState, state: KazooState) -> None:
        self.client_state = keeper
        for listener in list(self._listeners):
            listener(state)

    def start(self, timeout: float | None = None) -> None:
        self.stopped = False
        self.session = self.server.open_session(self)
        self.connected = True
        self.inbox.extend(self.waiting)
        self.waiting.clear()
        self._state(KeeperState.CONNECTED, KazooState.CONNECTED)

    def stop(self) -> None:
        """Close the session: its ephemerals go at once; whatever waits fails."""
        self.stopped = True
        if self.session is not None:
            self.server.end_session(self.session)
        self._fail_all(ConnectionClosedError("closed"))
        self.session, self.connected = None, False
        self.client_state = KeeperState.CLOSED

    def close(self) -> None:
        pass

    def kill(self) -> None:
        """The process dies: nothing it waits for will come, but the ensemble keeps its session until
        it expires."""
        self.stopped = True
        self.connected = False
        self._fail_all(ConnectionClosedError("the process died"))

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        return (self.session, b"") if self.session is not None and self.connected else None

    # -- kazoo's requests

    def send(self, request: tuple[Any, ...]) -> SimResult:
        result = SimResult()
        if self.stopped:
            result.set_exception(ConnectionClosedError("closed"))
        elif self.connected:
            self.inbox.append((request, result))
        else:
            self.waiting.append((request, result))
        return result

    def get_async(self, path: str, watch: Watcher | None = None) -> SimResult:
        return self.send(("get", path, watch))

    def get_children_async(self, path: str, watch: Watcher | None = None) -> SimResult:
        return self.send(("get_children", path, watch))

    def exists_async(self, path: str, watch: Watcher | None = None) -> SimResult:
        return self.send(("exists", path, watch))

    def create_async(
        self, path: str, value: bytes = b"", acl: Any = None, ephemeral: bool = False, sequence: bool = False
    ) -> SimResult:
        return self.send(("create", path, value, ephemeral, sequence))

    def set_async(self, path: str, value: bytes, version: int = -1) -> SimResult:
        return self.send(("set", path, value, version))

    def delete_async(self, path: str, version: int = -1) -> SimResult:
        return self.send(("delete", path, version))

    def set_acls_async(self, path: str, acls: Any, version: int = -1) -> SimResult:
        return self.send(("set_acls", path))

    def sync_async(self, path: str) -> SimResult:
        return self.send(("sync", path))

    def transaction(self) -> _TransactionRequest:
        return _TransactionRequest(self)

    def _call(self, request: Any, result: SimResult) -> None:
        """The raw request entry ``batch_read`` uses for multi-read."""
        sent = self.send(("multi_read", [tuple(op) for op in request.ops]))
        sent.rawlink(lambda done: _relay(done, result))

    # -- what the scheduler does

    def can_apply(self) -> bool:
        return self.connected and bool(self.inbox)

    def apply_one(self) -> str:
        """The ensemble carries out the oldest request in flight; its reply waits to be delivered."""
        request, result = self.inbox.popleft()
        try:
            value = self.server.apply(self.session or 0, request)
        except KazooException as exc:
            self.outbox.append(("reply", result, None, exc))
        else:
            self.outbox.append(("reply", result, value, None))
        return str(request[0])

    def can_deliver(self) -> bool:
        return self.connected and bool(self.outbox)

    def deliver_one(self) -> str:
        """The client reads the oldest reply or watch event."""
        item = self.outbox.popleft()
        if item[0] == "watch":
            _, watcher, event = item
            watcher(event)
            return f"watch {event.type} {event.path}"
        _, result, value, exc = item
        if exc is not None:
            result.set_exception(exc)
        else:
            result.set(value)
        return "reply"

    def disconnect(self) -> None:
        """The connection drops: every request in flight fails, applied or not."""
        if not self.connected:
            return
        self.connected = False
        lost: list[SimResult] = [result for _, result in self.inbox]
        self.inbox.clear()
        kept: deque[tuple[Any, ...]] = deque()
        for item in self.outbox:
            if item[0] == "reply":
                lost.append(item[1])
            else:
                kept.append(item)
        self.outbox = kept
        self.client_state = KeeperState.CONNECTING
        for result in lost:
            result.set_exception(ConnectionLoss())
        self._state(KeeperState.CONNECTING, KazooState.SUSPENDED)

    def reconnect(self) -> bool:
        """Connect again: to the same session if the ensemble still has it (True), else learn of its
        expiry (LOST, waiting requests fail) and open a new one (False)."""
        if self.connected or self.stopped:
            return True
        if self.server.alive(self.session):
            self.connected = True
            self.inbox.extend(self.waiting)
            self.waiting.clear()
            self._state(KeeperState.CONNECTED, KazooState.CONNECTED)
            return True
        self.outbox.clear()
        self._fail_all(SessionExpiredError())
        self._state(KeeperState.EXPIRED_SESSION, KazooState.LOST)
        self.session = self.server.open_session(self)
        self.connected = True
        self._state(KeeperState.CONNECTED, KazooState.CONNECTED)
        return False

    def _fail_all(self, exc: BaseException) -> None:
        pending = [result for _, result in (*self.inbox, *self.waiting)]
        pending += [item[1] for item in self.outbox if item[0] == "reply"]
        self.inbox.clear()
        self.waiting.clear()
        self.outbox.clear()
        for result in pending:
            result.set_exception(exc)


def _relay(done: SimResult, to: SimResult) -> None:
    try:
        to.set(done.get_nowait())
    except Exception as exc:
        to.set_exception(exc)
