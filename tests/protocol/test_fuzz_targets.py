"""The atheris fuzz targets: every crasher ever found is replayed (it must now be refused cleanly),
and a short coverage-guided run of every target (``make fuzz`` runs longer) finds nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.targets import TARGETS

REPO = Path(__file__).resolve().parents[2]
CRASHERS = REPO / "fuzz" / "crashers"


def test_every_crasher_found_is_now_refused_cleanly() -> None:
    """``fuzz/crashers/<target>-crash-<hash>``: what libFuzzer saved, kept once the bug was fixed."""
    for crasher in sorted(p for p in CRASHERS.glob("*-*") if p.is_file()):
        TARGETS[crasher.name.split("-", 1)[0]](crasher.read_bytes())


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_each_target_takes_empty_and_short_inputs(name: str) -> None:
    for data in (b"", b"\x00", b"\xff" * 7, bytes(range(64))):
        TARGETS[name](data)


def test_a_short_fuzzing_run_finds_no_crasher(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fuzz", "--seconds", "8", "--corpus", str(tmp_path / "corpus"),
         "--crashers", str(tmp_path / "crashers")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert not list((tmp_path / "crashers").iterdir())
    assert done.stdout.count("exit 0") == len(TARGETS)
