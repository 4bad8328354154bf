"""Codec throughput on the controller's biggest messages: the fast path beside a struct floor and construct.

A 100,000-partition UpdateMetadata (RF 3, 3-entry ISR, 200 live brokers; ``--partitions`` sets the
count) in the per-broker-epoch v5 and the seed's max-epoch v7, and a 10,000-partition LeaderAndIsr v2.
The floor is a hand-written ``struct`` loop for exactly each layout (bench/codec_floor.py), checked
once to write the fast path's bytes and read back its dicts; ``encode_over_floor`` and
``decode_over_floor`` are the fast path's time over the floor's (1.0 means no cost beyond the wire
work), reported beside the absolute seconds and MB/s. Each figure is the best of ``--runs`` runs
(construct: ``--construct-runs``, 0 to skip it and its check, its fields then null); all paths run in
the same process on the same bodies, so their ratios are fair. Results go to
bench/results/codec.json (and stdout); nothing here is asserted.

    .venv/bin/python -m bench.codec [--runs 5] [--construct-runs 2] [--partitions 100000]
        [--out bench/results/codec.json]
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.codec_floor import FLOORS, Floor
from bench.machine import machine, write_report
from protocol import ApiKey, epoch_field
from protocol.message_codec import MessageCodec
from protocol.registry import message_codec

REPLICATION_FACTOR = 3

Case = tuple[str, int, int, Callable[[], dict[str, Any]]]
"""A benchmarked message: its name, API key, version (default dialect) and a builder of its body."""


def _replicas(index: int, brokers: int) -> list[int]:
    return [(index + i) % brokers for i in range(REPLICATION_FACTOR)]


def topic_states(partitions: int, brokers: int, extra: dict[str, Any], per_topic: int = 100) -> list[dict]:
    """Topics of ``per_topic`` partitions, replicas spread round-robin, the full ISR in sync.

    ``extra`` holds the fields in which the two control requests' partition states differ.
    """
    topics = []
    for t in range(partitions // per_topic):
        states = []
        for p in range(per_topic):
            replicas = _replicas(t * per_topic + p, brokers)
            base = {"partition_index": p, "controller_epoch": 7, "leader": replicas[0], "leader_epoch": 12}
            states.append({**base, "isr": list(replicas), **extra, "replicas": replicas})
        topics.append({"topic_name": f"topic-{t:05d}", "partition_states": states})
    return topics


def update_metadata_body(version: int, partitions: int, brokers: int) -> dict[str, Any]:
    live_brokers = [
        {
            "id": b,
            "endpoints": [
                {
                    "port": port,
                    "host": f"broker-{b}.kafka.local",
                    "listener": listener,
                    "security_protocol": 0,
                }
                for port, listener in ((9092, "PLAINTEXT"), (9093, "CONTROLLER"))
            ],
            "rack": f"rack-{b % 3}",
        }
        for b in range(brokers)
    ]
    return {
        "controller_id": 1,
        "controller_epoch": 7,
        epoch_field(ApiKey.UPDATE_METADATA, version): 0x1F0000002A,
        "topic_states": topic_states(partitions, brokers, {"zk_version": 31, "offline_replicas": []}),
        "live_brokers": live_brokers,
    }


def leader_and_isr_body(partitions: int, brokers: int) -> dict[str, Any]:
    leaders = [{"broker_id": b, "host_name": f"broker-{b}.kafka.local", "port": 9092} for b in range(brokers)]
    return {
        "controller_id": 1,
        "controller_epoch": 7,
        "broker_epoch": 0x1F0000002A,
        "topic_states": topic_states(partitions, brokers, {"partition_epoch": 31, "is_new": False}),
        "live_leaders": leaders,
    }


def best_seconds(fn: Callable[[], Any], runs: int) -> float:
    """Best wall time of ``runs`` calls; each result is dropped before the next run starts."""
    best = float("inf")
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
        del result
        best = min(best, elapsed)
    return best


def check_agreement(
    name: str, codec: MessageCodec, floor: Floor, body: dict[str, Any], construct: bool
) -> bytes:
    """The fast path's bytes, once the floor (and construct, unless skipped) agree with them both ways:
    a ratio to a floor that writes other bytes, or reads other dicts, would measure nothing."""
    raw = codec.encode(body)
    if codec.decode(raw) != body:
        raise SystemExit(f"{name}: the fast path does not read back its own bytes; not benchmarking it")
    if construct and (codec.reference_encode(body) != raw or codec.reference_decode(raw) != body):
        raise SystemExit(f"{name}: fast path and construct disagree; not benchmarking a wrong codec")
    if floor.encode(body) != raw:
        raise SystemExit(f"{name}: the struct floor writes other bytes than the fast path; fix the floor")
    if floor.decode(raw) != body:
        raise SystemExit(f"{name}: the struct floor reads other dicts than the fast path; fix the floor")
    return raw


def _ratio(numerator: float | None, denominator: float | None, digits: int) -> float | None:
    return None if numerator is None or denominator is None else round(numerator / denominator, digits)


def measure(
    name: str, api_key: int, version: int, body: dict[str, Any], runs: int, construct_runs: int
) -> dict:
    """One message's figures; construct's are null when ``construct_runs`` is 0 (it is then skipped,
    its agreement check included)."""
    codec = message_codec(api_key, version, "request")
    floor = FLOORS[api_key, version]
    raw = check_agreement(name, codec, floor, body, construct_runs > 0)
    size = len(raw)
    timings: dict[str, float | None] = {
        "fast_encode_s": best_seconds(lambda: codec.encode(body), runs),
        "fast_decode_s": best_seconds(lambda: codec.decode(raw), runs),
        "struct_encode_s": best_seconds(lambda: floor.encode(body), runs),
        "struct_decode_s": best_seconds(lambda: floor.decode(raw), runs),
        "construct_encode_s": None,
        "construct_decode_s": None,
    }
    if construct_runs > 0:
        timings["construct_encode_s"] = best_seconds(lambda: codec.reference_encode(body), construct_runs)
        timings["construct_decode_s"] = best_seconds(lambda: codec.reference_decode(raw), construct_runs)
    result: dict[str, Any] = {"message": name, "bytes": size}
    for key, seconds in timings.items():
        result[key] = None if seconds is None else round(seconds, 6)
    for key, seconds in timings.items():
        result[key.replace("_s", "_mb_per_s")] = _ratio(size / 1e6, seconds, 2)
    result["encode_over_floor"] = _ratio(timings["fast_encode_s"], timings["struct_encode_s"], 2)
    result["decode_over_floor"] = _ratio(timings["fast_decode_s"], timings["struct_decode_s"], 2)
    result["encode_speedup"] = _ratio(timings["construct_encode_s"], timings["fast_encode_s"], 1)
    result["decode_speedup"] = _ratio(timings["construct_decode_s"], timings["fast_decode_s"], 1)
    return result


COLUMNS = (
    ("MB", "bytes", 1e-6),
    ("enc MB/s", "fast_encode_mb_per_s", 1),
    ("floor enc MB/s", "struct_encode_mb_per_s", 1),
    ("enc/floor", "encode_over_floor", 1),
    ("dec MB/s", "fast_decode_mb_per_s", 1),
    ("floor dec MB/s", "struct_decode_mb_per_s", 1),
    ("dec/floor", "decode_over_floor", 1),
    ("construct enc", "construct_encode_mb_per_s", 1),
    ("construct dec", "construct_decode_mb_per_s", 1),
)
"""The stdout table: heading, result field, scale (MB/s and ratios as reported, sizes in MB)."""


def table_row(label: str, result: dict[str, Any] | None = None) -> str:
    """The heading row without ``result``; a dash stands for a figure not measured."""
    cells = []
    for heading, key, scale in COLUMNS:
        value = None if result is None else result[key]
        cells.append(heading if result is None else "-" if value is None else f"{value * scale:.2f}")
    return f"{label:<46}" + "".join(f"{cell:>15}" for cell in cells)


def cases(partitions: int, leader_and_isr_partitions: int, brokers: int) -> list[Case]:
    """Each message with a builder for its body, so only one body is alive at a time (a million
    partitions take gigabytes as dicts)."""
    return [
        (
            f"UpdateMetadata v5, {partitions} partitions",
            ApiKey.UPDATE_METADATA,
            5,
            lambda: update_metadata_body(5, partitions, brokers),
        ),
        (
            f"UpdateMetadata v7 (seed), {partitions} partitions",
            ApiKey.UPDATE_METADATA,
            7,
            lambda: update_metadata_body(7, partitions, brokers),
        ),
        (
            f"LeaderAndIsr v2, {leader_and_isr_partitions} partitions",
            ApiKey.LEADER_AND_ISR,
            2,
            lambda: leader_and_isr_body(leader_and_isr_partitions, brokers),
        ),
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--runs", type=int, default=5, help="runs of the fast path and the floor; the best counts"
    )
    parser.add_argument(
        "--construct-runs", type=int, default=2, help="runs of construct alone (slow); 0 skips construct"
    )
    parser.add_argument(
        "--partitions", type=int, default=100_000, help="partitions of the UpdateMetadata cases"
    )
    parser.add_argument("--leader-and-isr-partitions", type=int, default=10_000)
    parser.add_argument("--brokers", type=int, default=200)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "codec.json"
    )
    args = parser.parse_args(argv)
    if args.runs < 1 or args.construct_runs < 0:
        parser.error("--runs must be at least 1 and --construct-runs at least 0")

    results = []
    print(table_row("message"))
    for name, key, version, build in cases(args.partitions, args.leader_and_isr_partitions, args.brokers):
        r = measure(name, key, version, build(), args.runs, args.construct_runs)
        results.append(r)
        print(table_row(name, r))
    report = {
        "benchmark": "codec",
        "machine": machine(),
        "runs": args.runs,
        "construct_runs": args.construct_runs,
        "partitions": args.partitions,
        "leader_and_isr_partitions": args.leader_and_isr_partitions,
        "brokers": args.brokers,
        "target_mb_per_s": 25,
        "results": results,
    }
    write_report(args.out, report)


if __name__ == "__main__":
    main()
