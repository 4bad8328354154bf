"""A compose test run: the state its steps share, their waits, and their execution, ending in ``down -v``.

``python -m deploy.compose_test`` (:mod:`deploy.compose_test.__main__`) runs the plain or the secured
variant's steps through :func:`execute`: :mod:`.steps` bring the cluster up and use it from the host,
:mod:`.faults` take brokers away, :mod:`.chaos_step` runs ``python -m chaos`` on the containers and
:mod:`.secure` reads the secured variant's client settings. :mod:`.client` is the cluster as the
host's clients see it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from daemon.config import ZOOKEEPER_SESSION_TIMEOUT_MS
from deploy.compose import Compose
from deploy.compose_test.client import CheckFailed, Metadata, admin_client, metadata

__all__ = [
    "PROJECT",
    "CheckFailed",
    "Metadata",
    "Run",
    "Step",
    "StepFunction",
    "execute",
    "step_down",
    "wait_until",
]

PROJECT = "kafka-zk-control-plane-test"
"""The run's own compose project name (``-p``): it never touches a cluster started from the same file."""
POLL_S = 1.0

T = TypeVar("T")


def wait_until(what: str, read: Callable[[], T], accept: Callable[[T], bool], timeout: float) -> T:
    """Call ``read`` until ``accept`` takes what it returns, and return that; raise after ``timeout``.

    A ``read`` that raises counts as a "not yet" (a broker may be unreachable for a while); the last
    error is in the message if time runs out.
    """
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = read()
            if accept(value):
                return value
        except Exception as exc:  # a probe against a cluster in flux
            last_error = exc
        if time.monotonic() > deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise CheckFailed(f"timed out after {timeout:.0f} s waiting for {what}{detail}")
        time.sleep(POLL_S)


@dataclass
class Step:
    name: str
    seconds: float
    detail: str
    ok: bool


@dataclass
class Run:
    """What the steps share: compose, a client, the session timeout, and the steps' record."""

    compose: Compose
    session_timeout_s: float = ZOOKEEPER_SESSION_TIMEOUT_MS.default / 1000
    broker_count: int = 3
    daemon_count: int = 5
    zookeeper_count: int = 3
    admin: Any = None
    cluster_touched: bool = False
    """Set once compose has been asked to do anything: from then on, the run ends with ``down -v``."""
    security: dict[str, str] = field(default_factory=dict)
    """The clients' security settings: none, or the secured variant's client.properties."""
    disrupted: list[int] = field(default_factory=list)
    """Brokers a fault has hit, in order: each fault takes another one."""
    steps: list[Step] = field(default_factory=list)

    @property
    def rejoin_timeout_s(self) -> float:
        """A broker is dropped after the session timeout; give the controller as long again to act."""
        return 2 * self.session_timeout_s + 30

    def client(self) -> Any:
        """One Admin API client for the whole run (it finds whichever broker answers)."""
        if self.admin is None:
            self.admin = admin_client(self.security)
        return self.admin

    def metadata(self) -> Metadata:
        return metadata(self.client())

    def wait_whole(self) -> Metadata:
        return wait_until(
            "every broker back with full ISRs",
            self.metadata,
            lambda md: md.whole(self.broker_count),
            self.rejoin_timeout_s,
        )

    def wait_fenced(self, broker: int) -> Metadata:
        return wait_until(
            f"broker {broker} to be dropped from metadata, leaderships and ISRs",
            self.metadata,
            lambda md: md.fenced(broker),
            self.rejoin_timeout_s,
        )

    def wait_registered(self, broker: int, above_epoch: int) -> int:
        """``broker``'s new epoch once it has registered again with a higher one."""
        return wait_until(
            f"broker {broker} to register with an epoch above {above_epoch}",
            lambda: self.compose.brokers().get(broker, 0),
            lambda epoch: epoch > above_epoch,
            self.rejoin_timeout_s,
        )

    def wait_unregistered(self, broker: int) -> bool:
        return wait_until(
            f"broker {broker}'s registration to expire",
            lambda: broker not in self.compose.brokers(),
            bool,
            self.rejoin_timeout_s,
        )

    @contextmanager
    def step(self, name: str) -> Iterator[list[str]]:
        """Time a step and print it; the body appends what it saw to the yielded list."""
        notes: list[str] = []
        print(f"--> {name}", flush=True)
        start = time.monotonic()
        try:
            yield notes
        except BaseException as exc:
            self._record(name, start, f"FAILED: {exc}", ok=False)
            raise
        self._record(name, start, "; ".join(notes), ok=True)

    def _record(self, name: str, start: float, detail: str, *, ok: bool) -> None:
        step = Step(name, time.monotonic() - start, detail, ok)
        self.steps.append(step)
        print(
            f"    {'ok' if ok else 'FAILED'} in {step.seconds:.1f} s{': ' + detail if detail else ''}",
            flush=True,
        )


StepFunction = Callable[[Run], str]
"""A step: it does its part of the run and says what it saw; it raises when something is wrong."""


def _next_broker(run_: Run) -> int:
    """A broker no fault has hit yet, leading as many partitions as any (so that leadership moves)."""
    md = run_.metadata()
    spared = sorted(set(md.brokers) - set(run_.disrupted)) or sorted(md.brokers)
    broker = max(spared, key=lambda b: (len(md.led_by(b)), -b))
    run_.disrupted.append(broker)
    return broker


def step_down(run_: Run) -> str:
    """``docker compose down -v``, then nothing of the project left: containers, networks, volumes."""
    run_.admin = None  # its connections would only report the brokers going away
    run_.compose("down", "--volumes", "--remove-orphans", "--timeout", "30")
    left = {kind: ids for kind, ids in run_.compose.leftovers().items() if ids}
    if left:
        raise CheckFailed(f"left behind: {left}")
    return "no container, network or volume left"


def print_logs(run_: Run) -> None:
    """The containers' last lines, to see why a step failed."""
    print(run_.compose("logs", "--no-color", "--tail", "30", check=False, timeout=60), flush=True)


def execute(run_: Run, steps: Sequence[tuple[str, StepFunction]]) -> bool:
    """Run ``steps`` in order until one fails, then always take the cluster down; did all pass?"""
    passed = True
    try:
        for name, function in steps:
            with run_.step(name) as notes:
                notes.append(function(run_))
    except Exception as exc:  # any failure fails the run; the cluster goes down all the same
        passed = False
        print(f"!! {type(exc).__name__}: {exc}", flush=True)
        if run_.cluster_touched:
            print_logs(run_)
    finally:
        if run_.cluster_touched:
            try:
                with run_.step("down") as notes:
                    notes.append(step_down(run_))
            except Exception as exc:
                passed = False
                print(f"!! {exc}", flush=True)
    return passed
