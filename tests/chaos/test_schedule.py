"""The fault schedule and loop without a cluster: seeded, safe targets, one node down at a time."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from pathlib import Path

import pytest

from chaos import ChaosError
from chaos.faults import Lanes, fault_loop
from chaos.network import Cut, cut_plan
from chaos.schedule import (
    FAULTS,
    KILL_DOWN_S,
    NETWORK_FAULTS,
    ZOOKEEPER_FAULTS,
    FaultSchedule,
    Node,
    Step,
    eligible_targets,
    nodes_of,
)

ZOOKEEPER = [Node("zookeeper-1", "zookeeper")]
CONTROLLERS = [Node("controller-1", "controller", 6.0), Node("controller-2", "controller", 6.0)]
BROKERS = [Node(f"broker-{i}", "broker", 6.0) for i in (1, 2, 3)]
CLUSTER = ZOOKEEPER + CONTROLLERS + BROKERS


def steps(schedule: FaultSchedule, count: int = 200) -> list[Step]:
    return list(itertools.islice(schedule, count))


def test_the_same_seed_gives_the_same_faults_and_another_seed_others() -> None:
    first = steps(FaultSchedule(CLUSTER, seed=42))
    assert first == steps(FaultSchedule(CLUSTER, seed=42))
    assert first != steps(FaultSchedule(CLUSTER, seed=43))


def test_faults_targets_and_waits_stay_within_what_was_asked() -> None:
    chosen = steps(FaultSchedule(CLUSTER, faults=("kill", "pause"), roles=("broker",), interval_s=4, seed=1))
    assert {s.fault for s in chosen} == {"kill", "pause"}
    assert {s.target for s in chosen} == {"broker-1", "broker-2", "broker-3"}
    assert all(2 <= s.wait_s <= 6 for s in chosen)
    assert sum(s.wait_s for s in chosen) / len(chosen) == pytest.approx(4, rel=0.1)


def test_a_pause_outlasts_the_session_timeout_and_a_kill_is_short() -> None:
    chosen = steps(FaultSchedule(CLUSTER, seed=3))
    holds = {s.fault: s.hold_s for s in chosen}
    assert holds["pause"] > 6.0, "a paused daemon must lose its ZooKeeper session"
    assert holds["kill"] == KILL_DOWN_S
    assert holds["bounce"] == holds["restart"] == 0


def test_a_lone_controller_or_zookeeper_server_is_never_a_target() -> None:
    alone = ZOOKEEPER + CONTROLLERS[:1] + BROKERS
    every_role = ("broker", "controller", "zookeeper")
    assert {n.role for n in eligible_targets(alone, every_role)} == {"broker"}
    ensemble = [Node(f"zookeeper-{i}", "zookeeper") for i in (1, 2, 3)] + CONTROLLERS
    assert len(eligible_targets(ensemble, every_role)) == 5
    with pytest.raises(ChaosError, match="can go down alone"):
        FaultSchedule(alone, roles=("controller",))
    with pytest.raises(ChaosError, match="unknown fault"):
        FaultSchedule(CLUSTER, faults=("nuke",))


def test_session_timeouts_come_from_the_daemons_configs(tmp_path: Path) -> None:
    config = tmp_path / "broker.properties"
    config.write_text("broker.id=1\nzookeeper.session.timeout.ms=6000\n")
    state = {
        "processes": [
            {"name": "zookeeper-1", "role": "zookeeper", "config": str(tmp_path / "zoo.cfg")},
            {"name": "broker-1", "role": "broker", "config": str(config)},
        ]
    }
    assert nodes_of(state) == [Node("zookeeper-1", "zookeeper", None), Node("broker-1", "broker", 6.0)]
    config.write_text("broker.id=1\n")
    assert nodes_of(state)[1].session_timeout_s == 18.0, "Kafka's default, as the daemon reads it"
    config.write_text("zookeeper.session.timeout.ms=soon\n")
    with pytest.raises(ChaosError, match=r"zookeeper\.session\.timeout\.ms"):
        nodes_of(state)
    config.unlink()
    with pytest.raises(ChaosError, match="cannot read"):
        nodes_of(state)


class RecordingInjector:
    """Keeps track of which nodes are down, as the real injector's faults would leave them."""

    def __init__(self, controllers: set[str]) -> None:
        self.controllers = controllers
        self.down: set[str] = set()
        self.calls: list[tuple[str, str]] = []
        self.most_down = 0
        self.injected = asyncio.Event()

    async def inject(self, step: Step) -> bool:
        self.calls.append(("inject", step.target))
        self.injected.set()
        self.down.add(step.target)
        self.most_down = max(self.most_down, len(self.down))
        assert self.controllers - self.down, "no controller candidate left"
        await asyncio.sleep(0)
        return True

    async def heal(self, step: Step) -> None:
        self.calls.append(("heal", step.target))
        await asyncio.sleep(0)

    async def settle(self, step: Step) -> None:
        await asyncio.sleep(0)
        self.down.discard(step.target)
        self.calls.append(("settle", step.target))


