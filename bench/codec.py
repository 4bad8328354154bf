"""Codec throughput on the controller's biggest messages: the fast path beside construct alone.

A 100,000-partition UpdateMetadata (RF 3, 3-entry ISR, 200 live brokers) in the per-broker-epoch v5
and the seed's max-epoch v7, and a 10,000-partition LeaderAndIsr v2. Each figure is the best of
``--runs`` runs; both paths run in the same process on the same bodies, so their ratio is fair.
Results go to bench/results/codec.json (and stdout); nothing here is asserted.

    .venv/bin/python -m bench.codec [--runs 5] [--construct-runs 2] [--out bench/results/codec.json]
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.machine import machine, write_report
from protocol import ApiKey, epoch_field
from protocol.registry import message_codec

REPLICATION_FACTOR = 3


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


def measure(
    name: str, api_key: int, version: int, body: dict[str, Any], runs: int, construct_runs: int
) -> dict:
    codec = message_codec(api_key, version, "request")
    raw = codec.encode(body)
    if codec.reference_encode(body) != raw or codec.decode(raw) != body:
        raise SystemExit(f"{name}: fast path and construct disagree; not benchmarking a wrong codec")
    size = len(raw)
    timings = {
        "fast_encode_s": best_seconds(lambda: codec.encode(body), runs),
        "fast_decode_s": best_seconds(lambda: codec.decode(raw), runs),
        "construct_encode_s": best_seconds(lambda: codec.reference_encode(body), construct_runs),
        "construct_decode_s": best_seconds(lambda: codec.reference_decode(raw), construct_runs),
    }
    result: dict[str, Any] = {"message": name, "bytes": size, **{k: round(v, 4) for k, v in timings.items()}}
    for key, seconds in timings.items():
        result[key.replace("_s", "_mb_per_s")] = round(size / seconds / 1e6, 2)
    result["encode_speedup"] = round(timings["construct_encode_s"] / timings["fast_encode_s"], 1)
    result["decode_speedup"] = round(timings["construct_decode_s"] / timings["fast_decode_s"], 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="runs of the fast path; the best counts")
    parser.add_argument("--construct-runs", type=int, default=2, help="runs of construct alone (slow)")
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--brokers", type=int, default=200)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "codec.json"
    )
    args = parser.parse_args()

    cases = [
        (
            f"UpdateMetadata v5, {args.partitions} partitions",
            ApiKey.UPDATE_METADATA,
            5,
            update_metadata_body(5, args.partitions, args.brokers),
        ),
        (
            f"UpdateMetadata v7 (seed), {args.partitions} partitions",
            ApiKey.UPDATE_METADATA,
            7,
            update_metadata_body(7, args.partitions, args.brokers),
        ),
        (
            "LeaderAndIsr v2, 10000 partitions",
            ApiKey.LEADER_AND_ISR,
            2,
            leader_and_isr_body(10_000, args.brokers),
        ),
    ]
    results = []
    columns = ("MB", "enc MB/s", "dec MB/s", "construct enc", "construct dec")
    print(f"{'message':<44}" + "".join(f"{c:>15}" for c in columns))
    for name, key, version, body in cases:
        r = measure(name, key, version, body, args.runs, args.construct_runs)
        results.append(r)
        figures = (
            r["bytes"] / 1e6,
            r["fast_encode_mb_per_s"],
            r["fast_decode_mb_per_s"],
            r["construct_encode_mb_per_s"],
            r["construct_decode_mb_per_s"],
        )
        print(f"{name:<44}" + "".join(f"{f:>15.2f}" for f in figures))
    report = {
        "benchmark": "codec",
        "machine": machine(),
        "runs": args.runs,
        "construct_runs": args.construct_runs,
        "target_mb_per_s": 25,
        "results": results,
    }
    write_report(args.out, report)


if __name__ == "__main__":
    main()
