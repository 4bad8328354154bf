"""Kafka's ZooKeeper client metrics, for both daemons, fed by their session's observer hook.

Kafka's ZooKeeperClient counts connection-state changes as meters of
``kafka.server:type=SessionExpireListener`` (ZooKeeperSyncConnectsPerSec, ZooKeeperDisconnectsPerSec,
ZooKeeperExpiresPerSec, ZooKeeperReadOnlyConnectsPerSec, ZooKeeperAuthFailuresPerSec) and times every
request (``kafka.server:type=ZooKeeperClientMetrics,name=ZooKeeperRequestLatencyMs``, a histogram).
Its ``SessionState`` gauge is a string, which the JMX exporter cannot export; here it is one series
per ZooKeeper client state, 1 for the current one, so ``…{state="CONNECTED"} == 0`` can alert.
"""

from __future__ import annotations

from collections.abc import Iterator

from daemon.metrics import Metrics
from zkstore.aio import AsyncZooKeeper

__all__ = ["SESSION_STATES", "ZooKeeperClientMetrics"]

SESSION_STATES = ("NOT_CONNECTED", "CONNECTING", "CONNECTED", "CONNECTEDREADONLY", "AUTH_FAILED", "CLOSED")
"""ZooKeeper's client ``States`` names, as Kafka's SessionState gauge shows them."""

_STATE_OF = {
    "CONNECTED": "CONNECTED",
    "CONNECTED_RO": "CONNECTEDREADONLY",
    "CONNECTING": "CONNECTING",
    "EXPIRED_SESSION": "CLOSED",  # the session is gone; kazoo opens a new one, CONNECTED once it has
    "AUTH_FAILED": "AUTH_FAILED",
    "CLOSED": "CLOSED",
}
"""kazoo's KeeperState to ZooKeeper's client state."""

DOMAIN, LISTENER = "kafka.server", "SessionExpireListener"


class ZooKeeperClientMetrics:
    """A :class:`~zkstore.aio.SessionObserver` that keeps Kafka's ZooKeeper client metrics."""

    def __init__(self, metrics: Metrics) -> None:
        meter = metrics.meter
        self.sync_connects = meter(
            DOMAIN, LISTENER, "ZooKeeperSyncConnectsPerSec", "Connections to ZooKeeper made"
        )
        self.disconnects = meter(
            DOMAIN,
            LISTENER,
            "ZooKeeperDisconnectsPerSec",
            "Connections to ZooKeeper lost (the session may live on)",
        )
        self.expires = meter(DOMAIN, LISTENER, "ZooKeeperExpiresPerSec", "ZooKeeper sessions expired")
        self.read_only_connects = meter(
            DOMAIN, LISTENER, "ZooKeeperReadOnlyConnectsPerSec", "Read-only connections to ZooKeeper made"
        )
        self.auth_failures = meter(
            DOMAIN, LISTENER, "ZooKeeperAuthFailuresPerSec", "Sessions ZooKeeper refused to authenticate"
        )
        self._meters = {
            "CONNECTED": self.sync_connects,
            "CONNECTED_RO": self.read_only_connects,
            "CONNECTING": self.disconnects,
            "EXPIRED_SESSION": self.expires,
            "AUTH_FAILED": self.auth_failures,
        }
        self.state = "NOT_CONNECTED"
        metrics.gauge_family(
            DOMAIN,
            LISTENER,
            "SessionState",
            "1 for the ZooKeeper session's current state, 0 for the others (in Kafka: the state's name)",
            ("state",),
            self._states,
            addition=True,
        )
        self.latency = metrics.histogram(
            DOMAIN,
            "ZooKeeperClientMetrics",
            "ZooKeeperRequestLatencyMs",
            "ZooKeeper request round trips as the daemon's event loop sees them (ms)",
        )

    def watch(self, zk: AsyncZooKeeper) -> ZooKeeperClientMetrics:
        """Observe ``zk`` (call before ``zk.start()`` so the first connection counts)."""
        zk.observe(self)
        return self

    def _states(self) -> Iterator[tuple[tuple[str], float]]:
        for state in SESSION_STATES:
            yield (state,), 1.0 if state == self.state else 0.0

    # -- SessionObserver (on the loop)

    def session_state(self, state: str) -> None:
        meter = self._meters.get(state)
        if meter is not None:
            meter.inc()
        self.state = _STATE_OF.get(state, self.state)

    def request_latency(self, seconds: float) -> None:
        self.latency.observe(seconds * 1000)
