"""A simulated ZooKeeper ensemble: znodes, sessions, watches and multi-ops.

The controller talks to it through the real ``AsyncZooKeeper`` (its retries, watch wrapping and
connection events included), over ``controller.sim.zk_client.SimKazooClient``, which stands where
``KazooClient`` stands. Every
request waits in its session's queue until the scheduler applies it, and every reply and watch event
waits again until the scheduler delivers it, so the scheduler decides all interleavings that a real
ensemble allows: sessions are ordered within themselves (FIFO), never with each other.

What the simulator can do to a session, as the network and the ensemble can:

* ``disconnect``: requests in flight fail with ConnectionLoss, whether already applied (a lost reply)
  or not; watch events wait, and are delivered after the reconnect as ZooKeeper's SetWatches does;
* ``expire``: the ensemble drops the session, its ephemerals and its watches; the client learns it
  at its next reconnect (kazoo's LOST), its waiting requests fail with SessionExpiredError, and it
  opens a new session.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.protocol.states import EventType, KeeperState, WatchedEvent, ZnodeStat

from zkstore.batch_read import GET_CHILDREN, GET_DATA, MultiReadResult

__all__ = ["Change", "SimZooKeeper"]

Watcher = Callable[[WatchedEvent], None]


@dataclass(slots=True)
class _Znode:
    data: bytes
    czxid: int
    ctime: int
    owner: int = 0
    mzxid: int = 0
    mtime: int = 0
    version: int = 0
    cversion: int = 0
    pzxid: int = 0
    children: set[str] = field(default_factory=set)

    def stat(self) -> ZnodeStat:
        return ZnodeStat(
            self.czxid, self.mzxid, self.ctime, self.mtime, self.version, self.cversion, 0, self.owner,
            len(self.data), len(self.children), self.pzxid,
        )  # fmt: skip


class _Reader(Protocol):
    """The client side of a session, as the ensemble sees it: where its watch events go."""

    outbox: deque[tuple[Any, ...]]


@dataclass(slots=True)
class _Session:
    session_id: int
    client: _Reader | None
    ephemerals: set[str] = field(default_factory=set)
    data_watches: dict[str, list[Watcher]] = field(default_factory=dict)
    child_watches: dict[str, list[Watcher]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Change:
    """One znode changed by a committed transaction, for the invariant checks."""

    zxid: int
    path: str
    before: bytes | None
    after: bytes | None
    owner: int
    session: int
    """The session that wrote it (for an ephemeral's expiry, the expired session)."""


def _parent(path: str) -> str:
    parent = path.rpartition("/")[0]
    return parent or "/"


def _name(path: str) -> str:
    return path.rpartition("/")[2]


class _Transaction:
    """Writes applied at once and undone if a later op of the same multi fails."""

    def __init__(self, server: SimZooKeeper, session_id: int) -> None:
        self.server = server
        self.session_id = session_id
        self.zxid = server.zxid + 1
        self.undo: list[Callable[[], None]] = []
        self.fired: list[tuple[str, EventType]] = []
        self.changes: list[Change] = []

    def _node(self, path: str) -> _Znode:
        node = self.server.nodes.get(path)
        if node is None:
            raise NoNodeError()
        return node

    def _changed(self, path: str, before: bytes | None, after: bytes | None, owner: int) -> None:
        self.changes.append(Change(self.zxid, path, before, after, owner, self.session_id))

    def create(self, path: str, data: bytes, ephemeral: bool, sequence: bool) -> str:
        nodes = self.server.nodes
        parent = nodes.get(_parent(path))
        if parent is None:
            raise NoNodeError()
        if parent.owner:
            raise NoChildrenForEphemeralsError()
        if sequence:
            path = f"{path}{parent.cversion:010d}"
        if path in nodes:
            raise NodeExistsError()
        now = self.server.now_ms()
        owner = self.session_id if ephemeral else 0
        node = _Znode(data or b"", self.zxid, now, owner, self.zxid, now, pzxid=self.zxid)
        nodes[path] = node
        parent_state = (parent.cversion, parent.pzxid)
        parent.children.add(_name(path))
        parent.cversion += 1
        parent.pzxid = self.zxid
        session = self.server.sessions.get(self.session_id)
        if ephemeral and session is not None:
            session.ephemerals.add(path)

        def undo() -> None:
            del nodes[path]
            parent.children.discard(_name(path))
            parent.cversion, parent.pzxid = parent_state
            if ephemeral and session is not None:
                session.ephemerals.discard(path)

        self.undo.append(undo)
        self.fired.append((path, EventType.CREATED))
        self._changed(path, None, node.data, owner)
        return path

    def set(self, path: str, data: bytes, version: int) -> ZnodeStat:
        node = self._node(path)
        if version != -1 and version != node.version:
            raise BadVersionError()
        before = (node.data, node.version, node.mzxid, node.mtime)
        node.data, node.version, node.mzxid, node.mtime = (
            data,
            node.version + 1,
            self.zxid,
            self.server.now_ms(),
        )

        def undo() -> None:
            node.data, node.version, node.mzxid, node.mtime = before

        self.undo.append(undo)
        self.fired.append((path, EventType.CHANGED))
        self._changed(path, before[0], data, node.owner)
        return node.stat()

    def delete(self, path: str, version: int) -> bool:
        node = self._node(path)
        if version != -1 and version != node.version:
            raise BadVersionError()
        if node.children:
            raise NotEmptyError()
        nodes = self.server.nodes
        parent = nodes[_parent(path)]
        parent_state = (parent.cversion, parent.pzxid)
        del nodes[path]
        parent.children.discard(_name(path))
        parent.cversion += 1
        parent.pzxid = self.zxid
        session = self.server.sessions.get(node.owner) if node.owner else None
        if session is not None:
            session.ephemerals.discard(path)

        def undo() -> None:
            nodes[path] = node
            parent.children.add(_name(path))
            parent.cversion, parent.pzxid = parent_state
            if session is not None:
                session.ephemerals.add(path)

        self.undo.append(undo)
        self.fired.append((path, EventType.DELETED))
        self._changed(path, node.data, None, node.owner)
        return True

    def check(self, path: str, version: int) -> bool:
        node = self._node(path)
        if version != -1 and version != node.version:
            raise BadVersionError()
        return True

    def rollback(self) -> None:
        for undo in reversed(self.undo):
            undo()

    def commit(self) -> None:
        if not self.undo:
            return
        self.server.zxid = self.zxid
        self.server.commit(self.changes, self.fired)


class SimZooKeeper:
    """One ensemble's state: znodes, sessions and their watches."""

    def __init__(self, now_ms: Callable[[], int]) -> None:
        self.now_ms = now_ms
        self.zxid = 0
        self.nodes: dict[str, _Znode] = {"/": _Znode(b"", 0, 0)}
        self.sessions: dict[int, _Session] = {}
        self._next_session = 0x1000
        self.observers: list[Callable[[list[Change]], None]] = []
        """Told every committed transaction's changes (the invariant checks)."""

    # -- sessions

    def open_session(self, client: _Reader | None) -> int:
        session_id = self._next_session
        self._next_session += 1
        self.sessions[session_id] = _Session(session_id, client)
        return session_id

    def alive(self, session_id: int | None) -> bool:
        return session_id in self.sessions

    def end_session(self, session_id: int) -> None:
        """The session closes or expires: its ephemerals go, each a transaction of its own, as the
        ensemble's closeSession deletes them; its watches go with it."""
        session = self.sessions.pop(session_id, None)
        if session is None:
            return
        for path in sorted(session.ephemerals, reverse=True):
            txn = _Transaction(self, session_id)
            if path in self.nodes:
                txn.delete(path, -1)
                txn.commit()

    # -- requests

    def apply(self, session_id: int, request: tuple[Any, ...]) -> Any:
        """Carry out one request of ``session_id``: its result, or raise its kazoo error."""
        if session_id not in self.sessions:
            raise SessionExpiredError()
        kind = request[0]
        if kind == "multi":
            return self._multi(session_id, request[1])
        if kind == "multi_read":
            return self._multi_read(request[1])
        if kind in ("get", "get_children", "exists"):
            return self._read(session_id, kind, request[1], request[2])
        if kind in ("sync", "set_acls"):
            return self._sync(kind, request[1])
        txn = _Transaction(self, session_id)
        match request:
            case ("create", path, data, ephemeral, sequence):
                result: Any = txn.create(path, data, ephemeral, sequence)
            case ("set", path, data, version):
                result = txn.set(path, data, version)
            case ("delete", path, version):
                result = txn.delete(path, version)
            case _:
                raise ValueError(f"unknown simulated request {request!r}")
        txn.commit()
        return result

    def _sync(self, kind: str, path: str) -> Any:
        if kind == "sync":
            return path
        node = self.nodes.get(path)
        if node is None:
            raise NoNodeError()
        return node.stat()

    def _read(self, session_id: int, kind: str, path: str, watch: Watcher | None) -> Any:
        node = self.nodes.get(path)
        session = self.sessions[session_id]
        if kind == "exists":
            if watch is not None:
                _add_watch(session.data_watches, path, watch)
            return node.stat() if node is not None else None
        if node is None:
            raise NoNodeError()
        if kind == "get":
            if watch is not None:
                _add_watch(session.data_watches, path, watch)
            return node.data, node.stat()
        if watch is not None:
            _add_watch(session.child_watches, path, watch)
        return sorted(node.children)

    def _multi(self, session_id: int, ops: list[tuple[Any, ...]]) -> list[Any]:
        txn = _Transaction(self, session_id)
        results: list[Any] = []
        for index, op in enumerate(ops):
            try:
                match op:
                    case ("create", path, data, ephemeral, sequence):
                        results.append(txn.create(path, data, ephemeral, sequence))
                    case ("set", path, data, version):
                        results.append(txn.set(path, data, version))
                    case ("delete", path, version):
                        results.append(txn.delete(path, version))
                    case ("check", path, version):
                        results.append(txn.check(path, version))
            except KazooException as exc:
                txn.rollback()
                return [
                    *(RolledBackError() for _ in range(index)),
                    exc,
                    *(RuntimeInconsistency() for _ in range(len(ops) - index - 1)),
                ]
        txn.commit()
        return results

    def _multi_read(self, ops: list[tuple[int, str]]) -> MultiReadResult:
        results = MultiReadResult()
        for op_type, path in ops:
            node = self.nodes.get(path)
            if node is None:
                results.append(NoNodeError())
            elif op_type == GET_DATA:
                results.append((node.data, node.stat()))
            elif op_type == GET_CHILDREN:
                results.append(sorted(node.children))
            results.wire_bytes += 100 + len(path) + (len(node.data) if node is not None else 0)
        return results

    # -- watches

    def commit(self, changes: list[Change], fired: list[tuple[str, EventType]]) -> None:
        for observer in self.observers:
            observer(changes)
        for path, event_type in fired:
            self._fire(path, event_type)

    def _fire(self, path: str, event_type: EventType) -> None:
        for session in self.sessions.values():
            for watcher in session.data_watches.pop(path, ()):
                session_event(session, watcher, WatchedEvent(event_type, KeeperState.CONNECTED, path))
            if event_type == EventType.DELETED:
                for watcher in session.child_watches.pop(path, ()):
                    session_event(session, watcher, WatchedEvent(event_type, KeeperState.CONNECTED, path))
            if event_type in (EventType.CREATED, EventType.DELETED):
                parent = _parent(path)
                for watcher in session.child_watches.pop(parent, ()):
                    child = WatchedEvent(EventType.CHILD, KeeperState.CONNECTED, parent)
                    session_event(session, watcher, child)


def _add_watch(watches: dict[str, list[Watcher]], path: str, watch: Watcher) -> None:
    """kazoo keeps a path's watchers in a set: the same callback is registered once."""
    registered = watches.setdefault(path, [])
    if watch not in registered:
        registered.append(watch)


def session_event(session: _Session, watcher: Watcher, event: WatchedEvent) -> None:
    if session.client is not None:
        session.client.outbox.append(("watch", watcher, event))
