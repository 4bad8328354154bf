"""Requests that wait for a condition: acks=all produces and long-polling fetches (Kafka's purgatory).

A waiting request holds no handler thread. It is registered under the partitions it depends on; the
code that changes a partition (an append, a high-watermark move, a leadership change) calls
``check(key)``, which retries the operations watching it; one reaper thread answers those whose
timeout passes first. Each operation completes exactly once, whichever comes first, and its reply
(a response body) resolves its future on the thread that completed it.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable
from concurrent.futures import Future
from typing import Any

log = logging.getLogger("broker.purgatory")

PURGE_EVERY = 1000
"""Completed operations left in watch lists are dropped once this many completed since the last purge."""


class DelayedOperation(ABC):
    def __init__(self, timeout_s: float) -> None:
        self.deadline = time.monotonic() + max(0.0, timeout_s)
        self.future: Future[dict[str, Any]] = Future()
        self._lock = threading.Lock()
        self._done = False
        self.expired = False

    @property
    def completed(self) -> bool:
        return self._done

    @abstractmethod
    def ready(self) -> bool:
        """Whether the condition holds now. May be called from any thread, more than once."""

    @abstractmethod
    def reply(self) -> dict[str, Any]:
        """The response body, built once, when the condition held or the time ran out (``expired``)."""

    def try_complete(self) -> bool:
        return self.ready() and self.force_complete()

    def force_complete(self, *, expired: bool = False) -> bool:
        """Complete now unless already done; True if this call completed it."""
        with self._lock:
            if self._done:
                return False
            self._done = True
            self.expired = expired
        try:
            self.future.set_result(self.reply())
        except Exception as exc:  # the client must get an answer (the connection closes) even on a bug
            log.exception("error completing %s", type(self).__name__)
            self.future.set_exception(exc)
        return True


class Purgatory:
    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._watchers: dict[Hashable, list[DelayedOperation]] = {}
        self._deadlines: list[tuple[float, int, DelayedOperation]] = []
        self._sequence = itertools.count()
        self._wake = threading.Condition(self._lock)
        self._completed_since_purge = 0
        self._stopped = False
        self._reaper: threading.Thread | None = None
        """Started by the first operation that has to wait."""

    def watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> Future[dict[str, Any]]:
        """Complete ``op`` now if it can; otherwise keep it until a ``check`` of a key or its deadline."""
        if op.try_complete():
            return op.future
        with self._lock:
            if self._stopped:
                op.force_complete(expired=True)
                return op.future
            for key in keys:
                self._watchers.setdefault(key, []).append(op)
            heapq.heappush(self._deadlines, (op.deadline, next(self._sequence), op))
            if self._reaper is None:
                self._reaper = threading.Thread(
                    target=self._reap, name=f"ExpirationReaper-{self.name}", daemon=True
                )
                self._reaper.start()
            self._wake.notify()
        op.try_complete()  # the condition may have changed between the first try and the registration
        return op.future

    def check(self, key: Hashable) -> int:
        """Retry the operations watching ``key``; returns how many completed."""
        with self._lock:
            ops = self._watchers.get(key)
            if not ops:
                return 0
            ops = list(ops)
        completed = sum(1 for op in ops if not op.completed and op.try_complete())
        if completed:
            with self._lock:
                remaining = [op for op in self._watchers.get(key, ()) if not op.completed]
                if remaining:
                    self._watchers[key] = remaining
                else:
                    self._watchers.pop(key, None)
        return completed

    def size(self) -> int:
        """Operations waiting (Kafka's NumDelayedOperations)."""
        with self._lock:
            return sum(1 for _, _, op in self._deadlines if not op.completed)

    def shutdown(self) -> None:
        """Answer everything still waiting as timed out, and stop the reaper."""
        with self._lock:
            self._stopped = True
            pending = [op for _, _, op in self._deadlines]
            self._deadlines.clear()
            self._watchers.clear()
            self._wake.notify()
        for op in pending:
            op.force_complete(expired=True)
        if self._reaper is not None:
            self._reaper.join(5)

    def _reap(self) -> None:
        while True:
            with self._lock:
                while not self._stopped:
                    while self._deadlines and self._deadlines[0][2].completed:
                        heapq.heappop(self._deadlines)
                        self._completed_since_purge += 1
                    if self._completed_since_purge >= PURGE_EVERY:
                        self._purge()
                    now = time.monotonic()
                    if self._deadlines and self._deadlines[0][0] <= now:
                        break
                    timeout = self._deadlines[0][0] - now if self._deadlines else None
                    self._wake.wait(timeout)
                if self._stopped:
                    return
                _, _, op = heapq.heappop(self._deadlines)
            op.force_complete(expired=True)

    def _purge(self) -> None:
        """Drop completed operations from the watch lists (under the lock)."""
        for key in list(self._watchers):
            remaining = [op for op in self._watchers[key] if not op.completed]
            if remaining:
                self._watchers[key] = remaining
            else:
                del self._watchers[key]
        self._completed_since_purge = 0
