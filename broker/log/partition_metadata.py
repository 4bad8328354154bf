"""A partition log's topic id on disk: Kafka's ``partition.metadata`` file (KIP-516), read and written.

Kafka writes it in the log's directory once the log knows its topic id (from a LeaderAndIsr v5+):
``version: 0`` and ``topic_id: <base64url id>`` on two lines. A broker restarted with a log whose
file names another id than the controller's refuses that partition with INCONSISTENT_TOPIC_ID: the
log belongs to an earlier topic of the same name. The file is replaced atomically; one that cannot be
read is reported and treated as absent, as a log without an id.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from pathlib import Path

from zkstore.znodes import format_topic_id, parse_topic_id

__all__ = ["PARTITION_METADATA_FILE", "read_topic_id", "write_topic_id"]

log = logging.getLogger("broker.log")

PARTITION_METADATA_FILE = "partition.metadata"
_VERSION = 0
_LINE = re.compile(r"(?P<key>[a-z_]+):\s+(?P<value>\S+)")


def read_topic_id(directory: Path) -> uuid.UUID | None:
    """The topic id recorded in ``directory``, or None (no file, or one that does not parse)."""
    path = directory / PARTITION_METADATA_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.error("%s: unreadable (%s); the log's topic id is taken as unknown", path, exc)
        return None
    fields = {m["key"]: m["value"] for line in text.splitlines() if (m := _LINE.fullmatch(line.strip()))}
    try:
        if int(fields["version"]) != _VERSION:
            raise ValueError(f"unknown version {fields['version']}")
        return parse_topic_id(fields["topic_id"])
    except (KeyError, ValueError) as exc:
        log.error("%s: not Kafka's partition metadata (%s); the topic id is taken as unknown", path, exc)
        return None


def write_topic_id(directory: Path, topic_id: uuid.UUID) -> None:
    """Record ``topic_id`` in ``directory`` (written to a temporary file, synced, then renamed)."""
    path = directory / PARTITION_METADATA_FILE
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", encoding="utf-8") as out:
        out.write(f"version: {_VERSION}\ntopic_id: {format_topic_id(topic_id)}")
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)
