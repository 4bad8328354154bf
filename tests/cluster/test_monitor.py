"""A real Prometheus (Debian's package) scraping a local cluster: every query of the Grafana dashboard
returns data, and every alert rule either fires when its condition is caused (a stale control
request, a killed broker, a bounce, an expired session, no controller left, ZooKeeper gone) or, for
conditions a test cannot honestly cause (two active controllers, a backed-up event queue), measures
something.

The rules are the shipped ones with every ``for`` set to 0 s, so the test waits for conditions, not
for hold times; ``promtool check rules`` checks the shipped file as it is.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cluster import launcher, monitor, node_control, state_file
from cluster.processes import REPO
from network.connection import KafkaConnection
from protocol import ApiKey, ErrorCode
from tests.support.requests import lai_partition, leader_and_isr
from tests.support.waiting import wait_until
from zkstore import cluster_reads, entity_configs, topic_writes, znodes

pytestmark = [
    pytest.mark.zookeeper,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus not installed (make clients)"),
]

DASHBOARD = REPO / "deploy" / "grafana" / "dashboards" / "kafka-control-plane.json"
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__range": "1h", "$__interval": "15s"}
COMPARISON = re.compile(r"\s*(<|>|==|!=|<=|>=)\s*[0-9.]+\s*$")
NOT_CAUSED = {"SeveralActiveControllers", "ControllerEventQueueBackingUp"}
"""Alerts whose condition a test cannot honestly cause: their measured side must return data."""


def test_the_shipped_rules_pass_promtool() -> None:
    checked = subprocess.run(
        ["promtool", "check", "rules", *map(str, sorted(monitor.RULES.glob("*.yml")))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL with Grafana's variables replaced) for every panel target."""

    def panels(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [p for item in items for p in (item, *panels(item.get("panels", [])))]

    found = []
    for panel in panels(json.loads(DASHBOARD.read_text())["panels"]):
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            found.append((panel["title"], expr))
    return found


def immediate_rules(directory: Path) -> Path:
    """The shipped rules with every hold time removed."""
    directory.mkdir(parents=True, exist_ok=True)
    for rules in monitor.RULES.glob("*.yml"):
        text = re.sub(r"(?m)^(\s*)for: \S+$", r"\1for: 0s", rules.read_text())
        (directory / rules.name).write_text(text)
    return directory


async def firing(url: str, name: str) -> bool:
    alerts = await asyncio.to_thread(monitor.alerts, url)
    return any(a["labels"]["alertname"] == name and a["state"] == "firing" for a in alerts)


async def stale_leader_and_isr(state: dict[str, Any]) -> None:
    """A LeaderAndIsr from controller epoch 0, below the cluster's: refused STALE_CONTROLLER_EPOCH."""
    entry = state_file.find(state, "broker-1")
    control = next(znodes.Endpoint.parse(e) for e in entry["listeners"] if e.startswith("CONTROLLER"))
    body = leader_and_isr(5, 1 << 40, {"replicated": [lai_partition(0, leader=1, replicas=(1, 2, 3))]})
    body["controller_epoch"] = 0
    connection = await KafkaConnection.open(control.host, control.port, client_id="stale", connect_timeout=5)
    try:
        _, answer = await connection.send(ApiKey.LEADER_AND_ISR, 5, body, timeout=15)
    finally:
        await connection.close()
    assert answer["error_code"] == ErrorCode.STALE_CONTROLLER_EPOCH


async def every_dashboard_query_answered(url: str) -> None:
    """Every dashboard query returns data (rates need two scrapes in their window)."""

    async def answered() -> list[str]:
        return [
            title
            for title, expr in dashboard_queries()
            if not await asyncio.to_thread(monitor.query, url, expr)
        ]

    await wait_until(lambda: _none(answered), timeout=60, what="every dashboard query answered")


async def freeze_past_its_session(directory: Path, node: str) -> None:
    """A broker frozen past its session: ZooKeeper expires it, and the broker counts the expiry."""
    frozen = state_file.find(state_file.load_state(directory), node)
    os.kill(frozen["pid"], signal.SIGSTOP)
    try:
        await asyncio.sleep(launcher.BROKER_SESSION_TIMEOUT_MS / 1000 * 1.5)
    finally:
        os.kill(frozen["pid"], signal.SIGCONT)


@pytest.mark.long
async def test_prometheus_answers_every_dashboard_query_and_the_alerts_fire_when_caused(
    directory: Path,
) -> None:
    state = await launcher.up(directory, launcher.Layout(brokers=3, controllers=2, monitor=True))
    prometheus = state_file.find(state, "prometheus")
    url = prometheus["url"]
    config = monitor.configure(Path(prometheus["config"]).parent, state, immediate_rules(directory / "rules"))
    os.kill(prometheus["pid"], signal.SIGHUP)  # reload with the immediate rules
    async with state_file.zookeeper_session(state) as zk:
        await topic_writes.create_topic(zk, "replicated", {0: (1, 2, 3), 1: (2, 3, 1)})
        await topic_writes.create_topic(zk, "single", {0: (3,)})  # offline once broker 3 is gone
        await entity_configs.write_topic_configs(zk, "guarded", {"min.insync.replicas": "2"})
        await topic_writes.create_topic(zk, "guarded", {0: (1, 3)})  # under min ISR once broker 3 is gone
        await wait_until(
            lambda: _all_led(zk, ("replicated", "single", "guarded")), timeout=60, what="every partition led"
        )
    await stale_leader_and_isr(state)

    async def scraped() -> bool:
        listed = await asyncio.to_thread(monitor.targets, url)
        rules = await asyncio.to_thread(monitor.alert_rules, url)
        return (
            len(listed) == 6  # 3 brokers, 2 controllers, the ZooKeeper exporter
            and all(t["health"] == "up" for t in listed)
            and all(r["duration"] == 0 for r in rules)
        )

    assert config.exists()
    await wait_until(scraped, timeout=60, what="every daemon scraped, the immediate rules loaded")

    await every_dashboard_query_answered(url)
    rules = {r["name"]: r["query"] for r in await asyncio.to_thread(monitor.alert_rules, url)}
    for name in NOT_CAUSED:
        measured = COMPARISON.sub("", rules[name])
        assert await asyncio.to_thread(monitor.query, url, measured), f"{name}: {measured} returns nothing"

    # A counter's first sample shows no increase: the second rejection, scrapes later, is what rate() sees.
    await stale_leader_and_isr(state)
    await wait_until(lambda: firing(url, "StaleEpochRejections"), timeout=60, what="StaleEpochRejections")
    node_control.node_action(directory, "broker-2", "bounce")
    await wait_until(lambda: firing(url, "BrokerEpochChanged"), timeout=60, what="BrokerEpochChanged")
    node_control.node_action(directory, "broker-3", "kill")
    for name in ("BrokerDown", "OfflinePartitions", "UnderReplicatedPartitions", "UnderMinIsrPartitions"):
        await wait_until(lambda n=name: firing(url, n), timeout=60, what=name)

    await freeze_past_its_session(directory, "broker-1")
    await wait_until(
        lambda: firing(url, "ZooKeeperSessionExpired"), timeout=60, what="ZooKeeperSessionExpired"
    )

    for controller in ("controller-1001", "controller-1002"):
        node_control.node_action(directory, controller, "kill")
    await wait_until(lambda: firing(url, "NoActiveController"), timeout=60, what="NoActiveController")
    node_control.node_action(directory, "zookeeper-1", "kill")
    for name in ("ZooKeeperServerDown", "ZooKeeperDisconnected"):
        await wait_until(lambda n=name: firing(url, n), timeout=60, what=name)
    for broker in ("broker-1", "broker-2"):  # no controller nor ZooKeeper to shut down cleanly with
        node_control.node_action(directory, broker, "kill")
    caused = set(rules) - NOT_CAUSED
    assert caused == {
        "NoActiveController",
        "OfflinePartitions",
        "UnderReplicatedPartitions",
        "UnderMinIsrPartitions",
        "BrokerDown",
        "BrokerEpochChanged",
        "StaleEpochRejections",
        "ZooKeeperSessionExpired",
        "ZooKeeperServerDown",
        "ZooKeeperDisconnected",
    }, "a new rule needs its cause in this test"


async def _all_led(zk: Any, topics: tuple[str, ...]) -> bool:
    described = await cluster_reads.describe_topics(zk, list(topics))
    return len(described) == 4 and all(p.leader is not None and p.leader >= 0 for p in described)


async def _none(check: Any) -> bool:
    return not await check()
