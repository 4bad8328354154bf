"""The confirmation of new controller epochs in ZooKeeper (pure: ZooKeeper's answers are scripted),
and against a real broker: a forged LeaderAndIsr with a huge epoch neither applies nor cuts the broker
off from its real controller."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import epoch_confirmation
from broker.controller_guard import ControllerEpochGuard, ZkController
from protocol import ApiKey, ErrorCode
from tests.support.cluster import Cluster, epoch_of
from tests.support.requests import lai_partition, leader_and_isr
from tests.support.waiting import wait_until
from zkstore.topic_writes import create_topic


def guard(*answers: ZkController | Exception, timeout_s: float = 1.0) -> ControllerEpochGuard:
    replies: Iterator[ZkController | Exception] = iter(answers)

    def read() -> ZkController:
        answer = next(replies)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return ControllerEpochGuard(read, timeout_s=timeout_s)


def test_a_new_epoch_is_read_once_and_then_believed() -> None:
    g = guard(ZkController(1001, 4))
    assert g.check(1001, 4) is None
    assert g.check(1001, 4) is None and g.reads == 1
    assert g.check(1001, 3) is None, "older epochs are left to the stale check"


def test_a_forged_epoch_is_refused_and_the_real_one_still_accepted() -> None:
    g = guard(ZkController(1001, 4), ZkController(1001, 4))
    refused = g.check(7, 1 << 30)
    assert refused is not None and refused.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert refused.zookeeper == ZkController(1001, 4)
    assert g.check(1001, 4) is None


def test_another_controller_within_the_confirmed_epoch_is_refused_without_a_read() -> None:
    g = guard(ZkController(1001, 4))
    assert g.check(1001, 4) is None
    refused = g.check(1002, 4)
    assert refused is not None and refused.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert g.reads == 1


def test_a_deposed_controller_is_stale_and_zookeeper_trouble_refuses_after_the_timeout() -> None:
    stale = guard(ZkController(1002, 6)).check(1001, 5)
    assert stale is not None and stale.code == ErrorCode.STALE_CONTROLLER_EPOCH
    retried = guard(ConnectionError("lost"), ZkController(1001, 5))
    assert retried.check(1001, 5) is None and retried.reads == 2
    silent = guard(*[TimeoutError()] * 20, timeout_s=0.3)
    refused = silent.check(1001, 5)
    assert refused is not None and refused.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


@pytest.mark.zookeeper
@pytest.mark.parametrize("confirmation", [True, False], ids=["confirmed", "kafka-as-is"])
async def test_a_forged_leader_and_isr_neither_applies_nor_cuts_the_broker_off(
    cluster: Cluster, confirmation: bool
) -> None:
    """Without the confirmation (Kafka's behaviour) the forged epoch is taken, and the broker then
    refuses its real controller: the attack the confirmation closes."""
    overrides = {"controller.epoch.confirmation.enable": str(confirmation).lower()}
    await cluster.start((1,), overrides={1: overrides})
    broker = cluster.brokers[1]
    await cluster.topic("before", {0: (1,)})
    real = cluster.controller
    assert real is not None
    forged = leader_and_isr(
        5, epoch_of(broker), {"hijacked": [lai_partition(0, replicas=(1,))]}, controller_epoch=1 << 30
    )
    forged["controller_id"] = real.controller_id
    answer = await broker.request("CONTROLLER", ApiKey.LEADER_AND_ISR, 5, forged)
    hijacked = [e for e in broker.of_kind("become_leader") if e["topic"] == "hijacked"]
    if not confirmation:
        assert answer["error_code"] == ErrorCode.NONE and hijacked
        await create_topic(cluster.admin, "after", {0: (1,)})
        await wait_until(
            lambda: any(
                e["controller_epoch"] < 1 << 30 and e["error"] == "STALE_CONTROLLER_EPOCH"
                for e in broker.of_kind("control_request_handled")
            ),
            what="the real controller refused",
        )
        return
    assert answer["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and not hijacked
    [line] = broker.of_kind("controller_epoch_unconfirmed")
    assert line["controller_epoch"] == 1 << 30 and line["zk_controller_id"] == real.controller_id
    await cluster.topic("after", {0: (1,)})  # the real controller is still obeyed


@pytest.mark.zookeeper
async def test_an_earlier_generations_request_is_stale_broker_epoch_before_any_epoch_confirmation(
    cluster: Cluster,
) -> None:
    """Kafka checks the broker epoch first: a request queued for this broker's previous registration,
    from a controller epoch ZooKeeper no longer holds, is STALE_BROKER_EPOCH, not STALE_CONTROLLER_EPOCH
    (a mixed campaign saw Kafka's deposed controller reach a bounced broker of ours that way)."""
    await cluster.start((1,))
    broker = cluster.brokers[1]
    real = cluster.controller
    assert real is not None
    old = leader_and_isr(
        5, epoch_of(broker) - 1, {"late": [lai_partition(0, replicas=(1,))]}, controller_epoch=1 << 20
    )
    old["controller_id"] = real.controller_id
    answer = await broker.request("CONTROLLER", ApiKey.LEADER_AND_ISR, 5, old)
    assert answer["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    assert not broker.of_kind("controller_epoch_unconfirmed")


@pytest.mark.zookeeper
def test_the_failover_benchmark_runs_both_modes(tmp_path: Path) -> None:
    """A smoke run of bench.epoch_confirmation, so that it cannot rot (numbers are not judged)."""
    out = tmp_path / "epoch_confirmation.json"
    epoch_confirmation.main(["--quick", "--out", str(out)])
    report = json.loads(out.read_text())
    assert [m["mode"] for m in report["modes"]] == ["confirmed", "unconfirmed"]
    assert all(len(m["takeover_ms"]) == 2 for m in report["modes"])
    assert report["confirmed_over_unconfirmed_takeover"] > 0
