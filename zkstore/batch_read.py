"""Read many znodes fast: ZooKeeper's multi-read (3.6+), batched and pipelined, with a plain-get fallback.

A controller failing over must load the state of every partition, one znode each. kazoo pays a
request object, a future and a thread hop per ``get``, which caps it at a few thousand reads a
second; one multi-read carries hundreds of reads in a single request and a single response.
kazoo does not expose multi-read, so this module builds the request itself and sends it through
``AsyncZooKeeper.call``.

The wire format, checked against a ZooKeeper 3.9 server: the request body is the one of a write
multi (opcode 14) under opcode 22; each op is a header ``(type: int32, done: bool, err: int32)``
followed by the op's own request (a path and a watch flag for GetData, 4, and GetChildren, 8), and
a header ``(-1, true, -1)`` ends the list. The response repeats the pattern: a header per op whose
type is the op's (error 0) and then the op's ordinary response, or type -1 with the error code both
in the header and in an int32 body; each op succeeds or fails on its own. Any other op type makes
the whole request fail with MarshallingError. To an opcode it does not know (tried: 99), the server
answers UnimplementedError and then drops the connection, keeping the session; that is what a
server older than 3.6 makes of opcode 22.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import weakref
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from kazoo.exceptions import (
    EXCEPTIONS,
    APIError,
    AuthFailedError,
    ConnectionLoss,
    MarshallingError,
    SessionExpiredError,
    SessionMovedError,
    UnimplementedError,
    ZookeeperError,
)
from kazoo.protocol.states import ZnodeStat

from zkstore.aio import RETRY_BACKOFF_S, AsyncZooKeeper

__all__ = [
    "DEFAULT_BATCH_OPS",
    "DEFAULT_EXPECTED_CHILDREN_BYTES",
    "DEFAULT_EXPECTED_DATA_BYTES",
    "DEFAULT_FALLBACK_IN_FLIGHT",
    "DEFAULT_MAX_IN_FLIGHT",
    "GET_CHILDREN",
    "GET_DATA",
    "MAX_RESPONSE_BYTES",
    "MULTI_READ",
    "MultiRead",
    "MultiReadResult",
    "ReadOp",
    "get_children_many",
    "get_data_many",
    "multi_read_supported",
    "server_path",
]

log = logging.getLogger("zkstore.batch_read")

MULTI_READ = 22
GET_DATA = 4
GET_CHILDREN = 8
_ERROR = -1

# Defaults measured with bench/zk_read.py (100,000 ~80-byte znodes, 2-core machine, ZooKeeper 3.9).

#: Ops per multi-read: 250 reached ~160k reads/s, 500 ~190k, 1,000 and 2,000 no more, with
#: responses (and the client's decoding stalls) growing in proportion.
DEFAULT_BATCH_OPS = 500
#: Multi-reads on the wire at once: the server reads the next while the client decodes the last;
#: one alone reached ~70% of four, and eight were no faster than four.
DEFAULT_MAX_IN_FLIGHT = 4
#: Concurrent single gets in the fallback: 32 to 1,024 all ran at ~3k gets/s (kazoo's per-request
#: cost is the limit), so a modest bound that leaves the server's queue short.
DEFAULT_FALLBACK_IN_FLIGHT = 128
#: Budget for one request or response. ZooKeeper's jute.maxbuffer defaults to 1 MiB and the Java
#: client refuses bigger packets; half of it leaves room for a bad size estimate.
MAX_RESPONSE_BYTES = 512 * 1024
#: Planning guess for one znode's data when nothing has been read yet; Kafka's partition state is
#: ~80 bytes and a topic's assignment a few KiB. Observed sizes take over once responses arrive.
DEFAULT_EXPECTED_DATA_BYTES = 1024
#: The same guess for one get-children response (a topic's partition list: ~7 bytes per partition).
DEFAULT_EXPECTED_CHILDREN_BYTES = 1024

_HEADER = struct.Struct("!iBi")  # op type, done flag, error code
_INT = struct.Struct("!i")
_STAT = struct.Struct("!qqqqiiiqiiq")
_OP_HEAD = struct.Struct("!iBii")  # a header (not done, err -1) then the path's length
_END = _HEADER.pack(-1, True, -1)
#: Wire bytes of one op besides its path: header, path length and the watch flag.
_REQUEST_OVERHEAD = _OP_HEAD.size + 1
#: Wire bytes of one result besides its payload: header, length or count, and a get's Stat.
_RESPONSE_OVERHEAD = {GET_DATA: _HEADER.size + _INT.size + _STAT.size, GET_CHILDREN: _HEADER.size + _INT.size}


class ReadOp(NamedTuple):
    """One read inside a multi-read: ``type`` is GET_DATA or GET_CHILDREN, ``path`` a server path."""

    type: int
    path: str


class MultiReadResult(list[Any]):
    """The per-op results of one multi-read, plus the size of the response that carried them."""

    wire_bytes: int = 0


class MultiRead:
    """A kazoo request object for ZooKeeper's multi-read (opcode 22), to pass to ``client._call``.

    Paths must already carry the client's chroot (see :func:`server_path`): kazoo adds it only in
    its own request methods. Watches are never set, so kazoo needs no bookkeeping for this request.
    """

    __slots__ = ("ops",)
    type = MULTI_READ

    def __init__(self, ops: Sequence[ReadOp]) -> None:
        # Checked here, on the caller's thread: kazoo serializes on its connection thread, where an
        # exception would be taken for a broken connection.
        for op_type, path in ops:
            if op_type not in (GET_DATA, GET_CHILDREN):
                raise ValueError(f"multi-read takes only GetData and GetChildren ops, not type {op_type}")
            if not isinstance(path, str):
                raise TypeError(f"znode path must be a str, not {type(path).__name__}")
        self.ops = ops

    def __repr__(self) -> str:
        # kazoo logs requests at DEBUG; a full op list would be hundreds of kilobytes.
        first = self.ops[0].path if self.ops else "-"
        return f"MultiRead({len(self.ops)} ops, first {first!r})"

    def serialize(self) -> bytes:
        pack = _OP_HEAD.pack
        parts: list[bytes] = []
        for op_type, path in self.ops:
            encoded = path.encode()
            parts.append(pack(op_type, False, -1, len(encoded)))
            parts.append(encoded)
            parts.append(b"\0")  # no watch
        parts.append(_END)
        return b"".join(parts)

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> MultiReadResult:
        """Per op: ``(data, ZnodeStat)``, a list of child names, or the op's kazoo exception."""
        start = offset
        results = MultiReadResult()
        append = results.append
        read_header = _HEADER.unpack_from
        read_int = _INT.unpack_from
        read_stat = _STAT.unpack_from
        make_stat = ZnodeStat._make
        while True:
            op_type, done, _err = read_header(buffer, offset)
            offset += 9
            if done:
                break
            (count,) = read_int(buffer, offset)
            offset += 4
            if op_type == GET_DATA:
                if count < 0:  # a znode created with null data; kazoo's get returns None too
                    data = None
                else:
                    data = bytes(buffer[offset : offset + count])
                    offset += count
                append((data, make_stat(read_stat(buffer, offset))))
                offset += 68
            elif op_type == GET_CHILDREN:
                children = []
                for _ in range(max(count, 0)):
                    (length,) = read_int(buffer, offset)
                    offset += 4
                    children.append(buffer[offset : offset + length].decode())
                    offset += length
                append(children)
            elif op_type == _ERROR:
                append(_exception(count))
            else:
                raise MarshallingError(f"unexpected op type {op_type} in a multi-read response")
        results.wire_bytes = offset - start
        return results


