"""Small builders for the log cleaner's tests: a compacted log, keyed writes, what a read sees."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from broker.cleaner import CleanerConfig, LogCleaner
from broker.log import Log, LogConfig
from protocol.record_batch import RecordBatchHeader, build_batch, decode_records, parse_batches
from zkstore.znodes import TopicPartition

TP = TopicPartition("compacted", 0)
NOW = 1_700_000_000_000
DAY_MS = 86_400_000


def compacted_log(directory: Path, **config: Any) -> Log:
    """A ``compact`` log with small segments (one keyed record of ~80 bytes each: ~12 per segment)."""
    settings: dict[str, Any] = {"segment_bytes": 1024, "compact": True, "delete": False, **config}
    return Log.open(directory / f"{TP.topic}-{TP.partition}", LogConfig(**settings))


def put(log: Log, key: str | None, value: str | None, *, now: int = NOW) -> int:
    """Append one record as leader (epoch 0) stamped ``now``; returns its offset."""
    encoded = (key.encode() if key is not None else None, value.encode() if value is not None else None)
    return log.append_as_leader(build_batch([encoded], timestamps=[now]), 0, now_ms=now).first_offset


def fill(log: Log, keys: int, rounds: int, *, now: int = NOW) -> dict[str, str]:
    """``rounds`` values for each of ``keys`` keys, interleaved; returns each key's latest value."""
    latest = {}
    for r in range(rounds):
        for k in range(keys):
            put(log, f"k{k}", f"v{r}-{k}", now=now)
            latest[f"k{k}"] = f"v{r}-{k}"
    return latest


@dataclass(frozen=True)
class Seen:
    """One record as a reader sees it."""

    offset: int
    key: bytes | None
    value: bytes | None
    header: RecordBatchHeader = field(compare=False)


def batches(log: Log) -> list[tuple[RecordBatchHeader, bytes]]:
    """Every batch from the log start to the log end, read as a consumer would."""
    found = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        assert data, f"no progress reading at {offset}"
        for header, position, size in parse_batches(data, verify_crc=True):
            found.append((header, data[position : position + size]))
            offset = header.next_offset
    return found


def records(log: Log) -> list[Seen]:
    """Every record of the data batches, in offset order."""
    return [
        Seen(header.base_offset + r.offset_delta, r.key, r.value, header)
        for header, batch in batches(log)
        if not header.is_control
        for r in decode_records(batch)
    ]


def latest_values(log: Log) -> dict[str, str | None]:
    """Each key's last value in the log (None for a tombstone)."""
    latest: dict[str, str | None] = {}
    for seen in records(log):
        assert seen.key is not None
        latest[seen.key.decode()] = seen.value.decode() if seen.value is not None else None
    return latest


@dataclass
class Harness:
    """A cleaner over one log, the high watermark at the log end, its events collected."""

    log: Log
    directory: Path
    cleaner: LogCleaner
    events: list[dict[str, Any]]

    def clean(self, now: int = NOW) -> bool:
        return self.cleaner.clean_once(now_ms=now)

    def checkpoint(self) -> str:
        return (self.directory / "cleaner-offset-checkpoint").read_text()


def harness(directory: Path, log: Log, *, in_process: bool = True, **config: Any) -> Harness:
    """A cleaner of ``log``, cleaning in the test's thread unless ``in_process`` is False."""
    events: list[dict[str, Any]] = []
    cleaner = LogCleaner(
        CleanerConfig(**config),
        directory,
        lambda: {TP: log} if not log_closed(log) else {},
        lambda kind, **fields: events.append({"kind": kind, **fields}),
        high_watermark=lambda tp: log.log_end_offset,
        in_process=in_process,
    )
    return Harness(log, directory, cleaner, events)


def log_closed(log: Log) -> bool:
    return bool(log._closed)


def with_segment_bytes(log: Log, segment_bytes: int) -> None:
    """Let the next cleaning group more segments together (Kafka groups by segment.bytes)."""
    log.reconfigure(replace(log.config, segment_bytes=segment_bytes))


@dataclass
class KeyedProducer:
    """An idempotent (or transactional) producer writing keyed records to one log as its leader."""

    pid: int
    epoch: int = 0
    sequence: int = 0

    def send(
        self, log: Log, key: str, value: str | None, *, transactional: bool = False, now: int = NOW
    ) -> int:
        data = build_batch(
            [(key.encode(), value.encode() if value is not None else None)],
            timestamps=[now],
            producer_id=self.pid,
            producer_epoch=self.epoch,
            base_sequence=self.sequence,
            transactional=transactional,
        )
        self.sequence += 1
        return log.append_as_leader(data, 0, now_ms=now).first_offset

    def end(self, log: Log, *, commit: bool, now: int = NOW) -> int:
        return log.append_marker(self.pid, self.epoch, 0, commit, 0, now_ms=now).first_offset


def roll_past(log: Log, tag: str, *, now: int = NOW) -> None:
    """Enough records under new keys that what came before leaves the active segment."""
    for i in range(14):
        put(log, f"{tag}{i}", "filler", now=now)


def markers(log: Log) -> list[RecordBatchHeader]:
    return [header for header, _ in batches(log) if header.is_control]
