"""The log cleaner's worker processes: a cleaning there writes the log a cleaning in the broker writes;
aborting it (the log deleted or cut, the cleaner stopping) or losing the worker leaves the log whole
and no ``.cleaned`` file, and the next cleaning gets a new worker; a worker never outlives the broker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from broker.cleaner.worker_client import CleanerWorker, spawn_worker
from broker.log import Log
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
SLOW_IO = 40_000.0
"""log.cleaner.io.max.bytes.per.second for a cleaning that lasts seconds: time to interfere."""


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


@contextmanager
def cleaning_in_background(h: Harness) -> Iterator[threading.Event]:
    """``h.clean()`` in a thread; the event is set when it returned True."""
    cleaned = threading.Event()
    thread = threading.Thread(target=lambda: h.clean() and cleaned.set())
    thread.start()
    try:
        wait_for(lambda: list(h.log.directory.glob("*.cleaned")), "the worker to write a .cleaned segment")
        yield cleaned
    finally:
        thread.join(WAIT_S)
        assert not thread.is_alive()


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


def test_deleting_a_log_kills_the_worker_and_leaves_no_cleaned_files(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    latest = fill(log, keys=50, rounds=20)
    with isolated(tmp_path, log, io_max_bytes_per_second=SLOW_IO) as h:
        with cleaning_in_background(h) as cleaned:
            pid = worker_of(h).process.pid  # type: ignore[union-attr]
            h.cleaner.abort(TP, forget=True)  # returns once the cleaning was dropped
            assert not list(log.directory.glob("*.cleaned")) and exited(pid)
        assert not cleaned.is_set() and not h.events
        assert latest_values(log) == latest  # the groups swapped in before the abort stay
        assert h.clean() and latest_values(log) == latest and worker_of(h).started == 2


def test_a_truncation_during_the_cleaning_aborts_it_and_keeps_the_worker(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    fill(log, keys=50, rounds=20)
    with isolated(tmp_path, log, io_max_bytes_per_second=SLOW_IO) as h:
        with cleaning_in_background(h) as cleaned:
            log.truncate_to(log.log_end_offset - 1)
        assert not cleaned.is_set() and not h.events  # the swap was refused: the worker aborted it
        assert not list(log.directory.glob("*.cleaned"))
        assert h.clean() and worker_of(h).started == 1


def test_a_worker_killed_mid_cleaning_aborts_it_and_the_next_cleaning_gets_another(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    latest = fill(log, keys=50, rounds=20)
    with isolated(tmp_path, log, io_max_bytes_per_second=SLOW_IO) as h:
        with cleaning_in_background(h) as cleaned:
            os.kill(worker_of(h).process.pid, signal.SIGKILL)  # type: ignore[union-attr]
        assert not cleaned.is_set() and not h.events  # aborted, not marked uncleanable
        assert not list(log.directory.glob("*.cleaned")) and latest_values(log) == latest
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
        pid = int(stand_in.stdout.readline())
        assert not exited(pid)
    finally:
        stand_in.kill()
        stand_in.wait()
    wait_for(lambda: exited(pid), "the orphaned worker to exit")
