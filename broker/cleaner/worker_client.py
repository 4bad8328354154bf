"""The broker's side of a cleaner worker process: cleans a log there and swaps its segments in here.

The map-and-copy work of a cleaning decodes and re-encodes every batch; run in the broker it holds the
GIL for its whole length and the data plane's latency suffers. So each cleaner thread has a worker
process (``broker.cleaner.worker``), started by ``subprocess`` (never forked from this threaded
interpreter) on its first cleaning and kept: the thread sends it the cleaning's plan, swaps each
``.cleaned`` segment it announces into the log (``Log.replace_segments``: the log and its state stay
here), and gets the figures back.

The thread never blocks on the worker: it writes and reads the pipes without blocking, and checks
``check_done`` every :data:`POLL_S` while it waits (a worker silent for :data:`SILENT_WARNING_S` is
logged, and waited for while it lives). To abort, it kills the worker, deletes the plan's ``.cleaned``
files and starts another worker next time. A worker that dies, or breaks the channel, raises
:class:`WorkerDied` (one that cannot be started, or dies before it said hello,
:class:`WorkerStartFailed`): the cleaning is dropped, and ``broker.cleaner.log_cleaner`` counts those.
An error the worker reports for the log is raised as :class:`CleaningFailed`, which marks the log
uncleanable as an error in the broker would.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import selectors
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import broker
from broker.log import Log
from broker.log.compaction import CleanerStats, CleaningAborted, CleaningPlan, Swap, plan_cleaning, swapper
from broker.log.segment import Segment, segment_paths
from broker.log.swap import CLEANED_SUFFIX

__all__ = [
    "FRAME",
    "POLL_S",
    "WORKER_CODE",
    "CleanerWorker",
    "CleaningFailed",
    "WorkerDied",
    "WorkerSettings",
    "WorkerStartFailed",
    "decode_frames",
    "encode",
    "read_message",
    "spawn_worker",
]

log = logging.getLogger("broker.cleaner")

POLL_S = 0.05
"""How often a thread waiting on its worker checks whether its cleaning must stop."""
STOP_TIMEOUT_S = 5.0
"""How long a worker has to exit once its input is closed, before it is killed."""
START_TIMEOUT_S = 30.0
"""How long a new worker has to say hello (its imports done) before it counts as not started."""
SILENT_WARNING_S = 60.0
"""A worker that neither answers nor reads for this long is logged (and still waited for)."""
WORKER_CODE = (
    "import os, sys\n"
    "channel = os.dup(1)\n"
    "os.dup2(2, 1)\n"
    "from broker.cleaner.worker import main\n"
    "main(sys.argv[1:], channel)\n"
)
"""The worker's program, run by ``python -c``: the channel (fd 1) is moved aside and fd 1 pointed at
stderr before anything of the broker is imported (``-m broker.cleaner.worker`` would import the
``broker.cleaner`` package first), so that nothing printed, even at import, reaches the channel."""
_PROJECT_ROOT = Path(broker.__file__).resolve().parent.parent
_spawner: ThreadPoolExecutor | None = None
_spawner_lock = threading.Lock()

FRAME = struct.Struct(">I")
"""Each message: its pickle's length, then the pickle."""


@dataclass(frozen=True)
class WorkerSettings:
    """The worker's offset map and I/O settings (its thread's share of the cleaner's)."""

    map_memory: int
    load_factor: float
    io_buffer_size: int
    io_max_bytes_per_second: float


def encode(message: Any) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return FRAME.pack(len(data)) + data


def decode_frames(buffer: bytearray) -> list[Any]:
    """The whole messages at the start of ``buffer``, removed from it."""
    found = []
    while len(buffer) >= FRAME.size:
        (size,) = FRAME.unpack_from(buffer)
        if len(buffer) < FRAME.size + size:
            break
        found.append(pickle.loads(buffer[FRAME.size : FRAME.size + size]))
        del buffer[: FRAME.size + size]
    return found


def read_message(inp: IO[bytes]) -> Any | None:
    """The next message of a blocking stream (the worker's side), None at its end."""
    head = inp.read(FRAME.size)
    if len(head) < FRAME.size:
        return None
    (size,) = FRAME.unpack(head)
    data = inp.read(size)
    return pickle.loads(data) if len(data) == size else None


class CleaningFailed(Exception):
    """The worker could not clean the log (corrupt data, an I/O error): the log is marked uncleanable."""


class WorkerDied(CleaningAborted):
    """The worker exited, or broke the channel, during a cleaning: the cleaning is dropped, the next one
    starts another worker."""


class WorkerStartFailed(WorkerDied):
    """No worker could be started (``subprocess`` failed, the interpreter is shutting down, the worker
    exited or said something else before its hello): nothing of the log's doing."""


