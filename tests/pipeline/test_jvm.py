"""The audit JVM's launch settings, and a class-data archive recorded by a real JVM, mapped by the next."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pipeline import jvm

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def archive_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(jvm, "ARCHIVE_DIR", tmp_path / "cds")
    monkeypatch.setattr(jvm, "_recording", None)
    return tmp_path / "cds"


def options(settings: dict[str, str]) -> list[str]:
    return settings.get("spark.driver.extraJavaOptions", "").split()


def test_small_input_gets_the_quick_compiler_and_the_default_heap(archive_dir: Path) -> None:
    settings = jvm.settings_for(1024)
    assert settings["spark.driver.memory"] == "1g"
    assert options(settings) == [jvm.THROUGHPUT_GC, jvm.QUICK_JIT]


def test_a_lasting_jvm_keeps_c2_whatever_its_input(archive_dir: Path) -> None:
    assert options(jvm.settings_for(1024, lasting=True)) == [jvm.THROUGHPUT_GC]


def test_large_input_gets_the_large_heap_and_keeps_c2(archive_dir: Path) -> None:
    settings = jvm.settings_for(jvm.SMALL_INPUT_BYTES)
    assert settings["spark.driver.memory"] == jvm.LARGE_HEAP
    assert options(settings) == [jvm.THROUGHPUT_GC]


def test_an_archive_is_recorded_only_when_asked_and_mapped_once_there(archive_dir: Path) -> None:
    assert not any("Archive" in o for o in options(jvm.settings_for(0)))
    recording = options(jvm.settings_for(0, record=True))
    archive = jvm.archive_path()
    assert archive is not None and archive.parent == archive_dir
    assert f"-XX:ArchiveClassesAtExit={archive}.{os.getpid()}.tmp" in recording
    archive.write_bytes(b"archive")
    assert options(jvm.settings_for(0, record=True))[-1] == f"-XX:SharedArchiveFile={archive}"


def test_stale_archives_and_scratch_files_of_gone_recorders_are_removed(archive_dir: Path) -> None:
    archive = jvm.archive_path()
    assert archive is not None
    archive_dir.mkdir()
    gone = archive.with_name(f"{archive.name}.999999999.tmp")
    live = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
    older = archive_dir / "spark-3.5.0-000000000000.jsa"
    for path in (gone, live, older):
        path.write_bytes(b"x")
    jvm.settings_for(0, record=True)
    assert not gone.exists() and live.exists() and not older.exists()


def test_a_recording_that_failed_is_not_tried_again(archive_dir: Path) -> None:
    """Recording costs an audit about 20 s: after a failure, later audits run without an archive."""
    archive = jvm.archive_path()
    assert archive is not None
    archive_dir.mkdir()
    archive.with_name(archive.name + ".failed").write_text("no JVM starts with the recorded archive\n")
    assert options(jvm.settings_for(0, record=True)) == [jvm.THROUGHPUT_GC, jvm.QUICK_JIT]


RECORD_THEN_MAP = """
import sys
from pathlib import Path
from pipeline import jvm
from pipeline.session import local_session
jvm.ARCHIVE_DIR = Path(sys.argv[1])
spark = local_session("jvm-test", jvm_log=Path(sys.argv[1]) / "spark.log", record=True)
assert spark.range(100).filter("id % 7 = 0").count() == 15
jvm.finish(spark)
print(jvm.archive_path())
"""


def test_a_real_jvm_records_the_archive_and_the_next_one_maps_it(tmp_path: Path) -> None:
    """The first JVM records as it exits (``finish`` ends it through PySpark's private gateway
    fields, which this would catch changing); the second loads Spark's classes from the archive."""
    script = textwrap.dedent(RECORD_THEN_MAP)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    first = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], env=env, capture_output=True, text=True, timeout=300
    )
    assert first.returncode == 0, first.stderr
    archive = Path(first.stdout.split()[-1])
    assert archive.is_file() and archive.stat().st_size > 1_000_000
    assert not list(tmp_path.glob("*.tmp"))
    assert jvm.sound(archive)
    cut = tmp_path / "cut.jsa"  # a JVM given a truncated archive dies of SIGBUS: never put one in place
    with archive.open("rb") as f:
        cut.write_bytes(f.read(archive.stat().st_size // 3))
    assert not jvm.sound(cut)
    loads = tmp_path / "class-load.log"
    env["JAVA_TOOL_OPTIONS"] = f"-Xlog:class+load=info:file={loads}"
    second = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], env=env, capture_output=True, text=True, timeout=300
    )
    assert second.returncode == 0, second.stderr
    shared = [line for line in loads.read_text().splitlines() if "org.apache.spark.sql" in line]
    assert shared and all("shared objects file (top)" in line for line in shared[:50]), shared[:3]
