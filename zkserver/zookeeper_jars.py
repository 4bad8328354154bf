"""Where ZooKeeper's jars come from: ``$ZOOKEEPER_HOME``, then Debian's package, then pyspark's bundle.

A standalone server that serves TLS needs ZooKeeper's Netty connection factory, so netty-handler (and,
optionally, netty-tcnative) must be on the classpath: pyspark's jars directory and ZooKeeper's binary
tarball carry them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from zkserver.errors import ZooKeeperNotFound
from zkserver.java import Classpath, bundled_jars_dir, has_jar, release_jar_dirs

__all__ = ["DEBIAN_LOGGING_JARS", "DEBIAN_ZOOKEEPER_JAR", "resolve_classpath"]

ARTIFACT = "zookeeper"

#: Debian's ``libzookeeper-java`` jar. Its manifest ``Class-Path`` already names the
#: jars it needs (netty, slf4j-api, jute, ...), so the jar alone is a usable classpath.
DEBIAN_ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
#: Optional Debian jars that give slf4j a logging backend; without them the server
#: runs fine but logs nothing. Deliberately not ``/usr/share/java/*``: that directory
#: holds several competing slf4j bindings (nop, simple, jdk14, log4j12).
DEBIAN_LOGGING_JARS = (Path("/usr/share/java/slf4j-log4j12.jar"), Path("/usr/share/java/log4j-1.2.jar"))


def _classpath_from_home(home: Path) -> Classpath:
    """Tarball layout: jars in ``lib/`` (3.5+) and/or at the top level (older releases)."""
    dirs = release_jar_dirs(home)
    if not dirs or not any(has_jar(d, ARTIFACT) for d in dirs):
        raise ZooKeeperNotFound(
            f"ZOOKEEPER_HOME is set to {str(home)!r}, but no zookeeper-<version>.jar was found in "
            f"{str(home / 'lib')!r} or {str(home)!r}. Point ZOOKEEPER_HOME at an unpacked ZooKeeper "
            "binary release (apache-zookeeper-X.Y.Z-bin), or unset it to use Debian's or pyspark's jars."
        )
    return Classpath(tuple(str(d / "*") for d in dirs), "ZOOKEEPER_HOME")


def _pyspark_jars_dir() -> Path | None:
    """pyspark bundles ZooKeeper and its deps."""
    return bundled_jars_dir("pyspark", ARTIFACT)


def resolve_classpath(environ: Mapping[str, str] | None = None) -> Classpath:
    """Find ZooKeeper's jars: ``$ZOOKEEPER_HOME``, then Debian's package, then pyspark's.

    A set-but-broken ``ZOOKEEPER_HOME`` is an error rather than a silent fallback, so
    nobody tests against a different ZooKeeper than the one they asked for.
    """
    env = os.environ if environ is None else environ
    home = env.get("ZOOKEEPER_HOME", "").strip()
    if home:
        return _classpath_from_home(Path(home).expanduser())
    if DEBIAN_ZOOKEEPER_JAR.is_file():
        entries = [str(DEBIAN_ZOOKEEPER_JAR)]
        if all(jar.is_file() for jar in DEBIAN_LOGGING_JARS):
            entries += [str(jar) for jar in DEBIAN_LOGGING_JARS]
        return Classpath(tuple(entries), "debian")
    jars = _pyspark_jars_dir()
    if jars is not None:
        return Classpath((str(jars / "*"),), "pyspark")
    raise ZooKeeperNotFound(
        "Cannot find ZooKeeper jars. Do one of: (1) set ZOOKEEPER_HOME to an unpacked ZooKeeper "
        "binary release; (2) `apt-get install zookeeper` (Debian/Ubuntu, provides "
        f"{DEBIAN_ZOOKEEPER_JAR}); (3) `pip install pyspark` (bundles ZooKeeper; `make test` installs it)."
    )
