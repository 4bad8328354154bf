"""Python's cyclic garbage collector held off while a handler builds state that lives on.

A failover loads a million partitions, and a controlled shutdown re-elects a hundred thousand: each
allocates millions of objects that stay in the context, and every collection meanwhile would scan
them again, with nothing to free. Afterwards they are frozen, so that later collections skip them
too; ``ControllerElection._resign`` unfreezes them.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["held_off"]


@contextlib.contextmanager
def held_off() -> Iterator[None]:
    """No cyclic collection inside the block; if the block ends normally, what it built is frozen."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        if collecting:
            gc.enable()
