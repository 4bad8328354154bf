"""Kafka's offset checkpoint files (``replication-offset-checkpoint``, ``recovery-point-offset-checkpoint``).

Text: a version line (0), a count line, then ``topic partition offset`` per line. Written atomically
(write a temporary file, fsync, rename, fsync the directory) so a crash leaves the old or the new
file, never a torn one.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from zkstore.znodes import TopicPartition

log = logging.getLogger("broker.checkpoint")

VERSION = 0


class CorruptCheckpoint(ValueError):
    pass


def read_offsets(path: Path) -> dict[TopicPartition, int]:
    """The offsets in ``path``; an absent file is empty; a malformed one raises CorruptCheckpoint."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    try:
        if int(lines[0]) != VERSION:
            raise CorruptCheckpoint(f"{path}: unknown version {lines[0]!r}")
        count = int(lines[1])
        entries = [line for line in lines[2:] if line.strip()]
        if len(entries) != count:
            raise CorruptCheckpoint(f"{path}: expected {count} entries, found {len(entries)}")
        offsets = {}
        for line in entries:
            topic, partition, offset = line.split()
            offsets[TopicPartition(topic, int(partition))] = int(offset)
        return offsets
    except (IndexError, ValueError) as exc:
        if isinstance(exc, CorruptCheckpoint):
            raise
        raise CorruptCheckpoint(f"{path}: {exc}") from None


def write_offsets(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    lines = [str(VERSION), str(len(offsets))]
    lines += [f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items())]
    write_atomically(path, "\n".join(lines) + "\n")


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so that a crash leaves the old content or the new, never a mix."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_directory(path.parent)


def fsync_directory(directory: Path) -> None:
    """Make the creations, renames and deletions of files in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
