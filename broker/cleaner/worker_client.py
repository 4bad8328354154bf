"""The broker's side of a cleaner worker process: cleans a log there and swaps its segments in here.

The map-and-copy work of a cleaning decodes and re-encodes every batch; run in the broker it holds the
GIL for its whole length and the data plane's latency suffers. So each cleaner thread has a worker
process (``broker.cleaner.worker``), started by ``subprocess`` (never forked from this threaded
interpreter) on its first cleaning and kept: the thread sends it the cleaning's plan, swaps each
``.cleaned`` segment it announces into the log (``Log.replace_segments``: the log and its state stay
here), and gets the figures back.

While it waits, the thread checks ``check_done`` every :data:`POLL_S`; to abort, it kills the worker,
deletes the ``.cleaned`` files left in the log's directory and starts another worker next time. A
worker that dies aborts its cleaning (logged); an error the worker reports for the log is raised as
:class:`CleaningFailed`, which marks the log uncleanable as an error in the broker would.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import broker
from broker.log import Log
from broker.log.compaction import CleanerStats, CleaningAborted, CleaningPlan, Swap, plan_cleaning, swapper
from broker.log.segment import Segment
from broker.log.swap import CLEANED_SUFFIX

__all__ = [
    "FRAME",
    "POLL_S",
    "CleanerWorker",
    "CleaningFailed",
    "WorkerDied",
    "WorkerSettings",
    "decode_frames",
    "encode",
    "spawn_worker",
]

log = logging.getLogger("broker.cleaner")

POLL_S = 0.05
"""How often a thread waiting on its worker checks whether its cleaning must stop."""
STOP_TIMEOUT_S = 5.0
"""How long a worker has to exit once its input is closed, before it is killed."""
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


class CleaningFailed(Exception):
    """The worker could not clean the log (corrupt data, an I/O error): the log is marked uncleanable."""


class WorkerDied(CleaningAborted):
    """The worker process exited during a cleaning: the cleaning is dropped, the next one starts another."""


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
        [sys.executable, "-m", "broker.cleaner.worker", str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )


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
        process = self._running()
        try:
            self._send(process, ("clean", plan, self.settings))
            return self._converse(process, plan, swapper(log, view))
        except (CleaningFailed, _Reported):
            raise  # the worker ended the cleaning itself and waits for the next one
        except BaseException:
            self._kill(process)
            _delete_cleaned(plan.directory)
            raise

    def _converse(
        self, process: subprocess.Popen[bytes], plan: CleaningPlan, swap: Swap
    ) -> tuple[int, CleanerStats]:
        while True:
            message = self._receive(process)
            match message:
                case ("ready", int(base), list(bases)):
                    self._send(process, ("swapped", _swap(plan, base, bases, swap)))
                case ("done", int(end), CleanerStats() as stats):
                    return end, stats
                case ("aborted", str(reason)):
                    raise _Reported(reason)
                case ("failed", str(error), str(trace)):
                    raise CleaningFailed(f"{error} (in the cleaner worker {process.pid}:\n{trace.rstrip()})")
                case _:
                    raise WorkerDied(f"the cleaner worker {process.pid} sent {message!r:.100}")

    def _running(self) -> subprocess.Popen[bytes]:
        with self._lock:
            if self.process is not None and self.process.poll() is not None:
                log.warning(
                    "cleaner worker %d had exited (%s): starting another",
                    self.process.pid,
                    self.process.returncode,
                )
                self._reap(self.process)
            if self.process is None:
                try:
                    self.process = spawn_worker()
                except OSError as exc:  # not the log's fault: the cleaning is dropped, retried later
                    log.warning("cannot start a cleaner worker: %s", exc)
                    raise WorkerDied(f"cannot start a cleaner worker: {exc}") from exc
                self.started += 1
                self._buffer.clear()
            return self.process

    def _send(self, process: subprocess.Popen[bytes], message: Any) -> None:
        assert process.stdin is not None
        try:
            process.stdin.write(encode(message))
            process.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise self._died(process) from None

    def _receive(self, process: subprocess.Popen[bytes]) -> Any:
        """The worker's next message; on the way, CleaningAborted from ``check_done`` or WorkerDied."""
        assert process.stdout is not None
        fd = process.stdout.fileno()
        while True:
            messages = decode_frames(self._buffer)
            if messages:
                assert len(messages) == 1, "the worker sends one message, then waits"
                return messages[0]
            self.check_done()
            ready, _, _ = select.select([fd], [], [], POLL_S)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise self._died(process)
                self._buffer += chunk

    def _died(self, process: subprocess.Popen[bytes]) -> WorkerDied:
        try:
            code = process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            code = None
        log.warning(
            "cleaner worker %d exited (%s) during a cleaning: the cleaning is aborted", process.pid, code
        )
        return WorkerDied(f"the cleaner worker {process.pid} exited ({code})")

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


def _delete_cleaned(directory: Path) -> None:
    """The ``.cleaned`` files a killed worker left (one log's cleaning at a time writes there)."""
    for path in directory.glob(f"*{CLEANED_SUFFIX}"):
        path.unlink(missing_ok=True)
