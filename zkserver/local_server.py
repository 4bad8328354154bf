"""Run real ZooKeeper servers (a JVM each) on loopback for development and tests.

The control plane talks to ZooKeeper through kazoo; to test it honestly we need a
real server, not a fake. This module finds a ZooKeeper distribution and a ``java``
binary, writes a config, starts the JVM and waits until it actually serves.

* :class:`ZooKeeperServer` is one standalone server (what the test fixtures use).
* :class:`ZooKeeperEnsemble` is a quorum of several servers, for failover tests.
* Both drive :class:`ZooKeeperProcess`, the one place that knows how to start,
  probe and stop a ZooKeeper JVM.

Where the jars come from, in order: ``$ZOOKEEPER_HOME`` (a binary tarball layout),
Debian's ``zookeeper`` package, then the jars bundled inside an installed ``pyspark``.

A standalone server can also serve TLS (:class:`ServerTls`) on a second port. That needs ZooKeeper's
Netty connection factory, so netty-handler (and, optionally, netty-tcnative) must be on the classpath:
pyspark's jars directory and ZooKeeper's binary tarball carry them.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import importlib.util
import logging
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

__all__ = [
    "DEFAULT_JVM_OPTS",
    "JavaNotFound",
    "LocalServerError",
    "ServerTls",
    "ZooKeeperClasspath",
    "ZooKeeperEnsemble",
    "ZooKeeperNotFound",
    "ZooKeeperProcess",
    "ZooKeeperServer",
    "ZooKeeperStartError",
    "find_free_port",
    "find_java",
    "four_letter_word",
    "free_ports",
    "resolve_classpath",
    "server_mode",
]

log = logging.getLogger("zkserver.local_server")

LOOPBACK = "127.0.0.1"
CLIENT_PORT, QUORUM_PORT, ELECTION_PORT = 2181, 2888, 3888
"""ZooKeeper's usual ports, for a server on an address of its own (a network namespace)."""
SECURE_CLIENT_PORT = 2182
"""The usual TLS client port."""

#: Debian's ``libzookeeper-java`` jar. Its manifest ``Class-Path`` already names the
#: jars it needs (netty, slf4j-api, jute, ...), so the jar alone is a usable classpath.
DEBIAN_ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
#: Optional Debian jars that give slf4j a logging backend; without them the server
#: runs fine but logs nothing. Deliberately not ``/usr/share/java/*``: that directory
#: holds several competing slf4j bindings (nop, simple, jdk14, log4j12).
DEBIAN_LOGGING_JARS = (Path("/usr/share/java/slf4j-log4j12.jar"), Path("/usr/share/java/log4j-1.2.jar"))

