"""Quantiles of what was observed over a recent window, in bounded memory, as Yammer's timers give them."""

from __future__ import annotations

import bisect
import random
from collections import deque
from collections.abc import Iterable, Sequence

__all__ = ["QUANTILES", "QUANTILE_WINDOW_S", "WindowedQuantiles", "quantiles_of"]

QUANTILES: tuple[tuple[str, float], ...] = (
    ("0.50", 0.50),
    ("0.75", 0.75),
    ("0.95", 0.95),
    ("0.98", 0.98),
    ("0.99", 0.99),
    ("0.999", 0.999),
)
"""Yammer's percentile attributes (``50thPercentile`` … ``999thPercentile``) as the rules label them:
``quantile="0.$N"``, hence ``"0.50"`` and not ``"0.5"``."""

QUANTILE_WINDOW_S = 60.0
"""How far back the quantiles look. Kafka's timers keep an exponentially decaying sample biased to the
last five minutes; a minute makes an alert on ``quantile="0.99"`` follow a change sooner."""


class WindowedQuantiles:
    """Quantiles of what was observed in the last ``window_s`` seconds, in bounded memory.

    Time is cut into ``slices`` slices of ``window_s / slices`` seconds; the current and previous
    ``slices - 1`` slices are kept, each with a uniform sample of at most ``per_slice`` values
    (reservoir sampling), so the window covers between ``window_s * (slices - 1) / slices`` and
    ``window_s`` seconds. A quantile is the nearest rank over the kept values, each standing for
    its slice's count divided by the values kept; an empty window gives 0, as an empty Yammer
    reservoir does. Not thread-safe: the owner locks.
    """

    __slots__ = ("_rng", "_slices", "per_slice", "slice_s", "slices")

    def __init__(
        self,
        window_s: float = QUANTILE_WINDOW_S,
        *,
        slices: int = 6,
        per_slice: int = 256,
        seed: int | None = None,
    ) -> None:
        if window_s <= 0 or slices < 1 or per_slice < 1:
            raise ValueError("window_s, slices and per_slice must be positive")
        self.slice_s = window_s / slices
        self.slices = slices
        self.per_slice = per_slice
        self._slices: deque[tuple[int, list[int], list[float]]] = deque()
        """(slice number, [values seen], kept values), oldest first."""
        self._rng = random.Random(seed)

    def _expire(self, now: float) -> int:
        current = int(now // self.slice_s)
        while self._slices and self._slices[0][0] <= current - self.slices:
            self._slices.popleft()
        return current

    def observe(self, value: float, now: float) -> None:
        current = self._expire(now)
        if not self._slices or self._slices[-1][0] != current:
            self._slices.append((current, [0], []))
        _, seen, kept = self._slices[-1]
        seen[0] += 1
        if len(kept) < self.per_slice:
            kept.append(value)
        else:
            slot = self._rng.randrange(seen[0])
            if slot < self.per_slice:
                kept[slot] = value

    def count(self, now: float) -> int:
        """Values observed in the window."""
        self._expire(now)
        return sum(seen[0] for _, seen, _ in self._slices)

    def snapshot(self, now: float) -> tuple[tuple[int, tuple[float, ...]], ...]:
        """(values seen, values kept) of each slice in the window: a copy, to rank outside a lock."""
        self._expire(now)
        return tuple((seen[0], tuple(kept)) for _, seen, kept in self._slices)

    def quantiles(self, qs: Sequence[float], now: float) -> list[float]:
        return quantiles_of(self.snapshot(now), qs)


def quantiles_of(slices: Iterable[tuple[int, Sequence[float]]], qs: Sequence[float]) -> list[float]:
    """Nearest-rank quantiles of sampled slices, each kept value weighing seen / kept (0 if empty)."""
    weighted = sorted((value, seen / len(kept)) for seen, kept in slices for value in kept)
    if not weighted:
        return [0.0 for _ in qs]
    cumulative: list[float] = []
    total = 0.0
    for _, weight in weighted:
        total += weight
        cumulative.append(total)
    answers = []
    for q in qs:
        rank = min(bisect.bisect_left(cumulative, q * total - 1e-9), len(weighted) - 1)
        answers.append(weighted[rank][0])
    return answers
