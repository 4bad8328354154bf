"""Swapping cleaned segments in: a crash at any step leaves the old segments or the new when the log
is opened again, and readers on other threads never see a torn log while cleanings swap."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from broker.log import Log
from broker.log.swap import CLEANED_SUFFIX, SWAP_SUFFIX
from tests.broker.cleaner_builders import (
    Seen,
    compacted_log,
    fill,
    harness,
    latest_values,
    records,
    roll_past,
    with_segment_bytes,
)

FIRST = "00000000000000000000"


def cleaned_once(tmp_path: Path) -> tuple[Path, Path, list[Seen], list[Seen]]:
    """A log directory before and after one cleaning that merged its inactive segments into one,
    and what a reader saw in each."""
    log = compacted_log(tmp_path / "after")
    fill(log, keys=6, rounds=10)
    roll_past(log, "tail")
    with_segment_bytes(log, 1 << 20)
    before_dir = tmp_path / "before"
    shutil.copytree(log.directory, before_dir)
    before = records(log)
    assert harness(tmp_path / "after", log).clean()
    after = records(log)
    log.flush()
    log.close()
    return before_dir, log.directory, before, after


def crashed(tmp_path: Path, name: str, base: Path) -> Path:
    directory = tmp_path / name / "compacted-0"
    shutil.copytree(base, directory)
    return directory


def reopen(directory: Path) -> Log:
    return compacted_log(directory.parent)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.suffix in (CLEANED_SUFFIX, SWAP_SUFFIX))


def cleaned_files(after: Path) -> list[Path]:
    return sorted(after.glob(f"{FIRST}.*"))


def test_a_crash_before_the_swap_began_keeps_the_old_segments(tmp_path: Path) -> None:
    before, after, seen_before, _ = cleaned_once(tmp_path)
    directory = crashed(tmp_path, "cleaned", before)
    for path in cleaned_files(after):
        shutil.copy(path, directory / (path.name + CLEANED_SUFFIX))
    log = reopen(directory)
    assert records(log) == seen_before and not leftovers(directory)


def test_a_crash_while_renaming_to_swap_keeps_the_old_segments(tmp_path: Path) -> None:
    before, after, seen_before, _ = cleaned_once(tmp_path)
    directory = crashed(tmp_path, "renaming", before)
    for path in cleaned_files(after):  # the indexes renamed, the log not yet
        suffix = CLEANED_SUFFIX if path.suffix == ".log" else SWAP_SUFFIX
        shutil.copy(path, directory / (path.name + suffix))
    log = reopen(directory)
    assert records(log) == seen_before and not leftovers(directory)


def test_a_crash_after_the_swap_began_completes_it(tmp_path: Path) -> None:
    before, after, _, seen_after = cleaned_once(tmp_path)
    directory = crashed(tmp_path, "swapping", before)
    for path in cleaned_files(after):
        shutil.copy(path, directory / (path.name + SWAP_SUFFIX))
    log = reopen(directory)
    assert records(log) == seen_after and not leftovers(directory)
    assert sorted(p.name for p in directory.glob("*.log")) == sorted(p.name for p in after.glob("*.log"))


def test_a_crash_between_the_log_and_index_renames_completes_it(tmp_path: Path) -> None:
    before, after, _, seen_after = cleaned_once(tmp_path)
    directory = crashed(tmp_path, "finishing", after)
    for path in cleaned_files(after):
        if path.suffix != ".log":  # the new index waits as .swap; the old one is still in place
            (directory / path.name).rename(directory / (path.name + SWAP_SUFFIX))
            shutil.copy(before / path.name, directory / path.name)
    log = reopen(directory)
    assert records(log) == seen_after and not leftovers(directory)
    assert (directory / f"{FIRST}.index").read_bytes() == (after / f"{FIRST}.index").read_bytes()


@pytest.mark.timeout(120)
def test_readers_never_see_a_torn_log_while_cleanings_swap(tmp_path: Path) -> None:
    log = compacted_log(tmp_path, min_cleanable_ratio=0.0)
    published = {"latest": fill(log, keys=20, rounds=15)}
    """Each key's latest value, replaced whole once the writes behind it are in the log."""
    h = harness(tmp_path, log)
    stop = threading.Event()
    problems: list[str] = []
    reads = [0]

    def read_forever() -> None:
        while not stop.is_set():
            latest = published["latest"]
            try:
                seen = records(log)  # CRCs checked; offsets must only go up
                offsets = [s.offset for s in seen]
                if offsets != sorted(set(offsets)):
                    problems.append(f"offsets out of order: {offsets}")
                values = {s.key.decode(): s.value.decode() for s in seen if s.key and s.value}
                if any(values.get(k) != v for k, v in latest.items()):
                    problems.append("a latest value went missing")
                reads[0] += 1
                time.sleep(0.001)  # let the cleaner have the GIL between whole-log reads
            except Exception as exc:
                problems.append(repr(exc))

    readers = [threading.Thread(target=read_forever) for _ in range(2)]
    for reader in readers:
        reader.start()
    try:
        for round_ in range(4):
            roll_past(log, f"r{round_}-")
            published["latest"] = {**published["latest"], **{f"r{round_}-{i}": "filler" for i in range(14)}}
            h.clean()
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    assert not problems, problems[:3]
    assert reads[0] > 0 and latest_values(log) == published["latest"]
