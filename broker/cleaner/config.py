"""The log cleaner's broker-wide settings (Kafka's CleanerConfig): threads, memory, I/O and back-off.

What a topic may override (cleanup.policy, min.cleanable.dirty.ratio, delete.retention.ms, the
compaction lags) is per log, in ``broker.log.LogConfig``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

__all__ = ["UNLIMITED_IO", "CleanerConfig"]

UNLIMITED_IO = sys.float_info.max
"""log.cleaner.io.max.bytes.per.second's default, Java's Double.MAX_VALUE: no throttling."""


@dataclass(frozen=True)
class CleanerConfig:
    enable: bool = True
    """log.cleaner.enable"""
    threads: int = 1
    """log.cleaner.threads"""
    dedupe_buffer_size: int = 128 * 1024 * 1024
    """log.cleaner.dedupe.buffer.size: the offset maps of all threads together"""
    dedupe_buffer_load_factor: float = 0.9
    """log.cleaner.io.buffer.load.factor: how full a map gets before a cleaning stops there"""
    io_buffer_size: int = 512 * 1024
    """log.cleaner.io.buffer.size: the read and write buffers of all threads together"""
    io_max_bytes_per_second: float = UNLIMITED_IO
    """log.cleaner.io.max.bytes.per.second: reads and writes of all threads together"""
    backoff_ms: int = 15000
    """log.cleaner.backoff.ms: the sleep when no log needs cleaning"""

    @property
    def map_memory(self) -> int:
        """Each thread's share of the dedupe buffer (Kafka caps it at 2 GB)."""
        return min(self.dedupe_buffer_size // max(self.threads, 1), 2**31 - 1)

    @property
    def thread_io_buffer_size(self) -> int:
        """Each thread's read (and write) buffer: Kafka halves its share between the two."""
        return self.io_buffer_size // max(self.threads, 1) // 2
