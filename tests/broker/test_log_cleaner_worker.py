"""The log cleaner's worker processes: a cleaning there writes the log a cleaning in the broker writes;
aborting it (the log deleted or cut, the cleaner stopping) or losing the worker leaves the log whole
and no ``.cleaned`` file, and the next cleaning gets a new worker; a worker never outlives the broker.

The tests that interfere with a cleaning hold its first swap (``held_swap``): the worker then waits
for the broker's answer, and the test acts before letting the swap go, whatever the machine's speed."""

from __future__ import annotations

import logging
import os
import resource
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from broker.cleaner import worker_client
from broker.cleaner.worker_client import CleanerWorker, spawn_worker
from broker.log import Log
from broker.log.compaction import Cleaner, CleaningAborted
from broker.log.segment import file_name
from tests.broker.cleaner_builders import (
    DAY_MS,
    NOW,
    TP,
    Harness,
    KeyedProducer,
    batches,
    compacted_log,
    fill,
    harness,
    latest_values,
    put,
    roll_past,
)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG and /proc are Linux's")

WAIT_S = 30.0


def wait_for(condition: Callable[[], object], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def exited(pid: int) -> bool:
    """Gone, or a zombie nobody reaped yet: either way it runs no more."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def worker_of(h: Harness) -> CleanerWorker:
    worker = h.cleaner.threads[0].cleaner
    assert isinstance(worker, CleanerWorker)
    return worker


@contextmanager
def isolated(directory: Path, log: Log, **config: object) -> Iterator[Harness]:
    """A harness cleaning in a worker process, stopped (its worker ended) on the way out."""
    h = harness(directory, log, in_process=False, **config)  # type: ignore[arg-type]
    try:
        yield h
    finally:
        h.cleaner.stop()


@dataclass
class HeldSwap:
    """The first swap of a cleaning through a worker waits, once ``reached``, for ``release``."""

    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def held_swap(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldSwap]:
    held = HeldSwap()
    swap = worker_client._swap

    def holding(*args: Any) -> bool:
        if not held.reached.is_set():
            held.reached.set()
            held.release.wait(WAIT_S)
        return swap(*args)

    monkeypatch.setattr(worker_client, "_swap", holding)
    yield held
    held.release.set()


@contextmanager
def cleaning_in_background(h: Harness, held: HeldSwap) -> Iterator[threading.Event]:
    """``h.clean()`` in a thread, the body run while its first swap is held (released on the way out);
    the event is set when it returned True."""
    cleaned = threading.Event()
    thread = threading.Thread(target=lambda: h.clean() and cleaned.set())
    thread.start()
    try:
        assert held.reached.wait(WAIT_S), "the worker never asked for a swap"
        assert list(h.log.directory.glob("*.cleaned"))
        yield cleaned
    finally:
        held.release.set()
        thread.join(WAIT_S)
        assert not thread.is_alive()


def abort_asked(h: Harness) -> bool:
    try:
        h.cleaner.manager.check_aborted(TP)
    except CleaningAborted:
        return True
    return False


def worker_code(patch: str) -> str:
    """A worker's program with ``patch`` run before its main: a worker that misbehaves on purpose."""
    return (
        "import os, sys, time\n"
        "channel = os.dup(1)\n"
        "os.dup2(2, 1)\n"
        "from broker.cleaner import worker\n"
        f"{patch}\n"
        "worker.main(sys.argv[1:], channel)\n"
    )


def cleaned_files(log: Log) -> list[Path]:
    return sorted(log.directory.glob("*.cleaned"))


def mixed_log(directory: Path) -> Log:
    """Superseded values, tombstones, an aborted and a committed transaction, an idempotent producer."""
    log = compacted_log(directory, min_cleanable_ratio=0.0, delete_retention_ms=DAY_MS)
    fill(log, keys=6, rounds=4)
    put(log, "k1", None)
    txn, idempotent = KeyedProducer(8001), KeyedProducer(8002)
    txn.send(log, "k2", "aborted", transactional=True)
    txn.end(log, commit=False)
    txn.send(log, "k3", "committed", transactional=True)
    txn.end(log, commit=True)
    for i in range(5):
        idempotent.send(log, "k4", f"idempotent-{i}")
    roll_past(log, "r")
    return log


def segment_files(log: Log) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(log.directory.iterdir()) if p.suffix != ".checkpoint"}


