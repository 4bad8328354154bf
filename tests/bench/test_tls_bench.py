"""A smoke run of bench.tls, so that it cannot rot: both modes measured, SSL really over TLS, ratios
present (the numbers themselves are not judged)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import tls


@pytest.mark.zookeeper
def test_quick_run_measures_plaintext_beside_ssl(tmp_path: Path) -> None:
    out = tmp_path / "tls.json"
    tls.main(["--quick", "--out", str(out)])
    report = json.loads(out.read_text())

    [failover] = report["failover"]
    plain, ssl = failover["plaintext"], failover["ssl"]
    assert (plain["security"], ssl["security"]) == ("plaintext", "ssl")
    assert plain["broker_connections"] > 0 and plain["broker_tls_connections"] == 0
    assert ssl["broker_tls_connections"] == ssl["broker_connections"] > 0
    assert failover["ssl_over_plaintext"]["elected_to_last_response_s"] > 0
    assert failover["floor_partition_state_read_s"] > 0

    latency = report["control_latency"]
    for mode in ("plaintext", "ssl"):
        idle = latency[mode]["phases"]["idle"]
        assert idle["probes"] > 0 and set(idle["responses"]) == {"NONE"}
        assert latency[mode]["bulk_update_metadata"]["round_trip_ms"]["n"] == 2
        assert latency[mode]["new_connection_first_response_ms"]["n"] == tls.NEW_CONNECTIONS
    ratios = report["ratios"]
    assert ratios["control_idle_round_trip_p50"] > 0
    assert ratios["control_new_connection_first_response_p50"] > 0
