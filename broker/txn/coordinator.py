"""Kafka's TransactionCoordinator: InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions, and what runs by itself: the
markers of each ended transaction, the abort of timed-out ones and the expiry of idle ids.

Runs on the broker's event loop, the one writer of every transactional id's state; each decision is
:mod:`broker.txn.state`'s, each write :class:`TransactionStateManager`'s. EndTxn is answered once
PrepareCommit/PrepareAbort is written; the markers follow, and CompleteCommit/CompleteAbort is written
when every partition has one. Until then the id answers CONCURRENT_TRANSACTIONS, which clients retry.
A coordinator that takes over a partition finishes what its predecessor had prepared.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from broker.group.timers import GroupScheduler
from broker.internal_log import InternalTopicLog
from broker.txn.config import TransactionConfig
from broker.txn.markers import MarkerRequest, MarkerSender
from broker.txn.state import (
    PREPARING,
    Refusal,
    Transition,
    TxnMetadata,
    TxnState,
    Unchanged,
    add_partitions,
    complete,
    end_transaction,
    fence,
    init_producer_id,
    needs_new_producer_id,
)
from broker.txn.state_manager import TransactionStateManager
from daemon.eventlog import EventLog
from protocol import ErrorCode
from protocol.topic_partition import TopicPartition

__all__ = ["InitResult", "TransactionCoordinator"]

log = logging.getLogger("broker.txn")

COMPLETE_RETRY_S = 0.5
"""Pause before writing CompleteCommit/CompleteAbort again after a failed write."""
COMPLETION_WAIT_S = 0.5
"""How long a request meeting a transaction whose markers are being written waits for them before it
is answered CONCURRENT_TRANSACTIONS. Kafka answers at once and the client retries after its backoff
(librdkafka's and Java's: about 20 ms), which a producer starting its next transaction right after a
commit meets every time; a few milliseconds of waiting here spare it that backoff."""


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


def now_ms() -> int:
    return int(time.time() * 1000)


class TransactionCoordinator:
    def __init__(
        self,
        config: TransactionConfig,
        txn_log: InternalTopicLog,
        markers: MarkerSender,
        next_producer_id: Callable[[], Awaitable[int]],
        events: EventLog,
    ) -> None:
        self.config = config
        self.markers = markers
        self.next_producer_id = next_producer_id
        self.events = events
        self.scheduler = GroupScheduler()
        self._finishing: dict[str, asyncio.Future[None]] = {}
        """Transactional id -> done once its markers' task has ended (completed, fenced or resigned)."""
        self.state = TransactionStateManager(
            txn_log,
            events,
            self.scheduler,
            partition_count=config.transaction_state_log_num_partitions,
            on_loaded=self._resume,
        )

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self.scheduler.bind(loop)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.scheduler.loop

    def partition_of(self, transactional_id: str) -> int:
        return self.state.partition_of(transactional_id)

    def on_election(self, partition: int, epoch: int) -> None:
        self.state.on_election(partition, epoch)

    def on_resignation(self, partition: int, epoch: int | None) -> None:
        self.state.on_resignation(partition, epoch)

    # ------------------------------------------------------------------ InitProducerId

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None
    ) -> InitResult:
        error = self.state.status_error(transactional_id)
        if error:
            return InitResult(error)
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        await self._completion(transactional_id)
        if transactional_id in self.state.pending:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        metadata = self.state.transactions.get(transactional_id)
        if metadata is not None and metadata.state is TxnState.ONGOING:
            # Abort the Ongoing transaction with a bumped epoch; the client retries and then gets the next.
            error = await self._abort(fence(metadata), "fenced by a new producer")
            return InitResult(error or ErrorCode.CONCURRENT_TRANSACTIONS)
        fresh = await self._fresh_id(transactional_id, metadata) if needs_new_producer_id(metadata) else -1
        if isinstance(fresh, ErrorCode):
            return InitResult(fresh)
        decision = init_producer_id(
            metadata,
            transactional_id=transactional_id,
            timeout_ms=timeout_ms,
            expected=expected,
            fresh_producer_id=fresh,
            now_ms=now_ms(),
        )
        if isinstance(decision, Refusal):
            return InitResult(decision.error)
        if isinstance(decision, Transition):
            error = await self._write(decision.metadata)
            if error:
                return InitResult(error)
        found = decision.metadata
        return InitResult(ErrorCode.NONE, found.producer_id, found.producer_epoch)

    async def _fresh_id(self, transactional_id: str, metadata: TxnMetadata | None) -> int | ErrorCode:
        """A new producer id, or why none: COORDINATOR_NOT_AVAILABLE (retried by clients) if no block
        can be claimed now; the id's state having moved during the wait, the error that now applies."""
        try:
            fresh = await self.next_producer_id()
        except Exception:
            log.exception("no producer id could be claimed for transaction %s", transactional_id)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self.state.status_error(transactional_id)  # the await may have seen a resignation
        if error:
            return error
        if self.state.transactions.get(transactional_id) is not metadata:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return fresh

    # ------------------------------------------------------------------ AddPartitionsToTxn / AddOffsetsToTxn

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: frozenset[TopicPartition],
    ) -> ErrorCode:
        await self._completion(transactional_id)
        error = self._writable(transactional_id)
        if error:
            return error
        metadata = self.state.transactions.get(transactional_id)
        decision = add_partitions(metadata, producer_id, producer_epoch, partitions, now_ms())
        if isinstance(decision, Refusal):
            return decision.error
        if isinstance(decision, Unchanged):
            return ErrorCode.NONE
        return await self._write(decision.metadata)

    # ------------------------------------------------------------------ EndTxn

    async def end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> ErrorCode:
        error = self._writable(transactional_id)
        if error:
            return error
        metadata = self.state.transactions.get(transactional_id)
        decision = end_transaction(metadata, producer_id, producer_epoch, commit, now_ms())
        if isinstance(decision, Refusal):
            return decision.error
        if isinstance(decision, Unchanged):
            return ErrorCode.NONE
        return await self._prepare(decision.metadata)

    async def _abort(self, metadata: TxnMetadata, reason: str) -> ErrorCode:
        """The coordinator's own abort (a fenced producer, a timeout): PrepareAbort, then markers."""
        decision = end_transaction(
            metadata, metadata.producer_id, metadata.producer_epoch, False, now_ms(), from_client=False
        )
        if not isinstance(decision, Transition):
            return decision.error if isinstance(decision, Refusal) else ErrorCode.NONE
        error = await self._prepare(decision.metadata)
        if not error:
            self.events.emit(
                "transaction_aborted",
                transactional_id=metadata.transactional_id,
                producer_id=metadata.producer_id,
                producer_epoch=metadata.producer_epoch,
                partitions=len(metadata.partitions),
                reason=reason,
            )
        return error

    async def _prepare(self, prepared: TxnMetadata) -> ErrorCode:
        """Write PrepareCommit/PrepareAbort; once written, the markers go out in the background."""
        error = await self._write(prepared)
        if not error:
            self._finish_later(prepared)
        return error

    # ------------------------------------------------------------------ markers and completion

    def _finish_later(self, prepared: TxnMetadata) -> None:
        epoch = self.state.coordinator_epoch(prepared.transactional_id)
        if epoch is not None:
            self._spawn_finish(prepared, epoch)

    def _resume(self, partition: int, epoch: int, loaded: list[TxnMetadata]) -> None:
        """A partition just loaded: transactions its previous coordinator prepared are finished here."""
        for metadata in loaded:
            if metadata.state in PREPARING:
                self._spawn_finish(metadata, epoch)

    def _spawn_finish(self, prepared: TxnMetadata, coordinator_epoch: int) -> None:
        transactional_id = prepared.transactional_id
        done: asyncio.Future[None] = self.loop.create_future()
        self._finishing[transactional_id] = done

        async def finish() -> None:
            try:
                await self._finish(prepared, coordinator_epoch)
            finally:
                if self._finishing.get(transactional_id) is done:
                    del self._finishing[transactional_id]
                done.set_result(None)

        self.scheduler.spawn(finish(), name=f"markers-{transactional_id}")

    async def _completion(self, transactional_id: str) -> None:
        """Wait up to :data:`COMPLETION_WAIT_S` for the id's markers to be written, if they are being."""
        finishing = self._finishing.get(transactional_id)
        if finishing is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(finishing), COMPLETION_WAIT_S)

    async def _finish(self, prepared: TxnMetadata, coordinator_epoch: int) -> None:
        transactional_id = prepared.transactional_id
        partition = self.partition_of(transactional_id)

        def still_owner() -> bool:
            return self.state.owned.get(partition) == coordinator_epoch

        request = MarkerRequest(
            transactional_id,
            prepared.producer_id,
            prepared.producer_epoch,
            coordinator_epoch,
            prepared.state is TxnState.PREPARE_COMMIT,
            prepared.partitions,
        )
        if not await self.markers.write(request, still_owner):
            return
        while still_owner() and self.state.transactions.get(transactional_id) == prepared:
            if transactional_id in self.state.pending:
                await asyncio.sleep(COMPLETE_RETRY_S)
                continue
            if await self.state.write(complete(prepared, now_ms()), transactional_id, coordinator_epoch) == 0:
                return
            await asyncio.sleep(COMPLETE_RETRY_S)

    # ------------------------------------------------------------------ background

    async def abort_timed_out(self) -> int:
        """Abort every Ongoing transaction past its timeout, fencing its producer; returns how many."""
        now = now_ms()
        aborted = 0
        for metadata in self.state.owned_transactions():
            if metadata.timed_out(now) and metadata.transactional_id not in self.state.pending:
                log.info(
                    "aborting transaction %s (producer %d, epoch %d): older than its timeout of %d ms",
                    metadata.transactional_id, metadata.producer_id, metadata.producer_epoch,
                    metadata.timeout_ms,
                )  # fmt: skip
                if not await self._abort(fence(metadata), "timed out"):
                    aborted += 1
        return aborted

    async def expire_transactional_ids(self) -> int:
        """Forget ids idle for ``transactional.id.expiration.ms`` (a tombstone each); returns how many."""
        now = now_ms()
        expired = 0
        for metadata in self.state.owned_transactions():
            transactional_id = metadata.transactional_id
            if not metadata.expired(now, self.config.transactional_id_expiration_ms):
                continue
            epoch = self.state.coordinator_epoch(transactional_id)
            if epoch is None or transactional_id in self.state.pending:
                continue
            if not await self.state.write(None, transactional_id, epoch):
                expired += 1
        return expired

    async def run_timers(self) -> None:
        """The two periodic jobs, forever (a failing round is logged; the next one still comes)."""
        abort_every = self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms / 1000.0
        expire_every = self.config.transaction_remove_expired_transaction_cleanup_interval_ms / 1000.0
        next_expiry = time.monotonic() + expire_every
        while True:
            await asyncio.sleep(abort_every)
            try:
                await self.abort_timed_out()
                if time.monotonic() >= next_expiry:
                    next_expiry = time.monotonic() + expire_every
                    await self.expire_transactional_ids()
            except Exception:
                log.exception("transaction coordinator: a periodic round failed")

    # ------------------------------------------------------------------ helpers

    def _writable(self, transactional_id: str) -> ErrorCode:
        error = self.state.status_error(transactional_id)
        if error:
            return error
        if transactional_id in self.state.pending:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.NONE

    async def _write(self, metadata: TxnMetadata) -> ErrorCode:
        epoch = self.state.coordinator_epoch(metadata.transactional_id)
        if epoch is None:
            return ErrorCode.NOT_COORDINATOR
        return await self.state.write(metadata, metadata.transactional_id, epoch)

    def shutdown(self) -> None:
        self.scheduler.cancel_all()
