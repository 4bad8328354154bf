"""The steps that bring the compose cluster up and use it from the host: health, topic, records, Prometheus.

Both variants take them: the engine and the local images (:mod:`deploy.images`), no leftover of an
earlier run, ``up`` without building or pulling, every healthcheck passing, then a topic, a round
trip of records through the published ports, and every Prometheus target up.
"""

from __future__ import annotations

import json
import socket
import urllib.request
from typing import Any

from deploy import images as local_images
from deploy.compose import REPO, daemon_role, session_timeout_s, zookeeper_id
from deploy.compose_test import Run, wait_until
from deploy.compose_test.client import CACHE, PARTITIONS, REPLICATION_FACTOR, TOPIC, CheckFailed, round_trip
from deploy.engine import ensure_engine

__all__ = [
    "step_after_faults",
    "step_engine",
    "step_healthy",
    "step_images",
    "step_preflight",
    "step_prometheus",
    "step_round_trip",
    "step_topic",
    "step_up",
]

PROMETHEUS = "http://127.0.0.1:9090"
PUBLISHED_PORTS = (9090, 9092, 9093, 9094)
RECORDS = 600
HEALTHY_TIMEOUT_S = 180.0

READY = frozenset({"healthy", "exited 0"})
"""A service is ready when its healthcheck passes, or when it is a one-shot that succeeded."""


def step_engine(run_: Run) -> str:
    """Debian's docker.io and debootstrap installed, dockerd running (started in the background if not)."""
    return ensure_engine(CACHE / "dockerd.log")


def step_images(run_: Run) -> str:
    """The local images built (or reused), and compose pointed at them."""
    images = local_images.build_all(CACHE)
    run_.compose.environment.update(images.compose_environment())
    model = run_.compose.model()
    roles = {name: daemon_role(service) for name, service in model["services"].items()}
    run_.daemon_count = sum(role is not None for role in roles.values())
    run_.broker_count = sum(role == "broker" for role in roles.values())
    run_.session_timeout_s = max(session_timeout_s(model["services"][n]) for n, r in roles.items() if r)
    run_.zookeeper_count = sum(zookeeper_id(service) is not None for service in model["services"].values())
    return ", ".join(f"{k}={v}" for k, v in images.compose_environment().items())


def step_preflight(run_: Run) -> str:
    """No cluster of an earlier, interrupted run left, and the published ports free on this machine."""
    run_.cluster_touched = True
    run_.compose("down", "--volumes", "--remove-orphans", "--timeout", "5")
    taken = [port for port in PUBLISHED_PORTS if _listening(port)]
    if taken:
        raise CheckFailed(f"ports {taken} are in use here; docker-compose.yml publishes them")
    return f"ports {', '.join(map(str, PUBLISHED_PORTS))} free"


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def step_up(run_: Run) -> str:
    """``docker compose up -d`` of every service but those left out, never building or pulling."""
    services = run_.compose.services()
    run_.compose("up", "--detach", "--no-build", "--pull", "never", *services)
    return f"{len(services)} services: {' '.join(services)}"


def step_healthy(run_: Run) -> str:
    """Every container healthy by its own healthcheck, then every broker seen by clients."""
    states = wait_until(
        "every service to be healthy",
        run_.compose.states,
        lambda states: set(states.values()) <= READY,
        HEALTHY_TIMEOUT_S,
    )
    brokers = wait_until(
        "the brokers in metadata",
        lambda: _cluster_brokers(run_),
        lambda brokers: len(brokers) == run_.broker_count,
        HEALTHY_TIMEOUT_S,
    )
    return f"{len(states)} services ready; brokers {sorted(brokers)}; epochs {run_.compose.brokers()}"


def _cluster_brokers(run_: Run) -> set[int]:
    return set(run_.client().list_topics(timeout=5).brokers)


def step_topic(run_: Run) -> str:
    """A topic created through the Admin API, every partition with a leader and a full ISR."""
    from confluent_kafka.admin import NewTopic

    futures = run_.client().create_topics([NewTopic(TOPIC, PARTITIONS, REPLICATION_FACTOR)])
    for future in futures.values():
        future.result(30)
    md = run_.wait_whole()
    return f"{TOPIC}: leaders {md.leaders}"


def step_round_trip(run_: Run) -> str:
    """Records produced with acks=all and read back, through the ports published on the host."""
    return f"{round_trip(TOPIC, RECORDS, 'first', run_.security)} records produced and read back"


def step_prometheus(run_: Run) -> str:
    """Prometheus (its HTTP API) scrapes every daemon and the ZooKeeper exporter and finds each up,
    and the exporter reaches every ZooKeeper server."""
    expected = len(scrape_targets())

    def targets() -> dict[str, str]:
        active = _prometheus_api("targets?state=active")["activeTargets"]
        return {t["labels"]["instance"]: t["health"] for t in active}

    def all_up(health: dict[str, str]) -> bool:
        return len(health) == expected and set(health.values()) == {"up"}

    up = wait_until(f"{expected} targets up in Prometheus", targets, all_up, 90)

    def servers_up() -> dict[str, float]:
        result = _prometheus_api("query?query=zookeeper_up")["result"]
        return {r["metric"]["server"]: float(r["value"][1]) for r in result}

    zookeeper = wait_until(
        f"zookeeper_up 1 for {run_.zookeeper_count} servers",
        servers_up,
        lambda found: len(found) == run_.zookeeper_count and set(found.values()) == {1.0},
        90,
    )
    return f"targets up: {', '.join(sorted(up))}; ZooKeeper servers up: {', '.join(sorted(zookeeper))}"


def scrape_targets() -> list[str]:
    """Every target of Prometheus's file_sd lists (deploy/prometheus/targets)."""
    files = sorted((REPO / "deploy" / "prometheus" / "targets").glob("*.json"))
    return [target for path in files for group in json.loads(path.read_text()) for target in group["targets"]]


def _prometheus_api(path: str) -> Any:
    with urllib.request.urlopen(f"{PROMETHEUS}/api/v1/{path}", timeout=5) as response:
        return json.load(response)["data"]


def step_after_faults(run_: Run) -> str:
    """Records produced and read back again, through every broker, once all three have come back."""
    return f"{round_trip(TOPIC, RECORDS, 'after-faults', run_.security)} records produced and read back"
