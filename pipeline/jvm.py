"""The local audit JVM's launch settings: its heap, collector and compiler, and a class-data archive.

A small directory's audit lives about twenty seconds, and a cold JVM spends much of that loading and
linking Spark's classes and compiling them. The settings:

* **the heap** (:func:`heap_for`) and **the throughput collector** (``THROUGHPUT_GC``): the audit is a
  batch job;
* **the quick compiler** (``QUICK_JIT``) for small input: C1 only, so that C2's optimising compiles do
  not compete with the work for the two cores;
* **a class-data archive** (JDK CDS, ``-XX:SharedArchiveFile``): the classes the audit loaded, already
  parsed and linked, mapped at start. The first audit on a machine records them
  (``-XX:ArchiveClassesAtExit``) into a file of its own, and :func:`finish` renames it into place
  once that JVM has exited and another has started with it (:func:`sound`); later JVMs map it. The
  archive is named after the Spark and the ``java`` it was made with, so a new one of either makes a
  new archive; a JVM that cannot use one runs without it.

A JVM that ``spark-submit`` started (a standalone cluster's driver) is left with what it was given.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("pipeline.jvm")

SMALL_INPUT_BYTES = 64 * 1024 * 1024
"""Logs below this (a local cluster's, a few chaos runs) are audited in a few hundred small jobs."""
LARGE_HEAP = "4g"
"""The local JVM's heap (its executors' too) for large input. Spark's 1 GB held ten million history
rows only by spilling their groupings to disk and collecting garbage for a fifth of the time: 3 GB
took a third off that audit. A large audit's caches are not compressed (``pipeline.session.LARGE``),
and ten million history rows take 1.4 GB of them: 4 GB leaves the groupings room beside them. Small
input keeps Spark's default, and the memory it leaves free."""
QUICK_JIT = "-XX:TieredStopAtLevel=1"
"""A small audit's JVM compiles with C1 only: a small directory's audit took 22 s instead of 29
(session included), its floor 0.7 s less. A large audit keeps C2, whose code pays back over minutes."""
THROUGHPUT_GC = "-XX:+UseParallelGC"
"""The audit is a batch job: the parallel collector's pauses cost it less than G1's barriers and
concurrent work. Ten million history rows took 71 s of audit instead of 78 (task time 127 s against
140, on two cores)."""
ARCHIVE_DIR = Path(__file__).resolve().parents[1] / ".run" / "spark-cds"
WAIT_FOR_EXIT_S = 120.0
"""How long :func:`finish` waits for a recording JVM to write its archive and exit."""

_recording: tuple[Path, Path] | None = None
"""(the file a JVM this process started records into, the archive it becomes), until :func:`finish`."""


def running() -> bool:
    """Whether this process has a JVM already (a stopped session leaves it to the next one)."""
    from pyspark import SparkContext

    return SparkContext._gateway is not None  # noqa: SLF001


def heap_for(input_bytes: int) -> str:
    """``spark.driver.memory`` for an audit of ``input_bytes``."""
    return "1g" if input_bytes < SMALL_INPUT_BYTES else LARGE_HEAP


def java() -> Path | None:
    """The ``java`` Spark starts (``$JAVA_HOME/bin/java``, else the one on the path), resolved."""
    java_home = os.environ.get("JAVA_HOME")
    found = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    return Path(found).resolve() if found else None


def archive_path() -> Path | None:
    """The archive for this Spark and this ``java`` (None if no ``java`` is found)."""
    import pyspark

    real = java()
    try:
        stat = real.stat() if real is not None else None
    except OSError:
        stat = None
    if stat is None:
        return None
    key = hashlib.sha256(f"{real}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    return ARCHIVE_DIR / f"spark-{pyspark.__version__}-{key}.jsa"


def sound(archive: Path) -> bool:
    """Whether a JVM starts with ``archive`` mapped. A JVM maps the file's regions as its header
    says, so a cut one (a dump that failed half-way) would crash every later audit with SIGBUS; one
    that is whole but does not fit (another class path) only goes unused."""
    real = java()
    if real is None:
        return False
    try:
        done = subprocess.run(
            # A crash's hs_err report would land in the working directory: the exit status says enough.
            [str(real), f"-XX:SharedArchiveFile={archive}", f"-XX:ErrorFile={os.devnull}", "-version"],
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def settings_for(input_bytes: int, *, record: bool = False, lasting: bool = False) -> dict[str, str]:
    """The Spark settings of a local JVM started for an audit of ``input_bytes``: its heap and
    collector, for small input the quick compiler (not for a ``lasting`` JVM, which runs many audits:
    the tests' pipeline suite took 106 s with C2 and 130 s without), and the class-data archive; with
    ``record`` and no archive yet, this JVM records one (call :func:`finish` after stopping its
    session)."""
    global _recording
    quick = input_bytes < SMALL_INPUT_BYTES and not lasting
    options = [THROUGHPUT_GC, *([QUICK_JIT] if quick else [])]
    archive = archive_path()
    if archive is not None and archive.is_file():
        options.append(f"-XX:SharedArchiveFile={archive}")
    elif archive is not None and record and not _failed(archive).exists() and _prepare(archive):
        scratch = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
        options.append(f"-XX:ArchiveClassesAtExit={scratch}")
        _recording = (scratch, archive)
    return {"spark.driver.memory": heap_for(input_bytes), "spark.driver.extraJavaOptions": " ".join(options)}


def _prepare(archive: Path) -> bool:
    """The archive's directory exists, without the archives of another Spark or ``java`` (170 MB
    each), nor the scratch files of recording JVMs that are gone."""
    try:
        archive.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.debug("no class-data archive: %s", exc)
        return False
    for stale in archive.parent.glob("*.jsa"):
        if stale.name != archive.name:
            stale.unlink(missing_ok=True)
    for scratch in archive.parent.glob(f"{archive.name}.*.tmp"):
        pid = scratch.name.removeprefix(f"{archive.name}.").removesuffix(".tmp")
        if not pid.isdigit() or not Path(f"/proc/{pid}").exists():
            scratch.unlink(missing_ok=True)
    return True


def _failed(archive: Path) -> Path:
    """Left when recording ``archive`` failed, so that later audits do not pay for trying again
    (delete it, or the directory, to try again)."""
    return archive.with_name(archive.name + ".failed")


def finish(spark: SparkSession) -> None:
    """Stop ``spark``; if its JVM is recording an archive, let it exit (it writes the archive as it
    does) and put the archive in place. A later session in this process starts a new JVM. Nothing
    here raises: the archive only saves time."""
    global _recording
    spark.stop()
    if _recording is None:
        return
    scratch, archive = _recording
    _recording = None
    try:
        why = _end_recording(scratch, archive)
    except OSError as exc:
        why = str(exc)
    if why is None:
        log.info("class-data archive written: %s", archive)
        return
    log.info("class-data archive not written: %s", why)  # an audit's stderr stays its own
    with contextlib.suppress(OSError):
        scratch.unlink(missing_ok=True)
        _failed(archive).write_text(why + "\n")


def _end_recording(scratch: Path, archive: Path) -> str | None:
    """End the recording JVM and put its archive in place; None if done, else why not."""
    from pyspark import SparkContext

    # PySpark keeps its JVM's gateway, and the process, in private class fields: no API ends the JVM.
    gateway = SparkContext._gateway  # noqa: SLF001
    proc = getattr(gateway, "proc", None)
    if gateway is None or proc is None or proc.stdin is None:
        return "the JVM was not started here"
    gateway.shutdown()
    SparkContext._gateway = SparkContext._jvm = None  # noqa: SLF001
    proc.stdin.close()  # Spark's gateway exits on end of input, and the JVM records as it exits
    try:
        proc.wait(timeout=WAIT_FOR_EXIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return f"the JVM had not exited after {WAIT_FOR_EXIT_S:.0f} s"
    if proc.returncode != 0:
        return f"the recording JVM exited {proc.returncode}"
    if not scratch.is_file() or not sound(scratch):
        return "no JVM starts with the recorded archive"
    os.replace(scratch, archive)
    return None
