"""A standalone ZooKeeper on its own data directory, optionally with a TLS port: what the tests use."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from zkserver.config import CLIENT_PORT, SECURE_CLIENT_PORT, ServerTls, base_config, make_data_dir
from zkserver.errors import LocalServerError
from zkserver.java import find_java
from zkserver.ports import LOOPBACK, free_ports
from zkserver.process import DEFAULT_JVM_OPTS, START_TIMEOUT_S, ZooKeeperProcess
from zkserver.zookeeper_jars import resolve_classpath

__all__ = ["ZooKeeperServer"]

log = logging.getLogger(__name__)


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
        directory = make_data_dir(data_dir, "zkstore-zookeeper-")
        if host == LOOPBACK:
            free = iter(free_ports(2))
            client_port = port if port is not None else next(free)
            secure = secure_port if secure_port is not None else next(free)
        else:
            client_port = port if port is not None else CLIENT_PORT
            secure = secure_port if secure_port is not None else SECURE_CLIENT_PORT
        self.secure_port: int | None = secure if tls is not None else None
        """The TLS client port, or None without ``tls``."""
        settings = base_config(directory, client_port, host)
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
