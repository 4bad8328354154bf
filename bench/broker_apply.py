"""How our broker copes with a full UpdateMetadata of up to 1,000,000 partitions (RF 3, 3 live brokers).

The request is the default wire's (the seed's UpdateMetadata v7, ``max_broker_epoch``), built with the
benchmarks' builders (``bench.codec.topic_states``, ``bench.control_requests.update_metadata``), 100
partitions per topic. Two parts:

1. In process, apply against decode: the request is encoded once. Each run decodes it with the broker's
   codec (``message_codec(...).decode``), applies the body as the broker's UpdateMetadata handler does
   (``ReplicaManager.accept_controller_epoch``, then ``MetadataCache.update``) to an empty cache,
   frees the decoded body, then decodes again and applies to the now full cache (warm: a controller's
   failover resends everything). A last set of runs sends the frame through ``KafkaApis.handle``, the
   handler thread's entry point, as a cross-check. The process runs with the daemons' interpreter
   settings (``daemon.runtime.tune_interpreter``: GC thresholds, switch interval), and every cyclic-GC
   collection is timed: a collection, like freeing a big body, keeps the GIL from start to end.
   Per ``--partitions`` size, best of ``--runs``: decode_s, apply_s, apply_over_decode (the floor:
   decode), release_s, warm_apply_s, handle_s, the longest GC pause, peak RSS.
2. A real broker process under one full UpdateMetadata of ``--big-partitions``
   (``bench.broker_apply_live``): ZooKeeper, ``python -m broker`` with a CONTROLLER listener, and a
   separate probe process keeping one data-plane request in flight (Metadata v1 of one topic, then
   ApiVersions) for ``--idle-s`` idle, then from writing the UpdateMetadata until its answer, then
   ``--after-s``. Reported: data-plane p50/p99/max idle, during and after, the window's length,
   p99_during_over_idle (the floor: idle; the target is 3x at most), and the window cut into the
   broker's steps (transfer, queue, decode, gc_after_decode, apply, finish: from its events and request
   metrics) with the data plane's latency in each.

Nothing is asserted. Results go to bench/results/broker_apply.json and two tables on stdout. On a small
machine other processes (another benchmark, a test run) skew every figure; the CPU shares in the JSON
say how busy the machine was.

    .venv/bin/python -m bench.broker_apply [--partitions 100000,1000000] [--runs 3]
        [--big-partitions 1000000] [--idle-s 10] [--after-s 3] [--out bench/results/broker_apply.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from bench.broker_apply_live import TARGET_P99_OVER_IDLE, big_update, measure_live, step_rows, update_codec
from bench.control_requests import SEED_WIRE
from bench.control_settings import BROKER_ID
from bench.machine import machine, write_report
from bench.measure import peak_rss_mib, ratio, status_kib
from bench.zookeeper import zookeeper_workdir
from broker.apis import BrokerIdentity, KafkaApis
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from broker.request_channel import Request, Result
from daemon.eventlog import EventLog
from daemon.runtime import tune_interpreter
from protocol import ApiKey, ErrorCode, decode_request_header, decode_response, encode_request_header

BROKER_EPOCH = 0x1F0000002A
FAKE_ENDPOINTS = {"PLAINTEXT": ("127.0.0.1", 9092), "CONTROLLER": ("127.0.0.1", 9093)}
NO_FUTURE = cast("asyncio.Future[Result]", None)
"""KafkaApis.handle returns its result; only the network layer reads the request's future."""
PHASES = ("decode", "apply", "release", "decode_warm", "warm_apply", "warm_release")
"""One in-process run, in order: each step's time and the GC collections that started in it."""


# -- part 1: in process


class GcPauses:
    """The cyclic collector's collections while installed, as ``(start, seconds, generation)`` on
    ``perf_counter``: each is a stretch in which the collecting thread keeps the GIL."""

    def __init__(self) -> None:
        self.pauses: list[tuple[float, float, int]] = []
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._began = now
        else:
            self.pauses.append((self._began, now - self._began, info["generation"]))

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)

    def within(self, start: float, end: float) -> list[tuple[float, int]]:
        """``(seconds, generation)`` of the collections that started in ``[start, end)``."""
        return [(seconds, generation) for began, seconds, generation in self.pauses if start <= began < end]


@dataclass
class InProcessBroker:
    """The real objects the broker's UpdateMetadata handler touches, wired as ``broker/server.py`` does."""

    replica_manager: ReplicaManager
    metadata_cache: MetadataCache
    apis: KafkaApis


def fresh_broker(log_dir: Path) -> InProcessBroker:
    events = EventLog(None, f"broker-{BROKER_ID}")
    replica_manager = ReplicaManager(BROKER_ID, log_dir, events)
    cache = MetadataCache()
    apis = KafkaApis(BrokerIdentity(BROKER_ID, BROKER_EPOCH), replica_manager, cache, events)
    return InProcessBroker(replica_manager, cache, apis)


