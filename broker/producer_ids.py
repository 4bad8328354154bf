"""Producer ids for idempotent producers: blocks of 1000 claimed through ``/latest_producer_id_block``.

Kafka's ZooKeeper-era allocation (reference §2.2): the znode holds the latest block handed out, as
``{"version":1,"broker":N,"block_start":"<first>","block_end":"<last>"}`` with the ids as decimal
strings. A broker claims the next block with a write conditional on the version it read and
re-reads on a conflict, so two brokers never hand out the same id. InitProducerId without a
transactional id always gets a fresh id with epoch 0 (Kafka's rule). Transactions are not supported:
a transactional id is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients report at
once as a fatal error (no transactional id is allowed here), where any other error would be retried.
"""

from __future__ import annotations

import asyncio
import json
import logging
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from broker.on_loop import answer_on_loop
from broker.request_channel import Request
from daemon.eventlog import EventLog
from protocol import ErrorCode
from zkstore.aio import AsyncZooKeeper

log = logging.getLogger("broker.producer_ids")

PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
BLOCK_SIZE = 1000
MAX_PRODUCER_ID = (1 << 63) - 1


class ProducerIdsExhausted(Exception):
    """No block is left below Long.MAX_VALUE (fatal in Kafka too)."""


@dataclass(frozen=True)
class Block:
    broker: int
    first: int
    last: int

    def encode(self) -> bytes:
        return json.dumps(
            {"version": 1, "broker": self.broker, "block_start": str(self.first), "block_end": str(self.last)}
        ).encode()


def decode_block(data: bytes) -> Block | None:
    """The block a znode holds; None when empty (no block handed out yet). ValueError if malformed."""
    if not data:
        return None
    try:
        raw = json.loads(data)
        return Block(int(raw["broker"]), int(raw["block_start"]), int(raw["block_end"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{PRODUCER_ID_BLOCK_PATH} holds {data[:80]!r}: {exc}") from None


def next_block(previous: Block | None, broker_id: int) -> Block:
    first = 0 if previous is None else previous.last + 1
    if first > MAX_PRODUCER_ID - BLOCK_SIZE:
        raise ProducerIdsExhausted(f"no producer id block is left after {first - 1}")
    return Block(broker_id, first, first + BLOCK_SIZE - 1)


class ProducerIdManager:
    """Hands out ids from the block this broker holds; claims the next block when it runs out (on the
    event loop; one claim at a time)."""

    def __init__(self, zk: AsyncZooKeeper, broker_id: int, events: EventLog) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.events = events
        self._next = 0
        self._last = -1
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next > self._last:
                block = await self._claim()
                self._next, self._last = block.first, block.last
            produced = self._next
            self._next += 1
            return produced

    async def _claim(self) -> Block:
        attempts = 0
        while True:
            attempts += 1
            try:
                data, stat = await self.zk.get(PRODUCER_ID_BLOCK_PATH)
            except NoNodeError:
                block = next_block(None, self.broker_id)
                try:
                    await self.zk.create(PRODUCER_ID_BLOCK_PATH, block.encode(), makepath=True)
                except NodeExistsError:
                    continue
                return self._claimed(block, attempts)
            block = next_block(decode_block(data), self.broker_id)
            try:
                await self.zk.set(PRODUCER_ID_BLOCK_PATH, block.encode(), version=stat.version)
            except (BadVersionError, NoNodeError):
                continue  # another broker claimed a block meanwhile: read again
            return self._claimed(block, attempts)

    def _claimed(self, block: Block, attempts: int) -> Block:
        log.info("claimed producer ids %d-%d (%d attempts)", block.first, block.last, attempts)
        self.events.emit("producer_id_block_claimed", first=block.first, last=block.last, attempts=attempts)
        return block


class InitProducerIdApi:
    def __init__(self, manager: ProducerIdManager, loop: asyncio.AbstractEventLoop) -> None:
        self.manager = manager
        self.loop = loop

    def handle(self, request: Request, body: dict[str, Any]) -> dict[str, Any] | Future[dict[str, Any]]:
        transactional_id = body["transactional_id"]
        if transactional_id is not None:
            log.warning(
                "InitProducerId for transactional id %r from %s refused: transactions are not supported",
                transactional_id,
                request.header.client_id,
            )
            return _answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
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