def _exception(code: int) -> ZookeeperError:
    # kazoo's EXCEPTIONS raises on unknown codes instead of returning something.
    known = EXCEPTIONS.get(code)
    return known() if known is not None else ZookeeperError(f"unknown ZooKeeper error code {code}")


def server_path(chroot: str, path: str) -> str:
    """``path`` as the server sees it: normalized like kazoo's own requests, under ``chroot``.

    ``chroot`` is kazoo's ``client.chroot``: "" or a normalized "/a/b".
    """
    if not isinstance(path, str):
        raise TypeError(f"znode path must be a str, not {type(path).__name__}")
    if path.startswith("/") and "//" not in path and "/." not in path and not path.endswith("/"):
        return chroot + path  # the common case, already normal
    parts = [part for part in path.split("/") if part]
    if "." in parts or ".." in parts:
        raise ValueError(f"relative znode paths are not allowed: {path!r}")
    return chroot + "/" + "/".join(parts) if parts else chroot or "/"


# -- session memory: does this server speak multi-read?

_supported: weakref.WeakKeyDictionary[AsyncZooKeeper, bool] = weakref.WeakKeyDictionary()


def multi_read_supported(zk: AsyncZooKeeper) -> bool | None:
    """What the auto mode learned about ``zk``'s server: True, False, or None before the first try."""
    return _supported.get(zk)


