"""One simulation: a seed (or a recorded schedule) stepped through a world, judged after every step.

A run is deterministic: virtual time (``SimLoop``), one seeded ``random.Random`` choosing every step,
and the process-wide sources of difference fixed while it runs: ``time.time`` and ``time.monotonic``
read the virtual clock, and ``uuid.uuid4`` (topic ids) draws from the seed. Set iteration order also
depends on ``PYTHONHASHSEED``; the command line fixes it.

After the steps, every fault is healed (connections back, crashed brokers restarted) and the cluster
settles in virtual time, fairly scheduled; then the liveness rules are judged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from unittest import mock

from controller.sim.invariants import Violation
from controller.sim.loop import SimLoop
from controller.sim.world import Action, SimSettings, World
from zkstore import znodes

__all__ = ["Outcome", "run"]

SETUP_S = 30.0
"""Virtual time for the cluster to come up before the first step."""
SETTLE_S = 60.0
"""Virtual time the healed cluster gets to settle before liveness is judged."""
EPOCH_S = 1_700_000_000.0
"""Where ``time.time`` starts (any fixed instant)."""


@dataclass(slots=True)
class Outcome:
    seed: int
    steps: list[str] = field(default_factory=list)
    """The schedule that ran: the label of each step taken."""
    violation: str | None = None
    failed_at: int | None = None
    """The step after which the violation was found (None: found while settling)."""
    notes: list[str] = field(default_factory=list)
    virtual_s: float = 0.0

    @property
    def failed(self) -> bool:
        return self.violation is not None


class _ErrorLog(logging.Handler):
    """Exceptions the controller logs: a handler that failed is a finding, whatever the invariants say.

    Errors logged without one are diagnostics Kafka logs too (an illegal state transition skipped)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if not record.exc_info:
            return
        self.records.append(
            f"{record.name}: {record.getMessage()}"
            + (f" ({record.exc_info[1]!r})" if record.exc_info else "")
        )


@contextlib.contextmanager
def _deterministic(loop: SimLoop, seed: int) -> Iterator[_ErrorLog]:
    ids = random.Random(seed ^ 0x5EED)
    errors = _ErrorLog()
    root = logging.getLogger()
    root.addHandler(errors)
    level = root.level
    root.setLevel(min(level, logging.ERROR) if level else logging.ERROR)
    try:
        with (
            mock.patch("time.time", lambda: EPOCH_S + loop.time()),
            mock.patch("time.monotonic", loop.time),
            mock.patch("uuid.uuid4", lambda: uuid.UUID(int=ids.getrandbits(128), version=4)),
        ):
            yield errors
    finally:
        root.removeHandler(errors)
        root.setLevel(level)


def _choose(rng: random.Random, actions: list[Action]) -> Action:
    return rng.choices(actions, weights=[a.weight for a in actions])[0]


def run(
    seed: int, steps: int, settings: SimSettings | None = None, script: Sequence[str] | None = None
) -> Outcome:
    """Run ``steps`` seeded steps (or, given ``script``, those labels in order, skipping any not possible)."""
    settings = settings or SimSettings()
    loop = SimLoop()
    outcome = Outcome(seed)
    rng = random.Random(seed)
    with _deterministic(loop, seed) as errors:
        world = World(settings, loop)
        try:
            world.start()
            _settle(world, SETUP_S)
            _judge_step(world, errors)
            plan = list(script) if script is not None else [None] * steps
            for index, wanted in enumerate(plan):
                actions = world.actions()
                if wanted is None:
                    action: Action | None = _choose(rng, actions)
                else:
                    action = next((a for a in actions if a.label == wanted), None)
                if action is None:
                    continue
                outcome.steps.append(action.label)
                action.run()
                loop.run_until_idle()
                try:
                    _judge_step(world, errors)
                except Violation:
                    outcome.failed_at = index
                    raise
            for heal in (_reconnect, _restart):
                heal(world)
                _settle(world, SETTLE_S)
                _judge_step(world, errors)
                world.judge.settled(
                    ((cid, c.is_active, world.clients[cid].session) for cid, c in world.controllers.items()),
                    world.unanswered(),
                    everyone_back=heal is _restart,
                )
        except Violation as violation:
            outcome.violation = str(violation)
        finally:
            outcome.notes = world.notes
            outcome.virtual_s = loop.time()
            _tear_down(loop)
    return outcome


def _judge_step(world: World, errors: _ErrorLog) -> None:
    world.judge.after_step()
    if errors.records:
        raise Violation("logged an error: " + errors.records[0])
    if world.failures:
        raise Violation("a simulated request failed: " + world.failures[0])


def _reconnect(world: World) -> None:
    """The network heals: sessions reconnect, and crashed brokers' sessions expire (they stay down)."""
    for _, client in world.zk_clients():
        if not client.connected and not client.stopped:
            client.reconnect()
    for broker in world.brokers.values():
        dead = broker.client
        if dead is not None and dead.stopped and world.server.alive(dead.session):
            world.server.end_session(dead.session or 0)
    world.loop.run_until_idle()


def _restart(world: World) -> None:
    """Every broker that is down starts again."""
    for broker in world.brokers.values():
        registered = znodes.broker_path(broker.broker_id) in world.server.nodes
        if not broker.alive and not broker.registering and not registered:
            world.spawn(f"restart broker {broker.broker_id}", broker.start())
    world.loop.run_until_idle()


def _settle(world: World, seconds: float) -> None:
    """Deliver everything in flight, taking the deliveries in turn, and let time pass, for ``seconds``."""
    loop = world.loop
    deadline = loop.time() + seconds
    turn = 0
    while loop.time() < deadline:
        deliveries = [a for a in world.actions() if a.label.startswith(("zk.apply", "zk.deliver", "net."))]
        if deliveries:
            deliveries[turn % len(deliveries)].run()
            turn += 1
            loop.run_until_idle()
            continue
        when = loop.next_timer()
        step = 0.1 if when is None else min(max(when - loop.time(), 0.0), 1.0)
        loop.advance(max(step, 0.001))


def _tear_down(loop: SimLoop) -> None:
    """Cancel every task still running, so nothing of this run outlives it."""
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in tasks:
        task.cancel()
    with contextlib.suppress(Exception):
        loop.run_until_idle()
    loop.close()
