"""Where the active controller listens, as ``/controller`` says, and how this broker dials it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NamedTuple

from network.connection import KafkaConnection
from security.config import ClientSecurity

__all__ = ["ControllerAddress", "ControllerEndpoint"]


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