def apply(broker: InProcessBroker, body: dict[str, Any]) -> None:
    """What ``KafkaApis``' UpdateMetadata handler does with a decoded body (``broker/apis.py``)."""
    if not broker.replica_manager.accept_controller_epoch(body["controller_epoch"]):
        raise RuntimeError("the in-process broker refused the controller epoch")
    broker.metadata_cache.update(body)


def one_run(decode: Callable[[bytes], dict[str, Any]], raw: bytes, log_dir: Path) -> dict[str, Any]:
    """Decode, apply to an empty cache, free; decode, apply to the full cache, free. The broker object is
    built first, so the first allocation after decoding (and the collection it may start) is the apply's,
    as on the broker's handler thread."""
    broker = fresh_broker(log_dir)
    gc.collect()
    with GcPauses() as pauses:
        marks = [time.perf_counter()]
        for _cache in ("empty", "full"):
            body = decode(raw)
            marks.append(time.perf_counter())
            apply(broker, body)
            marks.append(time.perf_counter())
            del body
            marks.append(time.perf_counter())
    cached = sum(len(partitions) for partitions in broker.metadata_cache.snapshot.topics.values())
    run: dict[str, Any] = {"cached_partitions": cached}
    for name, start, end in zip(PHASES, marks, marks[1:], strict=False):
        run[name] = (end - start, pauses.within(start, end))
    return run


def handle_run(raw: bytes, log_dir: Path) -> float:
    """The frame through ``KafkaApis.handle`` (decode, checks, events, apply, answer, free) once."""
    broker = fresh_broker(log_dir)
    version, dialect = SEED_WIRE.update_metadata, SEED_WIRE.dialect
    header = encode_request_header(
        ApiKey.UPDATE_METADATA, version, 1, "controller-1001", len(raw), dialect=dialect
    )
    frame = header + raw
    decoded_header, offset = decode_request_header(frame, dialect=dialect)
    now = time.monotonic()
    request = Request(
        decoded_header, frame, offset, "CONTROLLER", "127.0.0.1:0", now, NO_FUTURE, dequeued_at=now
    )
    gc.collect()
    began = time.perf_counter()
    result = broker.apis.handle(request)
    elapsed = time.perf_counter() - began
    if not isinstance(result, bytes):
        raise RuntimeError(f"KafkaApis.handle answered {result!r}")
    _, response = decode_response(ApiKey.UPDATE_METADATA, version, result, dialect=dialect)
    if response["error_code"] != ErrorCode.NONE:
        raise RuntimeError(f"UpdateMetadata refused: {ErrorCode.name_of(response['error_code'])}")
    return elapsed


def reset_peak_rss() -> int:
    """Start this process's peak-RSS count afresh (``/proc/self/clear_refs``); its RSS now, in KiB."""
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    return status_kib("VmRSS")


def summarize_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Best of the runs for every step, with the GC time of that best run, its collections of 10 ms or
    more in order (``[generation, seconds]``), and the longest collection of any run."""
    figures: dict[str, Any] = {}
    for name in PHASES:
        best_seconds, best_pauses = min((run[name] for run in runs), key=lambda step: step[0])
        longest = max((seconds for run in runs for seconds, _ in run[name][1]), default=0.0)
        figures[f"{name}_s"] = round(best_seconds, 4)
        figures[f"{name}_gc_s"] = round(sum(seconds for seconds, _ in best_pauses), 4)
        figures[f"{name}_gc_collections"] = len(best_pauses)
        figures[f"{name}_gc_long_pauses"] = [[gen, round(sec, 3)] for sec, gen in best_pauses if sec >= 0.01]
        figures[f"{name}_gc_max_pause_s"] = round(longest, 4)
    return figures


def measure_size(partitions: int, runs: int, log_dir: Path) -> dict[str, Any]:
    """Part 1 at one size: build and encode once, then ``runs`` in-process runs and handle runs. The peak
    RSS counts from after encoding (the built body freed), so it is the decoding and applying's."""
    codec = update_codec()
    body = big_update(partitions, FAKE_ENDPOINTS, BROKER_EPOCH)
    began = time.perf_counter()
    raw = codec.encode(body)
    encode_s = time.perf_counter() - began
    del body
    gc.collect()
    rss_before_kib = reset_peak_rss()
    measured = [one_run(codec.decode, raw, log_dir) for _ in range(runs)]
    handle_s = min(handle_run(raw, log_dir) for _ in range(runs))
    figures = summarize_runs(measured)
    decode_s, apply_s = figures["decode_s"], figures["apply_s"]
    result = {
        "partitions": partitions,
        "bytes": len(raw),
        "encode_s": round(encode_s, 4),
        **figures,
        "apply_over_decode": ratio(apply_s, decode_s),
        "release_over_decode": ratio(figures["release_s"], decode_s),
        "warm_apply_over_decode": ratio(figures["warm_apply_s"], decode_s),
        "handle_s": round(handle_s, 4),
        "handle_over_decode": ratio(handle_s, decode_s),
        "decode_mb_per_s": round(len(raw) / decode_s / 1e6, 1),
        "cached_partitions": measured[-1]["cached_partitions"],
        "rss_before_mib": round(rss_before_kib / 1024, 1),
        "peak_rss_mib": peak_rss_mib(os.getpid()),
    }
    del raw
    gc.collect()
    return result


