"""Blocks of producer ids claimed through ``/latest_producer_id_block``, Kafka's ZooKeeper-era layout.

The znode holds the latest block handed out, as ``{"version":1,"broker":N,"block_start":"<first>",
"block_end":"<last>"}`` with the ids as decimal strings. The next block is claimed with a write
conditional on the version read, re-read on a conflict, so no two claimants ever get the same ids.
Brokers below IBP 3.0-IV0 claim blocks themselves; later ones ask the controller (AllocateProducerIds),
which claims here in their name.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from daemon.eventlog import EventLog
from zkstore.aio import AsyncZooKeeper

log = logging.getLogger("zkstore.producer_id_blocks")

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

    @property
    def size(self) -> int:
        return self.last - self.first + 1

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


async def claim_block(zk: AsyncZooKeeper, broker_id: int) -> tuple[Block, int]:
    """Claim the block after the latest one for ``broker_id``; returns it and the attempts it took."""
    attempts = 0
    while True:
        attempts += 1
        try:
            data, stat = await zk.get(PRODUCER_ID_BLOCK_PATH)
        except NoNodeError:
            block = next_block(None, broker_id)
            try:
                await zk.create(PRODUCER_ID_BLOCK_PATH, block.encode(), makepath=True)
            except NodeExistsError:
                continue
            return block, attempts
        block = next_block(decode_block(data), broker_id)
        try:
            await zk.set(PRODUCER_ID_BLOCK_PATH, block.encode(), version=stat.version)
        except (BadVersionError, NoNodeError):
            continue  # claimed by someone else meanwhile: read again
        return block, attempts


class ProducerIdManager:
    """Hands out ids from the block its owner (a broker, or a controller for its own clients) holds;
    claims the next block when it runs out (on the event loop; one claim at a time)."""

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
        block, attempts = await claim_block(self.zk, self.broker_id)
        return self._claimed(block, attempts)

    def _claimed(self, block: Block, attempts: int) -> Block:
        log.info("claimed producer ids %d-%d (%d attempts)", block.first, block.last, attempts)
        self.events.emit("producer_id_block_claimed", first=block.first, last=block.last, attempts=attempts)
        return block
