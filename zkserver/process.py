"""One ZooKeeper JVM for a prepared data directory: start, probe, stop, kill, and none left at exit.

:class:`ZooKeeperProcess` is the one place that knows how to start, probe and stop a ZooKeeper JVM; a
standalone server (:mod:`zkserver.server`) and an ensemble (:mod:`zkserver.ensemble`) both drive it.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from zkserver.config import read_config, write_config, write_logging_configs
from zkserver.errors import ZooKeeperStartError
from zkserver.four_letter_words import four_letter_word, server_mode
from zkserver.java import Classpath, find_java
from zkserver.ports import LOOPBACK
from zkserver.zookeeper_jars import resolve_classpath

__all__ = [
    "DEFAULT_JVM_OPTS",
    "POLL_INTERVAL_S",
    "QUORUM_MAIN",
    "STANDALONE_MAIN",
    "START_TIMEOUT_S",
    "ZooKeeperProcess",
]

log = logging.getLogger(__name__)

#: Fast-starting JVM. 1 GiB of heap because at 100k+ partitions (200k znodes) a 256 MiB heap makes
#: ZooKeeper spend its time collecting garbage, ~30x slower; the C1-only JIT
#: plus the serial collector cut startup time and memory on small CI machines.
DEFAULT_JVM_OPTS: tuple[str, ...] = ("-Xmx1g", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
LOG_TAIL_LINES = 40
POLL_INTERVAL_S = 0.1

STANDALONE_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
QUORUM_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

# Strong references on purpose: a server whose owner dropped it must still be stopped.
_live_processes: set[ZooKeeperProcess] = set()


@atexit.register
def _stop_leftovers() -> None:
    """Never leave a JVM behind if the owner forgot to stop it (or crashed before teardown)."""
    for proc in list(_live_processes):
        with contextlib.suppress(Exception):
            proc.stop(timeout=3.0)


class ZooKeeperProcess:
    """One ZooKeeper JVM for a prepared data directory: start, probe, stop, kill.

    The config is rewritten on every start from ``settings``, so the same instance can
    be restarted any number of times on the same port and data.
    """

    def __init__(
        self,
        *,
        data_dir: Path,
        client_port: int,
        settings: Mapping[str, str],
        classpath: Classpath,
        java: str,
        jvm_opts: Sequence[str] = DEFAULT_JVM_OPTS,
        main_class: str = STANDALONE_MAIN,
        name: str = "zookeeper",
        command_prefix: Sequence[str] = (),
    ) -> None:
        self.data_dir = data_dir
        self.command_prefix = tuple(command_prefix)
        """Put before the java command, e.g. ``ip netns exec NS`` for a server in a network namespace."""
        self.client_port = client_port
        self.settings = dict(settings)
        self.classpath = classpath
        self.java = java
        self.jvm_opts = tuple(jvm_opts)
        self.main_class = main_class
        self.name = name
        self.config_path = data_dir / "zoo.cfg"
        self.log_path = data_dir / "zookeeper.log"
        self._popen: subprocess.Popen[bytes] | None = None

    @classmethod
    def from_config(
        cls, config_path: Path, *, name: str = "zookeeper", command_prefix: Sequence[str] = ()
    ) -> ZooKeeperProcess:
        """The node an earlier run configured in ``config_path`` (its zoo.cfg): same ports, data and, for
        an ensemble member (``server.N`` lines), same peers. For restarting a node of a detached cluster."""
        settings = read_config(config_path)
        quorum = any(key.startswith("server.") for key in settings)
        return cls(
            data_dir=config_path.parent,
            client_port=int(settings["clientPort"]),
            settings=settings,
            classpath=resolve_classpath(),
            java=find_java(),
            main_class=QUORUM_MAIN if quorum else STANDALONE_MAIN,
            name=name,
            command_prefix=command_prefix,
        )

    # -- properties

    @property
    def host(self) -> str:
        """The address the server listens on for clients (``clientPortAddress``)."""
        return self.settings.get("clientPortAddress", LOOPBACK)

    @property
    def port(self) -> int:
        return self.client_port

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def pid(self) -> int | None:
        """PID of the running JVM, or None once it has been stopped (or before start)."""
        return self._popen.pid if self.running and self._popen is not None else None

    @property
    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    # -- lifecycle

    def command(self) -> list[str]:
        """The java command line, after writing the config and logging files it names."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        write_config(self.config_path, self.settings)
        return [
            *self.command_prefix,
            self.java,
            *self.jvm_opts,
            *write_logging_configs(self.data_dir / "logging"),
            f"-Dzookeeper.log.dir={self.data_dir}",
            # ZooKeeper otherwise registers log4j 1.x MBeans, which only adds noise here.
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp",
            self.classpath.argument,
            self.main_class,
            str(self.config_path),
        ]

    def start(self) -> None:
        """Spawn the JVM (without waiting for it to serve). No-op if already running."""
        if self.running:
            return
        command = self.command()
        log.info("starting %s on %s (jars from %s)", self.name, self.connect_string, self.classpath.source)
        log.debug("command: %s", command)
        with self.log_path.open("ab") as log_file:
            log_file.write(f"\n=== zkstore: starting {self.name} at {time.ctime()} ===\n".encode())
            log_file.flush()
            self._popen = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                # Own process group: a terminal's Ctrl-C reaches only us, and we decide
                # the shutdown order (see ``python -m zkserver``).
                start_new_session=True,
            )
        _live_processes.add(self)

    def detach(self) -> None:
        """Let the server outlive this Python process (no stop at exit): a detached local cluster."""
        _live_processes.discard(self)

    def mode(self, timeout: float = 2.0) -> str | None:
        """The server's current ``Mode:`` from ``srvr``, or None if it is not serving."""
        if not self.running:
            return None
        return server_mode(self.host, self.client_port, timeout)

    def srvr(self, timeout: float = 2.0) -> str:
        """Raw ``srvr`` reply (version, latency, zxid, mode, node count)."""
        return four_letter_word(self.host, self.client_port, "srvr", timeout)

    def wait_until_serving(self, timeout: float = START_TIMEOUT_S, modes: Iterable[str] | None = None) -> str:
        """Poll ``srvr`` until it reports a mode (one of ``modes`` if given); return that mode.

        Raises :class:`ZooKeeperStartError` with the log tail if the JVM exits or time runs out.
        """
        wanted = None if modes is None else frozenset(modes)
        deadline = time.monotonic() + timeout
        last_mode: str | None = None
        while True:
            if not self.running:
                code = None if self._popen is None else self._popen.returncode
                raise ZooKeeperStartError(
                    f"{self.name} exited with code {code} before serving on {self.connect_string}\n"
                    + self.log_tail()
                )
            last_mode = server_mode(self.host, self.client_port, timeout=1.0)
            if last_mode is not None and (wanted is None or last_mode in wanted):
                return last_mode
            if time.monotonic() >= deadline:
                raise ZooKeeperStartError(
                    f"{self.name} not serving on {self.connect_string} after {timeout:.0f} s "
                    f"(last mode: {last_mode})\n" + self.log_tail()
                )
            time.sleep(POLL_INTERVAL_S)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM, wait up to ``timeout`` s, then SIGKILL. Safe to call repeatedly."""
        popen = self._popen
        if popen is None or popen.poll() is not None:
            _live_processes.discard(self)
            return
        log.info("stopping %s (pid %d)", self.name, popen.pid)
        with contextlib.suppress(ProcessLookupError):
            popen.send_signal(signal.SIGTERM)
        try:
            popen.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("%s (pid %d) ignored SIGTERM for %.0f s; killing it", self.name, popen.pid, timeout)
            self.kill()
        _live_processes.discard(self)

    def kill(self) -> None:
        """SIGKILL with no chance to clean up: simulates a crashed server."""
        popen = self._popen
        if popen is None or popen.poll() is not None:
            _live_processes.discard(self)
            return
        log.info("killing %s (pid %d)", self.name, popen.pid)
        with contextlib.suppress(ProcessLookupError):
            popen.kill()
        popen.wait()
        _live_processes.discard(self)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of the server log, for error messages."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return f"(no log at {self.log_path}: {exc})"
        tail = text.splitlines()[-lines:]
        return f"--- last {len(tail)} lines of {self.log_path} ---\n" + "\n".join(tail)

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else "stopped"
        return f"<ZooKeeperProcess {self.name} {self.connect_string} {state}>"
