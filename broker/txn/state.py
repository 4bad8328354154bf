"""A transactional id's state and the coordinator's decisions on it: pure, no I/O, no clock of its own.

Kafka's rules (``TransactionCoordinator``/``TransactionMetadata`` of the ZooKeeper era, without
KIP-890's second part): a transaction goes Empty -> Ongoing (its first AddPartitionsToTxn) ->
PrepareCommit or PrepareAbort (EndTxn, written before the markers are sent) -> CompleteCommit or
CompleteAbort (written once every partition has its marker). InitProducerId bumps the epoch, which
fences the previous producer with that transactional id; one arriving while a transaction is Ongoing
aborts it first with the bumped epoch, so its late writes are refused at the partitions.

Each decision takes the current metadata and returns a :class:`Refusal` (an error code, nothing
changes), :class:`Unchanged` (answered at once, nothing written) or a :class:`Transition` (the new
metadata, which the coordinator writes to ``__transaction_state`` before it is believed).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import IntEnum

from protocol import ErrorCode
from protocol.topic_partition import TopicPartition
from protocol.transaction_log import TransactionLogValue

__all__ = [
    "Decision",
    "Refusal",
    "Transition",
    "TxnMetadata",
    "TxnState",
    "Unchanged",
    "add_partitions",
    "complete",
    "end_transaction",
    "fence",
    "init_producer_id",
    "needs_new_producer_id",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 2**15 - 1
"""Kafka's ``Short.MaxValue``: an epoch at ``MAX_EPOCH - 1`` is exhausted and the id is replaced."""


class TxnState(IntEnum):
    """The states, numbered as ``TransactionLogValue.TransactionStatus`` stores them."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def wire_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use (``PrepareCommit``)."""
        return "".join(word.capitalize() for word in self.name.split("_"))

    @classmethod
    def from_wire_name(cls, name: str) -> TxnState | None:
        return next((s for s in cls if s.wire_name == name), None)


COMPLETE = frozenset({TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})
PREPARING = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    """One transactional id's state, as the coordinator holds and writes it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = frozenset()
    start_ms: int = -1
    """When the ongoing (or last) transaction began: its timeout counts from here."""
    update_ms: int = -1
    last_producer_id: int = NO_PRODUCER_ID
    """The id before the last rotation (kept in memory only, as Kafka's ZooKeeper-era log does not)."""
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    """The epoch before the last bump: a producer retrying that bump gets the current one back."""

    def record(self) -> TransactionLogValue:
        """Its ``__transaction_state`` value (partitions grouped by topic, sorted)."""
        topics: dict[str, list[int]] = {}
        for tp in sorted(self.partitions):
            topics.setdefault(tp.topic, []).append(tp.partition)
        return TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.timeout_ms,
            transaction_status=int(self.state),
            partitions=tuple((topic, tuple(ids)) for topic, ids in topics.items()),
            last_update_timestamp_ms=self.update_ms,
            start_timestamp_ms=self.start_ms,
        )

    @classmethod
    def from_record(cls, transactional_id: str, value: TransactionLogValue) -> TxnMetadata:
        return cls(
            transactional_id,
            value.producer_id,
            value.producer_epoch,
            value.transaction_timeout_ms,
            TxnState(value.transaction_status),
            frozenset(TopicPartition(topic, p) for topic, ids in value.partitions for p in ids),
            value.start_timestamp_ms,
            value.last_update_timestamp_ms,
        )

    def timed_out(self, now_ms: int) -> bool:
        """An Ongoing transaction older than its timeout: the coordinator aborts it."""
        return self.state is TxnState.ONGOING and self.start_ms + self.timeout_ms < now_ms

    def expired(self, now_ms: int, expiration_ms: int) -> bool:
        """No transaction for ``transactional.id.expiration.ms``: the id is forgotten."""
        idle = self.state is TxnState.EMPTY or self.state in COMPLETE
        return idle and self.update_ms + expiration_ms <= now_ms


@dataclass(frozen=True, slots=True)
class Refusal:
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class Unchanged:
    """Answer with the current metadata; nothing to write."""

    metadata: TxnMetadata


@dataclass(frozen=True, slots=True)
class Transition:
    """Write ``metadata`` to the transaction log, then believe it."""

    metadata: TxnMetadata


Decision = Refusal | Unchanged | Transition


def _exhausted(epoch: int) -> bool:
    return epoch >= MAX_EPOCH - 1


def needs_new_producer_id(metadata: TxnMetadata | None) -> bool:
    """Whether InitProducerId will hand out a fresh producer id (a new id, or an exhausted epoch)."""
    return metadata is None or _exhausted(metadata.producer_epoch)


def _valid_producer_id(metadata: TxnMetadata, expected: tuple[int, int]) -> bool:
    """Kafka's isValidProducerId: a request naming a producer id and epoch (KIP-360) is fenced unless
    the metadata is new, it names the current id, or it names the previous id with an exhausted epoch
    (a retry of a rotation whose answer was lost)."""
    pid, epoch = expected
    return (
        metadata.producer_epoch == NO_PRODUCER_EPOCH
        or pid == metadata.producer_id
        or (pid == metadata.last_producer_id and _exhausted(epoch))
    )


