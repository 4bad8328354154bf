"""A partition's producer-state snapshot files, ``<offset>.snapshot``: written, found, dropped.

The snapshot at offset N holds the producer state of the log before N. The log writes one at each
segment roll and on close, and keeps only those inside its offsets; a corrupt one is deleted and the
next older one tried, as Kafka does. The offsets on disk are listed once, then kept in step.
"""

from __future__ import annotations

import logging
import os
from bisect import insort
from pathlib import Path

from broker.log.producer_state import (
    SNAPSHOT_SUFFIX,
    CorruptSnapshot,
    ProducerStateEntry,
    decode_snapshot,
    encode_snapshot,
    snapshot_file_name,
)
from broker.log.segment import offset_from_file_name

log = logging.getLogger("broker.log")


class ProducerSnapshots:
    """The snapshot files of one partition directory; only its log's writer calls it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._offsets = sorted(
            offset
            for p in directory.glob(f"*{SNAPSHOT_SUFFIX}")
            if (offset := offset_from_file_name(p)) is not None
        )

    @property
    def offsets(self) -> tuple[int, ...]:
        return tuple(self._offsets)

    def latest(self) -> int | None:
        return self._offsets[-1] if self._offsets else None

    def path(self, offset: int) -> Path:
        return self.directory / snapshot_file_name(offset)

    def write(self, offset: int, entries: list[ProducerStateEntry], *, sync: bool) -> None:
        """Write the snapshot at ``offset``, fsynced if ``sync``. An unsynced one lost or torn in a
        crash fails its length or CRC check and an older one is used: only time is lost."""
        data = encode_snapshot(entries)
        fd = os.open(self.path(offset), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if offset not in self._offsets:
            insort(self._offsets, offset)

    def delete_outside(self, low: int, high: int) -> None:
        """Delete the snapshots at or below ``low`` (the log start) or above ``high`` (the log end)."""
        for offset in [o for o in self._offsets if o <= low or o > high]:
            self._delete(offset)

    def delete_all(self) -> None:
        for offset in list(self._offsets):
            self._delete(offset)

    def load_latest(self, now_ms: int, expiration_ms: int) -> tuple[int, list[ProducerStateEntry]] | None:
        """(offset, unexpired entries) of the latest readable snapshot; corrupt ones are deleted."""
        while self._offsets:
            offset = self._offsets[-1]
            try:
                entries = decode_snapshot(self.path(offset).read_bytes())
            except FileNotFoundError:
                self._offsets.remove(offset)
                continue
            except CorruptSnapshot as exc:
                log.warning(
                    "%s: deleting corrupt producer snapshot %s: %s",
                    self.directory.name, snapshot_file_name(offset), exc,
                )  # fmt: skip
                self._delete(offset)
                continue
            return offset, [entry for entry in entries if not entry.expired(now_ms, expiration_ms)]
        return None

    def _delete(self, offset: int) -> None:
        self._offsets.remove(offset)
        self.path(offset).unlink(missing_ok=True)