def spawn_worker() -> subprocess.Popen[bytes]:
    """A worker process, its stdin and stdout the channel, its stderr the broker's. Started from one
    thread that lives as long as the broker: PR_SET_PDEATHSIG, which the worker sets, fires when the
    thread that started it ends, not only the process."""
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = ThreadPoolExecutor(1, thread_name_prefix="kafka-log-cleaner-spawner")
        return _spawner.submit(_popen).result()


def _popen() -> subprocess.Popen[bytes]:
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(_PROJECT_ROOT), path) if p)}
    return subprocess.Popen(
        [sys.executable, "-c", WORKER_CODE, str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )


def _wait_for(fd: int, event: int, timeout_s: float) -> bool:
    """Whether ``fd`` became ready for ``event`` within ``timeout_s`` (any descriptor number, unlike
    ``select.select``, which refuses those past 1023)."""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, event)
        return bool(selector.select(timeout_s))


class _Patience:
    """Logs, every :data:`SILENT_WARNING_S`, that a worker has not moved; the wait goes on."""

    def __init__(self, pid: int, waiting_for: str) -> None:
        self.pid = pid
        self.waiting_for = waiting_for
        self.reset()

    def reset(self) -> None:
        self.since = time.monotonic()
        self.next_warning = self.since + SILENT_WARNING_S

    def check(self) -> None:
        now = time.monotonic()
        if now >= self.next_warning:
            log.warning(
                "cleaner worker %d: still waiting %s after %.0f s (it is alive)",
                self.pid,
                self.waiting_for,
                now - self.since,
            )
            self.next_warning = now + SILENT_WARNING_S


