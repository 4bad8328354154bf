"""Kafka's own command-line tools and single-file Java programs, run from the resolved jars.

Kafka's scripts (``kafka-topics.sh`` and the rest) are ``kafka-run-class.sh <main class>``; this module
knows those main classes for each client version, so a tool runs as ``java -cp <jars> <main class>``
without a Kafka distribution. Kafka 3.9 still has three tools in Scala in ``kafka_2.13``
(``kafka.admin.ConfigCommand``, ``kafka.admin.AclCommand``, ``kafka.tools.ConsoleProducer``); 4.x moved
them to ``org.apache.kafka.tools`` in ``kafka-tools``, where every other tool already was in 3.9.
A program (``Program.java``) runs compiled by :func:`compiled` (once per version and source, kept under
``.run/kafka/programs/``), or in Java's single-file source mode, compiled in memory at each start,
where there is no ``javac``.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from kafkapeer.jars import BROKER, CACHE, KAFKA_39, KAFKA_NEWEST, NEWEST_CLIENTS, ArtifactSet, classpath

__all__ = [
    "JVM_OPTS",
    "MAIN_CLASSES",
    "TOOLS_LOG4J",
    "VERSIONS",
    "JavaMissing",
    "ProgramError",
    "compiled",
    "java_command",
    "main_class",
]

VERSIONS: dict[str, ArtifactSet] = {
    ".".join(KAFKA_39.split(".")[:2]): BROKER,
    ".".join(KAFKA_NEWEST.split(".")[:2]): NEWEST_CLIENTS,
}
"""The client versions tested (``3.9``, ``4.4``: major.minor of ``kafkapeer.jars``' releases), and the jar
set each one runs from."""

JVM_OPTS = ("-Xms32m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
"""Short-lived client JVMs: the C1 compiler and the serial collector start fastest."""

_TOOLS = "org.apache.kafka.tools"
MAIN_CLASSES: dict[str, tuple[str, str]] = {
    "kafka-topics": (f"{_TOOLS}.TopicCommand", f"{_TOOLS}.TopicCommand"),
    "kafka-configs": ("kafka.admin.ConfigCommand", f"{_TOOLS}.ConfigCommand"),
    "kafka-acls": ("kafka.admin.AclCommand", f"{_TOOLS}.AclCommand"),
    "kafka-console-producer": ("kafka.tools.ConsoleProducer", f"{_TOOLS}.ConsoleProducer"),
    "kafka-console-consumer": (f"{_TOOLS}.consumer.ConsoleConsumer", f"{_TOOLS}.consumer.ConsoleConsumer"),
    "kafka-consumer-groups": (
        f"{_TOOLS}.consumer.group.ConsumerGroupCommand",
        f"{_TOOLS}.consumer.group.ConsumerGroupCommand",
    ),
    "kafka-reassign-partitions": (
        f"{_TOOLS}.reassign.ReassignPartitionsCommand",
        f"{_TOOLS}.reassign.ReassignPartitionsCommand",
    ),
    "kafka-leader-election": (f"{_TOOLS}.LeaderElectionCommand", f"{_TOOLS}.LeaderElectionCommand"),
    "kafka-log-dirs": (f"{_TOOLS}.LogDirsCommand", f"{_TOOLS}.LogDirsCommand"),
    "kafka-verifiable-producer": (f"{_TOOLS}.VerifiableProducer", f"{_TOOLS}.VerifiableProducer"),
    "kafka-verifiable-consumer": (f"{_TOOLS}.VerifiableConsumer", f"{_TOOLS}.VerifiableConsumer"),
    "kafka-producer-perf-test": (f"{_TOOLS}.ProducerPerformance", f"{_TOOLS}.ProducerPerformance"),
    "kafka-consumer-perf-test": (f"{_TOOLS}.ConsumerPerformance", f"{_TOOLS}.ConsumerPerformance"),
    "kafka-delete-records": (f"{_TOOLS}.DeleteRecordsCommand", f"{_TOOLS}.DeleteRecordsCommand"),
}
"""Each script's main class: (Kafka 3.9, Kafka 4.x)."""

TOOLS_LOG4J = """\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.stderr.Target=System.err
"""
"""Kafka's ``tools-log4j.properties``: warnings and errors on stderr, for the 3.9 set (reload4j). The 4.x
set logs through slf4j-simple, to stderr too, told the same level by a system property."""
SIMPLE_LOGGER_LEVEL = "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"


PROGRAMS_CACHE = CACHE / "programs"
"""Compiled programs, one directory per version and digest of their sources."""
_compiling = threading.Lock()


class JavaMissing(RuntimeError):
    """No ``java`` on the PATH."""


class ProgramError(RuntimeError):
    """A program did not compile against a version's jars."""


def main_class(script: str, version: str) -> str:
    """The main class Kafka's ``<script>.sh`` runs in ``version`` (a key of :data:`VERSIONS`)."""
    if version not in VERSIONS:
        raise KeyError(f"unknown Kafka version {version}: one of {', '.join(VERSIONS)}")
    before_4, from_4 = MAIN_CLASSES[script]
    return before_4 if version.startswith("3.") else from_4


def java_command(
    version: str,
    main: str | Path,
    args: Sequence[str] = (),
    *,
    log_config: Path | None = None,
    classes: Path | None = None,
) -> list[str]:
    """``java`` running ``main`` (a main class, or a ``.java`` source file) on ``version``'s jars, and
    ``classes`` (a directory) before them; with ``log_config`` (:data:`TOOLS_LOG4J` written to a file),
    logging warnings and errors only.

    Raises :class:`kafkapeer.jars.JarsMissing` when the set is not resolved, :class:`JavaMissing` when
    there is no ``java``."""
    java = shutil.which("java")
    if java is None:
        raise JavaMissing("java not found: Kafka's tools need a JDK (make java)")
    logging = (
        [f"-Dlog4j.configuration=file:{log_config}", SIMPLE_LOGGER_LEVEL] if log_config is not None else []
    )
    jars = classpath(VERSIONS[version])
    path = f"{classes}:{jars}" if classes is not None else jars
    return [java, *JVM_OPTS, *logging, "-cp", path, str(main), *args]


def compiled(version: str, sources: Sequence[Path], *, timeout_s: float = 300.0) -> Path | None:
    """The classes of ``sources`` compiled against ``version``'s jars, in a directory made once and kept
    (named by a digest of the sources); None without ``javac``. Safe across threads and processes: each
    compiles into a scratch directory, and the first to rename it into place wins."""
    javac = shutil.which("javac")
    if javac is None:
        return None
    jars = classpath(VERSIONS[version])
    digest = hashlib.sha256()
    for source in sorted(sources):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    target = PROGRAMS_CACHE / f"{VERSIONS[version].name}-{digest.hexdigest()[:16]}"
    with _compiling:
        if target.is_dir():
            return target
        PROGRAMS_CACHE.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(dir=PROGRAMS_CACHE, prefix=".compiling-"))
        command = [
            javac,
            "-nowarn",
            "-encoding",
            "UTF-8",
            "-d",
            str(scratch),
            "-cp",
            jars,
            *map(str, sources),
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        if result.returncode != 0:
            shutil.rmtree(scratch, ignore_errors=True)
            raise ProgramError(f"javac failed for Kafka {version}:\n{result.stdout}{result.stderr}"[-4000:])
        try:
            scratch.rename(target)
        except OSError:  # another process put it there first
            shutil.rmtree(scratch, ignore_errors=True)
        return target
