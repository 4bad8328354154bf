"""The plain run's faults: a broker killed, paused or disconnected until fenced, then back with a new epoch.

Each fault takes a broker no earlier fault took, leading as many partitions as any, and checks that
the controller moves its leaderships once its ZooKeeper session ends and that it registers again
with a higher epoch after it is healed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from deploy.compose import disconnect, reconnect
from deploy.compose_test import Run, _next_broker
from deploy.engine import docker

__all__ = ["step_disconnect", "step_kill", "step_pause", "take_away"]


def take_away(run_: Run, broker: int, cut: Callable[[], object], heal: Callable[[], object]) -> str:
    """``cut`` a broker off until it is fenced (its registration expired; out of the metadata, every
    leadership and every ISR), then ``heal`` it and wait until it is back with a new epoch and every
    ISR is full again. Says how long it took and where its leaderships went."""
    before = run_.metadata()
    epoch = run_.compose.brokers()[broker]
    cut()
    started = time.monotonic()
    try:
        run_.wait_unregistered(broker)
        after = run_.wait_fenced(broker)
    finally:
        fenced_s = time.monotonic() - started
        heal()
    new_epoch = run_.wait_registered(broker, epoch)
    run_.wait_whole()
    moves = ", ".join(f"{p}: {broker}->{after.leaders[p]}" for p in before.led_by(broker))
    return (
        f"broker {broker} fenced after {fenced_s:.1f} s, leaderships moved {{{moves}}}; "
        f"back with epoch {epoch} -> {new_epoch}"
    )


def step_kill(run_: Run) -> str:
    """``docker kill`` of a broker: once its ZooKeeper session ends, the controller moves its
    leaderships; ``docker start``: it registers with a new epoch and the ISRs fill up again."""
    broker = _next_broker(run_)
    container = run_.compose.container(f"broker-{broker}")
    return take_away(run_, broker, lambda: docker("kill", container), lambda: docker("start", container))


def step_pause(run_: Run) -> str:
    """``docker pause`` of a broker past its ZooKeeper session timeout, until it is fenced; then
    ``docker unpause``: it finds its session expired and registers again with a new epoch."""
    broker = _next_broker(run_)
    container = run_.compose.container(f"broker-{broker}")
    return take_away(run_, broker, lambda: docker("pause", container), lambda: docker("unpause", container))


def step_disconnect(run_: Run) -> str:
    """``docker network disconnect`` of a broker until it is fenced, then ``docker network connect``
    with the aliases compose gave it: it registers again with a new epoch."""
    broker = _next_broker(run_)
    container = run_.compose.container(f"broker-{broker}")
    networks: dict[str, Any] = {}
    return take_away(
        run_, broker, lambda: networks.update(disconnect(container)), lambda: reconnect(container, networks)
    )
