"""Shrinking a failing schedule to a minimal one that still fails the same way (delta debugging).

A schedule is the list of step labels a run took. Replaying a subset skips the steps that are no
longer possible, so every subset is a valid schedule; "the same way" means the same invariant, named
by the violation's text up to its first colon.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from controller.sim.run import Outcome

__all__ = ["kind_of", "shrink"]


def kind_of(violation: str | None) -> str:
    """What a violation is about, without the details that change as the schedule shrinks."""
    if violation is None:
        return ""
    head = violation.split(":")[0]
    return "".join(ch for ch in head if not ch.isdigit()).strip()


def shrink(failing: Outcome, replay: Callable[[Sequence[str]], Outcome], *, budget: int = 400) -> Outcome:
    """The smallest failing schedule found by ddmin within ``budget`` replays (1-minimal if it finishes)."""
    want = kind_of(failing.violation)
    best = failing
    steps = list(failing.steps[: (failing.failed_at or len(failing.steps)) + 1])
    tries = 0

    def fails(candidate: list[str]) -> Outcome | None:
        nonlocal tries
        tries += 1
        outcome = replay(candidate)
        return outcome if outcome.failed and kind_of(outcome.violation) == want else None

    # Deliveries are what the settling does anyway, and time passes there too: a failure caused by the
    # faults alone shrinks to them at once.
    for noise in (("zk.apply", "zk.deliver", "net."), ("time.",)):
        outcome = fails([step for step in steps if not step.startswith(noise)])
        if outcome is not None:
            steps, best = list(outcome.steps), outcome
    granularity = 2
    while len(steps) >= 2 and tries < budget:
        chunk = max(1, len(steps) // granularity)
        reduced = False
        for start in range(0, len(steps), chunk):
            if tries >= budget:
                break
            candidate = steps[:start] + steps[start + chunk :]
            outcome = fails(candidate)
            if outcome is not None:
                steps, best, reduced = list(outcome.steps), outcome, True
                granularity = max(granularity - 1, 2)
                break
        if not reduced:
            if chunk == 1:
                break
            granularity = min(granularity * 2, len(steps))
    return best
