"""Kafka's Throttler for the log cleaner: all threads together read and write at most a rate on average."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["Throttler"]

CHECK_INTERVAL_S = 0.3
"""Kafka's: the rate is measured, and a sleep decided, every 300 ms."""


class Throttler:
    """``maybe_throttle(n)`` after each read or write of ``n`` bytes; it sleeps (holding the lock, as
    Kafka's does, so every thread waits) when the bytes of the current interval went too fast."""

    def __init__(
        self,
        rate_per_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate_per_s = rate_per_s
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._period_start = clock()
        self._observed = 0.0
        self.slept_s = 0.0
        """Total time spent sleeping: how much the limit cost."""

    def maybe_throttle(self, observed: float) -> None:
        if self.rate_per_s >= 1e300:
            return
        with self._lock:
            self._observed += observed
            elapsed = self._clock() - self._period_start
            if elapsed < CHECK_INTERVAL_S:
                return
            wait = self._observed / self.rate_per_s - elapsed
            if wait > 0:
                self._sleep(wait)
                self.slept_s += wait
            self._period_start = self._clock()
            self._observed = 0.0
