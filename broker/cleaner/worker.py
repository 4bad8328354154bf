"""A log cleaner worker process: runs cleanings (``Cleaner.run``) off the broker's interpreter and GIL.

Started by ``broker.cleaner.worker_client`` as ``python -c WORKER_CODE <broker pid>`` (that module
holds the channel's framing; nothing in the broker imports this one). It reads length-prefixed
pickles on stdin and writes them on stdout; nothing else may reach stdout, so ``WORKER_CODE`` moves
the channel to another descriptor and points fd 1 at stderr before it imports anything of the broker
(this module's package imports the whole cleaner), and hands the channel to :func:`main`. Once ready
the worker says ``("hello",)``. Per cleaning the broker sends ``("clean", plan, settings)``; for
each group the worker sends ``("ready", base offset, group's base offsets)`` once its ``.cleaned``
segment is sealed, and waits for ``("swapped", ok)``: the broker swaps the segment in (the log and
its lock stay there). The cleaning ends with ``("done", end offset, stats)``, ``("aborted",
reason)`` or ``("failed", error, traceback)``. The worker exits at the end of
its stdin (the broker closed it, or died) and, on Linux, when the broker dies (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import traceback
from collections.abc import Sequence
from typing import IO, Any

from broker.cleaner.throttler import Throttler
from broker.cleaner.worker_client import WorkerSettings, encode, read_message
from broker.log.compaction import Cleaner, CleaningAborted, CleaningPlan, SegmentFile
from broker.log.offset_map import OffsetMap
from broker.log.segment import Segment

__all__ = ["main", "serve"]

log = logging.getLogger("broker.cleaner.worker")

_PR_SET_PDEATHSIG = 1


class _Worker:
    """The cleaner of one worker process, rebuilt when its settings change."""

    def __init__(self, inp: IO[bytes], out: IO[bytes]) -> None:
        self.inp = inp
        self.out = out
        self.settings: WorkerSettings | None = None
        self.throttler = Throttler(float("inf"))
        self.cleaner: Cleaner | None = None

    def send(self, message: Any) -> None:
        self.out.write(encode(message))
        self.out.flush()

    def _cleaner_for(self, settings: WorkerSettings) -> Cleaner:
        if self.cleaner is None or settings != self.settings:
            self.settings = settings
            self.throttler.rate_per_s = settings.io_max_bytes_per_second
            offset_map = OffsetMap(settings.map_memory, settings.load_factor)
            self.cleaner = Cleaner(
                offset_map, io_buffer_size=settings.io_buffer_size, throttle=self.throttler.maybe_throttle
            )
        return self.cleaner

    def swap(self, cleaned: Segment, group: Sequence[SegmentFile]) -> bool:
        """Hand the sealed segment to the broker and wait for its swap."""
        cleaned.release()  # the broker opens it itself
        self.send(("ready", cleaned.base_offset, [s.base_offset for s in group]))
        answer = read_message(self.inp)
        if answer is None:
            sys.exit(0)  # the broker is gone: the cleaning's ``.cleaned`` files go on the way out
        return bool(answer[1])

    def clean(self, plan: CleaningPlan, settings: WorkerSettings) -> None:
        cleaner = self._cleaner_for(settings)
        try:
            end, stats = cleaner.run(plan, self.swap)
        except CleaningAborted as exc:
            self.send(("aborted", str(exc)))
        except Exception as exc:
            self.send(("failed", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        else:
            self.send(("done", end, stats))


def serve(inp: IO[bytes], out: IO[bytes]) -> None:
    """Run the cleanings asked on ``inp`` until it ends."""
    worker = _Worker(inp, out)
    worker.send(("hello",))
    while (message := read_message(inp)) is not None:
        _, plan, settings = message
        worker.clean(plan, settings)


def _die_with_parent(parent: int) -> None:
    """SIGKILL when the thread that started this process ends (Linux only), and exit now if it is gone."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        sys.exit(0)


def main(argv: list[str] | None = None, channel: int | None = None) -> None:
    """Serve the broker whose pid is ``argv[0]`` on stdin and ``channel`` (a descriptor; None: fd 1,
    moved aside here, for a worker started by hand with ``-m``)."""
    if channel is None:
        channel = os.dup(1)
        os.dup2(2, 1)  # a stray print must not corrupt the channel
    sys.stdout = sys.stderr
    args = sys.argv[1:] if argv is None else argv
    if args:
        _die_with_parent(int(args[0]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the broker's Ctrl-C is for the broker to handle
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(name)s: %(message)s")
    serve(sys.stdin.buffer, os.fdopen(channel, "wb"))


if __name__ == "__main__":
    main()
