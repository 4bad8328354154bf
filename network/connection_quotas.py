"""Connection limits, for the brokers' listeners and the controller's RPC listener:
``max.connections`` (every listener but a broker's control plane, together),
``max.connections.per.ip`` (every listener), and what closes an idle or stalled connection
(``connections.max.idle.ms``, enforced by the listener).

The control-plane listener (KIP-291) does not count against ``max.connections``, so a flood of
clients cannot keep the controller out. (Kafka also lets inter-broker connections past the limit by
closing the least recently used client connection; here replication competes with clients on a
shared listener.) A connection over a limit is closed at once with a logged reason; each closing is
counted by listener and reason. Used on the event loop only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection

from daemon.metric_kinds import Meter
from daemon.metrics import Metrics


def connections_closed_meter(metrics: Metrics) -> Meter:
    """``kafka_network_socketserver_connectionsclosed_total{listener,reason}`` (not a Kafka MBean)."""
    return metrics.meter(
        "kafka.network",
        "SocketServer",
        "ConnectionsClosed",
        "Connections closed by this daemon: over max.connections or max.connections.per.ip (reason quota), "
        "or idle past connections.max.idle.ms (reason idle)",
        labels=("listener", "reason"),
        addition=True,
    )


class ConnectionQuotas:
    def __init__(
        self,
        *,
        max_connections: int,
        max_per_ip: int,
        exempt_listeners: Collection[str],
        on_refused: Callable[[str, str], None] | None = None,
    ) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.exempt = frozenset(exempt_listeners)
        self.on_refused = on_refused
        """Called with (listener, reason) for each connection refused."""
        self.counted = 0
        self.per_ip: Counter[str] = Counter()

    def admit(self, listener: str, ip: str) -> str | None:
        """Count a new connection, or say why it must be closed (and count nothing)."""
        reason = None
        if self.per_ip[ip] >= self.max_per_ip:
            reason = f"{ip} already has {self.per_ip[ip]} connections (max.connections.per.ip)"
        elif listener not in self.exempt and self.counted >= self.max_connections:
            reason = f"the broker already has {self.counted} client connections (max.connections)"
        if reason is not None:
            if self.on_refused is not None:
                self.on_refused(listener, "quota")
            return reason
        self.per_ip[ip] += 1
        if listener not in self.exempt:
            self.counted += 1
        return None

    def release(self, listener: str, ip: str) -> None:
        self.per_ip[ip] -= 1
        if self.per_ip[ip] <= 0:
            del self.per_ip[ip]
        if listener not in self.exempt:
            self.counted -= 1
