"""The audit of a real local cluster's logs: start, create a topic, bounce a broker, stop; every
control-plane check must pass on what the daemons wrote."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from cluster import launcher, node_control, state_file
from pipeline.__main__ import main
from tests.support.event_logs import events
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.zookeeper

CONTROL_PLANE = (
    "one_controller_per_epoch",
    "broker_epochs_increase",
    "stale_requests_rejected",
    "ineligible_never_in_isr",
)


async def test_the_audit_of_a_real_cluster_passes_every_control_plane_check(
    spark: SparkSession, directory: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = await launcher.up(directory, launcher.Layout(brokers=3, controllers=2))
    await launcher.create_demo_topic(state, "demo")
    broker = state_file.find(state, "broker-2")
    old_epoch = max(e["broker_epoch"] for e in events(broker) if e["kind"] == "registered")
    await asyncio.to_thread(node_control.node_action, directory, "broker-2", "bounce")
    controllers = [p for p in state["processes"] if p["role"] == "controller"]

    def back() -> bool:
        changes = [e for c in controllers for e in events(c) if e["kind"] == "broker_change"]
        return any(e["epochs"].get("2", -1) > old_epoch for e in changes)

    # The new process waits for the old session's znode to go, then registers: the active controller
    # sees broker 2 leave and come back (or, reading both at once, a bounce).
    await wait_until(back, timeout=30, what="the controller sees broker 2 back")
    await asyncio.to_thread(node_control.down, directory)

    out = directory / "report" / "audit.json"
    capsys.readouterr()
    status = main(["audit", "--dir", str(directory), "--out", str(out)])
    report = json.loads(out.read_text())
    checks = {c["name"]: c for c in report["checks"]}
    failed = {name: c["examples"][:3] for name, c in checks.items() if c["verdict"] == "failed"}
    assert failed == {}, "the daemons' logs break a control-plane rule (see the examples)"
    assert status == 0
    for name in CONTROL_PLANE:
        assert checks[name]["verdict"] == "passed" and checks[name]["checked"] > 0, checks[name]
    assert checks["workload_no_loss"]["verdict"] == "skipped", "no chaos run here"
    registrations = checks["broker_epochs_increase"]["checked"]
    assert registrations >= 4, "three brokers registered, and broker 2 again with a higher epoch"
    isr_details = checks["ineligible_never_in_isr"]["details"]
    assert isr_details.get("writes_before_registration_view", 0) == 0, "brokers_loaded gives the view"
    assert report["inputs"]["malformed_lines"] == 0
    assert report["stats"]["cluster"]["controller_elections"] == 1
    table = capsys.readouterr().out
    assert "ineligible_never_in_isr" in table and "passed" in table
