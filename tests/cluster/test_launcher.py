"""The local cluster launcher: up, status from cluster.json, node experiments, and an ordered down."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from cluster import launcher, node_control, state_file
from tests.support.event_logs import events
from tests.support.waiting import wait_until
from zkserver.four_letter_words import server_mode

pytestmark = pytest.mark.zookeeper


def assert_running(processes: list[dict[str, Any]]) -> None:
    """Every process alive, and each daemon with its config, metrics port and listeners recorded."""
    for p in processes:
        assert state_file.alive(p["pid"]), p["name"]
        if p["role"] != "zookeeper":
            assert Path(p["config"]).exists() and p["metrics_port"] and p["listeners"]


async def test_up_writes_what_later_commands_need_and_down_stops_in_order(directory: Path) -> None:
    state = await launcher.up(directory, launcher.Layout(brokers=2, controllers=2))
    saved = json.loads(state_file.state_path(directory).read_text())
    assert saved == state and saved["zookeeper_connect"]
    roles = [(p["role"], p["id"]) for p in saved["processes"]]
    assert roles == [
        ("zookeeper", 1),
        ("controller", 1001),
        ("controller", 1002),
        ("broker", 1),
        ("broker", 2),
    ]
    assert_running(saved["processes"])
    broker = state_file.find(saved, "broker-1")
    assert [lst.split("://")[0] for lst in broker["listeners"]] == ["PLAINTEXT", "CONTROLLER"]
    with pytest.raises(state_file.ClusterError, match="already running"):
        await launcher.up(directory, launcher.Layout())

    stopped = node_control.down(directory)
    assert stopped == ["broker-1", "broker-2", "controller-1001", "controller-1002", "zookeeper-1"]
    assert not any(state_file.alive(p["pid"]) for p in saved["processes"])
    attempts = [e for e in events(broker) if e["kind"] == "controlled_shutdown_attempt"]
    assert attempts and attempts[0]["error"] == "NONE", "brokers left while a controller was there"


async def test_a_bounced_broker_comes_back_with_a_new_epoch(directory: Path) -> None:
    await launcher.up(directory, launcher.Layout(brokers=2, controllers=1))
    before = state_file.find(state_file.load_state(directory), "broker-2")
    old_epoch = next(e for e in events(before) if e["kind"] == "registered")["broker_epoch"]
    controller = state_file.find(state_file.load_state(directory), "controller-1001")
    # Broker 2 may have registered after the controller's failover, so an early broker_change can
    # already name it: only the changes after the bounce count.
    seen = len([e for e in events(controller) if e["kind"] == "broker_change"])
    entry = await asyncio.to_thread(node_control.node_action, directory, "broker-2", "bounce")
    assert entry["pid"] != before["pid"]
    assert state_file.find(state_file.load_state(directory), "broker-2")["pid"] == entry["pid"]

    def back() -> bool:
        changes = [e for e in events(controller) if e["kind"] == "broker_change"][seen:]
        return any(2 in e.get("new", []) + e.get("bounced", []) for e in changes)

    # The new process waits for the old session's znode to go, then registers: the controller sees
    # broker 2 leave and come back (or, if it reads both changes at once, a bounce).
    await wait_until(back, timeout=30, what="the controller sees broker 2 back")
    epochs = [e["broker_epoch"] for e in events(before) if e["kind"] == "registered"]
    assert epochs[-1] > old_epoch


async def test_killing_the_active_controller_hands_over_and_the_view_shows_it(
    directory: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state = await launcher.up(directory, launcher.Layout(brokers=1, controllers=2))
    await launcher.create_demo_topic(state, "demo")
    controllers = [p for p in state["processes"] if p["role"] == "controller"]
    active = next(c for c in controllers if any(e["kind"] == "failover_complete" for e in events(c)))
    other = next(c for c in controllers if c is not active)
    await asyncio.to_thread(node_control.node_action, directory, active["name"], "kill")
    await wait_until(
        lambda: any(e["kind"] == "failover_complete" for e in events(other)),
        timeout=40,
        what="the other candidate takes over",
    )

    from cluster.__main__ import main

    monkeypatch.setenv("COLUMNS", "200")
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["watch", "--once", "--dir", str(directory)]) == 0
    view = capsys.readouterr().out
    assert f"active controller {other['id']}" in view and "controller epoch 2" in view
    broker_epoch = next(e for e in events(state_file.find(state, "broker-1")) if e["kind"] == "registered")
    row = next(line for line in view.splitlines() if line.startswith("│ 1 "))
    assert str(broker_epoch["broker_epoch"]) in row, "the broker's epoch (czxid) is shown"
    assert f"{other['name']} controller_elected epoch 2" in view
    assert "demo-0" in view


async def test_a_three_node_ensemble_with_shared_listeners(directory: Path) -> None:
    """--zookeeper-nodes 3 --shared-listener: an ensemble that outlives one node, and brokers
    without a control-plane listener, which take control requests on the client listener."""
    state = await launcher.up(
        directory, launcher.Layout(brokers=2, controllers=1, zookeeper_nodes=3, shared_listener=True)
    )
    nodes = [p for p in state["processes"] if p["role"] == "zookeeper"]
    assert [p["name"] for p in nodes] == ["zookeeper-1", "zookeeper-2", "zookeeper-3"]
    assert len(state["zookeeper_connect"].split(",")) == 3
    broker = state_file.find(state, "broker-1")
    assert [lst.split("://")[0] for lst in broker["listeners"]] == ["PLAINTEXT"]

    await asyncio.to_thread(node_control.node_action, directory, "zookeeper-1", "kill")
    await launcher.create_demo_topic(state_file.load_state(directory), "after-kill")
    await wait_until(
        lambda: any(e["kind"] == "become_leader" and e["topic"] == "after-kill" for e in events(broker)),
        timeout=30,
        what="a topic created with one ZooKeeper node down gets leaders",
    )
    # the LeaderAndIsr that made it a leader came in on the one listener there is
    received = [e for e in events(broker) if e["kind"] == "control_request_received"]
    assert received and {e["listener"] for e in received} == {"PLAINTEXT"}
    entry = await asyncio.to_thread(node_control.node_action, directory, "zookeeper-1", "restart")
    assert state_file.alive(entry["pid"])
    assert server_mode("127.0.0.1", entry["port"]) in ("leader", "follower"), "it rejoined the ensemble"
    stopped = node_control.down(directory)
    assert stopped[:3] == ["broker-1", "broker-2", "controller-1001"]
    assert {"zookeeper-2", "zookeeper-3"} <= set(stopped[3:])
    assert not any(state_file.alive(p["pid"]) for p in state_file.load_state(directory)["processes"])


def test_commands_on_a_missing_cluster_fail_clearly(tmp_path: Path) -> None:
    with pytest.raises(state_file.ClusterError, match="no cluster in"):
        node_control.down(tmp_path)
    (tmp_path / "cluster.json").write_text(json.dumps({"version": 1, "processes": []}))
    with pytest.raises(state_file.ClusterError, match="no node 'broker-9'"):
        node_control.node_action(tmp_path, "broker-9", "kill")


def test_the_cli_starts_detached_reports_and_stops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cluster.__main__ import main

    directory = str(tmp_path / "cli")
    try:
        assert main(["up", "--dir", directory, "--detach", "--brokers", "2", "--controllers", "1"]) == 0
        capsys.readouterr()
        assert main(["status", "--dir", directory, "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert all(p["alive"] for p in status["processes"]) and len(status["processes"]) == 4
        assert main(["topics", "describe", "demo", "--dir", directory, "--json"]) == 0
        described = json.loads(capsys.readouterr().out)
        assert described, "the demo topic exists"
        assert main(["bounce", "--dir", directory, "broker-9"]) == 1
        assert "no node 'broker-9'" in capsys.readouterr().err
    finally:
        assert main(["down", "--dir", directory]) == 0
    assert "stopped broker-1, broker-2, controller-1001, zookeeper-1" in capsys.readouterr().out
    assert main(["watch", "--once", "--dir", directory]) == 1
    assert "is not running" in capsys.readouterr().err


def test_a_paused_node_is_resumed_so_it_can_stop_cleanly(tmp_path: Path) -> None:
    """A chaos run that dies mid-pause leaves a SIGSTOPped daemon; stopping it must let it handle
    SIGTERM (a broker's controlled shutdown) instead of waiting for the SIGKILL fallback."""
    import signal
    import subprocess
    import sys

    handled = tmp_path / "sigterm-handled"
    script = (
        "import pathlib, signal, sys, time\n"
        f"signal.signal(signal.SIGTERM, lambda *_: (pathlib.Path({str(handled)!r}).touch(), sys.exit(0)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        child.send_signal(signal.SIGSTOP)
        node_control.stop_node({"pid": child.pid}, timeout=30)
        assert handled.exists(), "the node ran its SIGTERM handler"
    finally:
        child.kill()
        child.wait()


def test_a_usual_port_is_taken_when_free_and_replaced_with_a_notice_when_not() -> None:
    import socket

    from cluster.launcher import port_is_free, usual_port

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        assert not port_is_free(taken)
        notices: list[str] = []
        chosen = usual_port(taken, "broker-1", notices)
        assert chosen != taken and port_is_free(chosen)
        assert notices == [f"port {taken} is taken: broker-1 listens on {chosen} instead"]
    notices = []
    assert usual_port(taken, "broker-1", notices) == taken and notices == []