def measure_in_process(sizes: list[int], runs: int) -> list[dict[str, Any]]:
    tune_interpreter()
    results = []
    with tempfile.TemporaryDirectory(prefix="broker-apply-") as tmp:
        for partitions in sorted(sizes):
            print(f"in process: {partitions} partitions, {runs} runs", flush=True)
            results.append(measure_size(partitions, runs, Path(tmp)))
    return results


# -- output


def in_process_table(results: list[dict[str, Any]]) -> str:
    """One row per size; ``of it gc`` is the apply's GC time, ``gc max`` the longest collection."""
    columns = ("partitions", "MB", "decode s", "apply s", "apply/dec", "of it gc", "gc max s", "release s")
    head = "".join(f"{c:>11}" for c in columns) + f"{'warm apply s':>13}{'handle s':>10}{'peak MiB':>10}"
    lines = [head, "-" * len(head)]
    for r in results:
        figures = (r["decode_s"], r["apply_s"], r["apply_over_decode"], r["apply_gc_s"])
        longest = max(r[f"{name}_gc_max_pause_s"] for name in ("apply", "warm_apply"))
        lines.append(
            f"{r['partitions']:>11}{r['bytes'] / 1e6:>11.1f}"
            + "".join(f"{f:>11.3f}" for f in figures)
            + f"{longest:>11.3f}{r['release_s']:>11.3f}{r['warm_apply_s']:>13.3f}{r['handle_s']:>10.3f}"
            f"{r['peak_rss_mib'] or 0:>10.0f}"
        )
    return "\n".join(lines)


def live_table(result: dict[str, Any]) -> str:
    """Data-plane round trips idle, during the window and after, then in each broker step of the window;
    ``md``/``av`` are Metadata's and ApiVersions' own p50."""
    columns = ("step s", "n", "p50 ms", "p99 ms", "max ms", "md p50", "av p50", "req/s")
    head = f"{'phase':<18}" + "".join(f"{c:>9}" for c in columns)
    lines = [head, "-" * len(head)]

    def f(value: float | None, digits: int = 2) -> str:
        return f"{'-':>9}" if value is None else f"{value:>9.{digits}f}"

    for name, p, seconds in step_rows(result):
        by_api = p["by_api"]
        lines.append(
            f"{name:<18}{f(seconds, 3)}{p['n']:>9}{f(p['p50'])}{f(p['p99'])}{f(p['max'])}"
            f"{f(by_api['METADATA']['p50'])}{f(by_api['API_VERSIONS']['p50'])}{f(p['per_s'], 0)}"
        )
    cores = result["cpu_cores"]["window"]
    lines.append(
        f"window {result['window_s']:.3f} s for {result['partitions']} partitions "
        f"({result['bytes'] / 1e6:.1f} MB, {result['error']}); "
        f"p99 during / idle = {result['p99_during_over_idle']} (target <= {TARGET_P99_OVER_IDLE}), "
        f"p50 {result['p50_during_over_idle']}; cores in the window: broker {cores['broker']}, "
        f"others {cores['other']}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", default="100000,1000000", help="part 1's sizes, comma-separated")
    parser.add_argument("--runs", type=int, default=3, help="part 1's runs per size; the best counts")
    parser.add_argument("--big-partitions", type=int, default=1_000_000, help="part 2's UpdateMetadata")
    parser.add_argument("--idle-s", type=float, default=10.0, help="part 2's idle probing before the apply")
    parser.add_argument("--after-s", type=float, default=3.0, help="part 2's probing after the answer")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "broker_apply.json"
    )
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.partitions.split(",") if size.strip()]
    in_process = measure_in_process(sizes, args.runs)
    print(in_process_table(in_process), flush=True)
    print(f"broker process: {args.big_partitions} partitions, {args.idle_s:.0f} s idle first", flush=True)
    with zookeeper_workdir("broker-apply-bench-") as (server, workdir):
        live = asyncio.run(
            measure_live(server.connect_string, workdir, args.big_partitions, args.idle_s, args.after_s)
        )
    print(live_table(live))
    report = {
        "benchmark": "broker_apply",
        "machine": machine(),
        "command": " ".join([Path(sys.executable).name, "-m", "bench.broker_apply", *sys.argv[1:]]),
        "settings": {
            "update_metadata_version": SEED_WIRE.update_metadata,
            "wire": "seed (max_broker_epoch)",
            "replication_factor": 3,
            "live_brokers": 3,
            "partitions_per_topic": 100,
            "runs": args.runs,
            "idle_s": args.idle_s,
            "after_s": args.after_s,
            "data_plane_probe": ["Metadata v1 (one topic, 100 partitions)", "ApiVersions v0"],
        },
        "in_process": in_process,
        "broker_process": live,
        "target_p99_during_over_idle_max": TARGET_P99_OVER_IDLE,
        "target_met": live.get("p99_during_over_idle") is not None
        and live["p99_during_over_idle"] <= TARGET_P99_OVER_IDLE,
    }
    write_report(args.out, report)


if __name__ == "__main__":
    main()
