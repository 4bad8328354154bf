"""Kafka's jars from Maven Central: which artifacts make each set, resolving them once, class paths.

Each set is resolved with Maven into its own directory under ``.run/kafka/`` from a pom written here,
so the only place jars come from is the registry, and a second call costs nothing. A set is complete
when its marker file names the same artifacts: changing a version below resolves again.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BROKER",
    "CACHE",
    "JMX_EXPORTER",
    "NEWEST_CLIENTS",
    "SETS",
    "ArtifactSet",
    "JarsMissing",
    "agent_jar",
    "classpath",
    "resolve",
]

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".run" / "kafka"
"""Where the sets live, one directory each."""

KAFKA_39 = "3.9.2"
"""The last release line with ZooKeeper mode."""
KAFKA_NEWEST = "4.4.0"
"""The newest 4.x clients (4.0 dropped old protocol versions, KIP-896)."""
JMX_EXPORTER_VERSION = "1.0.1"
"""The Prometheus JMX exporter's newest version Maven Central serves here."""


@dataclass(frozen=True, slots=True)
class ArtifactSet:
    """Maven coordinates (``group:artifact:version``) resolved together into one directory."""

    name: str
    artifacts: tuple[str, ...]

    @property
    def directory(self) -> Path:
        return CACHE / self.name

    @property
    def marker(self) -> Path:
        return self.directory / "resolved.txt"

    def pom(self) -> str:
        entry = "<groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version>"
        dependencies = "\n".join(
            f"    <dependency>{entry.format(*item.split(':'))}</dependency>" for item in self.artifacts
        )
        return (
            '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
            "  <modelVersion>4.0.0</modelVersion>\n"
            f"  <groupId>local.kafkapeer</groupId><artifactId>{self.name}</artifactId><version>1</version>\n"
            "  <packaging>pom</packaging>\n"
            f"  <dependencies>\n{dependencies}\n  </dependencies>\n"
            "</project>\n"
        )


BROKER = ArtifactSet(
    f"kafka-{KAFKA_39}",
    (
        f"org.apache.kafka:kafka_2.13:{KAFKA_39}",
        f"org.apache.kafka:kafka-tools:{KAFKA_39}",
        f"org.apache.kafka:kafka-streams:{KAFKA_39}",
        # Kafka 3.9 logs through slf4j 1.7 and ships no binding in its Maven artifacts.
        "org.slf4j:slf4j-reload4j:1.7.36",
    ),
)
"""Kafka 3.9's broker (``kafka.Kafka``), its clients, command-line tools and Streams."""

NEWEST_CLIENTS = ArtifactSet(
    f"clients-{KAFKA_NEWEST}",
    (
        f"org.apache.kafka:kafka-clients:{KAFKA_NEWEST}",
        f"org.apache.kafka:kafka-tools:{KAFKA_NEWEST}",
        f"org.apache.kafka:kafka-streams:{KAFKA_NEWEST}",
        "org.slf4j:slf4j-api:2.0.17",
        "org.slf4j:slf4j-simple:2.0.17",
    ),
)
"""The newest 4.x clients, tools and Streams (no broker: 4.x has no ZooKeeper mode)."""

JMX_EXPORTER = ArtifactSet(
    f"jmx-exporter-{JMX_EXPORTER_VERSION}",
    (f"io.prometheus.jmx:jmx_prometheus_javaagent:{JMX_EXPORTER_VERSION}",),
)
"""The Prometheus JMX exporter's Java agent (one shaded jar), which serves a Kafka broker's MBeans at
``/metrics`` (``kafkapeer.jmx_exporter``; tests/interop/test_metric_names.py)."""

SETS = (BROKER, NEWEST_CLIENTS, JMX_EXPORTER)


class JarsMissing(RuntimeError):
    """A set could not be resolved (no Maven, no registry) or has not been resolved yet."""


def _wanted(artifact_set: ArtifactSet) -> str:
    return "\n".join(artifact_set.artifacts) + "\n"


def resolve(artifact_set: ArtifactSet, *, timeout_s: float = 900.0) -> Path:
    """The set's jar directory, resolving it with Maven first unless its marker says it is there."""
    if artifact_set.marker.exists() and artifact_set.marker.read_text() == _wanted(artifact_set):
        return artifact_set.directory
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarsMissing("mvn not found: install Maven (apt-get install maven) to resolve Kafka's jars")
    if artifact_set.directory.exists():
        shutil.rmtree(artifact_set.directory)
    artifact_set.directory.mkdir(parents=True)
    pom = artifact_set.directory / "pom.xml"
    pom.write_text(artifact_set.pom())
    command = [
        mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
        f"-DoutputDirectory={artifact_set.directory / 'lib'}", "-DincludeScope=runtime",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    if result.returncode != 0:
        raise JarsMissing(
            f"mvn could not resolve {artifact_set.name}:\n{(result.stdout + result.stderr)[-3000:]}"
        )
    artifact_set.marker.write_text(_wanted(artifact_set))
    return artifact_set.directory


def classpath(artifact_set: ArtifactSet) -> str:
    """The set's jars as a ``java -cp`` argument; :class:`JarsMissing` if it was never resolved."""
    if not artifact_set.marker.exists() or artifact_set.marker.read_text() != _wanted(artifact_set):
        raise JarsMissing(
            f"{artifact_set.name} is not resolved: run `make kafka` (python -m kafkapeer resolve)"
        )
    jars = sorted((artifact_set.directory / "lib").glob("*.jar"))
    return ":".join(str(jar) for jar in jars)


def agent_jar(artifact_set: ArtifactSet = JMX_EXPORTER) -> Path:
    """The set's one Java agent jar (``-javaagent:<jar>=…``); :class:`JarsMissing` if never resolved."""
    classpath(artifact_set)  # raises unless resolved
    artifact = artifact_set.artifacts[0].split(":")[1]
    jars = sorted((artifact_set.directory / "lib").glob(f"{artifact}-*.jar"))
    if len(jars) != 1:
        raise JarsMissing(f"{artifact_set.name}: expected one {artifact} jar, found {jars}")
    return jars[0]
