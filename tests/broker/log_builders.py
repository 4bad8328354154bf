"""Small builders for the partition-log tests: batches, whole-log reads, and byte surgery on files."""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

import crc32c
import pytest

from broker.log import Log, LogConfig
from protocol.record_batch import CRC_START, build_batch, parse_batches

TP = "topic-0"
PID = 4000
"""The idempotent producer of the producer-state tests."""
NOW = 1_700_000_000_000
"""Their wall clock, in ms: batches' timestamps and producers' last activity."""


def batch(records: int = 1, *, value_size: int = 10, timestamp: int = 0, base_offset: int = 0) -> bytes:
    """An uncompressed batch of ``records`` records stamped ``timestamp``, ``timestamp + 1``, ..."""
    return build_batch(
        [(None, bytes(value_size))] * records,
        base_offset,
        timestamps=[timestamp + i for i in range(records)],
    )


def producer_batch(
    producer_id: int,
    epoch: int,
    sequence: int,
    records: int = 1,
    *,
    timestamp: int | None = None,
    transactional: bool = False,
) -> bytes:
    """An idempotent (or ``transactional``) producer's batch: ``records`` records from ``sequence`` on,
    stamped like batch() from ``timestamp`` (now if None: older producer state expires when a
    snapshot is loaded)."""
    ts = time.time_ns() // 1_000_000 if timestamp is None else timestamp
    return build_batch(
        [(None, b"v")] * records,
        timestamps=[ts + i for i in range(records)],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        transactional=transactional,
    )


def with_crc_fixed(data: bytes | bytearray) -> bytes:
    """``data`` (one batch whose CRC-covered bytes were edited) with its CRC recomputed."""
    fixed = bytearray(data)
    struct.pack_into(">I", fixed, 17, crc32c.crc32c(bytes(fixed[CRC_START:])))
    return bytes(fixed)


def spans(data: bytes) -> list[tuple[int, int]]:
    """(base offset, last offset) of each batch in ``data``, which must be whole batches only."""
    return [(h.base_offset, h.last_offset) for h, _, _ in parse_batches(data, allow_partial=False)]


def read_all(log: Log, start: int | None = None, *, max_bytes: int = 1 << 20) -> bytes:
    """Every batch from ``start`` (the log start if None) to the log end, read by repeated fetches."""
    offset = log.log_start_offset if start is None else start
    out = bytearray()
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes)
        assert data, f"no progress reading at {offset}"
        out += data
        offset = parse_batches(data)[-1][0].next_offset
    return bytes(out)


def open_log(directory: Path, **config: int) -> Log:
    return Log.open(directory / TP, LogConfig(**config))


def segment_files(directory: Path, suffix: str = ".log") -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(suffix))


def count_preads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, the size of every ``os.pread`` result is appended to the returned list."""
    sizes: list[int] = []
    real_pread = os.pread

    def counting_pread(fd: int, length: int, offset: int) -> bytes:
        data = real_pread(fd, length, offset)
        sizes.append(len(data))
        return data

    monkeypatch.setattr(os, "pread", counting_pread)
    return sizes