def _mark_unsupported(zk: AsyncZooKeeper, why: str) -> None:
    if _supported.get(zk) is not False:
        _supported[zk] = False
        log.info("ZooKeeper multi-read unavailable (%s); reading znodes one get at a time", why)


# -- the reads


_Result = TypeVar("_Result")


def _per_op_error(exc: BaseException) -> bool:
    """Whether a single get's error belongs in its slot (as multi-read puts it) rather than raised.

    Errors about the znode (no node, no auth, ...) are per op; losing the connection or the session
    fails the whole read, exactly as it fails a multi-read.
    """
    return (
        isinstance(exc, ZookeeperError)
        and getattr(exc, "code", 0) <= APIError.code
        and not isinstance(exc, SessionExpiredError | AuthFailedError | SessionMovedError)
    )


async def _all_or_nothing(coros: Sequence[Awaitable[None]]) -> None:
    """Run ``coros`` together; on the first failure cancel the rest and raise it (not a group)."""
    tasks = [asyncio.ensure_future(coro) for coro in coros]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            if task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _one_by_one(
    read: Callable[[str], Awaitable[_Result]],
    paths: Sequence[str],
    indices: range,
    out: list[Any],
    in_flight: int,
    *,
    after_rejection: bool = False,
) -> None:
    """The fallback: ``read`` each path with at most ``in_flight`` requests outstanding.

    ``after_rejection``: the server has just refused a multi-read, and it closes the connection
    right behind that answer, so gets sent meanwhile are lost; each is retried once (kazoo holds
    it until it has reconnected). Reads are idempotent, so the retry is safe.
    """
    todo: Iterator[int] = iter(indices)

    async def worker() -> None:
        for i in todo:
            try:
                try:
                    out[i] = await read(paths[i])
                except ConnectionLoss:
                    if not after_rejection:
                        raise
                    out[i] = await read(paths[i])
            except ZookeeperError as exc:
                if not _per_op_error(exc):
                    raise
                out[i] = exc

    await _all_or_nothing([worker() for _ in range(max(1, min(in_flight, len(indices))))])