def test_a_cleaning_in_the_worker_writes_what_one_in_the_broker_writes(tmp_path: Path) -> None:
    here = harness(tmp_path / "here", mixed_log(tmp_path / "here"))
    with isolated(tmp_path / "there", mixed_log(tmp_path / "there")) as there:
        for now in (NOW, NOW + 2 * DAY_MS):  # the second cleaning drops the tombstone and the marker
            assert here.clean(now) and there.clean(now)
            for h in (here, there):  # something new to clean
                put(h.log, "k5", "later")
                roll_past(h.log, "s")
        assert batches(there.log) == batches(here.log)
        assert segment_files(there.log) == segment_files(here.log)
        strip = [{k: v for k, v in e.items() if k != "seconds"} for e in here.events]
        assert [{k: v for k, v in e.items() if k != "seconds"} for e in there.events] == strip
        assert there.cleaner.recopy_percent() == here.cleaner.recopy_percent() > 0
        assert there.cleaner.max_buffer_utilization_percent() == here.cleaner.max_buffer_utilization_percent()
        assert worker_of(there).started == 1


def test_deleting_a_log_kills_the_worker_and_leaves_no_cleaned_files(
    tmp_path: Path, held_swap: HeldSwap
) -> None:
    log = compacted_log(tmp_path)
    latest = fill(log, keys=50, rounds=20)
    with isolated(tmp_path, log) as h:
        with cleaning_in_background(h, held_swap) as cleaned:
            pid = worker_of(h).process.pid  # type: ignore[union-attr]
            aborting = threading.Thread(target=h.cleaner.abort, args=(TP,), kwargs={"forget": True})
            aborting.start()  # returns once the cleaning was dropped
            wait_for(lambda: abort_asked(h), "the abort to be asked")
            held_swap.release.set()
            aborting.join(WAIT_S)
            assert not aborting.is_alive()
            assert not cleaned_files(log) and exited(pid)
        assert not cleaned.is_set() and not h.events
        assert latest_values(log) == latest  # the groups swapped in before the abort stay
        assert h.clean() and latest_values(log) == latest and worker_of(h).started == 2


def test_a_truncation_during_the_cleaning_aborts_it_and_keeps_the_worker(
    tmp_path: Path, held_swap: HeldSwap
) -> None:
    log = compacted_log(tmp_path)
    fill(log, keys=50, rounds=20)
    with isolated(tmp_path, log) as h:
        with cleaning_in_background(h, held_swap) as cleaned:
            log.truncate_to(log.log_end_offset - 1)
        assert not cleaned.is_set() and not h.events  # the swap was refused: the worker aborted it
        assert not list(log.directory.glob("*.cleaned"))
        assert h.clean() and worker_of(h).started == 1


def test_a_worker_killed_mid_cleaning_aborts_it_and_the_next_cleaning_gets_another(
    tmp_path: Path, held_swap: HeldSwap
) -> None:
    log = compacted_log(tmp_path)
    latest = fill(log, keys=50, rounds=20)
    other = log.directory / (file_name(10**9, ".log") + ".cleaned")  # not the plan's: left alone
    other.write_bytes(b"")
    with isolated(tmp_path, log) as h:
        with cleaning_in_background(h, held_swap) as cleaned:
            pid = worker_of(h).process.pid  # type: ignore[union-attr]
            os.kill(pid, signal.SIGKILL)
            wait_for(lambda: exited(pid), "the worker to die")
        assert not cleaned.is_set() and not h.events  # aborted, not marked uncleanable
        assert cleaned_files(log) == [other] and latest_values(log) == latest
        assert h.cleaner.manager.uncleanable_count == 0
        assert h.clean() and latest_values(log) == latest and worker_of(h).started == 2


