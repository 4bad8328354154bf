"""The local ZooKeeper runner against real JVMs: what the rest of the test suite relies on."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import ZnodeStat

from tests.support.waiting import wait_until_sync
from zkserver import ports, zookeeper_jars
from zkserver.ensemble import ZooKeeperEnsemble
from zkserver.errors import JavaNotFound, ZooKeeperNotFound
from zkserver.four_letter_words import server_mode
from zkserver.java import find_java
from zkserver.server import ZooKeeperServer
from zkserver.zookeeper_jars import resolve_classpath

CLIENT_TIMEOUT_S = 15.0

# Path shared by the two chroot tests: each must be able to create it from scratch.
SHARED_PATH = "/isolation/probe"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def started_client(hosts: str) -> KazooClient:
    client = KazooClient(hosts=hosts)
    client.start(timeout=CLIENT_TIMEOUT_S)
    return client


# --------------------------------------------------------------------------- kazoo on the shared server


@pytest.mark.zookeeper
def test_broker_registration_multi_op_returns_czxid(zk_client: KazooClient) -> None:
    """One multi-op creates the ephemeral and sets its data; the setData stat carries the czxid."""
    zk_client.ensure_path("/brokers/ids")
    payload = json.dumps({"version": 5, "host": "127.0.0.1", "port": 9092}).encode()

    txn = zk_client.transaction()
    txn.create("/brokers/ids/1", b"", ephemeral=True)
    txn.set_data("/brokers/ids/1", payload, version=0)
    created_path, set_stat = txn.commit()

    assert created_path == "/brokers/ids/1"
    assert isinstance(set_stat, ZnodeStat)
    data, stat = zk_client.get("/brokers/ids/1")
    assert data == payload
    assert set_stat.czxid == stat.czxid
    assert stat.version == 1  # created at 0, bumped once by the setData in the same txn
    assert stat.ephemeralOwner == zk_client.client_id[0]


@pytest.mark.zookeeper
@pytest.mark.parametrize("run", ["first", "second"])
def test_chroot_isolates_tests(run: str, zk_client: KazooClient, zk_connect: str) -> None:
    """Both runs create the same path without a NodeExists; the server sees it under the chroot."""
    zk_client.create(SHARED_PATH, run.encode(), makepath=True)
    assert zk_client.get(SHARED_PATH)[0] == run.encode()

    hosts, _, chroot = zk_connect.partition("/")
    assert chroot.startswith("test-")
    raw = started_client(hosts)
    try:
        assert raw.get(f"/{chroot}{SHARED_PATH}")[0] == run.encode()
        assert not raw.exists(SHARED_PATH)
    finally:
        raw.stop()
        raw.close()


@pytest.mark.zookeeper
def test_shared_server_is_standalone(zk_server: ZooKeeperServer) -> None:
    assert zk_server.connect_string == f"127.0.0.1:{zk_server.port}"
    assert server_mode(zk_server.host, zk_server.port) == "standalone"
    assert zk_server.pid is not None and pid_alive(zk_server.pid)


# --------------------------------------------------------------------------- classpath and java resolution


def test_empty_zookeeper_home_is_an_error_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOOKEEPER_HOME", str(tmp_path))
    with pytest.raises(ZooKeeperNotFound, match="ZOOKEEPER_HOME") as excinfo:
        resolve_classpath()
    assert str(tmp_path) in str(excinfo.value)


def test_zookeeper_home_tarball_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "zookeeper-3.9.9.jar").touch()
    (tmp_path / "lib" / "netty-handler-4.1.jar").touch()
    monkeypatch.setenv("ZOOKEEPER_HOME", str(tmp_path))
    classpath = resolve_classpath()
    assert classpath.source == "ZOOKEEPER_HOME"
    assert classpath.entries == (str(tmp_path / "lib" / "*"),)


def test_fallback_without_zookeeper_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZOOKEEPER_HOME", raising=False)
    assert resolve_classpath().source in {"debian", "pyspark"}


def test_nothing_found_names_all_three_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZOOKEEPER_HOME", raising=False)
    monkeypatch.setattr(zookeeper_jars, "DEBIAN_ZOOKEEPER_JAR", tmp_path / "absent.jar")
    monkeypatch.setattr(zookeeper_jars, "_pyspark_jars_dir", lambda: None)
    with pytest.raises(ZooKeeperNotFound) as excinfo:
        resolve_classpath()
    message = str(excinfo.value)
    for option in ("ZOOKEEPER_HOME", "apt-get install zookeeper", "pip install pyspark", "make test"):
        assert option in message


def test_missing_java_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(JavaNotFound, match="openjdk-17-jre-headless"):
        find_java()
    with pytest.raises(JavaNotFound):
        ZooKeeperServer(data_dir=tmp_path / "zk")


def test_java_home_wins_over_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert find_java() == str(java)


# --------------------------------------------------------------------------- process lifecycle


@pytest.mark.zookeeper
def test_stop_ends_the_jvm_and_keeps_the_log(tmp_path: Path) -> None:
    server = ZooKeeperServer(data_dir=tmp_path / "zk")
    with server:
        pid = server.pid
        assert pid is not None and pid_alive(pid)
    assert not pid_alive(pid)
    assert server.pid is None
    assert server_mode(server.host, server.port, timeout=0.5) is None
    assert server.log_path.is_file()
    assert "ZooKeeperServer" in server.log_path.read_text()  # the JVM really logged there
    server.stop()  # idempotent


@pytest.mark.zookeeper
def test_restart_after_kill_keeps_port_and_data(tmp_path: Path) -> None:
    with ZooKeeperServer(data_dir=tmp_path / "zk") as server:
        port = server.port
        client = started_client(server.connect_string)
        client.create("/survivor", b"still here")
        client.stop()
        client.close()

        server.kill()
        assert server.pid is None
        server.restart()
        assert server.port == port
        client = started_client(server.connect_string)
        try:
            assert client.get("/survivor")[0] == b"still here"
        finally:
            client.stop()
            client.close()


# --------------------------------------------------------------------------- ensemble


@pytest.mark.zookeeper
def test_ensemble_elects_a_new_leader_when_the_leader_dies(tmp_path: Path) -> None:
    with ZooKeeperEnsemble(3, data_dir=tmp_path / "ensemble") as ensemble:
        modes = ensemble.modes()
        assert sorted(modes) == ["follower", "follower", "leader"]
        leader = modes.index("leader")
        followers = [i for i in range(3) if i != leader]
        assert ensemble.connect_string == ",".join(f"127.0.0.1:{node.port}" for node in ensemble.nodes)

        writer = started_client(ensemble.nodes[followers[0]].connect_string)
        reader = started_client(ensemble.nodes[followers[1]].connect_string)
        try:
            writer.create("/replicated", b"v1")
            reader.sync("/replicated")  # a follower may lag; sync makes the read see the write
            assert reader.get("/replicated")[0] == b"v1"
        finally:
            writer.stop()
            writer.close()

        ensemble.kill_node(leader)
        new_leader = ensemble.wait_for_quorum(timeout=30.0)
        assert new_leader in followers
        assert ensemble.nodes[leader].mode() is None

        try:
            wait_until_sync(
                lambda: reader.connected, "the client to reconnect to a surviving node", timeout=30.0
            )
            reader.set("/replicated", b"v2")
            assert reader.get("/replicated")[0] == b"v2"
        finally:
            reader.stop()
            reader.close()


def test_a_port_handed_out_is_not_handed_out_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A port stays free until its daemon binds it, so the next call (the next daemon of the same
    cluster) must not draw it: from a range of 1,200, two draws of 500 would overlap without memory."""
    monkeypatch.setattr(ports, "LISTEN_PORTS", (20_000, 21_200))
    first = ports.free_ports(500)
    second = ports.free_ports(500)
    assert len(set(first)) == 500 and len(set(second)) == 500
    assert not set(first) & set(second)
