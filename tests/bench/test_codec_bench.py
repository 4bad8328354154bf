"""bench.codec cannot rot: a small run reports the struct floor beside the fast path, and the floor's
hand-written encoders and decoders write and read exactly the fast path's bytes (no timing judged)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.codec import check_agreement, leader_and_isr_body, update_metadata_body
from bench.codec_floor import FLOORS, Floor
from protocol import ApiKey
from protocol.registry import message_codec

REPO = Path(__file__).resolve().parents[2]
FLOOR_FIELDS = ("struct_encode_s", "struct_decode_s", "encode_over_floor", "decode_over_floor")


def small_body(api_key: int, version: int, partitions: int = 300, brokers: int = 5) -> dict[str, Any]:
    if api_key == ApiKey.LEADER_AND_ISR:
        return leader_and_isr_body(partitions, brokers)
    return update_metadata_body(version, partitions, brokers)


def assert_floor_matches_fast_path(api_key: int, version: int, body: dict[str, Any]) -> None:
    raw = message_codec(api_key, version, "request").encode(body)
    floor = FLOORS[api_key, version]
    assert floor.encode(body) == raw
    assert floor.decode(raw) == body


@pytest.mark.parametrize(("api_key", "version"), sorted(FLOORS))
def test_the_floor_writes_and_reads_the_fast_paths_bytes(api_key: int, version: int) -> None:
    assert_floor_matches_fast_path(api_key, version, small_body(api_key, version))


@pytest.mark.parametrize(("api_key", "version"), sorted(FLOORS))
def test_the_floor_handles_long_arrays_and_odd_values(api_key: int, version: int) -> None:
    """Counts past the floor's precompiled structs, offline replicas, a null rack, a new partition."""
    body = small_body(api_key, version, partitions=200)
    state = body["topic_states"][0]["partition_states"][0]
    state["replicas"] = list(range(70))
    state["isr"] = list(range(0, 70, 2))
    if api_key == ApiKey.LEADER_AND_ISR:
        state["is_new"] = True
    else:
        state["offline_replicas"] = list(range(1, 70, 2))
        body["live_brokers"][0]["rack"] = None
    assert_floor_matches_fast_path(api_key, version, body)


def test_a_floor_that_writes_other_bytes_stops_the_benchmark() -> None:
    body = small_body(ApiKey.LEADER_AND_ISR, 2)
    floor = FLOORS[ApiKey.LEADER_AND_ISR, 2]
    off_by_one = Floor(lambda b: floor.encode(b) + b"\0", floor.decode)
    codec = message_codec(ApiKey.LEADER_AND_ISR, 2, "request")
    with pytest.raises(SystemExit, match="struct floor writes other bytes"):
        check_agreement("LeaderAndIsr v2", codec, off_by_one, body, construct=False)


def test_a_small_run_reports_the_floor_beside_the_fast_path(tmp_path: Path) -> None:
    out = tmp_path / "codec.json"
    command = [sys.executable, "-m", "bench.codec", "--partitions", "2000", "--leader-and-isr-partitions"]
    command += ["1000", "--runs", "1", "--construct-runs", "1", "--brokers", "10", "--out", str(out)]
    subprocess.run(command, cwd=REPO, check=True, capture_output=True, text=True, timeout=300)
    report = json.loads(out.read_text())

    assert [r["message"] for r in report["results"]] == [
        "UpdateMetadata v5, 2000 partitions",
        "UpdateMetadata v7 (seed), 2000 partitions",
        "LeaderAndIsr v2, 1000 partitions",
    ]
    for result in report["results"]:
        for field in (*FLOOR_FIELDS, "construct_encode_s", "encode_speedup", "decode_speedup"):
            assert result[field] > 0, (result["message"], field)


def test_zero_construct_runs_skip_construct(tmp_path: Path) -> None:
    out = tmp_path / "codec.json"
    command = [sys.executable, "-m", "bench.codec", "--partitions", "1000", "--leader-and-isr-partitions"]
    command += ["500", "--runs", "1", "--construct-runs", "0", "--brokers", "10", "--out", str(out)]
    run = subprocess.run(command, cwd=REPO, check=True, capture_output=True, text=True, timeout=300)
    report = json.loads(out.read_text())

    for result in report["results"]:
        assert all(result[field] > 0 for field in FLOOR_FIELDS)
        assert result["construct_encode_s"] is None and result["construct_decode_mb_per_s"] is None
        assert result["encode_speedup"] is None
    assert "UpdateMetadata v5, 1000 partitions" in run.stdout
