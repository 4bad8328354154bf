"""Do all replicas of each partition hold the same record batches up to the high watermark?

What Kafka's replica verification tool checks, done on a local cluster's disks: each replica's
segment files are read as they are (the broker is not asked, so a follower is seen exactly as it
stored what it fetched), and each batch is compared by base offset, last offset, leader epoch and
CRC. Only the committed part counts: up to the high watermark the partition's leader reports
(ListOffsets, latest), since a follower may still hold an uncommitted tail it will truncate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster import state_file
from daemon.eventlog import EventLog
from network.connection import KafkaConnection
from placement.errors import AdminError
from protocol import ApiKey, CorruptRecordBatch, ErrorCode
from protocol.record_batch import parse_batches
from zkstore import cluster_reads, znodes
from zkstore.aio import AsyncZooKeeper

LIST_OFFSETS_VERSION = 1
LATEST = -1


@dataclass(frozen=True, order=True)
class Batch:
    base_offset: int
    last_offset: int
    leader_epoch: int
    crc: int


@dataclass(frozen=True)
class Divergence:
    topic: str
    partition: int
    replica: int
    offset: int
    """The first offset at which ``replica`` disagrees with the reference replica (or misses data)."""
    reference: int
    detail: str


@dataclass(frozen=True)
class PartitionReport:
    topic: str
    partition: int
    high_watermark: int
    replicas: tuple[int, ...]
    divergences: tuple[Divergence, ...]

    @property
    def consistent(self) -> bool:
        return not self.divergences


# -- the comparison (pure)


def committed(batches: Iterable[Batch], high_watermark: int) -> list[Batch]:
    """The batches holding offsets below the high watermark."""
    return [b for b in batches if b.base_offset < high_watermark]


def compare(
    topic: str, partition: int, by_replica: Mapping[int, Sequence[Batch]], high_watermark: int, reference: int
) -> list[Divergence]:
    """Every replica's committed batches against ``reference``'s (the leader's, when it has a log)."""
    expected = committed(by_replica[reference], high_watermark)
    found = []
    for replica, batches in sorted(by_replica.items()):
        if replica == reference:
            continue
        mine = committed(batches, high_watermark)
        for theirs, ours in zip(expected, mine, strict=False):
            if theirs != ours:
                found.append(
                    Divergence(
                        topic,
                        partition,
                        replica,
                        min(theirs.base_offset, ours.base_offset),
                        reference,
                        f"{ours} where replica {reference} has {theirs}",
                    )
                )
                break
        else:
            if len(mine) < len(expected):
                missing = expected[len(mine)]
                found.append(
                    Divergence(
                        topic,
                        partition,
                        replica,
                        missing.base_offset,
                        reference,
                        f"ends before offset {missing.base_offset}, below the high watermark",
                    )
                )
    return found


def divergence_lines(reports: Iterable[PartitionReport]) -> list[str]:
    """One line per differing replica, so chaos runs and ``verify-replicas`` word them alike."""
    return [
        f"{d.topic}-{d.partition}: replica {d.replica} at offset {d.offset}: {d.detail}"
        for r in reports
        for d in r.divergences
    ]


def record(events: EventLog, reports: Sequence[PartitionReport], **extra: Any) -> list[str]:
    """Append the ``replicas_verified`` line the audit judges replica consistency by; its divergences."""
    lines = divergence_lines(reports)
    events.emit(
        "replicas_verified",
        partitions=len(reports),
        consistent=sum(r.consistent for r in reports),
        divergences=lines,
        **extra,
    )
    return lines


# -- reading a replica's log from disk


def read_batches(partition_dir: Path) -> list[Batch]:
    """Every whole batch in the partition directory's segments, in offset order; a torn, zeroed or
    corrupt batch (a segment being written, or a damaged disk) ends a segment's walk there."""
    out: list[Batch] = []
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        try:
            parsed = parse_batches(data, verify_crc=True)
        except CorruptRecordBatch:
            parsed = _whole_prefix(data)
        out.extend(
            Batch(h.base_offset, h.base_offset + h.last_offset_delta, h.partition_leader_epoch, h.crc)
            for h, _, _ in parsed
        )
    return out


def _whole_prefix(data: bytes) -> list[Any]:
    """The batches before the first one that does not parse."""
    good: list[Any] = []
    position = 0
    while position < len(data):
        try:
            first = parse_batches(data[position:], verify_crc=True)[:1]
        except CorruptRecordBatch:
            break
        if not first:
            break
        header, _, size = first[0]
        good.append((header, position, size))
        position += size
    return good


def log_dirs(config: Path) -> list[Path]:
    """``log.dirs`` (or ``log.dir``) from a broker's properties file."""
    settings = {}
    for line in config.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.lstrip().startswith("#"):
            settings[key.strip()] = value.strip()
    value = settings.get("log.dirs") or settings.get("log.dir") or ""
    return [Path(d) for d in value.split(",") if d]


def replica_batches(dirs: Sequence[Path], topic: str, partition: int) -> list[Batch] | None:
    """The replica's batches, or None when no log directory holds the partition."""
    for directory in dirs:
        partition_dir = directory / f"{topic}-{partition}"
        if partition_dir.is_dir():
            return read_batches(partition_dir)
    return None


# -- the command


async def high_watermark(endpoint: tuple[str, int], topic: str, partition: int) -> int:
    """The leader's high watermark: ListOffsets' latest offset for a consumer."""
    try:
        return await _list_latest(endpoint, topic, partition)
    except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
        host, port = endpoint
        why = str(exc) or type(exc).__name__
        raise AdminError(
            f"{topic}-{partition}: its leader at {host}:{port} does not answer ({why}); "
            "verify once the cluster has settled"
        ) from None


async def _list_latest(endpoint: tuple[str, int], topic: str, partition: int) -> int:
    connection = await KafkaConnection.open(*endpoint, client_id="verify-replicas", connect_timeout=10)
    try:
        body = {
            "replica_id": -1,
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "timestamp": LATEST}]}],
        }
        _, response = await connection.send(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, body, timeout=15)
    finally:
        await connection.close()
    answer = response["topics"][0]["partitions"][0]
    if answer["error_code"] != ErrorCode.NONE:
        error = ErrorCode.name_of(answer["error_code"])
        raise AdminError(f"{topic}-{partition}: the leader answered ListOffsets with {error}")
    return int(answer["offset"])


def _client_endpoint(entry: Mapping[str, Any]) -> tuple[str, int]:
    for text in entry["listeners"]:
        endpoint = znodes.Endpoint.parse(text)
        if endpoint.listener_name != "CONTROLLER":
            return endpoint.host, endpoint.port
    raise AdminError(f"{entry['name']} has no client listener")


async def verify(state: Mapping[str, Any], topics: Sequence[str] = ()) -> list[PartitionReport]:
    """Check every partition of ``topics`` (all topics when empty) of the cluster ``state`` describes."""
    brokers = {p["id"]: p for p in state["processes"] if p["role"] == "broker"}
    dirs = {b: log_dirs(Path(entry["config"])) for b, entry in brokers.items()}
    endpoints = {b: _client_endpoint(entry) for b, entry in brokers.items()}
    async with state_file.zookeeper_session(state) as zk:
        return await verify_logs(zk, topics, endpoints, dirs)


async def verify_logs(
    zk: AsyncZooKeeper,
    topics: Sequence[str],
    endpoints: Mapping[int, tuple[str, int]],
    dirs: Mapping[int, Sequence[Path]],
) -> list[PartitionReport]:
    """Check every partition of ``topics`` (all topics when empty): each broker's client endpoint
    answers for its high watermark when it leads, and its log directories (here or copied out of a
    container) hold its replicas."""
    names = list(topics) or [t.topic for t in await cluster_reads.list_topics(zk)]
    described = await cluster_reads.describe_topics(zk, names)
    reports = []
    for p in described:
        if p.leader is None or p.leader < 0 or p.leader not in endpoints:
            raise AdminError(f"{p.topic}-{p.partition} has no leader to ask for its high watermark")
        hw = await high_watermark(endpoints[p.leader], p.topic, p.partition)
        by_replica: dict[int, list[Batch]] = {}
        missing: list[Divergence] = []
        for replica in p.replicas:
            batches = replica_batches(dirs.get(replica, []), p.topic, p.partition)
            if batches is None:
                missing.append(Divergence(p.topic, p.partition, replica, 0, p.leader, "no log on disk"))
            else:
                by_replica[replica] = batches
        found = compare(p.topic, p.partition, by_replica, hw, p.leader) if p.leader in by_replica else []
        reports.append(PartitionReport(p.topic, p.partition, hw, p.replicas, (*missing, *found)))
    return reports


def run(state: Mapping[str, Any], topics: Sequence[str] = ()) -> list[PartitionReport]:
    return asyncio.run(verify(state, topics))