class _Plan:
    """Cuts the op list into batches under the op-count and byte budgets, learning sizes as it goes."""

    def __init__(
        self,
        op_type: int,
        full_paths: Sequence[str],
        batch_ops: int,
        max_bytes: int,
        expected_payload: int,
    ) -> None:
        self.op_type = op_type
        self.full_paths = full_paths
        self.batch_ops = max(1, batch_ops)
        self.max_bytes = max_bytes
        self.overhead = _RESPONSE_OVERHEAD[op_type]
        self.expected = self.overhead + max(0, expected_payload)
        self.seen_ops = 0
        self.seen_bytes = 0
        self.next = 0

    def learn(self, ops: int, wire_bytes: int) -> None:
        self.seen_ops += ops
        self.seen_bytes += wire_bytes

    def per_op(self) -> float:
        """Expected response bytes per op: the configured guess until responses show the real mean."""
        return self.seen_bytes / self.seen_ops if self.seen_ops else self.expected

    def cut(self) -> range:
        """The next batch: as many ops as fit both budgets, at least one."""
        start = self.next
        per_op = self.per_op()
        limit = min(
            len(self.full_paths), start + self.batch_ops, start + max(1, int(self.max_bytes // per_op))
        )
        request_bytes = 0
        end = start
        paths = self.full_paths
        while end < limit:
            request_bytes += _REQUEST_OVERHEAD + len(paths[end])
            if request_bytes > self.max_bytes and end > start:
                break
            end += 1
        self.next = end
        return range(start, end)


@dataclass(frozen=True, slots=True)
class _ReadSettings:
    op_type: int
    batch_ops: int
    max_in_flight: int
    max_response_bytes: int
    expected_payload: int
    fallback_in_flight: int
    use_multi_read: bool | None
    """None: try multi-read once per session and fall back; True: insist; False: single gets only."""


async def _read_many(
    zk: AsyncZooKeeper,
    paths: Sequence[str],
    fallback: Callable[[str], Awaitable[Any]],
    settings: _ReadSettings,
) -> list[Any]:
    out: list[Any] = [None] * len(paths)
    if not paths:
        return out
    chroot = zk.client.chroot or ""
    full_paths = [server_path(chroot, path) for path in paths]  # validates every path up front
    if settings.use_multi_read is False or (settings.use_multi_read is None and _supported.get(zk) is False):
        await _one_by_one(fallback, paths, range(len(paths)), out, settings.fallback_in_flight)
        return out
    await _MultiReader(zk, paths, full_paths, fallback, settings, out).read_all()
    return out


class _MultiReader:
    """One ``_read_many`` call: cuts the paths into multi-reads and keeps a few of them in flight.

    With ``use_multi_read`` None (``auto``), the first batch probes the server alone; a server that
    turns out to lack multi-read gets the rest as single gets.
    """

    def __init__(
        self,
        zk: AsyncZooKeeper,
        paths: Sequence[str],
        full_paths: list[str],
        fallback: Callable[[str], Awaitable[Any]],
        settings: _ReadSettings,
        out: list[Any],
    ) -> None:
        self.zk = zk
        self.paths = paths
        self.full_paths = full_paths
        self.fallback = fallback
        self.settings = settings
        self.out = out
        self.auto = settings.use_multi_read is None
        self.plan = _Plan(
            settings.op_type,
            full_paths,
            settings.batch_ops,
            settings.max_response_bytes,
            settings.expected_payload,
        )

    async def read_all(self) -> None:
        pending: set[asyncio.Future[None]] = set()
        try:
            while self.plan.next < len(self.full_paths):
                if self.auto and _supported.get(self.zk) is False:
                    # Learned mid-way: the rest goes through plain gets, in one bounded pipeline.
                    rest = range(self.plan.next, len(self.full_paths))
                    self.plan.next = len(self.full_paths)
                    pending.add(asyncio.ensure_future(self._fall_back(rest)))
                    break
                probe = self.auto and _supported.get(self.zk) is None
                pending.add(asyncio.ensure_future(self._read_or_fall_back(self.plan.cut(), probe)))
                # A probe goes alone: nothing else should be in flight if the server drops the connection.
                pending = await _settle(pending, keep=0 if probe else max(1, self.settings.max_in_flight) - 1)
            await _settle(pending, keep=0)
        finally:
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)

    async def _read_or_fall_back(self, batch: range, probe: bool) -> None:
        try:
            await self._read(batch, probe)
        except _Unsupported:
            await self._fall_back(batch)

    async def _fall_back(self, batch: range) -> None:
        await _one_by_one(
            self.fallback, self.paths, batch, self.out, self.settings.fallback_in_flight, after_rejection=True
        )

    async def _send(self, batch: range) -> MultiReadResult:
        ops = [ReadOp(self.settings.op_type, self.full_paths[i]) for i in batch]
        results: MultiReadResult = await self.zk.call(MultiRead(ops))
        if len(results) != len(batch):
            raise MarshallingError(f"multi-read of {len(batch)} ops returned {len(results)} results")
        return results

    async def _send_probe(self, batch: range, probe: bool) -> MultiReadResult:
        try:
            return await self._send(batch)
        except ConnectionLoss:
            if not (self.auto and probe):
                raise
        # A drop right after the probe could be chance: ask once more (kazoo holds the request until
        # it has reconnected). Two in a row mean the server rejects it.
        try:
            return await self._send(batch)
        except ConnectionLoss:
            _mark_unsupported(self.zk, "the connection dropped twice on a multi-read")
            raise _Unsupported() from None

    async def _read(self, batch: range, probe: bool) -> None:
        while True:
            try:
                results = await self._send_probe(batch, probe)
                break
            except UnimplementedError:
                if not self.auto:
                    raise
                _mark_unsupported(self.zk, "the server answered UnimplementedError")
                raise _Unsupported() from None
            except ConnectionLoss:
                # A batch sent with others, after one of them found the server lacks multi-read:
                # that server closes the connection behind its error, failing every other request
                # in flight. Once the server is known to serve multi-reads, a drop is the network's,
                # and the read goes again (reads are idempotent), as every other request does.
                known = _supported.get(self.zk)
                if self.auto and known is False:
                    raise _Unsupported() from None
                if known is not True:
                    raise
                log.info("ZooKeeper connection lost during a multi-read; reading again")
                await asyncio.sleep(RETRY_BACKOFF_S)
        if self.auto:
            _supported[self.zk] = True
        log.debug("multi-read of %d ops: %d response bytes", len(batch), results.wire_bytes)
        self.plan.learn(len(batch), results.wire_bytes)
        self.out[batch.start : batch.stop] = results


async def _settle(pending: set[asyncio.Future[None]], *, keep: int) -> set[asyncio.Future[None]]:
    """Wait until at most ``keep`` of ``pending`` are unfinished, raising the first failure seen."""
    while len(pending) > keep:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    return pending


class _Unsupported(Exception):
    """Internal: this batch must be re-read with single gets."""


async def get_data_many(
    zk: AsyncZooKeeper,
    paths: Sequence[str],
    *,
    batch_ops: int = DEFAULT_BATCH_OPS,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    expected_data_bytes: int = DEFAULT_EXPECTED_DATA_BYTES,
    max_response_bytes: int = MAX_RESPONSE_BYTES,
    fallback_in_flight: int = DEFAULT_FALLBACK_IN_FLIGHT,
    use_multi_read: bool | None = None,
) -> list[tuple[bytes, ZnodeStat] | Exception]:
    """``zk.get`` of every path, in order; a znode-level failure (NoNodeError, ...) fills its slot.

    Paths are relative to the client's chroot, as with ``zk.get``. Reads go out as multi-reads of
    at most ``batch_ops`` ops and about ``max_response_bytes`` of response each (sized from
    ``expected_data_bytes`` per znode until real sizes are seen), ``max_in_flight`` at a time.
    ``use_multi_read``: None tries multi-read once per session and falls back to single gets if the
    server lacks it; True insists (raising UnimplementedError); False always uses single gets.
    Losing the connection or session raises, like ``zk.get``. Results are read at different zxids:
    this is a batch of reads, not a snapshot. A znode with null data reads as None, as in kazoo.
    """
    settings = _ReadSettings(
        GET_DATA,
        batch_ops,
        max_in_flight,
        max_response_bytes,
        expected_data_bytes,
        fallback_in_flight,
        use_multi_read,
    )
    return await _read_many(zk, paths, zk.get, settings)


async def get_children_many(
    zk: AsyncZooKeeper,
    paths: Sequence[str],
    *,
    batch_ops: int = DEFAULT_BATCH_OPS,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    expected_children_bytes: int = DEFAULT_EXPECTED_CHILDREN_BYTES,
    max_response_bytes: int = MAX_RESPONSE_BYTES,
    fallback_in_flight: int = DEFAULT_FALLBACK_IN_FLIGHT,
    use_multi_read: bool | None = None,
) -> list[list[str] | Exception]:
    """``zk.get_children`` of every path, in order, e.g. the partitions of many topics at once.

    Same batching, fallback and error rules as :func:`get_data_many`; ``expected_children_bytes``
    is the planning guess for one listing (4 bytes plus the name per child).
    """
    settings = _ReadSettings(
        GET_CHILDREN,
        batch_ops,
        max_in_flight,
        max_response_bytes,
        expected_children_bytes,
        fallback_in_flight,
        use_multi_read,
    )
    return await _read_many(zk, paths, zk.get_children, settings)