def fast(schedule: FaultSchedule) -> list[Step]:
    """The schedule's first steps with its waits and holds shrunk a thousandfold."""
    return [
        dataclasses.replace(s, wait_s=s.wait_s / 1000, hold_s=s.hold_s / 1000) for s in steps(schedule, 60)
    ]


async def test_the_loop_takes_one_node_down_at_a_time_and_keeps_a_controller() -> None:
    injector = RecordingInjector({"controller-1", "controller-2"})
    await fault_loop(fast(FaultSchedule(CLUSTER, interval_s=1, seed=9)), injector, asyncio.Event())
    assert injector.most_down == 1
    targets = {t for _, t in injector.calls}
    assert {"controller-1", "controller-2"} <= targets and len(injector.calls) == 3 * 60
    for i in range(0, len(injector.calls), 3):
        (a, x), (b, y), (c, z) = injector.calls[i : i + 3]
        assert (a, b, c) == ("inject", "heal", "settle") and x == y == z


async def test_a_stop_lets_the_current_fault_finish_and_heals_it() -> None:
    injector = RecordingInjector({"controller-1"})
    stop = asyncio.Event()
    schedule = [Step(0.0, "pause", "broker-1", "broker", 0.3), Step(0.0, "kill", "broker-2", "broker", 0.3)]
    loop = asyncio.create_task(fault_loop(schedule, injector, stop))
    await asyncio.wait_for(injector.injected.wait(), 5)
    stop.set()
    await asyncio.wait_for(loop, 5)
    assert injector.calls == [("inject", "broker-1"), ("heal", "broker-1"), ("settle", "broker-1")]


async def test_a_cancelled_loop_still_heals_the_node_it_took_down() -> None:
    injector = RecordingInjector({"controller-1"})
    loop = asyncio.create_task(
        fault_loop([Step(0.0, "kill", "broker-1", "broker", 30.0)], injector, asyncio.Event())
    )
    await asyncio.wait_for(injector.injected.wait(), 5)
    loop.cancel()
    with pytest.raises(asyncio.CancelledError):
        await loop
    assert injector.calls == [("inject", "broker-1"), ("heal", "broker-1")]


# ---------------------------------------------------------------- network and ZooKeeper faults

ENSEMBLE = [Node(f"zookeeper-{i}", "zookeeper") for i in (1, 2, 3)] + CONTROLLERS + BROKERS


def test_cuts_need_a_cluster_that_can_make_them() -> None:
    with pytest.raises(ChaosError, match=r"it can cut none.*--netns"):
        FaultSchedule(CLUSTER, faults=("isolate-zookeeper",))
    with pytest.raises(ChaosError, match=r"^isolate-zookeeper cut .*it can only isolate\)"):
        FaultSchedule(CLUSTER, faults=("isolate", "isolate-zookeeper"), cuts=("isolate",))
    assert FaultSchedule(CLUSTER, faults=("isolate",), cuts=("isolate",)).faults == ("isolate",)
    every = FaultSchedule(CLUSTER, faults=("isolate-zookeeper",), cuts=NETWORK_FAULTS)
    assert every.faults == ("isolate-zookeeper",)


