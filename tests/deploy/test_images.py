"""The local images' recipes, checked without a Docker engine: which jars and packages go in, and the
ZooKeeper entrypoint's translation of the official image's variables into zoo.cfg.

``make compose-test`` builds and runs the images themselves.
"""

from __future__ import annotations

import os
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from deploy import images
from tests.support.compose import (
    COMPOSE_FILE,
    IMAGE_VARIABLES,
    SECURE_COMPOSE_FILE,
    compose_model,
    container_environment,
)

ENTRYPOINT = images.DOCKERFILES / "zookeeper" / "docker-entrypoint.sh"


def touch_jars(folder: Path, *names: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"")
    return folder


def jar_with_class_path(path: Path, class_path: str) -> Path:
    """A jar whose manifest names ``class_path``, folded at 72 bytes as jar tools write it."""
    line = f"Class-Path: {class_path}"
    folded = "\r\n ".join(line[i : i + 70] for i in range(0, len(line), 70))
    with zipfile.ZipFile(path, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", f"Manifest-Version: 1.0\r\n{folded}\r\n\r\n")
    return path


def test_the_server_jars_are_picked_from_a_folder_of_many_with_this_machines_native_ones(
    tmp_path: Path,
) -> None:
    jars = touch_jars(
        tmp_path / "jars",
        "zookeeper-3.9.5.jar",
        "zookeeper-jute-3.9.5.jar",
        "netty-handler-4.2.13.Final.jar",
        "netty-transport-native-epoll-4.2.13.Final-linux-x86_64.jar",
        "netty-transport-native-epoll-4.2.13.Final-linux-aarch_64.jar",
        "netty-tcnative-boringssl-static-2.0.76.Final-osx-x86_64.jar",
        "slf4j-api-2.0.17.jar",
        "log4j-core-2.25.4.jar",
        "spark-core_2.13-4.0.0.jar",
        "hadoop-client-api-3.4.1.jar",
    )
    picked = {jar.name for jar in images.zookeeper_jars([f"{jars}/*"], machine="x86_64")}
    assert picked == {
        "zookeeper-3.9.5.jar",
        "zookeeper-jute-3.9.5.jar",
        "netty-handler-4.2.13.Final.jar",
        "netty-transport-native-epoll-4.2.13.Final-linux-x86_64.jar",
        "slf4j-api-2.0.17.jar",
        "log4j-core-2.25.4.jar",
    }
    assert images.zookeeper_version([jars / "zookeeper-3.9.5.jar"]) == "3.9.5"


def test_a_jar_brings_what_its_manifest_class_path_names(tmp_path: Path) -> None:
    """Debian's zookeeper.jar names its dependencies in its manifest."""
    names = ["slf4j-api.jar", "netty-handler.jar", "jute-with-a-rather-long-name-to-fold-the-line.jar"]
    touch_jars(tmp_path, *names)
    server = jar_with_class_path(tmp_path / "zookeeper.jar", " ".join([*names, "absent.jar"]))
    picked = [jar.name for jar in images.zookeeper_jars([str(server)])]
    assert picked == ["zookeeper.jar", *names]


def test_the_jars_of_this_machines_local_runner_make_a_server(tmp_path: Path) -> None:
    """Whatever resolve_classpath finds here, the image gets a server jar and its jute."""
    from zkserver.errors import LocalServerError
    from zkserver.zookeeper_jars import resolve_classpath

    try:
        entries = resolve_classpath().entries
    except LocalServerError as exc:
        pytest.skip(str(exc))
    names = [jar.name for jar in images.zookeeper_jars(entries)]
    assert any(re.fullmatch(r"zookeeper(-\d+\.\d+\.\d+)?\.jar", n) for n in names), names
    assert any(n.startswith(("zookeeper-jute", "jute")) for n in names) or "zookeeper.jar" in names


def test_apt_simulation_gives_the_file_names_apt_downloads() -> None:
    output = "\n".join(
        [
            "NOTE: This is only a simulation!",
            "Inst libssl3 (3.0.22-1~deb12u2 Debian-Security:12/oldstable-security [amd64])",
            "Inst libgcc-s1 [12.2.0-14] (12.2.0-14+deb12u1 Debian:12.15/oldstable [amd64])",
            "Inst tzdata (2:2025b-0+deb12u1 Debian:12.15/oldstable [all])",
            "Conf libssl3 (3.0.22-1~deb12u2 Debian-Security:12/oldstable-security [amd64])",
        ]
    )
    assert images.parse_simulation(output) == [
        "libssl3_3.0.22-1~deb12u2_amd64.deb",
        "libgcc-s1_12.2.0-14+deb12u1_amd64.deb",
        "tzdata_2%3a2025b-0+deb12u1_all.deb",
    ]


def test_the_wheelhouse_holds_what_the_dockerfile_installs() -> None:
    requirements = images.project_requirements()
    names = {re.split(r"[<>=!~\[ ]", r, maxsplit=1)[0] for r in requirements}
    assert {"setuptools", "kazoo", "confluent-kafka", "cryptography"} <= names


def test_the_local_images_set_every_image_variable_but_grafanas() -> None:
    """Grafana has no local image (no registry, no Debian package): make compose-test leaves it out."""
    local = images.LocalImages("b", "p", "z", "m", "c").compose_environment()
    assert set(local) == set(IMAGE_VARIABLES) - {"GRAFANA_IMAGE"}
    for path in (COMPOSE_FILE, SECURE_COMPOSE_FILE):
        named = set(re.findall(r"\$\{([A-Z_]+_IMAGE):-", path.read_text()))
        assert named <= set(IMAGE_VARIABLES), path.name


def run_entrypoint(tmp_path: Path, env: dict[str, str]) -> tuple[str, str]:
    """Run the entrypoint with ``cat zoo.cfg`` as its command: the zoo.cfg it leaves, and myid."""
    conf, data = tmp_path / "conf", tmp_path / "data"
    conf.mkdir(exist_ok=True)
    data.mkdir(exist_ok=True)
    dirs = {"ZOO_CONF_DIR": str(conf), "ZOO_DATA_DIR": str(data), "ZOO_DATA_LOG_DIR": "/datalog"}
    result = subprocess.run(
        ["sh", str(ENTRYPOINT), "cat", str(conf / "zoo.cfg")],
        env={"PATH": os.environ["PATH"], **dirs, **env},
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    return result.stdout, (data / "myid").read_text().strip()


def test_the_entrypoint_writes_the_ensemble_of_docker_compose_yml(tmp_path: Path) -> None:
    service = compose_model()["services"]["zookeeper-2"]
    config, myid = run_entrypoint(tmp_path, container_environment(service))
    lines = config.splitlines()
    assert myid == "2"
    assert [line for line in lines if line.startswith("server.")] == [
        "server.1=zookeeper-1:2888:3888;2181",
        "server.2=zookeeper-2:2888:3888;2181",
        "server.3=zookeeper-3:2888:3888;2181",
    ]
    assert "4lw.commands.whitelist=srvr,ruok,mntr" in lines
    assert "admin.enableServer=false" in lines
    assert {"dataDir=" + str(tmp_path / "data"), "dataLogDir=/datalog", "tickTime=2000"} <= set(lines)


def test_the_entrypoint_appends_the_secure_variants_extra_lines(tmp_path: Path) -> None:
    service = compose_model((COMPOSE_FILE, SECURE_COMPOSE_FILE))["services"]["zookeeper-1"]
    env = container_environment(service)
    config, _ = run_entrypoint(tmp_path, env)
    lines = config.splitlines()
    assert env["ZOO_CFG_EXTRA"].split() == lines[-len(env["ZOO_CFG_EXTRA"].split()) :]
    assert "secureClientPort=2182" in lines and "sslQuorum=true" in lines


def test_the_entrypoint_keeps_a_mounted_config_and_an_existing_myid(tmp_path: Path) -> None:
    """As the official image does: a zoo.cfg in the config folder and a myid in a volume win."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "zoo.cfg").write_text("tickTime=500\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "myid").write_text("3\n")
    config, myid = run_entrypoint(tmp_path, {"ZOO_MY_ID": "1", "ZOO_TICK_TIME": "2000"})
    assert (config, myid) == ("tickTime=500\n", "3")
