"""The log cleaner's throughput beside the cost of reading the same segments, in one run.

A compacted log of ``--segments`` full segments (``--segment-bytes`` each) is written once: batches of
``--batch-records`` keyed records, ``--value-bytes`` values, keys drawn round-robin from ``--keys``
keys, so most records are superseded. Each round copies that log afresh and, on the same page-cache
state, times three passes over the cleanable segments:

1. **read**: every batch fetched with ``Log.read`` (bytes only), the floor of any pass over the log;
2. **read + decode**: the same, each batch's records decoded (``decode_records``), which the cleaner
   must do twice (map, then copy) in Python;
3. **clean**: one cleaning (``broker.log.compaction.Cleaner``, a 128 MB map) from the log start to
   the active segment, swaps included.

The report gives MB/s of the cleanable bytes for each, the ratios clean/read and clean/decode
(median of ``--rounds``), and what the cleaning kept. bench/results/log_cleaner.json and a line on
stdout.

    .venv/bin/python -m bench.log_cleaner [--segments 40] [--segment-bytes 1048576] [--quick]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.machine import machine, write_report
from bench.measure import ratio
from broker.log import Log, LogConfig
from broker.log.compaction import Cleaner
from broker.log.offset_map import OffsetMap
from protocol.record_batch import build_batch, decode_records, parse_batches

NOW = 1_700_000_000_000
MAP_MEMORY = 128 * 1024 * 1024


@dataclass(frozen=True)
class Settings:
    segments: int
    segment_bytes: int
    keys: int
    batch_records: int
    value_bytes: int
    rounds: int


def write_log(directory: Path, settings: Settings) -> Log:
    """A compacted log with ``settings.segments`` sealed segments and a small active one."""
    config = LogConfig(segment_bytes=settings.segment_bytes, compact=True, delete=False)
    log = Log.open(directory, config)
    value = b"v" * settings.value_bytes
    i = 0
    while log.segment_count <= settings.segments:
        records = [
            (f"key-{(i + n) % settings.keys:08d}".encode(), value) for n in range(settings.batch_records)
        ]
        log.append_as_leader(build_batch(records, timestamps=[NOW] * len(records)), 0, now_ms=NOW)
        i += settings.batch_records
    log.flush()
    return log


def cleanable_bytes(log: Log) -> int:
    return sum(s.size for s in log.cleaning_view().segments[:-1])


def read_pass(log: Log, *, decode: bool) -> int:
    """Read every batch below the active segment; returns the records decoded (0 without)."""
    end, offset, decoded = log.cleaning_view().active_base, log.log_start_offset, 0
    while offset < end:
        data = log.read(offset, 1 << 20, upper_bound=end)
        for header, position, size in parse_batches(data):
            if decode:
                decoded += len(decode_records(data[position : position + size]))
            offset = header.next_offset
    return decoded


def one_round(pristine: Path, scratch: Path, settings: Settings) -> dict[str, Any]:
    directory = scratch / "compacted-0"
    shutil.rmtree(directory, ignore_errors=True)
    shutil.copytree(pristine, directory)
    log = Log.open(directory, LogConfig(segment_bytes=settings.segment_bytes, compact=True, delete=False))
    size = cleanable_bytes(log)
    timings: dict[str, Any] = {}
    for name, decode in (("read", False), ("read_decode", True)):
        started = time.perf_counter()
        read_pass(log, decode=decode)
        timings[name] = time.perf_counter() - started
    cleaner = Cleaner(OffsetMap(MAP_MEMORY))
    started = time.perf_counter()
    end, stats = cleaner.clean(log, 0, log.cleaning_view().active_base, NOW)
    timings["clean"] = time.perf_counter() - started
    log.close()
    return {
        "cleanable_bytes": size,
        "seconds": {k: round(v, 3) for k, v in timings.items()},
        "mb_per_s": {k: round(size / v / 1e6, 2) for k, v in timings.items()},
        "clean": {
            "end_offset": end,
            "bytes_written": stats.bytes_written,
            "records_read": stats.records_read,
            "records_kept": stats.records_written,
            "map_seconds": round(stats.elapsed_index_s, 3),
        },
    }


def run(settings: Settings) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="log-cleaner-bench-") as tmp:
        root = Path(tmp)
        pristine = root / "pristine"
        write_log(pristine, settings).close()
        rounds = [one_round(pristine, root / "scratch", settings) for _ in range(settings.rounds)]
    median = {
        name: statistics.median(r["mb_per_s"][name] for r in rounds)
        for name in ("read", "read_decode", "clean")
    }
    return {
        "rounds": rounds,
        "median_mb_per_s": median,
        "ratio_clean_to_read": ratio(median["clean"], median["read"]),
        "ratio_clean_to_read_decode": ratio(median["clean"], median["read_decode"]),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--segments", type=int, default=40)
    parser.add_argument("--segment-bytes", type=int, default=1 << 20)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--batch-records", type=int, default=50)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="4 segments of 64 KB, one round")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "log_cleaner.json"
    )
    args = parser.parse_args(argv)
    settings = Settings(
        segments=4 if args.quick else args.segments,
        segment_bytes=64 * 1024 if args.quick else args.segment_bytes,
        keys=500 if args.quick else args.keys,
        batch_records=args.batch_records,
        value_bytes=args.value_bytes,
        rounds=1 if args.quick else args.rounds,
    )
    started = time.time()
    results = run(settings)
    report = {
        "benchmark": "log_cleaner",
        "machine": machine(),
        "command": " ".join([Path(sys.executable).name, "-m", "bench.log_cleaner", *sys.argv[1:]]),
        "settings": {**asdict(settings), "map_memory": MAP_MEMORY},
        "wall_s": round(time.time() - started, 1),
        **results,
    }
    write_report(args.out, report)
    print(
        json.dumps(
            {k: report[k] for k in ("median_mb_per_s", "ratio_clean_to_read", "ratio_clean_to_read_decode")}
        )
    )


if __name__ == "__main__":
    main()
