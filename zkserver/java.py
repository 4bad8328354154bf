"""Find a Java runtime and a Java product's jars: what any local JVM server needs before it starts.

Nothing here knows ZooKeeper: :mod:`zkserver.zookeeper_jars` names ZooKeeper's jars and the places
they are packaged, and builds its classpath from these pieces. A runner for another Java server (Apache
Kafka's 3.9 jars, say) names its own artifact and reuses them the same way.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from zkserver.errors import JavaNotFound

__all__ = ["INSTALL_HINT_JAVA", "Classpath", "bundled_jars_dir", "find_java", "has_jar", "release_jar_dirs"]

log = logging.getLogger(__name__)

INSTALL_HINT_JAVA = "install a Java runtime, e.g. `apt-get install openjdk-17-jre-headless`"


@dataclass(frozen=True)
class Classpath:
    """Where a product's jars were found, kept with its origin for error messages."""

    entries: tuple[str, ...]
    source: str
    """Where they came from, e.g. ``ZOOKEEPER_HOME``, ``debian`` or ``pyspark``."""

    @property
    def argument(self) -> str:
        """The value for ``java -cp`` (entries may be ``dir/*`` wildcards that java expands)."""
        return os.pathsep.join(self.entries)


def has_jar(directory: Path, artifact: str) -> bool:
    """Whether ``directory`` holds ``artifact``'s jar: ``artifact-<version>.jar`` as a release names it,
    or ``artifact.jar`` as Debian does."""
    return any(directory.glob(f"{artifact}-[0-9]*.jar")) or (directory / f"{artifact}.jar").is_file()


def release_jar_dirs(home: Path) -> list[Path]:
    """The directories of an unpacked binary release that hold jars: ``lib/`` and/or the top level
    (older releases put them there)."""
    return [d for d in (home / "lib", home) if d.is_dir() and any(d.glob("*.jar"))]


def bundled_jars_dir(package: str, artifact: str) -> Path | None:
    """The ``jars/`` directory of an installed Python package (pyspark bundles many Java products) if it
    holds ``artifact``'s jar; found without importing the package (slow, heavy)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        jars = Path(location) / "jars"
        if jars.is_dir() and has_jar(jars, artifact):
            return jars
    return None


def find_java(environ: Mapping[str, str] | None = None, *, needed_by: str = "ZooKeeper") -> str:
    """``$JAVA_HOME/bin/java`` if usable, else ``java`` on ``PATH``; ``needed_by`` names the server in
    the error when there is neither."""
    env = os.environ if environ is None else environ
    java_home = env.get("JAVA_HOME", "").strip()
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
        log.warning("JAVA_HOME=%s has no bin/java; looking for java on PATH", java_home)
    found = shutil.which("java", path=env.get("PATH", os.defpath))
    if found is None:
        where = f"JAVA_HOME={java_home!r} (no bin/java) nor on PATH" if java_home else "on PATH"
        raise JavaNotFound(
            f"No `java` executable found {where}; {needed_by} needs a Java runtime (11+). "
            f"To fix it, {INSTALL_HINT_JAVA}, or set JAVA_HOME."
        )
    return found
