"""The failures of the local server runners: no Java, no jars, a server that never served.

Every one is a :class:`LocalServerError`, which callers (``python -m zkserver``, chaos, the launcher)
catch to print a message instead of a traceback.
"""

from __future__ import annotations

__all__ = ["JavaNotFound", "LocalServerError", "ZooKeeperNotFound", "ZooKeeperStartError"]


class LocalServerError(RuntimeError):
    """Base class for every failure to set up or run a local ZooKeeper."""


class ZooKeeperNotFound(LocalServerError):
    """No ZooKeeper jars could be located."""


class JavaNotFound(LocalServerError):
    """No ``java`` executable could be located."""


class ZooKeeperStartError(LocalServerError):
    """The JVM exited or never started serving; the message carries the log tail."""
