"""A --netns cluster: every node on its own address, links cut and healed between nodes.

The fault that makes zombies: a broker cut off from ZooKeeper alone keeps talking to clients and to
the other brokers, but its session expires, the controller fences it and moves its leadership; once
healed it registers again with a new epoch and rejoins the ISRs. Then the ZooKeeper server restarts
under the cluster. Root only: skipped, with the reason, where namespaces are not allowed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from cluster import launcher, netns, node_control, partitions, state_file
from tests.support.event_logs import events
from tests.support.waiting import wait_until
from zkstore import admin_session, cluster_reads

REASON = netns.unavailable()
pytestmark = [pytest.mark.netns, pytest.mark.skipif(REASON is not None, reason=REASON or "")]


async def isrs_are(state: dict[str, Any], topic: str, wanted: dict[int, tuple[int, ...]]) -> bool:
    """Whether every partition of ``topic`` has the ISR ``wanted`` says (in any order)."""
    async with admin_session.connect(state["zookeeper_connect"]) as zk:
        described = await cluster_reads.describe_topics(zk, [topic])
    return {p.partition: tuple(sorted(p.isr)) for p in described} == wanted


def kinds(state: dict[str, Any], name: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in events(state_file.find(state, name)) if e["kind"] == kind]


async def test_a_broker_cut_off_from_zookeeper_is_fenced_and_rejoins_after_healing(directory: Path) -> None:
    state = await launcher.up(directory, launcher.Layout(brokers=3, controllers=1, netns=True))
    network = state_file.network_of(state)
    assert network is not None
    assert {p["address"] for p in state["processes"]} == {n.address for n in network.nodes.values()}
    await launcher.create_demo_topic(state, "t", partitions=3)
    full = {p: (1, 2, 3) for p in range(3)}
    await wait_until(lambda: isrs_are(state, "t", full), timeout=30, what="full ISRs")

    cuts = partitions.partition(directory, ["broker-1"], ["zookeeper-1"])
    assert cuts == [("broker-1", "zookeeper-1"), ("zookeeper-1", "broker-1")]
    assert partitions.active(directory) == cuts

    def fenced() -> bool:
        return any(1 in e["dead"] for e in kinds(state, "controller-1001", "broker_change"))

    await wait_until(fenced, timeout=30, what="the controller fences broker 1")
    without_1 = {p: (2, 3) for p in range(3)}
    await wait_until(lambda: isrs_are(state, "t", without_1), timeout=30, what="1 out of every ISR")

    assert partitions.heal(directory) == []
    await wait_until(
        lambda: len(kinds(state, "broker-1", "registered")) == 2, timeout=30, what="broker 1 registers again"
    )
    await wait_until(lambda: isrs_are(state, "t", full), timeout=60, what="1 back in every ISR")

    node_control.node_action(directory, "zookeeper-1", "restart")
    await launcher.create_demo_topic(state, "after-restart", partitions=2)

    node_control.down(directory)
    assert not [n for n in network.nodes.values() if n.namespace in _namespaces()]


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}
