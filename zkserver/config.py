"""A local ZooKeeper's files: its zoo.cfg settings, TLS on a secure client port, logging configs.

:func:`base_config` holds what every server here runs with (quick ticks, no fsync, the four-letter
words the runners probe with), :class:`ServerTls` the lines for a TLS port, and
:func:`write_logging_configs` one console config per logging backend ZooKeeper may be packaged with.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from zkserver.ports import LOOPBACK

__all__ = [
    "CLIENT_PORT",
    "ELECTION_PORT",
    "QUORUM_PORT",
    "SECURE_CLIENT_PORT",
    "ServerTls",
    "base_config",
    "make_data_dir",
    "read_config",
    "write_config",
    "write_logging_configs",
]

CLIENT_PORT, QUORUM_PORT, ELECTION_PORT = 2181, 2888, 3888
"""ZooKeeper's usual ports, for a server on an address of its own (a network namespace)."""
SECURE_CLIENT_PORT = 2182
"""The usual TLS client port."""

#: 500 ms ticks make elections and session expiry quick in tests. With ZooKeeper's
#: default bounds (2..20 ticks) that would cap sessions at 10 s, so the cap is raised
#: explicitly: sessions from 1 s (2 ticks) to 60 s are accepted.
TICK_TIME_MS = 500
MAX_SESSION_TIMEOUT_MS = 60_000

FOUR_LETTER_WORDS = "srvr,ruok,stat,mntr,cons"

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


def base_config(data_dir: Path, client_port: int, host: str = LOOPBACK) -> dict[str, str]:
    """The zoo.cfg settings every server started here has, standalone or in an ensemble."""
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


def read_config(path: Path) -> dict[str, str]:
    """The settings of a zoo.cfg (comments skipped)."""
    settings = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.lstrip().startswith("#"):
            settings[key.strip()] = value.strip()
    return settings


def write_config(path: Path, settings: Mapping[str, str]) -> None:
    """Write ``settings`` as a zoo.cfg."""
    lines = [f"{key}={value}" for key, value in settings.items()]
    path.write_text("# Written by zkserver\n" + "\n".join(lines) + "\n", encoding="utf-8")


def make_data_dir(data_dir: str | os.PathLike[str] | None, prefix: str) -> Path:
    """``data_dir`` made absolute and created, or a fresh temporary directory named ``prefix...``."""
    if data_dir is None:
        return Path(tempfile.mkdtemp(prefix=prefix))
    path = Path(data_dir).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


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


def write_logging_configs(conf: Path) -> list[str]:
    """Write the three logging configs into ``conf``; the JVM options that point each backend at its own."""
    conf.mkdir(exist_ok=True)
    (conf / "log4j2.properties").write_text(_LOG4J2_CONFIG, encoding="utf-8")
    (conf / "log4j.properties").write_text(_LOG4J1_CONFIG, encoding="utf-8")
    (conf / "logback.xml").write_text(_LOGBACK_CONFIG, encoding="utf-8")
    return [
        f"-Dlog4j2.configurationFile={conf / 'log4j2.properties'}",
        f"-Dlog4j.configuration={(conf / 'log4j.properties').as_uri()}",
        f"-Dlogback.configurationFile={conf / 'logback.xml'}",
    ]
