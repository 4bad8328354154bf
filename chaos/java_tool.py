"""One of Kafka's command-line tools as a child JVM: started, its stdout lines handed on, stopped cleanly.

The tool runs as ``java -cp <Kafka's newest clients and tools> <main class>`` (``kafkapeer.jars``,
resolved by ``make kafka``); a missing ``java`` or an unresolved jar set is :class:`ToolsMissing`,
raised before anything starts. Each stdout line is kept, as printed, in a file of the run's directory
and handed, parsed, to a callback in a reader thread of its own, so the JVM never blocks on a full
pipe. A line that is not one of the tool's JSON objects, or that the callback cannot use, is logged
and skipped. Stderr goes to the run's log, line by line. Stopping is SIGTERM (the tools' shutdown hooks
flush, commit and print their last lines), then SIGKILL after a deadline. Where util-linux's ``setpriv``
is, the JVM also gets SIGTERM when the run's process dies, so a killed run leaves no producer behind.
"""

from __future__ import annotations

import logging
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from chaos import ChaosError
from chaos.verifiable_events import STARTUP, MalformedLine, parse
from kafkapeer.jars import NEWEST_CLIENTS, JarsMissing, classpath

__all__ = ["JVM_OPTS", "JavaTool", "ToolsMissing", "java_prefix"]

log = logging.getLogger("chaos.kafka-tools")

JVM_OPTS = (
    "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss1m",
    "-Djava.awt.headless=true",
)  # fmt: skip
"""Small client JVMs: the serial collector and the C1 compiler start fastest and idle cheapest."""
STDERR_KEPT = 20
"""Stderr lines kept to explain a tool that exited on its own."""


class ToolsMissing(ChaosError):
    """No ``java``, or Kafka's jars not resolved: the tools cannot run at all."""


def java_prefix() -> list[str]:
    """``java <options> -cp <jars>``, to which a main class and its arguments are added."""
    java = shutil.which("java")
    if java is None:
        raise ToolsMissing("java not found on the PATH: Kafka's tools need a JDK")
    try:
        jars = classpath(NEWEST_CLIENTS)
    except JarsMissing as exc:
        raise ToolsMissing(f"Kafka's tools are missing: {exc}") from None
    return [java, *JVM_OPTS, "-cp", jars]


def _dying_with_us(command: list[str]) -> list[str]:
    """``command`` under util-linux's ``setpriv --pdeathsig TERM`` where there is one: the JVM gets
    SIGTERM when the thread that started it (the run's) dies, even by SIGKILL."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--", *command] if setpriv is not None else command


class JavaTool:
    """``command`` (:func:`java_prefix`, a main class and its arguments) as a child process, named
    ``name`` in the log; every stdout line kept in ``raw`` and handed, parsed, to ``on_line``."""

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        raw: Path,
        on_line: Callable[[dict[str, Any]], None],
    ) -> None:
        self.name = name
        self.command = list(command)
        self.raw = raw
        self.on_line = on_line
        self.started = threading.Event()
        """Set at the tool's ``startup_complete`` line."""
        self.stopping = False
        """Set once SIGTERM (or SIGKILL) was sent: an exit after it is the one asked for."""
        self.skipped = 0
        """Stdout lines logged and skipped: not the tool's JSON, or not usable."""
        self._stderr: deque[str] = deque(maxlen=STDERR_KEPT)
        self._process: subprocess.Popen[str] | None = None
        self._readers: list[threading.Thread] = []

    def start(self) -> JavaTool:
        shown = self.command[self.command.index("-cp") + 2 :] if "-cp" in self.command else self.command
        log.info("starting %s: %s", self.name, " ".join(shown))
        self._process = subprocess.Popen(
            _dying_with_us(self.command),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="backslashreplace",
            bufsize=1,
        )
        assert self._process.stdout is not None and self._process.stderr is not None
        self._readers = [
            threading.Thread(target=self._read_stdout, args=(self._process.stdout,), daemon=True,
                             name=f"{self.name}-stdout"),
            threading.Thread(target=self._read_stderr, args=(self._process.stderr,), daemon=True,
                             name=f"{self.name}-stderr"),
        ]  # fmt: skip
        for reader in self._readers:
            reader.start()
        return self

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def exit_status(self) -> int | None:
        """The exit status once the process has ended, None while it runs (or never started)."""
        return None if self._process is None else self._process.poll()

    def why(self) -> str:
        """What the tool said on stderr last, for an error message."""
        return " | ".join(self._stderr) or "nothing on stderr"

    def wait_started(self, deadline: float) -> None:
        """Until the tool's ``startup_complete`` line, or a :class:`ChaosError` at ``deadline``
        (``time.monotonic()``) or when it exits first."""
        while not self.started.wait(0.1):
            status = self.exit_status()
            if status is not None:
                raise ChaosError(f"{self.name} exited with status {status} before starting: {self.why()}")
            if time.monotonic() > deadline:
                raise ChaosError(f"{self.name} did not start in time: {self.why()}")

    def terminate(self) -> None:
        """SIGTERM, once, if it still runs: the tool's shutdown hook then does its last work."""
        if self._process is not None and not self.stopping and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
        self.stopping = True

    def stop(self, timeout_s: float) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout_s``; returns the exit status, once every line is read."""
        if self._process is None:
            return None
        self.terminate()
        try:
            self._process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop %.0f s after SIGTERM: SIGKILL", self.name, timeout_s)
            self._process.kill()
            self._process.wait()
        for reader in self._readers:
            reader.join()
        return self._process.returncode

    def kill(self) -> None:
        """SIGKILL if it still runs (a run that failed on its way)."""
        if self._process is not None and self._process.poll() is None:
            self.stopping = True
            self._process.kill()
            self._process.wait()

    def _read_stdout(self, stream: IO[str]) -> None:
        with self.raw.open("a", encoding="utf-8") as raw:
            for text in stream:
                raw.write(text)
                raw.flush()
                self._handle(text.rstrip("\n"))

    def _handle(self, text: str) -> None:
        if not text.strip():
            return
        try:
            line = parse(text)
            if line["name"] == STARTUP:
                self.started.set()
            self.on_line(line)
        except MalformedLine as exc:
            self.skipped += 1
            log.warning("%s: skipping a line: %s", self.name, exc)
        except Exception:  # a line the translation did not foresee must not stop the reading
            self.skipped += 1
            log.exception("%s: skipping a line that could not be used: %r", self.name, text[:200])

    def _read_stderr(self, stream: IO[str]) -> None:
        for text in stream:
            text = text.rstrip("\n")
            if text.startswith("SLF4J:"):  # the newest clients' slf4j API finds no binding, thrice
                log.debug("%s: %s", self.name, text)
            elif text:
                self._stderr.append(text)
                log.info("%s: %s", self.name, text)
