"""A small run of bench.kafka_anchor, so that it cannot rot: Apache Kafka 3.9's controller and ours each
take over (cold and warm) and handle a controlled shutdown against the same simulated brokers, and
every run had every partition acknowledged. The numbers themselves are not judged.

Kafka's jars are needed (``make kafka``); without them this fails, as the interop suite does, rather
than skipping.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import kafka_anchor, kafka_controller

PARTITIONS = 500
BROKERS = 3
RF = 3


def test_the_state_change_log_gives_each_request_and_its_partitions_per_broker() -> None:
    head = "[t] INFO [Controller id=0 epoch=4] Sending"
    log = "\n".join(
        [
            f"{head} UpdateMetadata request to brokers HashSet(0, 1, 2) for 0 partitions",
            f"{head} LeaderAndIsr request to broker 1 with 3 become-leader and 5 become-follower partitions",
            f"{head} UpdateMetadata request to brokers Set(0, 1) for 8 partitions (state.change.logger)",
            f"{head} UpdateMetadata request to brokers HashSet() for 0 partitions (state.change.logger)",
            "[t] INFO [Controller id=0 epoch=3] Sending LeaderAndIsr request to broker 2 with 1 "
            "become-leader and 0 become-follower partitions",
        ]
    )
    assert kafka_controller.state_change_requests(log, 0, 4) == {
        0: {"UpdateMetadata": [0, 8]},
        1: {"UpdateMetadata": [0, 8], "LeaderAndIsr": [8]},
        2: {"UpdateMetadata": [0]},
    }


@pytest.mark.zookeeper
def test_both_controllers_take_over_and_shut_a_broker_down_with_every_partition_acknowledged(
    kafka_jars: str, tmp_path: Path
) -> None:
    out = tmp_path / "kafka_anchor.json"
    kafka_anchor.main(
        [
            *("--partitions", str(PARTITIONS), "--brokers", str(BROKERS)),
            *("--runs", "1", "--reelections", "1"),
            *("--shutdown-partitions", str(PARTITIONS), "--shutdown-runs", "1"),
            *("--heap", "512m", "--kafka-heap", "512m", "--timeout", "120"),
            *("--workdir", str(tmp_path / "work"), "--out", str(out)),
        ]
    )
    report = json.loads(out.read_text())
    assert report["kafka"]["version"].startswith("3.9")
    assert report["date"] and report["machine"]["cores"] and "cpu_stall_share" in report["load"]

    [case] = report["failover"]
    epochs = []
    for kind in ("cold", "warm"):
        for side in ("ours", "kafka"):
            [run] = case[kind][side]["runs"]
            epochs.append(run["controller_epoch"])
            assert run["elected_to_last_ack_s"] > 0, (kind, side)
            assert run["acked"] == {
                "requests": run["acked"]["requests"],
                "unanswered": 0,
                "brokers": BROKERS,
                "leader_and_isr_partitions": PARTITIONS * RF,
                "update_metadata_full_brokers": BROKERS,
            }, (kind, side)
            assert run["acked"]["requests"]["LeaderAndIsr"] >= BROKERS
        assert case[kind]["ours_over_kafka"] > 0 and case[kind]["kafka_over_floor"] > 0
    assert len(set(epochs)) == 4, "every takeover won an election of its own"

    shutdown = report["controlled_shutdown"]
    for side in ("ours", "kafka"):
        [run] = shutdown[side]["runs"]
        assert (run["controlled_shutdown_version"], run["reelections_before"]) == (3, 1)
        assert (run["error"], run["remaining_partitions"], run["correct"]) == ("NONE", 0, True), side
        assert run["zookeeper"]["checked"] == PARTITIONS
        assert run["partition_states_written"] == PARTITIONS
        assert run["request_to_last_ack_s"] is not None, f"{side}: the new leaders were announced and acked"
    assert shutdown["ours_over_kafka"] > 0 and shutdown["floor_s"] > 0
