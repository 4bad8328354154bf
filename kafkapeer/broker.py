"""A real Apache Kafka 3.9 broker in ZooKeeper mode as a child process, with our daemons' lifecycle.

``java -cp <Kafka 3.9 jars> kafka.Kafka server.properties``: its directory holds the properties, a
log4j configuration, the broker's log (``server.log``, kept after the test) and its log dirs. Start,
SIGKILL, SIGSTOP/SIGCONT, SIGTERM and bounce mirror ``cluster.processes.DaemonProcess``, so a test
treats a Kafka broker and one of ours alike. Readiness is Kafka's own: its registration in
``/brokers/ids/N``, read with the project's znode decoder.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Self

from kafkapeer.jars import BROKER, classpath

__all__ = ["JVM_OPTS", "KafkaBroker", "KafkaBrokerError", "server_properties"]

JVM_OPTS = ("-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
"""A small heap and the C1 compiler only: a test broker starts in seconds and idles cheaply."""

LOG4J = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.controller=TRACE
log4j.logger.state.change.logger=TRACE
log4j.logger.org.apache.zookeeper=WARN
"""
"""Everything to ``server.log``; the controller and state-change loggers at TRACE, as Kafka's own
``log4j.properties`` sets them, so a test's failure shows what Kafka's controller decided."""


class KafkaBrokerError(AssertionError):
    """The broker exited, or did not do in time what a test waited for."""


def server_properties(
    broker_id: int, zk_connect: str, listeners: str, log_dir: Path, overrides: Mapping[str, object]
) -> dict[str, object]:
    """Kafka's settings for a broker sharing a cluster with ours: ZooKeeper mode, IBP 3.9, RF 1 internals."""
    return {
        "broker.id": broker_id,
        "zookeeper.connect": zk_connect,
        "listeners": listeners,
        "log.dirs": log_dir,
        "inter.broker.protocol.version": "3.9",
        "offsets.topic.replication.factor": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
        "zookeeper.session.timeout.ms": 6000,
        "auto.create.topics.enable": "false",
        **overrides,
    }


class KafkaBroker:
    """One Kafka 3.9 broker under ``workdir/kafka-<id>``; ``listeners`` as Kafka spells them."""

    def __init__(
        self, broker_id: int, zk_connect: str, workdir: Path, listeners: str, **overrides: object
    ) -> None:
        self.broker_id = broker_id
        self.java_options: tuple[str, ...] = ()
        """More JVM options, after :data:`JVM_OPTS` (a ``-javaagent:…``, say): set before :meth:`start`."""
        self.name = f"kafka-{broker_id}"
        self.dir = workdir / self.name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.dir / "server.log"
        self.stdout_path = self.dir / "stdout.log"
        self.config = self.dir / "server.properties"
        self.listeners = listeners
        settings = server_properties(broker_id, zk_connect, listeners, self.dir / "data", overrides)
        self.config.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        (self.dir / "log4j.properties").write_text(LOG4J.format(log=self.log_path))
        self.process: subprocess.Popen[bytes] | None = None

    def endpoint(self, listener: str = "PLAINTEXT") -> tuple[str, int]:
        """``(host, port)`` of one of ``listeners`` (``NAME://host:port``, comma-separated)."""
        for item in self.listeners.split(","):
            name, _, address = item.strip().partition("://")
            if name.upper() == listener.upper():
                host, _, port = address.rpartition(":")
                return host.strip("[]"), int(port)
        raise KeyError(f"{self.name} has no listener {listener}: {self.listeners}")

    def bootstrap(self, listener: str = "PLAINTEXT") -> str:
        return "{}:{}".format(*self.endpoint(listener))

    def command(self) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise KafkaBrokerError("java not found: Kafka's broker needs a JRE (make java)")
        return [
            java, *JVM_OPTS, *self.java_options,
            f"-Dlog4j.configuration=file:{self.dir / 'log4j.properties'}",
            f"-Dkafka.logs.dir={self.dir}", "-cp", classpath(BROKER), "kafka.Kafka", str(self.config),
        ]  # fmt: skip

    def start(self) -> Self:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "JAVA_TOOL_OPTIONS"))}
        with self.stdout_path.open("ab") as out:
            self.process = subprocess.Popen(self.command(), env=env, stdout=out, stderr=subprocess.STDOUT)
        return self

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def check_running(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise KafkaBrokerError(f"{self.name} exited with {self.process.returncode}:\n{self.tail()}")

    def tail(self, lines: int = 40) -> str:
        text = []
        for path in (self.stdout_path, self.log_path):
            try:
                text += path.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
        return "\n".join(text)

    def log_lines(self, needle: str) -> list[str]:
        try:
            return [line for line in self.log_path.read_text(errors="replace").splitlines() if needle in line]
        except OSError:
            return []

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL: the registration stays in ZooKeeper until the session expires."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait()

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM: Kafka's controlled shutdown, then exit."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGCONT)
        self.process.terminate()
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise KafkaBrokerError(f"{self.name} did not stop on SIGTERM within {timeout} s") from None

    def bounce(self) -> Self:
        """SIGKILL and start again at once, same id, ports and data."""
        self.kill()
        return self.start()
