"""ZooKeeper write operations as typed, frozen values: what decision code returns instead of writing.

A multi-op is a list of these; ``AsyncZooKeeper.multi`` is the one place that turns them into kazoo's
transaction, and ``FencedWriter`` the one place that groups them under ``/controller_epoch``'s check.
Being plain values, they can be compared in tests and produced by pure code with no server at all.
Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Check", "Create", "Delete", "Op", "SetData", "op_size"]

ANY_VERSION = -1
"""ZooKeeper's "whatever the current version is": an unconditional write or delete."""


@dataclass(frozen=True, slots=True)
class Create:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequence: bool = False


@dataclass(frozen=True, slots=True)
class SetData:
    """Replace the data of ``path``; with a ``version``, only if the znode is still at it (CAS)."""

    path: str
    data: bytes
    version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class Delete:
    path: str
    version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class Check:
    """Fail the whole multi-op unless ``path`` is at ``version``; writes nothing."""

    path: str
    version: int


Op = Create | SetData | Delete | Check

_OP_OVERHEAD_BYTES = 64
"""Header, version and flags of one op in a multi request, rounded up."""


def op_size(op: Op) -> int:
    """An upper estimate of an op's bytes in a multi request, for staying under jute.maxbuffer."""
    data = op.data if isinstance(op, Create | SetData) else b""
    return _OP_OVERHEAD_BYTES + len(op.path.encode()) + len(data)
