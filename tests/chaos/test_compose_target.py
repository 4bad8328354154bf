"""Chaos on compose without a Docker engine: what the run reads from the compose model, and which
engine commands each fault and its healing come down to (the engine recorded, not run).

``make compose-test`` runs the real thing against containers.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from chaos import ChaosError, compose
from chaos.compose import ComposeCluster, ComposeInjector
from chaos.schedule import FaultSchedule, Step
from daemon.eventlog import EventLog
from deploy.compose import Compose
from tests.support.compose import SECURE_FILES, compose_model


class ModelOnly(Compose):
    """A project as ``docker compose`` would describe it, with every node in ``states``."""

    def __init__(self, model: dict[str, Any], states: dict[str, str] | None = None) -> None:
        super().__init__(environment={})
        self._model = model
        self._states = states if states is not None else dict.fromkeys(model["services"], "healthy")

    def model(self) -> dict[str, Any]:
        return self._model

    def states(self) -> dict[str, str]:
        return self._states

    def container(self, service: str) -> str:
        return f"id-{service}"


def cluster(tmp_path: Path, **states: str) -> ComposeCluster:
    model = compose_model()
    every = dict.fromkeys(model["services"], "healthy") | states
    return ComposeCluster(tmp_path, ModelOnly(model, every))


def test_the_nodes_are_the_controllers_brokers_and_zookeeper_servers_of_the_file(tmp_path: Path) -> None:
    nodes = {n.name: (n.role, n.session_timeout_s) for n in cluster(tmp_path).nodes()}
    assert nodes == {
        "zookeeper-1": ("zookeeper", None),
        "zookeeper-2": ("zookeeper", None),
        "zookeeper-3": ("zookeeper", None),
        "controller-1001": ("controller", 18.0),
        "controller-1002": ("controller", 18.0),
        "broker-1": ("broker", 18.0),
        "broker-2": ("broker", 18.0),
        "broker-3": ("broker", 18.0),
    }


def test_clients_bootstrap_from_the_published_ports_and_replicas_are_read_where_the_brokers_log(
    tmp_path: Path,
) -> None:
    target = cluster(tmp_path)
    assert target.bootstrap_servers() == "localhost:9092,localhost:9093,localhost:9094"
    broker = target.services["broker-2"]
    assert (broker.broker_id, broker.log_dir(), broker.client_endpoint()) == (
        2,
        "/var/lib/kafka/data",
        ("localhost", 9093),
    )
    assert target.services["controller-1001"].log_dir() == "/var/lib/kafka/controller"


def test_only_isolate_can_be_cut_and_the_other_cuts_are_refused_by_name(tmp_path: Path) -> None:
    target = cluster(tmp_path)
    assert target.cuts == {"isolate"}
    with pytest.raises(ChaosError, match=r"^isolate-controller cut .*it can only isolate"):
        FaultSchedule(target.nodes(), faults=("isolate", "isolate-controller"), cuts=target.cuts)


def test_a_project_not_up_is_refused_naming_what_is_down(tmp_path: Path) -> None:
    with pytest.raises(ChaosError, match=r"not running \(broker-2 not up\).*docker compose -p .* up -d"):
        cluster(tmp_path, **{"broker-2": "exited 137"})


def test_the_secured_project_is_refused_since_the_run_carries_no_credentials(tmp_path: Path) -> None:
    with pytest.raises(ChaosError, match=r"secured .*plaintext docker-compose\.yml only"):
        ComposeCluster(tmp_path, ModelOnly(compose_model(SECURE_FILES)))


class Engine:
    """The docker commands the injector gives, and container states it reads."""

    def __init__(self) -> None:
        self.commands: list[tuple[str, ...]] = []
        self.state: dict[str, str] = {}

    def docker(self, *args: str) -> Any:
        self.commands.append(args)
        return type("Done", (), {"stdout": ""})()

    def status(self, container: str) -> str:
        return self.state.get(container, "healthy")


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Engine:
    fake = Engine()
    monkeypatch.setattr(compose, "docker", fake.docker)
    monkeypatch.setattr(compose, "status", fake.status)
    monkeypatch.setattr(compose, "disconnect", lambda c: fake.docker("disconnect", c) and {"net": {}})
    monkeypatch.setattr(compose, "reconnect", lambda c, networks: fake.docker("reconnect", c, *networks))

    async def epoch(self: Any, broker_id: int) -> int:
        return len(fake.commands)  # a new epoch after every command

    monkeypatch.setattr(compose.BrokerEpochs, "epoch", epoch)
    return fake


def carry_out(injector: ComposeInjector, step: Step) -> None:
    async def go() -> None:
        assert await injector.inject(step)
        await injector.heal(step)
        await injector.settle(step)

    asyncio.run(go())


def test_each_fault_is_the_engine_command_its_name_says_and_is_healed_in_kind(
    tmp_path: Path, engine: Engine
) -> None:
    events = EventLog(tmp_path / "events.jsonl", "chaos")
    injector = ComposeInjector(cluster(tmp_path), events, zk=None)  # type: ignore[arg-type]
    steps = [
        Step(0, "kill", "broker-1", "broker", 0),
        Step(0, "bounce", "controller-1001", "controller", 0),
        Step(0, "restart", "broker-2", "broker", 0),
        Step(0, "pause", "broker-3", "broker", 0),
        Step(0, "isolate", "controller-1002", "controller", 0),
        Step(0, "quorum-loss", "zookeeper-2", "zookeeper", 0),
    ]
    for step in steps:
        carry_out(injector, step)
    assert engine.commands == [
        ("kill", "id-broker-1"),
        ("start", "id-broker-1"),
        ("kill", "id-controller-1001"),
        ("start", "id-controller-1001"),
        ("restart", "--time", "30", "id-broker-2"),  # the service's stop_grace_period
        ("pause", "id-broker-3"),
        ("unpause", "id-broker-3"),
        ("disconnect", "id-controller-1002"),
        ("reconnect", "id-controller-1002", "net"),
        ("kill", "id-zookeeper-2"),  # the target and another: a quorum of three lost
        ("kill", "id-zookeeper-1"),
        ("start", "id-zookeeper-2"),
        ("start", "id-zookeeper-1"),
    ]
    kinds = [(e["kind"], e["fault"], e["target"]) for e in events.recent]
    assert kinds == [
        ("fault_injected", "kill", "broker-1"),
        ("fault_healed", "kill", "broker-1"),
        ("fault_injected", "bounce", "controller-1001"),
        ("fault_injected", "restart", "broker-2"),
        ("fault_injected", "pause", "broker-3"),
        ("fault_injected", "resume", "broker-3"),
        ("fault_healed", "pause", "broker-3"),
        ("fault_injected", "isolate", "controller-1002"),
        ("fault_healed", "isolate", "controller-1002"),
        ("fault_injected", "quorum-loss", "zookeeper-2"),
        ("fault_healed", "quorum-loss", "zookeeper-2"),
    ]
    assert injector.crashed == []


def test_a_container_found_down_is_noted_as_crashed_and_started_and_the_fault_skipped(
    tmp_path: Path, engine: Engine
) -> None:
    events = EventLog(None, "chaos")
    injector = ComposeInjector(cluster(tmp_path), events, zk=None)  # type: ignore[arg-type]
    engine.state["id-broker-3"] = "exited"
    assert not asyncio.run(injector.inject(Step(0, "pause", "broker-3", "broker", 0)))
    assert engine.commands == [("start", "id-broker-3")]
    assert injector.crashed == ["broker-3"]
    assert [e["kind"] for e in events.recent] == ["node_crashed"]


def test_healing_everything_unpauses_reconnects_and_starts_what_is_left_down(
    tmp_path: Path, engine: Engine
) -> None:
    injector = ComposeInjector(cluster(tmp_path), EventLog(None, "chaos"), zk=None)  # type: ignore[arg-type]
    asyncio.run(injector.inject(Step(0, "isolate", "broker-1", "broker", 0)))
    engine.commands.clear()
    engine.state |= {"id-broker-2": "paused", "id-controller-1001": "exited"}
    asyncio.run(injector.heal_all())
    assert engine.commands == [
        ("reconnect", "id-broker-1", "net"),
        ("unpause", "id-broker-2"),
        ("start", "id-controller-1001"),
    ]
    assert injector.crashed == ["controller-1001"]