def test_corrupt_data_found_by_the_worker_marks_the_log_uncleanable(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    fill(log, keys=5, rounds=10)
    first = log.cleaning_view().segments[0].path
    with first.open("r+b") as f:  # a record's bytes (past the batch header): the CRC no longer holds
        f.seek(70)
        f.write(b"\xff\xff\xff\xff")
    with isolated(tmp_path, log) as h:
        assert not h.clean()
        assert [e["kind"] for e in h.events] == ["log_uncleanable"]
        assert "cleaner worker" in h.events[0]["error"]
        assert h.cleaner.manager.uncleanable_count == 1 and worker_of(h).started == 1
        assert not list(log.directory.glob("*.cleaned"))


def test_stopping_the_cleaner_ends_its_workers(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    latest = fill(log, keys=5, rounds=20)
    with isolated(tmp_path, log, backoff_ms=10) as h:
        h.cleaner.start(lambda tp: log.log_end_offset)
        wait_for(lambda: h.cleaner.cleanings, "a cleaning by the thread")
        process = worker_of(h).process
        assert process is not None
        h.cleaner.stop()
        assert process.poll() is not None and exited(process.pid) and worker_of(h).process is None
        assert latest_values(log) == latest


def test_a_worker_exits_when_its_input_closes() -> None:
    worker = spawn_worker()
    assert worker.stdin is not None
    worker.stdin.close()
    assert worker.wait(WAIT_S) == 0


def test_a_worker_exits_when_its_broker_is_killed() -> None:
    stand_in = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\n"
            "from broker.cleaner.worker_client import spawn_worker\n"
            "print(spawn_worker().pid, flush=True)\n"
            "time.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert stand_in.stdout is not None
        pid = int(read_line(stand_in.stdout.fileno()))
        assert not exited(pid)
    finally:
        stand_in.kill()
        stand_in.wait()
    wait_for(lambda: exited(pid), "the orphaned worker to exit")


def read_line(fd: int, timeout: float = WAIT_S) -> bytes:
    """A line from ``fd``, or a failure after ``timeout``: a stuck stand-in cannot hang the suite."""
    deadline = time.monotonic() + timeout
    data = b""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while not data.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"timed out reading a line (so far {data!r})"
            if selector.select(remaining):
                chunk = os.read(fd, 4096)
                assert chunk, f"the stand-in ended its output (so far {data!r})"
                data += chunk
    return data


# -- stopping, and workers that misbehave


STUCK_COPYING = "from broker.log import compaction\ncompaction.Cleaner._copy = lambda *a: time.sleep(600)"
"""A worker that has created its first ``.cleaned`` segment and never gets further."""


def test_stopping_the_cleaner_mid_cleaning_returns_soon_and_leaves_no_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_client, "WORKER_CODE", worker_code(STUCK_COPYING))
    log = compacted_log(tmp_path)
    latest = fill(log, keys=5, rounds=20)
    with isolated(tmp_path, log, backoff_ms=10) as h:
        h.cleaner.start(lambda tp: log.log_end_offset)
        wait_for(lambda: cleaned_files(log), "the worker to start copying")
        process = worker_of(h).process
        assert process is not None
        began = time.monotonic()
        h.cleaner.stop()
        assert time.monotonic() - began < 5.0
        assert process.poll() is not None and exited(process.pid) and worker_of(h).process is None
        assert not cleaned_files(log) and not h.events and h.cleaner.dead_threads() == 0
        assert latest_values(log) == latest


def test_a_cleaning_succeeds_while_the_broker_holds_descriptors_past_1023(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 1500
    if soft != resource.RLIM_INFINITY and soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.skip(f"RLIMIT_NOFILE's hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    held: list[int] = []
    try:
        while not held or held[-1] < 1100:  # every descriptor below 1100 taken: the pipes get higher ones
            held.append(os.open(os.devnull, os.O_RDONLY))
        log = compacted_log(tmp_path)
        latest = fill(log, keys=5, rounds=10)
        with isolated(tmp_path, log) as h:
            assert h.clean() and [e["kind"] for e in h.events] == ["log_cleaned"]
            process = worker_of(h).process
            assert process is not None and process.stdout is not None and process.stdout.fileno() > 1023
            assert latest_values(log) == latest
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_log_whose_cleanings_kill_the_worker_three_times_in_a_row_is_marked_uncleanable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crashing = worker_code("worker._Worker.clean = lambda self, plan, settings: os._exit(9)")
    monkeypatch.setattr(worker_client, "WORKER_CODE", crashing)
    log = compacted_log(tmp_path)
    latest = fill(log, keys=5, rounds=10)
    with isolated(tmp_path, log) as h:
        for _ in range(2):
            assert not h.clean()
            assert not h.events and h.cleaner.manager.uncleanable_count == 0
        assert not h.clean()
        assert [e["kind"] for e in h.events] == ["log_uncleanable"]
        assert "killed the cleaner worker 3 times in a row" in h.events[0]["error"]
        assert h.cleaner.manager.uncleanable_count == 1 and worker_of(h).started == 3
        assert not h.clean() and worker_of(h).started == 3  # not chosen again
        assert not cleaned_files(log) and latest_values(log) == latest


def test_a_cleaning_that_completes_resets_the_count_of_worker_deaths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crashing = worker_code("worker._Worker.clean = lambda self, plan, settings: os._exit(9)")
    log = compacted_log(tmp_path, min_cleanable_ratio=0.0)
    fill(log, keys=5, rounds=10)
    with isolated(tmp_path, log) as h:
        healthy = worker_client.WORKER_CODE
        for code in (crashing, crashing, healthy, crashing, crashing):
            monkeypatch.setattr(worker_client, "WORKER_CODE", code)
            cleaned = h.clean()
            assert cleaned == (code == healthy)
            if cleaned:
                worker_of(h).close()  # the next cleaning starts a worker of the next code
                put(log, "k1", "later")
                roll_past(log, "s")
        assert h.cleaner.manager.uncleanable_count == 0
        assert [e["kind"] for e in h.events] == ["log_cleaned"]


def test_workers_that_cannot_start_leave_the_thread_cleaning_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(worker_client, "WORKER_CODE", "import sys\nsys.exit(3)\n")
    log = compacted_log(tmp_path)
    latest = fill(log, keys=5, rounds=10)
    with isolated(tmp_path, log) as h:
        for failures in (1, 2):
            assert not h.clean() and h.cleaner.threads[0].start_failures == failures
            assert isinstance(h.cleaner.threads[0].cleaner, CleanerWorker)
        assert not h.clean()
        assert not h.events and h.cleaner.manager.uncleanable_count == 0
        assert isinstance(h.cleaner.threads[0].cleaner, Cleaner)
        errors = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 1 and "cleans in the broker's process" in errors[0].getMessage()
        assert h.clean() and latest_values(log) == latest
        assert [e["kind"] for e in h.events] == ["log_cleaned"]


def test_a_worker_that_cannot_be_spawned_drops_the_cleaning_not_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def shut_down() -> None:
        raise RuntimeError("cannot schedule new futures after interpreter shutdown")

    monkeypatch.setattr(worker_client, "spawn_worker", shut_down)
    log = compacted_log(tmp_path)
    fill(log, keys=5, rounds=10)
    with isolated(tmp_path, log) as h:
        assert not h.clean()
        assert not h.events and h.cleaner.manager.uncleanable_count == 0
        assert h.cleaner.threads[0].start_failures == 1


def test_a_worker_that_sends_garbage_is_killed_and_the_log_kept_cleanable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    garbage = worker_code(
        "worker._Worker.clean = lambda self, plan, settings: "
        "(self.out.write(b'\\0\\0\\0\\5junk!'), self.out.flush(), time.sleep(600))"
    )
    monkeypatch.setattr(worker_client, "WORKER_CODE", garbage)
    log = compacted_log(tmp_path)
    fill(log, keys=5, rounds=10)
    with isolated(tmp_path, log) as h:
        assert not h.clean()
        assert not h.events and h.cleaner.manager.uncleanable_count == 0
        assert worker_of(h).process is None and worker_of(h).started == 1


def test_a_worker_that_stopped_reading_cannot_hold_an_abort(monkeypatch: pytest.MonkeyPatch) -> None:
    not_reading = worker_code("worker.read_message = lambda inp: time.sleep(600)")
    monkeypatch.setattr(worker_client, "WORKER_CODE", not_reading)
    deadline = [float("inf")]

    def check_done() -> None:
        if time.monotonic() > deadline[0]:
            raise CleaningAborted("enough")

    client = CleanerWorker(worker_client.WorkerSettings(1 << 20, 0.9, 4096, float("inf")), check_done)
    process = client._running()
    try:
        deadline[0] = time.monotonic() + 0.3
        with pytest.raises(CleaningAborted, match="enough"):
            client._send(process, b"x" * (8 << 20))  # far more than a pipe holds
        assert time.monotonic() - deadline[0] < 5.0
    finally:
        client._kill(process)


def test_a_silent_worker_is_logged_and_still_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(worker_client, "WORKER_CODE", worker_code(STUCK_COPYING))
    monkeypatch.setattr(worker_client, "SILENT_WARNING_S", 0.2)
    log = compacted_log(tmp_path)
    fill(log, keys=5, rounds=10)
    with isolated(tmp_path, log) as h:
        thread = threading.Thread(target=h.clean)
        thread.start()
        wait_for(lambda: "still waiting for its answer" in caplog.text, "the warning of a silent worker")
        assert thread.is_alive()
        h.cleaner.abort(TP)
        thread.join(WAIT_S)
        assert not thread.is_alive() and not h.events and not cleaned_files(log)
