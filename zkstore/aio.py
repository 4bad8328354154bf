"""An asyncio face for kazoo: its ``*_async`` results become awaitables, its callbacks post to the loop.

kazoo runs its own I/O and event threads. Nothing here ever blocks the event loop on ZooKeeper, and
nothing runs daemon logic on a kazoo thread: results, watch events and connection-state changes are
handed to the loop with ``call_soon_threadsafe`` (blocking inside a kazoo listener is a classic hang).

kazoo fails a request in flight when the connection drops (ConnectionLoss) and does not send it
again. Every operation here does, once connected again, as Kafka's ZooKeeper client does
(``retryRequestsUntilConnected``); a session expiry still fails it (SessionExpiredError). A write
whose reply was lost may therefore have been applied already: its retry then fails with NodeExists,
NoNode or BadVersion, and callers that write tell their own earlier write from someone else's.

Observers (``observe``) are told, on the loop, each state kazoo reports and each request's round
trip, which the daemons turn into Kafka's ZooKeeper client metrics.

Given a :class:`~zkstore.security.ZkSecurity`, the session authenticates and every znode created
through this class (single creates, missing parents, creates inside a multi-op) carries the ACL the
policy gives its own path; kazoo alone would give a path's missing parents the leaf's ACL.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import ConnectionLoss, NodeExistsError, NoNodeError
from kazoo.interfaces import IAsyncResult
from kazoo.protocol import serialization
from kazoo.protocol.states import KazooState, WatchedEvent, ZnodeStat
from kazoo.security import ACL, OPEN_ACL_UNSAFE

from zkstore.ops import Check, Create, Delete, Op, SetData
from zkstore.security import ZkSecurity, kazoo_arguments

__all__ = ["AsyncZooKeeper", "ConnectionEvent", "SessionObserver"]

log = logging.getLogger("zkstore.aio")

_NORMAL_PATH = re.compile(r"(?:/(?!\.\.?(?:/|$))[^/]+)+")
"""An absolute path that kazoo's ``normpath`` leaves as it is: no empty, ``.`` or ``..`` segment and
no trailing slash. kazoo puts such a path under its chroot by prefixing it."""

RECONNECT_MAX_DELAY_S = 1.0
"""The longest wait between two attempts to reconnect. kazoo's default backs off to a minute, so a
daemon cut off for a while learned that its session had expired (and a zombie controller that it
was deposed) up to a minute after the network came back; a second is what Kafka's Java client
roughly does, trying the ensemble's servers in turn."""

RETRY_BACKOFF_S = 0.05
"""The pause before a request lost with the connection is sent again (kazoo holds it while it
reconnects, so this only keeps a flapping connection from spinning)."""


class ConnectionEvent(enum.Enum):
    """What the session did, as the daemons care about it.

    SUSPENDED: the connection dropped; the session may still be alive, but watches may have fired
    unseen. RECONNECTED: back on the same session; re-read and re-arm every watch. EXPIRED: the
    session is gone with its ephemerals and watches (kazoo's LOST).
    """

    SUSPENDED = "suspended"
    RECONNECTED = "reconnected"
    EXPIRED = "expired"


class SessionObserver(Protocol):
    """Told, on the loop, what the session does and how long requests take (for metrics)."""

    def session_state(self, state: str) -> None:
        """kazoo's ``KeeperState`` at each change of connection state: ``CONNECTED``,
        ``CONNECTED_RO``, ``CONNECTING`` (the connection dropped), ``EXPIRED_SESSION``,
        ``AUTH_FAILED`` or ``CLOSED``."""

    def request_latency(self, seconds: float) -> None:
        """One request answered (with a result or a ZooKeeper error) after ``seconds``."""