#: Fast-starting JVM. 1 GiB of heap because at 100k+ partitions (200k znodes) a 256 MiB heap makes
#: ZooKeeper spend its time collecting garbage, ~30x slower; the C1-only JIT
#: plus the serial collector cut startup time and memory on small CI machines.
DEFAULT_JVM_OPTS: tuple[str, ...] = ("-Xmx1g", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")

#: 500 ms ticks make elections and session expiry quick in tests. With ZooKeeper's
#: default bounds (2..20 ticks) that would cap sessions at 10 s, so the cap is raised
#: explicitly: sessions from 1 s (2 ticks) to 60 s are accepted.
TICK_TIME_MS = 500
MAX_SESSION_TIMEOUT_MS = 60_000

FOUR_LETTER_WORDS = "srvr,ruok,stat,mntr,cons"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
LOG_TAIL_LINES = 40
POLL_INTERVAL_S = 0.1

INSTALL_HINT_JAVA = "install a Java runtime, e.g. `apt-get install openjdk-17-jre-headless`"


class LocalServerError(RuntimeError):
    """Base class for every failure to set up or run a local ZooKeeper."""


class ZooKeeperNotFound(LocalServerError):
    """No ZooKeeper jars could be located."""


class JavaNotFound(LocalServerError):
    """No ``java`` executable could be located."""


class ZooKeeperStartError(LocalServerError):
    """The JVM exited or never started serving; the message carries the log tail."""


# --------------------------------------------------------------------------- resolution


@dataclass(frozen=True)
class ZooKeeperClasspath:
    """Where the ZooKeeper jars were found, kept with its origin for error messages."""

    entries: tuple[str, ...]
    source: str  # "ZOOKEEPER_HOME", "debian" or "pyspark"

    @property
    def argument(self) -> str:
        """The value for ``java -cp`` (entries may be ``dir/*`` wildcards that java expands)."""
        return os.pathsep.join(self.entries)


def _has_zookeeper_jar(directory: Path) -> bool:
    return any(directory.glob("zookeeper-[0-9]*.jar")) or (directory / "zookeeper.jar").is_file()


def _classpath_from_home(home: Path) -> ZooKeeperClasspath:
    """Tarball layout: jars in ``lib/`` (3.5+) and/or at the top level (older releases)."""
    dirs = [d for d in (home / "lib", home) if d.is_dir() and any(d.glob("*.jar"))]
    if not dirs or not any(_has_zookeeper_jar(d) for d in dirs):
        raise ZooKeeperNotFound(
            f"ZOOKEEPER_HOME is set to {str(home)!r}, but no zookeeper-<version>.jar was found in "
            f"{str(home / 'lib')!r} or {str(home)!r}. Point ZOOKEEPER_HOME at an unpacked ZooKeeper "
            "binary release (apache-zookeeper-X.Y.Z-bin), or unset it to use Debian's or pyspark's jars."
        )
    return ZooKeeperClasspath(tuple(str(d / "*") for d in dirs), "ZOOKEEPER_HOME")


def _pyspark_jars_dir() -> Path | None:
    """pyspark bundles ZooKeeper and its deps; locate them without importing pyspark (slow, heavy)."""
    try:
        spec = importlib.util.find_spec("pyspark")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        jars = Path(location) / "jars"
        if jars.is_dir() and _has_zookeeper_jar(jars):
            return jars
    return None


def resolve_classpath(environ: Mapping[str, str] | None = None) -> ZooKeeperClasspath:
    """Find ZooKeeper's jars: ``$ZOOKEEPER_HOME``, then Debian's package, then pyspark's.

    A set-but-broken ``ZOOKEEPER_HOME`` is an error rather than a silent fallback, so
    nobody tests against a different ZooKeeper than the one they asked for.
    """
    env = os.environ if environ is None else environ
    home = env.get("ZOOKEEPER_HOME", "").strip()
    if home:
        return _classpath_from_home(Path(home).expanduser())
    if DEBIAN_ZOOKEEPER_JAR.is_file():
        entries = [str(DEBIAN_ZOOKEEPER_JAR)]
        if all(jar.is_file() for jar in DEBIAN_LOGGING_JARS):
            entries += [str(jar) for jar in DEBIAN_LOGGING_JARS]
        return ZooKeeperClasspath(tuple(entries), "debian")
    jars = _pyspark_jars_dir()
    if jars is not None:
        return ZooKeeperClasspath((str(jars / "*"),), "pyspark")
    raise ZooKeeperNotFound(
        "Cannot find ZooKeeper jars. Do one of: (1) set ZOOKEEPER_HOME to an unpacked ZooKeeper "
        "binary release; (2) `apt-get install zookeeper` (Debian/Ubuntu, provides "
        f"{DEBIAN_ZOOKEEPER_JAR}); (3) `pip install pyspark` (bundles ZooKeeper; `make test` installs it)."
    )


def find_java(environ: Mapping[str, str] | None = None) -> str:
    """``$JAVA_HOME/bin/java`` if usable, else ``java`` on ``PATH``."""
    env = os.environ if environ is None else environ
    java_home = env.get("JAVA_HOME", "").strip()
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
        log.warning("JAVA_HOME=%s has no bin/java; looking for java on PATH", java_home)
    found = shutil.which("java", path=env.get("PATH", os.defpath))
    if found is None:
        where = f"JAVA_HOME={java_home!r} (no bin/java) nor on PATH" if java_home else "on PATH"
        raise JavaNotFound(
            f"No `java` executable found {where}; ZooKeeper needs a Java runtime (11+). "
            f"To fix it, {INSTALL_HINT_JAVA}, or set JAVA_HOME."
        )
    return found


# --------------------------------------------------------------------------- probing


def find_free_port(host: str = LOOPBACK) -> int:
    """A port free right now, below the kernel's ephemeral range (see :func:`free_ports`)."""
    return free_ports(1, host)[0]


LISTEN_PORTS = (10000, 32768)
"""Where servers started here listen: below Linux's default ephemeral range (32768-60999), from which
the kernel picks the source port of every outgoing connection. A port taken from that range with
``bind(0)`` can be handed to some client's ``connect`` before the daemon that was told to use it
binds it ("address already in use"); below it, only another listener can take it."""


def _ephemeral_floor() -> int:
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return LISTEN_PORTS[1]
    return low


HANDED_OUT_MEMORY = 2048
"""How many ports this process remembers handing out: a port is free until the daemon told to use it
binds it, so without memory a second call (the next daemon of the same cluster) could draw it again."""
_handed_out: collections.deque[int] = collections.deque(maxlen=HANDED_OUT_MEMORY)
_handed_out_lock = threading.Lock()


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """Distinct free ports, drawn at random below the ephemeral range and none handed out lately by
    this process; every socket stays bound until all are picked. Falls back to ``bind(0)`` where that
    range leaves too little room."""
    low, high = LISTEN_PORTS[0], min(LISTEN_PORTS[1], _ephemeral_floor())
    rng = random.SystemRandom()
    with _handed_out_lock, contextlib.ExitStack() as stack:
        recent = set(_handed_out)
        ports: list[int] = []
        attempts = 0
        while len(ports) < count:
            attempts += 1
            port = rng.randrange(low, high) if high - low > 1000 and attempts < 200 else 0
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError:
                continue
            # SO_REUSEADDR lets two sockets that do not listen bind one port: distinct by bookkeeping.
            chosen = sock.getsockname()[1]
            if chosen in recent:
                continue
            recent.add(chosen)
            ports.append(chosen)
        _handed_out.extend(ports)
        return ports


def four_letter_word(
    host: str, port: int, word: str, timeout: float = 2.0, tls: ssl.SSLContext | None = None
) -> str:
    """Send a four-letter admin command and return the whole reply (the server closes after it).
    With ``tls``, over the server's TLS port (``secureClientPort`` answers them too).

    Raises ``OSError`` when the server is not listening or does not answer in time (``ssl.SSLError``,
    an ``OSError``, when the handshake fails).
    """
    with socket.create_connection((host, port), timeout=timeout) as raw:
        sock = tls.wrap_socket(raw, server_hostname=host) if tls is not None else raw
        with sock:
            sock.sendall(word.encode("ascii"))
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


def server_mode(host: str, port: int, timeout: float = 2.0) -> str | None:
    """``standalone``/``leader``/``follower``/..., or None while the server is not serving."""
    try:
        reply = four_letter_word(host, port, "srvr", timeout)
    except OSError:
        return None
    for line in reply.splitlines():
        if line.startswith("Mode:"):
            return line.partition(":")[2].strip()
    return None  # e.g. "not currently serving requests" while a quorum peer looks for a leader


# --------------------------------------------------------------------------- config files

NETTY_CONNECTION_FACTORY = "org.apache.zookeeper.server.NettyServerCnxnFactory"
"""The only connection factory that speaks TLS (it then serves the plaintext port as well)."""
CLIENT_AUTH_MODES = ("need", "want", "none")


@dataclass(frozen=True)
class ServerTls:
    """TLS for a server's secure client port, from PEM files as ``security.certs`` writes them.

    ``keystore`` holds the server's private key and certificate chain, ``truststore`` the CA that
    client certificates must chain to; ``client_auth`` is ZooKeeper's ``ssl.clientAuth``: ``need`` (a
    client certificate is required, and its subject becomes the session's ``x509`` identity),
    ``want`` or ``none``. ``protocols`` are the TLS versions served: ZooKeeper 3.9 alone would
    serve only its default, TLSv1.3, and refuse clients with Kafka's default, TLSv1.2.
    """

    keystore: Path
    truststore: Path
    client_auth: str = "need"
    key_password: str | None = None
    protocols: tuple[str, ...] = ("TLSv1.3", "TLSv1.2")

    def __post_init__(self) -> None:
        if self.client_auth not in CLIENT_AUTH_MODES:
            raise ValueError(
                f"client_auth must be one of {', '.join(CLIENT_AUTH_MODES)}, not {self.client_auth!r}"
            )

    def settings(self, secure_port: int, host: str) -> dict[str, str]:
        """The zoo.cfg lines (ZooKeeper turns the ``ssl.*`` ones into ``zookeeper.ssl.*`` properties)."""
        settings = {
            "secureClientPort": str(secure_port),
            "secureClientPortAddress": host,
            "serverCnxnFactory": NETTY_CONNECTION_FACTORY,
            "ssl.keyStore.location": str(self.keystore),
            "ssl.keyStore.type": "PEM",
            "ssl.trustStore.location": str(self.truststore),
            "ssl.trustStore.type": "PEM",
            "ssl.clientAuth": self.client_auth,
            "ssl.enabledProtocols": ",".join(self.protocols),
        }
        if self.key_password is not None:
            settings["ssl.keyStore.password"] = self.key_password
        return settings


# Minimal console-logging configs for each backend ZooKeeper may be packaged with
# (log4j2 in pyspark, logback in 3.8+ tarballs, log4j 1.2 on Debian). Without one,
# log4j2 prints only errors and logback/log4j1 complain. Only the one matching the
# classpath is read; the others are ignored.
_LOG4J2_CONFIG = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d{ISO8601} %-5p [%t] %c{1}: %m%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
"""
_LOG4J1_CONFIG = """\
log4j.rootLogger=INFO, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n
"""
_LOGBACK_CONFIG = """\
<configuration>
  <appender name="out" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{ISO8601} %-5level [%thread] %logger{0}: %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="out"/></root>
</configuration>
"""


def _base_config(data_dir: Path, client_port: int, host: str = LOOPBACK) -> dict[str, str]:
    return {
        "tickTime": str(TICK_TIME_MS),
        "maxSessionTimeout": str(MAX_SESSION_TIMEOUT_MS),
        "dataDir": str(data_dir),
        "clientPort": str(client_port),
        "clientPortAddress": host,
        "admin.enableServer": "false",
        "4lw.commands.whitelist": FOUR_LETTER_WORDS,
        "maxClientCnxns": "0",
        # Writes still reach the OS page cache before they are acknowledged, so killing
        # the JVM (chaos tests) loses nothing; only skipping fsync keeps tests fast.
        "forceSync": "no",
        "preAllocSize": "4096",  # KiB; the 64 MiB default is wasteful for test data
    }


STANDALONE_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
QUORUM_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


def _read_config(path: Path) -> dict[str, str]:
    settings = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.lstrip().startswith("#"):
            settings[key.strip()] = value.strip()
    return settings


def _write_config(path: Path, settings: Mapping[str, str]) -> None:
    lines = [f"{key}={value}" for key, value in settings.items()]
    path.write_text("# Written by zkserver.local_server\n" + "\n".join(lines) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------- the JVM

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
        classpath: ZooKeeperClasspath,
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
        settings = _read_config(config_path)
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

    def start(self) -> None:
        """Spawn the JVM (without waiting for it to serve). No-op if already running."""
        if self.running:
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        _write_config(self.config_path, self.settings)
        conf = self.data_dir / "logging"
        conf.mkdir(exist_ok=True)
        (conf / "log4j2.properties").write_text(_LOG4J2_CONFIG, encoding="utf-8")
        (conf / "log4j.properties").write_text(_LOG4J1_CONFIG, encoding="utf-8")
        (conf / "logback.xml").write_text(_LOGBACK_CONFIG, encoding="utf-8")
        command = [
            *self.command_prefix,
            self.java,
            *self.jvm_opts,
            f"-Dlog4j2.configurationFile={conf / 'log4j2.properties'}",
            f"-Dlog4j.configuration={(conf / 'log4j.properties').as_uri()}",
            f"-Dlogback.configurationFile={conf / 'logback.xml'}",
            f"-Dzookeeper.log.dir={self.data_dir}",
            # ZooKeeper otherwise registers log4j 1.x MBeans, which only adds noise here.
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp",
            self.classpath.argument,
            self.main_class,
            str(self.config_path),
        ]
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


# --------------------------------------------------------------------------- public runners


def _make_data_dir(data_dir: str | os.PathLike[str] | None, prefix: str) -> Path:
    if data_dir is None:
        return Path(tempfile.mkdtemp(prefix=prefix))
    path = Path(data_dir).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


class ZooKeeperServer:
    """A standalone ZooKeeper on 127.0.0.1 with its own data dir (kept after stop, for its log).

    Usage::

        with ZooKeeperServer() as zk:
            client = KazooClient(hosts=zk.connect_string)
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        jvm_opts: Sequence[str] = DEFAULT_JVM_OPTS,
        extra_config: Mapping[str, str] | None = None,
        start_timeout: float = START_TIMEOUT_S,
        host: str = LOOPBACK,
        command_prefix: Sequence[str] = (),
        tls: ServerTls | None = None,
        secure_port: int | None = None,
    ) -> None:
        """``host`` and ``command_prefix`` place the server elsewhere than loopback, e.g. on its own
        address in a network namespace (``ip netns exec NS``); its port there is 2181 unless given.

        With ``tls``, the server also serves TLS on ``secure_port`` (a free one unless given; 2182
        off loopback); the plaintext port stays, for the four-letter-word health checks."""
        classpath = resolve_classpath()
        java = find_java()
        directory = _make_data_dir(data_dir, "zkstore-zookeeper-")
        if host == LOOPBACK:
            free = iter(free_ports(2))
            client_port = port if port is not None else next(free)
            secure = secure_port if secure_port is not None else next(free)
        else:
            client_port = port if port is not None else CLIENT_PORT
            secure = secure_port if secure_port is not None else SECURE_CLIENT_PORT
        self.secure_port: int | None = secure if tls is not None else None
        """The TLS client port, or None without ``tls``."""
        settings = _base_config(directory, client_port, host)
        if tls is not None:
            settings |= tls.settings(secure, host)
        settings |= dict(extra_config or {})
        self.start_timeout = start_timeout
        self.process = ZooKeeperProcess(
            data_dir=directory,
            client_port=client_port,
            settings=settings,
            classpath=classpath,
            java=java,
            jvm_opts=jvm_opts,
            name=f"zookeeper-standalone:{client_port}",
            command_prefix=command_prefix,
        )

    @property
    def host(self) -> str:
        return self.process.host

    @property
    def port(self) -> int:
        """The client port."""
        return self.process.port

    @property
    def connect_string(self) -> str:
        """``"127.0.0.1:PORT"``, for kazoo's ``hosts``."""
        return self.process.connect_string

    @property
    def secure_connect_string(self) -> str:
        """``"127.0.0.1:SECURE_PORT"``: the TLS port, for a client with ``use_ssl``."""
        if self.secure_port is None:
            raise LocalServerError(f"{self!r} serves no TLS port (started without tls=ServerTls(...))")
        return f"{self.host}:{self.secure_port}"

    @property
    def pid(self) -> int | None:
        """JVM pid; None when not running."""
        return self.process.pid

    @property
    def log_path(self) -> Path:
        """The JVM's stdout/stderr; survives ``stop()`` for post-mortems."""
        return self.process.log_path

    @property
    def data_dir(self) -> Path:
        """Holds zoo.cfg, the log and ZooKeeper's snapshots/txn logs."""
        return self.process.data_dir

    @property
    def running(self) -> bool:
        return self.process.running

    def start(self) -> Self:
        """Start the JVM and block until it answers ``srvr`` in standalone mode."""
        self.process.start()
        try:
            self.process.wait_until_serving(self.start_timeout)
        except BaseException:
            self.process.stop()
            raise
        log.info("ZooKeeper serving at %s (log %s)", self.connect_string, self.log_path)
        return self

    def stop(self) -> None:
        """Graceful stop (SIGTERM, then SIGKILL after 10 s); idempotent."""
        self.process.stop()

    def kill(self) -> None:
        """SIGKILL: a crash, for chaos tests."""
        self.process.kill()

    def detach(self) -> None:
        """Keep running after this Python process exits."""
        self.process.detach()

    def restart(self) -> Self:
        """Stop (if running) and start again on the same port and data dir."""
        self.process.stop()
        return self.start()

    def mode(self) -> str | None:
        return self.process.mode()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<ZooKeeperServer {self.process!r}>"


