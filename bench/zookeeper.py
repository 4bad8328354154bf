"""The ZooKeeper every benchmark runs against: a temporary directory with a server in it."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from zkserver.process import DEFAULT_JVM_OPTS
from zkserver.server import ZooKeeperServer


def jvm_opts(heap: str) -> tuple[str, ...]:
    """The test suite's JVM options with the heap replaced."""
    return (*(opt for opt in DEFAULT_JVM_OPTS if not opt.startswith("-Xmx")), f"-Xmx{heap}")


@contextlib.contextmanager
def zookeeper_workdir(
    prefix: str, heap: str | None = None, keep: Path | None = None
) -> Iterator[tuple[ZooKeeperServer, Path]]:
    """A running ZooKeeper (data under ``workdir/zookeeper``) and the working directory; the server is
    stopped and the directory removed afterwards, also on errors and Ctrl-C: no JVM is left behind.
    With ``keep``, that directory is the working directory and stays, with every log in it."""
    with contextlib.ExitStack() as stack:
        if keep is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True))
            workdir = Path(tmp)
        else:
            workdir = keep
            workdir.mkdir(parents=True, exist_ok=True)
        server = ZooKeeperServer(
            data_dir=workdir / "zookeeper", jvm_opts=DEFAULT_JVM_OPTS if heap is None else jvm_opts(heap)
        )
        try:
            server.start()
            yield server, workdir
        finally:
            server.stop()