class AsyncZooKeeper:
    """One ZooKeeper session (a ``KazooClient``) used from one asyncio loop.

    Connection-state changes are delivered, in order, to the callbacks given to
    ``on_connection_event``; they run on the loop.
    """

    def __init__(
        self,
        hosts: str,
        *,
        session_timeout_ms: int = 18_000,
        connect_timeout_s: float = 15.0,
        client: KazooClient | None = None,
        security: ZkSecurity | None = None,
    ) -> None:
        self.hosts = hosts
        self.connect_timeout_s = connect_timeout_s
        self.security = security
        self.client = client or KazooClient(
            hosts=hosts,
            timeout=session_timeout_ms / 1000.0,
            connection_retry={"max_tries": -1, "max_delay": RECONNECT_MAX_DELAY_S},
            **kazoo_arguments(security),
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listeners: list[Callable[[ConnectionEvent], None]] = []
        self._observers: list[SessionObserver] = []
        self._last_state: KazooState | None = None
        self._wrapped: dict[Callable[[WatchedEvent], None], Callable[[WatchedEvent], None]] = {}
        self.retried = 0
        """Requests sent again after a lost connection (a counter for tests and logs)."""

    # -- lifecycle

    async def start(self) -> None:
        """Connect (without blocking the loop) and start forwarding connection-state changes."""
        self._loop = asyncio.get_running_loop()
        self.client.add_listener(self._on_kazoo_state)
        await self._loop.run_in_executor(None, self.client.start, self.connect_timeout_s)
        self._last_state = KazooState.CONNECTED

    async def close(self) -> None:
        """Close the session: its ephemeral znodes disappear at once instead of after the timeout."""
        loop = asyncio.get_running_loop()
        self.client.remove_listener(self._on_kazoo_state)
        await loop.run_in_executor(None, self.client.stop)
        await loop.run_in_executor(None, self.client.close)
        self._observed_state("CLOSED")

    @property
    def session_id(self) -> int | None:
        """The current session id (a new one after an expiry), or None when not connected."""
        session = self.client.client_id
        return session[0] if session else None

    @property
    def connected(self) -> bool:
        return bool(self.client.connected)

    def on_connection_event(self, callback: Callable[[ConnectionEvent], None]) -> None:
        self._listeners.append(callback)

    def observe(self, observer: SessionObserver) -> None:
        """Tell ``observer`` of every state change and request from now on (before ``start``: the
        first connection too)."""
        self._observers.append(observer)

    def _observed_state(self, keeper_state: str) -> None:
        for observer in list(self._observers):
            observer.session_state(keeper_state)

    def _observed_latency(self, started: float) -> None:
        elapsed = time.monotonic() - started
        for observer in list(self._observers):
            observer.request_latency(elapsed)

    def _on_kazoo_state(self, state: KazooState) -> None:
        # On a kazoo thread: only classify and hand over; never block here.
        previous, self._last_state = self._last_state, state
        loop = self._loop
        if self._observers and loop is not None and not loop.is_closed():
            # kazoo set its KeeperState (which says why: expired, auth failed, ...) just before this call.
            loop.call_soon_threadsafe(self._observed_state, str(self.client.client_state))
        if state == KazooState.SUSPENDED:
            event = ConnectionEvent.SUSPENDED
        elif state == KazooState.LOST:
            event = ConnectionEvent.EXPIRED
        elif state == KazooState.CONNECTED and previous is not None and previous != KazooState.CONNECTED:
            event = ConnectionEvent.RECONNECTED
        else:
            return
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._dispatch, event)

    def _dispatch(self, event: ConnectionEvent) -> None:
        log.info("ZooKeeper session %s: %s", hex(self.session_id or 0), event.value)
        for callback in list(self._listeners):
            try:
                callback(event)
            except Exception:
                log.exception("connection listener %r failed on %s", callback, event)

    # -- plumbing

    def _await(self, result: IAsyncResult) -> Awaitable[Any]:
        """An asyncio future settled, on the loop, by kazoo's async result."""
        loop = self._loop or asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def settle(done: IAsyncResult) -> None:
            # On a kazoo thread.
            try:
                value = done.get_nowait()
            except Exception as exc:  # kazoo reports ZooKeeper errors as exceptions
                loop.call_soon_threadsafe(_set_exception, future, exc)
            else:
                loop.call_soon_threadsafe(_set_result, future, value)

        result.rawlink(settle)
        return future

    def watcher(self, handler: Callable[[WatchedEvent], None]) -> Callable[[WatchedEvent], None]:
        """Wrap a loop-side watch handler so kazoo's thread only posts the event to the loop.

        The wrapper is cached per handler: kazoo keeps watchers in sets, so re-arming a watch with the
        same handler (after every read) registers it once and it fires once.
        """
        cached = self._wrapped.get(handler)
        if cached is not None:
            return cached
        loop = self._loop or asyncio.get_running_loop()

        def on_kazoo_thread(event: WatchedEvent) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(handler, event)

        self._wrapped[handler] = on_kazoo_thread
        return on_kazoo_thread

    async def _retrying(self, send: Callable[[], IAsyncResult], what: str) -> Any:
        """Send with ``send`` until an answer comes: a request lost with the connection goes again."""
        while True:
            started = time.monotonic()
            try:
                result = await self._await(send())
            except ConnectionLoss:
                self.retried += 1
                log.info("ZooKeeper connection lost during %s; sending it again once reconnected", what)
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            except Exception:  # an answer too (NoNode, BadVersion, ...): it took a round trip
                self._observed_latency(started)
                raise
            self._observed_latency(started)
            return result

    # -- operations (each retried until connected, see the module docstring)

    async def get(
        self, path: str, watch: Callable[[WatchedEvent], None] | None = None
    ) -> tuple[bytes, ZnodeStat]:
        w = watch and self.watcher(watch)
        result: tuple[bytes, ZnodeStat] = await self._retrying(
            lambda: self.client.get_async(path, watch=w), f"get {path}"
        )
        return result

    async def get_children(self, path: str, watch: Callable[[WatchedEvent], None] | None = None) -> list[str]:
        w = watch and self.watcher(watch)
        children: list[str] = await self._retrying(
            lambda: self.client.get_children_async(path, watch=w), f"get_children {path}"
        )
        return children

    async def exists(
        self, path: str, watch: Callable[[WatchedEvent], None] | None = None
    ) -> ZnodeStat | None:
        w = watch and self.watcher(watch)
        return await self._retrying(lambda: self.client.exists_async(path, watch=w), f"exists {path}")

    def acls_for(self, path: str) -> list[ACL] | None:
        """The ACL a znode created at ``path`` gets (None: ZooKeeper's open default)."""
        return self.security.acls_for(path) if self.security is not None else None

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str:
        """Create ``path`` (and, with ``makepath``, its missing ancestors), each with its own ACL."""
        acl = self.acls_for(path)
        while True:
            try:
                created: str = await self._retrying(
                    lambda: self.client.create_async(
                        path, data, acl=acl, ephemeral=ephemeral, sequence=sequence
                    ),
                    f"create {path}",
                )
                return created
            except NoNodeError:
                parent = path.rstrip("/").rpartition("/")[0]
                if not makepath or not parent:
                    raise
                await self.ensure_path(parent)  # then again: the parent may vanish meanwhile

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        return await self._retrying(lambda: self.client.set_async(path, data, version), f"set {path}")

    async def delete(self, path: str, version: int = -1) -> None:
        await self._retrying(lambda: self.client.delete_async(path, version), f"delete {path}")

    async def set_acls(self, path: str, acls: Sequence[ACL] | None, version: int = -1) -> ZnodeStat:
        """Replace ``path``'s ACL (None: ZooKeeper's open default), e.g. to close a chroot to all but
        the cluster's identity."""
        return await self._retrying(
            lambda: self.client.set_acls_async(path, list(acls or OPEN_ACL_UNSAFE), version), f"setAcl {path}"
        )

    async def sync(self, path: str) -> None:
        """Bring this session's server up to date with the leader for ``path``, so that the reads
        that follow see every write committed before (ZooKeeper's reads are otherwise only
        sequentially consistent)."""
        await self._retrying(lambda: self.client.sync_async(path), f"sync {path}")

    async def ensure_path(self, path: str) -> None:
        """Create ``path`` and its missing ancestors, empty; a znode that exists already is fine."""
        if not path.strip("/") or await self.exists(path) is not None:
            return
        with contextlib.suppress(NodeExistsError):  # created meanwhile by someone else
            await self.create(path, makepath=True)

    async def multi(self, ops: Sequence[Op]) -> list[Any]:
        """Commit ``ops`` atomically; the result list holds, per op, its result or an exception object.

        As in kazoo, a failed transaction is not raised: every op's slot holds the error (the one
        that failed its own, the others RolledBackError), so callers can tell which check failed.
        """

        def send() -> IAsyncResult:
            txn = self.client.transaction()
            direct = isinstance(txn, TransactionRequest)  # kazoo's own (not the simulator's)
            root = self.client.chroot or ""
            for op in ops:
                match op:
                    case Create(path, data, ephemeral, sequence):
                        # An explicit ACL: with none, kazoo gives every create the default ACL.
                        txn.create(
                            path, data, acl=self.acls_for(path), ephemeral=ephemeral, sequence=sequence
                        )
                    case SetData(path, data, version):
                        if direct and isinstance(data, bytes) and _NORMAL_PATH.fullmatch(path):
                            # What ``set_data`` adds, without normalizing a path that is normal
                            # already: that took half of building a controlled shutdown's writes.
                            txn.operations.append(serialization.SetData(root + path, data, version))
                        else:
                            txn.set_data(path, data, version=version)
                    case Delete(path, version):
                        txn.delete(path, version=version)
                    case Check(path, version):
                        txn.check(path, version)
            return txn.commit_async()

        results: list[Any] = await self._retrying(send, f"multi of {len(ops)} ops")
        return results

    async def call(self, request: Any) -> Any:
        """Send a raw kazoo request object (for ops kazoo does not expose, like multi-read).

        Not retried: a server that does not know the request closes the connection, and
        ``batch_read`` tells that from a network blip by the ConnectionLoss. kazoo has no public
        way to send a request type it does not know; ``_call`` is the one entry its own request
        methods go through.
        """
        result = self.client.handler.async_result()
        started = time.monotonic()
        self.client._call(request, result)  # noqa: SLF001
        try:
            answer = await self._await(result)
        except ConnectionLoss:
            raise
        except Exception:
            self._observed_latency(started)
            raise
        self._observed_latency(started)
        return answer


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