def init_producer_id(
    metadata: TxnMetadata | None,
    *,
    transactional_id: str,
    timeout_ms: int,
    expected: tuple[int, int] | None,
    fresh_producer_id: int,
    now_ms: int,
) -> Decision:
    """InitProducerId with a transactional id. ``fresh_producer_id`` is used only when
    :func:`needs_new_producer_id`; an Ongoing transaction is answered CONCURRENT_TRANSACTIONS here, the
    coordinator having aborted it first (:func:`fence`)."""
    if metadata is None:
        metadata = TxnMetadata(
            transactional_id, fresh_producer_id, NO_PRODUCER_EPOCH, timeout_ms, TxnState.EMPTY
        )
    if expected is not None and not _valid_producer_id(metadata, expected):
        return Refusal(ErrorCode.PRODUCER_FENCED)
    if metadata.state not in (TxnState.EMPTY, *COMPLETE):
        return Refusal(ErrorCode.CONCURRENT_TRANSACTIONS)
    if expected is not None and expected[0] == metadata.last_producer_id != metadata.producer_id:
        return Unchanged(metadata)  # a retried rotation: the new id is already the answer
    expected_epoch = expected[1] if expected is not None else None
    if not (
        expected_epoch is None
        or metadata.producer_epoch == NO_PRODUCER_EPOCH
        or expected_epoch == metadata.producer_epoch
    ):
        if expected_epoch == metadata.last_producer_epoch:
            return Unchanged(metadata)  # a retried bump (KIP-360)
        return Refusal(ErrorCode.PRODUCER_FENCED)
    if _exhausted(metadata.producer_epoch):
        bumped = replace(
            metadata,
            producer_id=fresh_producer_id,
            last_producer_id=metadata.producer_id,
            producer_epoch=0,
            last_producer_epoch=NO_PRODUCER_EPOCH,
        )
    else:
        bumped = replace(
            metadata,
            producer_epoch=metadata.producer_epoch + 1,
            last_producer_epoch=metadata.producer_epoch,
        )
    return Transition(
        replace(
            bumped,
            timeout_ms=timeout_ms,
            state=TxnState.EMPTY,
            partitions=frozenset(),
            start_ms=-1,
            update_ms=now_ms,
        )
    )


def fence(metadata: TxnMetadata) -> TxnMetadata:
    """Kafka's prepareFenceProducerEpoch: the Ongoing transaction's metadata with the epoch bumped, to
    be aborted with that epoch (by :func:`end_transaction`, not from a client) so the old producer's
    writes are refused from then on. Nothing is written for the fence itself."""
    epoch = metadata.producer_epoch if _exhausted(metadata.producer_epoch) else metadata.producer_epoch + 1
    return replace(metadata, producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH)


def _check_producer(metadata: TxnMetadata | None, producer_id: int) -> ErrorCode | None:
    if metadata is None or metadata.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    return None


def add_partitions(
    metadata: TxnMetadata | None,
    producer_id: int,
    producer_epoch: int,
    partitions: frozenset[TopicPartition],
    now_ms: int,
) -> Decision:
    """AddPartitionsToTxn (and AddOffsetsToTxn, whose partition is the group's offsets partition)."""
    error = _check_producer(metadata, producer_id)
    if error is not None:
        return Refusal(error)
    assert metadata is not None
    if producer_epoch != metadata.producer_epoch:
        return Refusal(ErrorCode.PRODUCER_FENCED)
    if metadata.state in PREPARING or metadata.state in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE):
        return Refusal(ErrorCode.CONCURRENT_TRANSACTIONS)
    if metadata.state is TxnState.ONGOING and partitions <= metadata.partitions:
        return Unchanged(metadata)
    starting = metadata.state is not TxnState.ONGOING
    return Transition(
        replace(
            metadata,
            state=TxnState.ONGOING,
            partitions=metadata.partitions | partitions,
            start_ms=now_ms if starting else metadata.start_ms,
            update_ms=now_ms,
        )
    )


def end_transaction(
    metadata: TxnMetadata | None,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    now_ms: int,
    *,
    from_client: bool = True,
) -> Decision:
    """EndTxn (or the coordinator's own abort of a timed-out or fenced transaction): Ongoing goes to
    PrepareCommit/PrepareAbort; a retry of a finished or finishing end is answered as Kafka does."""
    error = _check_producer(metadata, producer_id)
    if error is not None:
        return Refusal(error)
    assert metadata is not None
    epoch = metadata.producer_epoch
    if (from_client and producer_epoch != epoch) or producer_epoch < epoch:
        return Refusal(ErrorCode.PRODUCER_FENCED)
    state = metadata.state
    if state is TxnState.ONGOING:
        target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        return Transition(replace(metadata, state=target, update_ms=now_ms))
    same = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    preparing = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    if state is same:
        return Unchanged(metadata)
    if state is preparing:
        return Refusal(ErrorCode.CONCURRENT_TRANSACTIONS)
    return Refusal(ErrorCode.INVALID_TXN_STATE)


def complete(metadata: TxnMetadata, now_ms: int) -> TxnMetadata:
    """Every marker is written: PrepareCommit -> CompleteCommit, PrepareAbort -> CompleteAbort."""
    target = (
        TxnState.COMPLETE_COMMIT if metadata.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
    )
    return replace(metadata, state=target, partitions=frozenset(), update_ms=now_ms)
