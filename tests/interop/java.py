"""Kafka's Java side (clients, command-line tools, Streams) run against a test's cluster of our daemons.

``JavaSide(version, cluster, workdir)`` runs one Kafka version's tools by their script names
(``kafka-topics``, through ``kafkapeer.tools.MAIN_CLASSES``) and the single-file programs beside this
module (``programs/*.java``) by theirs, at the clients' defaults, with the cluster's bootstrap servers and,
on the secured layout, the test's super-user certificate (Kafka's PEM key and trust stores). Missing jars
fail the test, as ``tests/interop/conftest.py``'s ``kafka_jars`` does: the interop suite never skips.

``Shared`` keeps the outcome of one costly run (a cluster and a JVM) for the several tests that each
assert on a part of it, including the strict xfails that name a gap.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest

from kafkapeer.jars import JarsMissing
from kafkapeer.tools import TOOLS_LOG4J, VERSIONS, JavaMissing, compiled, java_command, main_class
from tests.support.cluster import Cluster

__all__ = [
    "PROGRAMS",
    "RUN_TIMEOUT_S",
    "VERSION_IDS",
    "JavaRun",
    "JavaSide",
    "Shared",
    "ToolRun",
    "client_properties",
]

PROGRAMS = Path(__file__).resolve().parent / "programs"
RUN_TIMEOUT_S = 120.0
"""No tool or program here needs more; one that hangs fails the test with what it printed."""
BATCH_TIMEOUT_S = 240.0
"""A batch of tool runs in one JVM (each with its own deadline) ends within pytest's 300 s."""
VERSION_IDS = tuple(VERSIONS)
"""``3.9`` (the last ZooKeeper-era release) and ``4.4`` (the newest clients, after KIP-896)."""

T = TypeVar("T")


@dataclass
class JavaRun:
    """One finished JVM: its command line, exit status and output."""

    command: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float = 0.0

    def describe(self) -> str:
        shown = " ".join(a if len(a) < 200 else "<class path>" for a in self.command[-12:])
        return (
            f"{shown}\nexit status {self.returncode}\n--- stdout ---\n{self.stdout[-4000:]}"
            f"\n--- stderr ---\n{self.stderr[-4000:]}"
        )

    def ok(self) -> JavaRun:
        assert self.returncode == 0, self.describe()
        return self

    def succeeded(self) -> str:
        """The stdout of a tool that exited 0 and printed no error (some tools exit 0 after one)."""
        self.ok()
        assert "Error" not in self.stdout, self.describe()
        return self.stdout

    def events(self) -> list[dict[str, Any]]:
        """The JSON objects printed one a line (the verifiable tools' events), in order."""
        return [json.loads(line) for line in self.stdout.splitlines() if line.startswith("{")]

    def result(self) -> Any:
        """The JSON value on the last line of stdout (what the programs here print)."""
        lines = self.stdout.strip().splitlines()
        assert lines, self.describe()
        return json.loads(lines[-1])