def test_each_fault_hits_only_the_nodes_it_is_for() -> None:
    chosen = steps(FaultSchedule(ENSEMBLE, faults=FAULTS, cuts=NETWORK_FAULTS, seed=5), 500)
    by_fault: dict[str, set[str]] = {}
    for s in chosen:
        by_fault.setdefault(s.fault, set()).add(s.role)
    assert set(by_fault) == set(FAULTS)
    assert by_fault["isolate-followers"] == by_fault["isolate-controller"] == by_fault["bridge"] == {"broker"}
    assert by_fault["isolate-zookeeper"] == {"broker", "controller"}
    for fault in ("zookeeper-restart", "zookeeper-leader-kill", "quorum-loss", "zookeeper-minority"):
        assert by_fault[fault] == {"zookeeper"}
    holds = {s.fault: s.hold_s for s in chosen}
    assert holds["isolate-zookeeper"] > 6.0, "a cut from ZooKeeper must outlast the session timeout"


def test_a_standalone_zookeeper_can_only_be_restarted() -> None:
    schedule = FaultSchedule(CLUSTER, faults=ZOOKEEPER_FAULTS, cuts=NETWORK_FAULTS, seed=2)
    assert schedule.faults == ("zookeeper-restart",)


@pytest.mark.parametrize(
    ("fault", "target", "near", "far"),
    [
        (
            "isolate",
            "broker-2",
            ("broker-2",),
            (
                "zookeeper-1",
                "zookeeper-2",
                "zookeeper-3",
                "controller-1",
                "controller-2",
                "broker-1",
                "broker-3",
            ),
        ),
        ("isolate-zookeeper", "broker-2", ("broker-2",), ("zookeeper-1", "zookeeper-2", "zookeeper-3")),
        ("isolate-controller", "broker-2", ("broker-2",), ("controller-1", "controller-2")),
        ("isolate-followers", "broker-2", ("broker-2",), ("broker-1", "broker-3")),
        ("zookeeper-minority", "zookeeper-2", ("zookeeper-2",), ("zookeeper-1", "zookeeper-3")),
    ],
)
def test_what_each_cut_separates(
    fault: str, target: str, near: tuple[str, ...], far: tuple[str, ...]
) -> None:
    assert cut_plan(fault, target, ENSEMBLE) == Cut(near, far)


def test_a_bridge_splits_the_others_in_two_and_leaves_the_target_between() -> None:
    cut = cut_plan("bridge", "broker-2", ENSEMBLE)
    others = {n.name for n in ENSEMBLE} - {"broker-2"}
    assert set(cut.near) | set(cut.far) == others and not set(cut.near) & set(cut.far)
    assert abs(len(cut.near) - len(cut.far)) <= 1


class OverlapInjector(RecordingInjector):
    """Records which faults were in force at once."""

    def __init__(self) -> None:
        super().__init__(set())
        self.now: list[Step] = []
        self.together: list[tuple[str, ...]] = []

    async def inject(self, step: Step) -> bool:
        assert step.target not in {s.target for s in self.now}, f"{step.target} hit twice at once"
        self.now.append(step)
        self.together.append(tuple(sorted(s.fault for s in self.now)))
        self.calls.append(("inject", step.target))
        await asyncio.sleep(0)
        return True

    async def heal(self, step: Step) -> None:
        self.now.remove(step)
        await asyncio.sleep(0)

    async def settle(self, step: Step) -> None:
        await asyncio.sleep(0)


async def test_mixed_loops_overlap_but_never_on_one_node_one_cut_or_one_zookeeper_fault() -> None:
    injector = OverlapInjector()
    lanes = Lanes()
    schedules = [fast(FaultSchedule(ENSEMBLE, faults=FAULTS, cuts=NETWORK_FAULTS, seed=s)) for s in (1, 2, 3)]
    await asyncio.gather(*(fault_loop(s, injector, asyncio.Event(), lanes) for s in schedules))
    assert any(len(t) > 1 for t in injector.together), "the loops never overlapped"
    for faults in injector.together:
        assert sum(f in ZOOKEEPER_FAULTS for f in faults) <= 1, faults
        assert sum(f in NETWORK_FAULTS for f in faults) <= 1, faults
    assert lanes.held == set(), "every token given back"