class ZooKeeperEnsemble:
    """A ZooKeeper quorum of ``size`` JVMs on loopback, for leader-failover tests.

    Nodes are addressed by 0-based index ``i``; node ``i`` has server id (``myid``) ``i + 1``.
    """

    def __init__(
        self,
        size: int = 3,
        *,
        data_dir: str | os.PathLike[str] | None = None,
        jvm_opts: Sequence[str] = DEFAULT_JVM_OPTS,
        extra_config: Mapping[str, str] | None = None,
        start_timeout: float = START_TIMEOUT_S,
        hosts: Sequence[str] | None = None,
        command_prefixes: Sequence[Sequence[str]] | None = None,
    ) -> None:
        """``hosts`` (one address per node) and ``command_prefixes`` place each node elsewhere than
        loopback, e.g. in a network namespace of its own; each then uses Kafka's usual ports."""
        if size < 2:
            raise ValueError("an ensemble needs at least 2 servers; use ZooKeeperServer for one")
        classpath = resolve_classpath()
        java = find_java()
        root = _make_data_dir(data_dir, "zkstore-ensemble-")
        addresses = list(hosts) if hosts is not None else [LOOPBACK] * size
        if hosts is None:
            ports = free_ports(3 * size)
            client_ports, peer_ports = ports[:size], ports[size:]
        else:
            client_ports, peer_ports = [CLIENT_PORT] * size, [QUORUM_PORT, ELECTION_PORT] * size
        servers = {
            f"server.{i + 1}": f"{addresses[i]}:{peer_ports[2 * i]}:{peer_ports[2 * i + 1]}"
            for i in range(size)
        }
        self.start_timeout = start_timeout
        self.data_dir = root
        self.nodes: list[ZooKeeperProcess] = []
        for i in range(size):
            node_dir = root / f"node{i + 1}"
            node_dir.mkdir(parents=True, exist_ok=True)
            (node_dir / "myid").write_text(f"{i + 1}\n", encoding="ascii")
            settings = (
                _base_config(node_dir, client_ports[i], addresses[i])
                # Generous limits in ticks: startup on a busy 2-core box can be slow.
                | {"initLimit": "20", "syncLimit": "10"}
                | servers
                | dict(extra_config or {})
            )
            self.nodes.append(
                ZooKeeperProcess(
                    data_dir=node_dir,
                    client_port=client_ports[i],
                    settings=settings,
                    classpath=classpath,
                    java=java,
                    jvm_opts=jvm_opts,
                    main_class=QUORUM_MAIN,
                    name=f"zookeeper-{i + 1}:{client_ports[i]}",
                    command_prefix=command_prefixes[i] if command_prefixes is not None else (),
                )
            )

    @property
    def connect_string(self) -> str:
        """All nodes, running or not: clients fail over between them."""
        return ",".join(node.connect_string for node in self.nodes)

    def start(self) -> Self:
        """Start every node at once (so the election sees all peers) and wait for a quorum."""
        for node in self.nodes:
            node.start()
        try:
            self.wait_for_quorum()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def detach(self) -> None:
        """Keep every node running after this Python process exits."""
        for node in self.nodes:
            node.detach()

    def stop_node(self, i: int) -> None:
        self.nodes[i].stop()

    def kill_node(self, i: int) -> None:
        self.nodes[i].kill()

    def start_node(self, i: int) -> None:
        """(Re)start one node and wait until it has joined the quorum as leader or follower."""
        node = self.nodes[i]
        node.start()
        node.wait_until_serving(self.start_timeout, modes=("leader", "follower"))

    def modes(self) -> list[str | None]:
        """Each node's ``srvr`` mode (None for stopped or not-serving nodes)."""
        return [node.mode() for node in self.nodes]

    def leader(self) -> int | None:
        """Index of the current leader, if exactly one node claims to lead."""
        leaders = [i for i, mode in enumerate(self.modes()) if mode == "leader"]
        return leaders[0] if len(leaders) == 1 else None

    def wait_for_quorum(self, timeout: float | None = None) -> int:
        """Wait until every running node is leader or follower with exactly one leader; return its index.

        Needs a majority of nodes running, otherwise it times out.
        """
        limit = self.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while True:
            running = [i for i, node in enumerate(self.nodes) if node.running]
            modes = {i: self.nodes[i].mode() for i in running}
            leaders = [i for i, mode in modes.items() if mode == "leader"]
            if (
                len(running) > len(self.nodes) // 2
                and len(leaders) == 1
                and all(mode in ("leader", "follower") for mode in modes.values())
            ):
                return leaders[0]
            out_of_time = time.monotonic() >= deadline
            if out_of_time or len(running) <= len(self.nodes) // 2:  # no majority: it cannot happen
                tails = "\n".join(self.nodes[i].log_tail(15) for i in range(len(self.nodes)))
                raise ZooKeeperStartError(
                    f"ensemble has no quorum after {limit:.0f} s: modes {modes}, running {running}\n{tails}"
                )
            time.sleep(POLL_INTERVAL_S)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<ZooKeeperEnsemble {self.nodes!r}>"