def client_properties(cluster: Cluster) -> dict[str, str]:
    """A Java client's settings reaching ``cluster`` as the test's client (PEM stores when secured)."""
    config = {"bootstrap.servers": cluster.bootstrap()}
    if cluster.secure is not None:
        assert cluster.client_keystore is not None
        config |= {
            "security.protocol": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(cluster.client_keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(cluster.secure.ca.certificate),
        }
    return config


@dataclass(frozen=True)
class ToolRun:
    """One run of Kafka's ``<script>.sh`` in :meth:`JavaSide.tools`; with ``until``, repeated until its
    stdout matches that regex (within ``timeout_s``), as a user re-runs ``--verify``."""

    name: str
    script: str
    args: tuple[str, ...]
    stdin: str | None = None
    until: str | None = None
    timeout_s: float = 30.0

    @classmethod
    def of(cls, name: str, script: str, command: str, **options: Any) -> ToolRun:
        """A run of ``script`` whose arguments are ``command``'s words."""
        return cls(name, script, tuple(command.split()), **options)


class JavaSide:
    """One Kafka version's tools and programs against ``cluster`` (started), working in ``workdir``."""

    def __init__(self, version: str, cluster: Cluster, workdir: Path) -> None:
        self.version = version
        self.cluster = cluster
        self.dir = workdir / f"java-{version}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log_config = self.dir / "tools-log4j.properties"
        self.log_config.write_text(TOOLS_LOG4J)
        self.config = self.write("client.properties", client_properties(cluster))
        """The client settings as a properties file: ``--command-config``, ``--producer.config``, ..."""
        self.batches = 0

    @property
    def before_4(self) -> bool:
        """Kafka 3.x: some tools' options were renamed in 4.0."""
        return self.version.startswith("3.")

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap()

    def write(self, name: str, settings: dict[str, str]) -> Path:
        path = self.dir / name
        path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        return path

    def command(self, main: str | Path, args: tuple[str, ...], classes: Path | None = None) -> list[str]:
        try:
            return java_command(self.version, main, args, log_config=self.log_config, classes=classes)
        except (JarsMissing, JavaMissing) as exc:
            pytest.fail(f"Kafka {self.version}'s Java side cannot run, so this interop test cannot: {exc}")

    async def program_command(self, name: str, args: tuple[str, ...]) -> list[str]:
        """``programs/<name>.java`` with ``args``: compiled once (kept for later sessions), else in
        Java's source mode."""
        sources = sorted(PROGRAMS.glob("*.java"))
        try:
            classes = await asyncio.to_thread(compiled, self.version, sources)
        except JarsMissing as exc:
            pytest.fail(f"Kafka {self.version}'s Java side cannot run, so this interop test cannot: {exc}")
        if classes is None:
            return self.command(PROGRAMS / f"{name}.java", args)
        return self.command(name, args, classes)

    async def run(
        self, command: list[str], *, stdin: bytes | None = None, timeout: float = RUN_TIMEOUT_S
    ) -> JavaRun:
        started = time.monotonic()
        given = asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL
        process = await asyncio.create_subprocess_exec(
            *command,
            cwd=self.dir,
            stdin=given,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            async with asyncio.timeout(timeout):
                out, err = await process.communicate(stdin)
        except TimeoutError:
            process.kill()
            out, err = await process.communicate()
            run = JavaRun(command, -9, out.decode(errors="replace"), err.decode(errors="replace"))
            raise AssertionError(f"timed out after {timeout:g} s:\n{run.describe()}") from None
        assert process.returncode is not None
        text = out.decode(errors="replace"), err.decode(errors="replace")
        return JavaRun(command, process.returncode, *text, time.monotonic() - started)

    async def tool(self, script: str, *args: str, **options: Any) -> JavaRun:
        """Kafka's ``<script>.sh`` with ``args``, run by its main class in a JVM of its own."""
        return await self.run(self.command(main_class(script, self.version), args), **options)

    async def tools(self, runs: list[ToolRun]) -> dict[str, JavaRun]:
        """Many tool runs in one JVM, in order (``programs/ToolRunner.java``), by name: a run there costs
        what the tool does, not a JVM start. The verifiable tools, which exit and print from shutdown
        hooks of their own, need a JVM each (:meth:`tool`)."""
        plan = [{**asdict(r), "main": main_class(r.script, self.version)} for r in runs]
        self.batches += 1
        path = self.dir / f"runs-{self.batches}.json"
        path.write_text(json.dumps(plan))
        timeout = min(sum(r.timeout_s for r in runs) + 30, BATCH_TIMEOUT_S)
        batch = await self.program("ToolRunner", str(path), timeout=timeout)
        path.with_suffix(".out").write_text(batch.stdout)  # every run's output, kept with the test's files
        path.with_suffix(".err").write_text(batch.stderr)
        outcomes = batch.ok().result()

        def outcome(run: ToolRun) -> JavaRun:
            found = outcomes[run.name]
            return JavaRun(
                [run.script, *run.args], found["code"], found["stdout"], found["stderr"], found["seconds"]
            )

        return {run.name: outcome(run) for run in runs}

    async def program(self, name: str, *args: str, **options: Any) -> JavaRun:
        """``programs/<name>.java`` with ``args``, until it exits."""
        return await self.run(await self.program_command(name, args), **options)

    async def start(self, name: str, *args: str) -> asyncio.subprocess.Process:
        """``programs/<name>.java`` left running, its stdout a pipe and its stderr in ``<name>.err``."""
        command = await self.program_command(name, args)
        with (self.dir / f"{name}.err").open("wb") as err:
            return await asyncio.create_subprocess_exec(
                *command, cwd=self.dir, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=err,
            )  # fmt: skip


class Shared(Generic[T]):
    """What one costly scenario produced, by key, for every test asserting on a part of it.

    The first test to ask runs the scenario on its own ``cluster``; later ones read the result, so a
    strict xfail naming one gap costs no cluster or JVM of its own, and any test also runs alone. A
    scenario that failed fails every test asking for it, at once and never as an expected failure (the
    strict xfails expect an AssertionError from their own check)."""

    def __init__(self) -> None:
        self._results: dict[Hashable, T] = {}
        self._failures: dict[Hashable, str] = {}

    async def get(self, key: Hashable, scenario: Callable[[], Awaitable[T]]) -> T:
        if key in self._failures:
            pytest.fail(f"the shared run {key!r} failed in an earlier test: {self._failures[key]}")
        if key not in self._results:
            try:
                self._results[key] = await scenario()
            except (Exception, pytest.fail.Exception) as exc:  # pytest.fail: say, the jars are missing
                self._failures[key] = f"{type(exc).__name__}: {str(exc)[:2000]}"
                pytest.fail(f"the shared run {key!r} failed: {self._failures[key]}")
        return self._results[key]
