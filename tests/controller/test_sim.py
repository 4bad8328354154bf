"""The controller's deterministic simulation: its parts, its determinism, and that it finds real bugs.

The simulated ZooKeeper and loop are checked against the behaviour the controller relies on
(multi-op atomicity, one-shot watches, lost replies, expiry); whole runs are checked to replay
exactly; and each bug the project once fixed, put back (``controller.sim.plants``), is found within
a few seeds and shrunk to a short schedule. Schedules the simulator found failing are kept here as
regression tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss, NodeExistsError, RolledBackError, RuntimeInconsistency
from kazoo.protocol.states import EventType, WatchedEvent

from controller.sim.loop import SimLoop
from controller.sim.plants import PLANTS, planted
from controller.sim.run import Outcome, run
from controller.sim.shrink import kind_of, shrink
from controller.sim.world import SimSettings
from controller.sim.zk_client import SimKazooClient
from controller.sim.zookeeper import SimZooKeeper

ROOT = Path(__file__).resolve().parents[2]


def _server() -> SimZooKeeper:
    return SimZooKeeper(lambda: 0)


def _drain(client: SimKazooClient) -> None:
    while client.can_apply() or client.can_deliver():
        if client.can_apply():
            client.apply_one()
        else:
            client.deliver_one()


def test_virtual_time_runs_timers_in_order_without_waiting() -> None:
    loop = SimLoop()
    fired: list[tuple[str, float]] = []
    loop.call_later(30.0, lambda: fired.append(("late", loop.time())))
    loop.call_later(5.0, lambda: fired.append(("early", loop.time())))
    loop.advance(10.0)
    assert fired == [("early", 5.0)]
    loop.advance(100.0)
    assert fired == [("early", 5.0), ("late", 30.0)]
    assert loop.time() == 110.0
    loop.close()


def test_a_failed_multi_changes_nothing_and_names_the_op_that_failed() -> None:
    server = _server()
    client = SimKazooClient(server, "c")
    client.start()
    txn = client.transaction()
    txn.create("/a", b"1")
    txn.create("/a", b"2")  # exists by then: the whole transaction rolls back
    txn.create("/b", b"3")
    result = txn.commit_async()
    _drain(client)
    outcome = result.get_nowait()
    assert [type(r) for r in outcome] == [RolledBackError, NodeExistsError, RuntimeInconsistency]
    assert "/a" not in server.nodes and "/b" not in server.nodes


def test_watches_fire_once_in_order_with_the_replies() -> None:
    server = _server()
    watcher, writer = SimKazooClient(server, "w"), SimKazooClient(server, "x")
    watcher.start()
    writer.start()
    seen: list[WatchedEvent] = []
    watcher.exists_async("/node", watch=seen.append)
    watcher.get_children_async("/", watch=seen.append)
    _drain(watcher)
    writer.create_async("/node", b"")
    writer.set_async("/node", b"again")
    _drain(writer)
    _drain(watcher)
    assert [(e.type, e.path) for e in seen] == [(EventType.CREATED, "/node"), (EventType.CHILD, "/")]


def test_a_lost_reply_fails_the_request_although_the_write_was_applied() -> None:
    server = _server()
    client = SimKazooClient(server, "c")
    client.start()
    result = client.create_async("/applied", b"")
    client.apply_one()  # the ensemble applies it; the reply is on its way
    client.disconnect()
    with pytest.raises(ConnectionLoss):
        result.get_nowait()
    assert "/applied" in server.nodes


def test_an_expired_session_loses_its_ephemerals_and_the_client_a_new_session() -> None:
    server = _server()
    client = SimKazooClient(server, "c")
    client.start()
    client.create_async("/mine", b"", ephemeral=True)
    _drain(client)
    old = client.session
    client.disconnect()
    server.end_session(old or 0)
    assert "/mine" not in server.nodes
    assert client.reconnect() is False  # expired: kazoo's LOST, then a new session
    assert client.session != old and client.connected


def _replay(outcome: Outcome, settings: SimSettings | None = None) -> Outcome:
    return run(outcome.seed, 0, settings, outcome.steps)


def test_a_seed_replays_exactly() -> None:
    first, second = run(7, 600), run(7, 600)
    assert first.steps == second.steps and first.notes == second.notes
    assert first.violation == second.violation
    assert len(set(first.steps)) > 20, "the schedule should mix many kinds of step"
    replayed = _replay(first)
    assert replayed.steps == first.steps and replayed.notes == first.notes


def test_the_cluster_comes_up_and_every_invariant_holds_without_faults() -> None:
    outcome = run(1, 0)
    assert outcome.violation is None
    assert outcome.notes[:2] == [
        "controller 1001: controller_elected 1",
        "controller 1001: failover_complete 1",
    ]


REGRESSIONS: dict[str, tuple[int, list[str]]] = {
    # The controller's session expired while an event was in flight; the event carried on on the new
    # session and won epoch 2 there; the queued Expire then resigned that term, leaving /controller
    # held by a controller that was not active: no controller at all, for the session's lifetime.
    "expire-after-a-new-term": (
        1,
        [
            "zk.disconnect controller-1001",
            "zk.reconnect controller-1001",
            "zk.disconnect controller-1001",
            "zk.expire controller-1001",
            "zk.reconnect controller-1001",
            "time.tick",
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_schedules_that_once_failed_pass(name: str) -> None:
    seed, steps = REGRESSIONS[name]
    outcome = run(seed, 0, script=steps)
    assert outcome.steps == steps, "every step of the schedule must still be possible"
    assert outcome.violation is None


PLANT_SETTINGS = {"deletions-at-failover": SimSettings(delete_topic_enable=False)}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_each_bug_put_back_is_found_and_shrunk(plant: str) -> None:
    settings = PLANT_SETTINGS.get(plant, SimSettings())
    with planted(plant):
        found = next((o for seed in range(1, 61) if (o := run(seed, 1000, settings)).failed), None)
        assert found is not None, f"{plant} was not found in 60 seeds"
        minimal = shrink(found, lambda script: run(found.seed, 0, settings, script), budget=300)
    assert kind_of(minimal.violation) == kind_of(found.violation)
    assert len(minimal.steps) <= 60 < len(found.steps), minimal.steps
    assert run(found.seed, 0, settings, minimal.steps).violation is None  # the fix, back in place


def test_the_command_line_runs_seeds_and_reports_json(tmp_path: Path) -> None:
    out = tmp_path / "sim.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    done = subprocess.run(
        [sys.executable, "-m", "controller.sim", "--seeds", "8", "--steps", "300", "--json", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    summary: dict[str, Any] = json.loads(out.read_text())
    assert summary["seeds"] == 8 and summary["failures"] == []
    assert "8 seeds of 300 steps" in done.stdout


def test_a_failing_seed_prints_its_minimal_schedule_and_exits_1() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    done = subprocess.run(
        [sys.executable, "-m", "controller.sim", "--seed", "5", "--plant", "deletions-at-failover",
         "--delete-topic-enable", "false", "--trace"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "minimal schedule" in done.stdout
    assert "was deleted although delete.topic.enable=false" in done.stdout
