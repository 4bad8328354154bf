"""The log cleaner's key -> latest offset map, bounded by the memory it is given (Kafka's OffsetMap).

Kafka's SkimpyOffsetMap packs a 16-byte MD5 of each key and an 8-byte offset into a fixed buffer. Here
a dict maps the key's 64-bit hash to its offset; what one entry costs in CPython (the dict's slot and
index share, and two int objects: about 110 bytes, measured by ``tests/broker/test_log_cleaner.py``)
is :data:`ENTRY_BYTES`, so the map never holds more than ``memory // ENTRY_BYTES`` keys and a cleaning
whose dirty section has more distinct keys cleans only up to where the map filled, as Kafka's does.
Two keys with the same 64-bit hash would be taken for one (as two keys with one MD5 are in Kafka).
"""

from __future__ import annotations

__all__ = ["ENTRY_BYTES", "OffsetMap"]

ENTRY_BYTES = 128
"""Memory one entry may take: a bound of the measured cost, so ``memory`` is never exceeded."""


class OffsetMap:
    """For one cleaning at a time: ``clear`` it, ``put`` each key of the dirty section in offset order."""

    __slots__ = ("_offsets", "latest_offset", "max_entries", "slots")

    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        self.slots = max(memory // ENTRY_BYTES, 1)
        """How many entries ``memory`` holds."""
        self.max_entries = max(int(self.slots * load_factor), 1)
        """How many are put before the map counts as full (log.cleaner.io.buffer.load.factor)."""
        self._offsets: dict[int, int] = {}
        self.latest_offset = -1
        """The last offset the map covers: records above it are newer than anything mapped."""

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    @property
    def utilization(self) -> float:
        """The share of the slots in use (Kafka's buffer utilization)."""
        return len(self._offsets) / self.slots

    def clear(self) -> None:
        self._offsets.clear()
        self.latest_offset = -1

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[hash(key)] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, -1 if it is not mapped."""
        return self._offsets.get(hash(key), -1)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset
