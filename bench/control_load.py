"""The data-plane load of the control-latency benchmark: pipelined Metadata and Produce from processes.

:class:`LoadGenerator` spawns ``load_processes`` processes, each with its own event loop, that keep
``pipeline_depth`` requests outstanding on every connection: Metadata v1 for all topics and, on
``produce_connections`` of them, Produce requests of many one-record batches to the probe partition.
Responses are counted, not decoded, so that the load costs the broker, not the client.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import multiprocessing
import signal
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import uvloop

from bench.control_settings import METADATA_VERSION, PROBE_TOPIC, Settings
from daemon.runtime import die_with_parent
from protocol import ApiKey, encode_request
from protocol.record_batch import build_batch

__all__ = ["PRODUCE_BATCHES", "LoadGenerator", "load_worker"]

_INT32 = struct.Struct(">i")


class Counter(Protocol):
    """A shared ``multiprocessing`` integer: one writer (a load process), read by the benchmark."""

    value: int


PRODUCE_VERSION = 7
PRODUCE_BATCHES = 200
"""One-record batches per Produce request: each costs the handler a header parse and a CRC check."""


def metadata_frame(correlation_id: int) -> bytes:
    return encode_request(
        ApiKey.METADATA, METADATA_VERSION, correlation_id, "control-latency-load", {"topics": None}
    )


def produce_frame(correlation_id: int, one_batch: bool = False) -> bytes:
    """acks=1 to the probe partition, which the probe's LeaderAndIsr makes this broker lead.

    ``one_batch``: the ``PRODUCE_BATCHES`` records in one batch instead of one batch each; Apache Kafka
    refuses Produce v3+ with more than one batch per partition (INVALID_RECORD), so a load meant for
    both implementations sends this one."""
    if one_batch:
        records = build_batch([(None, b"x" * 100)] * PRODUCE_BATCHES, 0)
    else:
        records = build_batch([(None, b"x" * 100)], 0) * PRODUCE_BATCHES
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 30000,
        "topic_data": [{"name": PROBE_TOPIC, "partition_data": [{"index": 0, "records": records}]}],
    }
    return encode_request(ApiKey.PRODUCE, PRODUCE_VERSION, correlation_id, "control-latency-load", body)


async def _stream(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    depth: int,
    frame: Callable[[int], bytes],
    completed: Counter,
    failures: Counter,
) -> None:
    """Keep ``depth`` requests outstanding; responses are counted, not decoded (a cheap client)."""
    sent = itertools.count()
    expected = 0
    for _ in range(depth):
        writer.write(frame(next(sent)))
    try:
        while True:
            prefix = await reader.readexactly(_INT32.size)
            (size,) = _INT32.unpack(prefix)
            payload = await reader.readexactly(size)
            (correlation_id,) = _INT32.unpack_from(payload)
            if correlation_id != expected:
                raise ConnectionError(f"response {correlation_id} where {expected} was due")
            expected += 1
            completed.value += 1
            writer.write(frame(next(sent)))
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        failures.value += 1
    finally:
        writer.close()


@dataclass(frozen=True)
class LoadShare:
    """One load process's part of the load, and the counters and events it shares with the parent
    (multiprocessing values, passed when the process is spawned)."""

    host: str
    port: int
    connections: int
    producers: int
    depth: int
    completed: Any
    produced: Any
    failures: Any
    ready: Any
    stop: Any
    one_batch: bool = False
    """Produce requests of one batch (see :func:`produce_frame`)."""


async def _load(share: LoadShare) -> None:
    streams = [
        await asyncio.open_connection(share.host, share.port, limit=1 << 22) for _ in range(share.connections)
    ]
    produce = functools.partial(produce_frame, one_batch=share.one_batch)
    tasks = [
        asyncio.create_task(
            _stream(r, w, share.depth, produce, share.produced, share.failures)
            if i < share.producers
            else _stream(r, w, share.depth, metadata_frame, share.completed, share.failures)
        )
        for i, (r, w) in enumerate(streams)
    ]
    share.ready.set()
    # share.stop is a multiprocessing.Event set by the parent process: it cannot be awaited.
    while not share.stop.is_set() and not all(t.done() for t in tasks):  # noqa: ASYNC110
        await asyncio.sleep(0.1)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def load_worker(share: LoadShare) -> None:
    """A load-generator process: its own event loop, so the load never shares the probe's."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    uvloop.run(_load(share))


class LoadGenerator:
    """``connections`` Metadata and Produce streams split over ``processes`` spawned processes;
    ``one_batch`` as :func:`produce_frame` takes it."""

    def __init__(self, host: str, port: int, settings: Settings, *, one_batch: bool = False) -> None:
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._ready = [context.Event() for _ in range(settings.load_processes)]
        self._completed = [context.Value("q", 0, lock=False) for _ in range(settings.load_processes)]
        self._produced = [context.Value("q", 0, lock=False) for _ in range(settings.load_processes)]
        producers, spare = divmod(settings.produce_connections, settings.load_processes)
        self._failures = [context.Value("q", 0, lock=False) for _ in range(settings.load_processes)]
        base, extra = divmod(settings.connections, settings.load_processes)
        self._processes = [
            context.Process(
                target=load_worker,
                args=(
                    LoadShare(
                        host=host,
                        port=port,
                        connections=base + (i < extra),
                        producers=producers + (i < spare),
                        depth=settings.pipeline_depth,
                        completed=self._completed[i],
                        produced=self._produced[i],
                        failures=self._failures[i],
                        ready=self._ready[i],
                        stop=self._stop,
                        one_batch=one_batch,
                    ),
                ),
                name=f"control-latency-load-{i}",
                daemon=True,
            )
            for i in range(settings.load_processes)
        ]

    async def start(self, timeout: float = 60.0) -> None:
        for process in self._processes:
            process.start()
        deadline = time.monotonic() + timeout
        for ready, process in zip(self._ready, self._processes, strict=True):
            while not await asyncio.to_thread(ready.wait, 0.5):
                if not process.is_alive():
                    raise RuntimeError(f"{process.name} exited with code {process.exitcode}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{process.name} did not connect within {timeout} s")

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._processes if p.pid is not None]

    @property
    def completed(self) -> int:
        return sum(v.value for v in self._completed)

    @property
    def produced(self) -> int:
        return sum(v.value for v in self._produced)

    @property
    def failures(self) -> int:
        return sum(v.value for v in self._failures)

    def stop(self) -> None:
        self._stop.set()
        for process in self._processes:
            if process.pid is not None:
                process.join(10)
        for process in self._processes:
            if process.is_alive():
                process.terminate()
                process.join(5)