class CleanerWorker:
    """One cleaner thread's worker process; ``clean`` is ``Cleaner.clean``, run there."""

    def __init__(self, settings: WorkerSettings, check_done: Callable[[], None]) -> None:
        self.settings = settings
        self.check_done = check_done
        self.process: subprocess.Popen[bytes] | None = None
        self._buffer = bytearray()
        self._lock = threading.Lock()
        self.started = 0
        """Worker processes started: more than one means one died or was killed to abort a cleaning."""

    def clean(self, log: Log, first_dirty: int, upper_bound: int, now_ms: int) -> tuple[int, CleanerStats]:
        plan, view = plan_cleaning(log, first_dirty, upper_bound, now_ms)
        request = encode(("clean", plan, self.settings))  # a plan that does not pickle: no worker's fault
        process = self._running()
        try:
            self._send(process, request)
            return self._converse(process, plan, swapper(log, view))
        except (CleaningFailed, _Reported):
            _delete_cleaned(plan)  # the worker deleted its own; it waits idle, so a sweep races nothing
            raise
        except BaseException:
            self._kill(process)
            _delete_cleaned(plan)
            raise

    def _converse(
        self, process: subprocess.Popen[bytes], plan: CleaningPlan, swap: Swap
    ) -> tuple[int, CleanerStats]:
        while True:
            message = self._receive(process)
            match message:
                case ("ready", int(base), list(bases)):
                    self._send(process, encode(("swapped", _swap(plan, base, bases, swap))))
                case ("done", int(end), CleanerStats() as stats):
                    return end, stats
                case ("aborted", str(reason)):
                    raise _Reported(reason)
                case ("failed", str(error), str(trace)):
                    raise CleaningFailed(f"{error} (in the cleaner worker {process.pid}:\n{trace.rstrip()})")
                case _:
                    raise self._lost(process, f"sent {message!r:.100}")

    def _running(self) -> subprocess.Popen[bytes]:
        """The thread's worker, started (and its hello awaited) if there is none."""
        with self._lock:
            if self.process is not None and self.process.poll() is not None:
                log.warning(
                    "cleaner worker %d had exited (%s): starting another",
                    self.process.pid,
                    self.process.returncode,
                )
                self._reap(self.process)
            if self.process is not None:
                return self.process
            try:
                process = spawn_worker()
            except Exception as exc:  # OSError; RuntimeError at interpreter shutdown: not the log's fault
                log.warning("cannot start a cleaner worker: %r", exc)
                raise WorkerStartFailed(f"cannot start a cleaner worker: {exc!r}") from exc
            assert process.stdin is not None
            os.set_blocking(process.stdin.fileno(), False)
            self.process = process
            self.started += 1
            self._buffer.clear()
        try:
            hello = self._receive(process, timeout_s=START_TIMEOUT_S)
            if hello != ("hello",):
                raise self._lost(process, f"said {hello!r:.100} instead of hello")
        except WorkerDied as exc:
            self._kill(process)
            raise WorkerStartFailed(f"the cleaner worker {process.pid} did not start: {exc}") from exc
        except BaseException:
            self._kill(process)
            raise
        return process

    def _send(self, process: subprocess.Popen[bytes], data: bytes) -> None:
        """Write ``data`` to the worker; while the pipe is full, ``check_done`` runs every POLL_S, so a
        worker that stopped reading cannot hold an abort or a stop."""
        assert process.stdin is not None
        patience = _Patience(process.pid, "for it to read")
        rest = memoryview(data)
        try:
            fd = process.stdin.fileno()
            while rest:
                try:
                    written = os.write(fd, rest)
                except BlockingIOError:
                    self.check_done()
                    patience.check()
                    _wait_for(fd, selectors.EVENT_WRITE, POLL_S)
                    continue
                rest = rest[written:]
                patience.reset()
        except (OSError, ValueError) as exc:  # EPIPE: it exited; ValueError: its pipe was closed
            raise self._lost(process, f"stopped reading ({exc})", exited=True) from None

    def _receive(self, process: subprocess.Popen[bytes], timeout_s: float | None = None) -> Any:
        """The worker's next message; on the way, CleaningAborted from ``check_done``, or WorkerDied if
        the channel ends or breaks (or ``timeout_s`` passes)."""
        assert process.stdout is not None
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        patience = _Patience(process.pid, "for its answer")
        while True:
            try:
                messages = decode_frames(self._buffer)
            except Exception as exc:  # whatever unpickling raises: the channel is broken
                raise self._lost(process, f"sent what does not unpickle ({exc!r})") from exc
            if len(messages) > 1:
                raise self._lost(process, f"sent {len(messages)} messages where one was due")
            if messages:
                return messages[0]
            self.check_done()
            patience.check()
            if deadline is not None and time.monotonic() > deadline:
                raise self._lost(process, f"said nothing for {timeout_s} s")
            try:
                fd = process.stdout.fileno()
                if not _wait_for(fd, selectors.EVENT_READ, POLL_S):
                    continue
                chunk = os.read(fd, 1 << 16)
            except (OSError, ValueError) as exc:
                raise self._lost(process, f"broke the channel ({exc})") from exc
            if not chunk:
                raise self._lost(process, "closed the channel", exited=True)
            self._buffer += chunk
            patience.reset()

    def _lost(self, process: subprocess.Popen[bytes], what: str, *, exited: bool = False) -> WorkerDied:
        """The WorkerDied to raise for a worker that ``what``; ``exited``: it is exiting, so wait for its
        exit status (the caller kills it either way)."""
        code = process.poll()
        if exited and code is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = process.wait(STOP_TIMEOUT_S)
        log.warning("cleaner worker %d %s (exit status %s): its cleaning is dropped", process.pid, what, code)
        return WorkerDied(f"the cleaner worker {process.pid} {what} (exit status {code})")

    def _kill(self, process: subprocess.Popen[bytes]) -> None:
        with self._lock:
            if process.poll() is None:
                process.kill()
            self._reap(process)

    def _reap(self, process: subprocess.Popen[bytes]) -> None:
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):  # a pipe the dead worker no longer reads
                    pipe.close()
        process.wait()
        if self.process is process:
            self.process = None

    def close(self) -> None:
        """End the worker: its input closed, it exits (killed if it takes longer than STOP_TIMEOUT_S)."""
        with self._lock:
            process = self.process
            if process is None:
                return
            try:
                if process.stdin is not None:
                    process.stdin.close()
                process.wait(STOP_TIMEOUT_S)
            except (OSError, subprocess.TimeoutExpired):
                process.kill()
            self._reap(process)


class _Reported(CleaningAborted):
    """The worker aborted the cleaning (the log changed under it): it deleted its files and waits."""


def _swap(plan: CleaningPlan, base: int, bases: list[int], swap: Swap) -> bool:
    """Open the worker's sealed ``.cleaned`` segment at ``base`` and swap it in for the plan's segments
    ``bases``; a refused swap deletes it."""
    wanted = set(bases)
    group = [s for s in plan.segments if s.base_offset in wanted]
    cleaned = Segment.open(plan.directory, base, plan.index_interval_bytes, suffix=CLEANED_SUFFIX)
    try:
        cleaned.load()
        swapped = swap(cleaned, group)
    except BaseException:
        cleaned.delete()
        raise
    if not swapped:
        cleaned.delete()
    return swapped


def _delete_cleaned(plan: CleaningPlan) -> None:
    """The ``.cleaned`` files a killed worker may have left: those its plan can make (a group's
    ``.cleaned`` segment is named after the group's first segment), nothing else of the directory."""
    for segment in plan.segments:
        for path in segment_paths(plan.directory, segment.base_offset, CLEANED_SUFFIX):
            path.unlink(missing_ok=True)
