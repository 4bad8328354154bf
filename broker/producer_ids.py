"""Producer ids for idempotent producers: ids handed out from blocks of 1000 this broker claims through
``/latest_producer_id_block`` (``zkstore.producer_id_blocks``, Kafka's ZooKeeper-era allocation).

InitProducerId without a transactional id always gets a fresh id with epoch 0 (Kafka's rule); one
with a transactional id is the transaction coordinator's (``broker/txn/apis.py``), which draws its ids
from the same manager.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from typing import Any

from broker.on_loop import answer_on_loop
from broker.request_channel import Request
from protocol import ErrorCode
from zkstore.producer_id_blocks import ProducerIdManager

log = logging.getLogger("broker.producer_ids")


class InitProducerIdApi:
    def __init__(self, manager: ProducerIdManager, loop: asyncio.AbstractEventLoop) -> None:
        self.manager = manager
        self.loop = loop

    def handle(self, request: Request, body: dict[str, Any]) -> dict[str, Any] | Future[dict[str, Any]]:
        if (body.get("producer_id", -1) == -1) != (body.get("producer_epoch", -1) == -1):
            return _answer(ErrorCode.INVALID_REQUEST)
        return answer_on_loop(self.loop, self._fresh_id(), lambda body: body, "InitProducerId")

    async def _fresh_id(self) -> dict[str, Any]:
        """A new producer id with epoch 0; COORDINATOR_NOT_AVAILABLE (retried by clients) if no block
        can be claimed now (ZooKeeper trouble)."""
        try:
            return _answer(ErrorCode.NONE, await self.manager.next_id(), 0)
        except Exception:
            log.exception("no producer id could be claimed")
            return _answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)


def _answer(error: ErrorCode, producer_id: int = -1, epoch: int = -1) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": error, "producer_id": producer_id, "producer_epoch": epoch}
