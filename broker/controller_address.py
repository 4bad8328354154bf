"""Where the active controller listens, and how this broker dials it.

Two ways, tried in Kafka's order. A Kafka broker finds the controller in its metadata cache: the
``controller_id`` of the last UpdateMetadata, looked up among that request's live brokers on the
control-plane listener (else the inter-broker one); it never reads ``/controller`` for this
(``MetadataCacheControllerNodeProvider``). A controller of ours is no broker, so it is not among the
live brokers; then ``/controller`` names its RPC endpoint (our additive fields), and that is used.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NamedTuple

from broker.metadata_cache import Snapshot
from network.connection import KafkaConnection
from security.config import ClientSecurity

__all__ = ["ControllerAddress", "ControllerEndpoint", "controller_in_metadata"]


class ControllerAddress(NamedTuple):
    controller_id: int
    host: str
    port: int
    security: ClientSecurity | None = None
    """TLS and SASL towards the controller's RPC listener (its ``security_protocol`` in ZooKeeper)."""

    async def connect(self, client_id: str, timeout: float) -> KafkaConnection:
        return await KafkaConnection.open(
            self.host, self.port, client_id=client_id, connect_timeout=timeout, security=self.security
        )


ControllerEndpoint = Callable[[], Awaitable[ControllerAddress | None]]
"""Reads ``/controller``: the active controller's address, or None when there is none."""


def controller_in_metadata(snapshot: Snapshot, listener: str) -> tuple[int, str, int] | None:
    """UpdateMetadata's controller as Kafka's brokers find it: ``(id, host, port)`` on ``listener`` when
    the controller id is one of the live brokers that advertise it, else None."""
    broker = snapshot.brokers.get(snapshot.controller_id)
    if broker is None or listener not in broker.endpoints:
        return None
    host, port = broker.endpoints[listener]
    return snapshot.controller_id, host, port
