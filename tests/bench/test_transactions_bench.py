"""A smoke run of bench.transactions, so that it cannot rot: both producers measured in the same run,
the ratio and the commit latencies present (the numbers themselves are not judged)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import transactions


@pytest.mark.zookeeper
def test_quick_run_measures_transactional_beside_idempotent(tmp_path: Path) -> None:
    out = tmp_path / "transactions.json"
    transactions.main(["--quick", "--out", str(out)])
    report = json.loads(out.read_text())
    small, large = report["results"]["rounds"]
    assert small["idempotent"]["records_per_s"] > 0 and large["idempotent"]["records_per_s"] > 0
    assert small["transactional"]["transactions"] == 10  # 5,000 records, 500 per transaction
    assert large["transactional"]["transactions"] == 1
    assert set(report["results"]["median_ratio_by_txn_size"]) == {"500", "5000"}
    assert report["results"]["single_record"]["commit_ms"]["n"] == 20
