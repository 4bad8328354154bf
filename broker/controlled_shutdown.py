"""The broker's side of controlled shutdown: ask the active controller to move leadership away.

Kafka's procedure on SIGTERM: ControlledShutdown to the active controller, carrying this broker's epoch
(KIP-380: the controller refuses an older one), at the wire's version (``inter.broker.protocol.version``:
v2, or v3, flexible, from IBP 3.4, what Kafka 3.9's brokers send), retried with
``controlled.shutdown.retry.backoff.ms`` until the controller has moved every partition or
``controlled.shutdown.max.retries`` attempts are spent. Each attempt is an event-log line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from broker.controller_address import ControllerEndpoint
from daemon.eventlog import EventLog
from protocol import ApiKey, ErrorCode

__all__ = ["CONTROLLED_SHUTDOWN_VERSION", "ControlledShutdown"]

log = logging.getLogger("broker")

CONTROLLED_SHUTDOWN_VERSION = 2
"""The version sent at the default IBP (``protocol.ibp.control_wire``)."""


class ControlledShutdown:
    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        controller_endpoint: ControllerEndpoint,
        events: EventLog,
        *,
        max_retries: int,
        retry_backoff_s: float,
        timeout_s: float,
        version: int = CONTROLLED_SHUTDOWN_VERSION,
    ) -> None:
        self.broker_id = broker_id
        self.version = version
        self.broker_epoch = broker_epoch
        self.controller_endpoint = controller_endpoint
        self.events = events
        self.max_retries = max_retries
        self.retry_backoff_s = retry_backoff_s
        self.timeout_s = timeout_s

    async def run(self) -> bool:
        """Whether the controller moved every partition away before the attempts ran out."""
        for attempt in range(1, self.max_retries + 1):
            outcome = await self._attempt()
            self.events.emit(
                "controlled_shutdown_attempt",
                attempt=attempt,
                api_version=self.version,
                broker_epoch=self.broker_epoch(),
                **outcome,
            )
            if outcome.get("error") == "NONE" and not outcome.get("remaining"):
                log.info("broker %d: controlled shutdown succeeded", self.broker_id)
                return True
            if attempt < self.max_retries:
                await asyncio.sleep(self.retry_backoff_s)
        log.warning(
            "broker %d: controlled shutdown failed; proceeding to do an unclean shutdown", self.broker_id
        )
        return False

    async def _attempt(self) -> dict[str, object]:
        found = await self.controller_endpoint()
        if found is None:
            return {"error": "NO_CONTROLLER"}
        controller_id = found.controller_id
        try:
            connection = await found.connect(f"broker-{self.broker_id}", self.timeout_s)
        except (OSError, TimeoutError) as exc:
            return {"controller_id": controller_id, "error": "CONNECTION_FAILED", "reason": str(exc)}
        try:
            _, response = await connection.send(
                ApiKey.CONTROLLED_SHUTDOWN,
                self.version,
                {"broker_id": self.broker_id, "broker_epoch": self.broker_epoch()},
                timeout=self.timeout_s,
            )
        except (ConnectionError, TimeoutError) as exc:
            return {"controller_id": controller_id, "error": "REQUEST_FAILED", "reason": str(exc)}
        finally:
            await connection.close()
        remaining = [f"{p['topic_name']}-{p['partition_index']}" for p in response["remaining_partitions"]]
        return {
            "controller_id": controller_id,
            "error": ErrorCode.name_of(response["error_code"]),
            "remaining": remaining,
        }
