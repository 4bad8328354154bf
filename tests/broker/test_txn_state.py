"""The transaction coordinator's decisions (``broker.txn.state``), one rule of Kafka's at a time."""

from __future__ import annotations

from dataclasses import replace

from broker.txn.state import (
    MAX_EPOCH,
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
from protocol import ErrorCode
from protocol.topic_partition import TopicPartition
from protocol.transaction_log import decode_transaction_value, encode_transaction_value

A, B = TopicPartition("orders", 0), TopicPartition("orders", 1)
NOW = 1_700_000_000_000


def new(pid: int = 7) -> TxnMetadata:
    decision = init_producer_id(
        None, transactional_id="tx", timeout_ms=60_000, expected=None, fresh_producer_id=pid, now_ms=NOW
    )
    assert isinstance(decision, Transition)
    return decision.metadata


def ongoing() -> TxnMetadata:
    decision = add_partitions(new(), 7, 0, frozenset({A}), NOW + 1)
    assert isinstance(decision, Transition)
    return decision.metadata


def test_a_new_transactional_id_gets_a_fresh_id_at_epoch_0_and_empty() -> None:
    first = new()
    assert (first.producer_id, first.producer_epoch, first.state) == (7, 0, TxnState.EMPTY)
    assert needs_new_producer_id(None) and not needs_new_producer_id(first)


def test_init_again_bumps_the_epoch_which_fences_the_previous_producer() -> None:
    again = init_producer_id(
        new(), transactional_id="tx", timeout_ms=1000, expected=None, fresh_producer_id=-1, now_ms=NOW
    )
    assert isinstance(again, Transition)
    assert (again.metadata.producer_id, again.metadata.producer_epoch, again.metadata.timeout_ms) == (
        7,
        1,
        1000,
    )
    # the previous producer's next request carries epoch 0 and is fenced
    assert add_partitions(again.metadata, 7, 0, frozenset({A}), NOW) == Refusal(ErrorCode.PRODUCER_FENCED)
    assert end_transaction(again.metadata, 7, 0, True, NOW) == Refusal(ErrorCode.PRODUCER_FENCED)


def test_an_exhausted_epoch_rotates_to_a_new_producer_id() -> None:
    worn = replace(new(), producer_epoch=MAX_EPOCH - 1)
    assert needs_new_producer_id(worn)
    rotated = init_producer_id(
        worn, transactional_id="tx", timeout_ms=1000, expected=None, fresh_producer_id=99, now_ms=NOW
    )
    assert isinstance(rotated, Transition)
    assert (rotated.metadata.producer_id, rotated.metadata.producer_epoch) == (99, 0)
    # a retry naming the old id with its exhausted epoch gets the new id back, unchanged (KIP-360)
    retried = init_producer_id(
        rotated.metadata,
        transactional_id="tx",
        timeout_ms=1000,
        expected=(7, MAX_EPOCH - 1),
        fresh_producer_id=-1,
        now_ms=NOW,
    )
    assert retried == Unchanged(rotated.metadata)


def test_kip_360_a_retried_bump_gets_the_current_epoch_and_a_stale_one_is_fenced() -> None:
    bumped = init_producer_id(
        new(), transactional_id="tx", timeout_ms=1000, expected=(7, 0), fresh_producer_id=-1, now_ms=NOW
    )
    assert isinstance(bumped, Transition) and bumped.metadata.producer_epoch == 1
    retried = init_producer_id(
        bumped.metadata,
        transactional_id="tx",
        timeout_ms=1000,
        expected=(7, 0),
        fresh_producer_id=-1,
        now_ms=NOW,
    )
    assert retried == Unchanged(bumped.metadata)
    twice = init_producer_id(
        bumped.metadata,
        transactional_id="tx",
        timeout_ms=1000,
        expected=(7, 1),
        fresh_producer_id=-1,
        now_ms=NOW,
    )
    assert isinstance(twice, Transition) and twice.metadata.producer_epoch == 2
    stale = init_producer_id(
        twice.metadata,
        transactional_id="tx",
        timeout_ms=1000,
        expected=(7, 0),
        fresh_producer_id=-1,
        now_ms=NOW,
    )
    assert stale == Refusal(ErrorCode.PRODUCER_FENCED)
    other = init_producer_id(
        twice.metadata,
        transactional_id="tx",
        timeout_ms=1000,
        expected=(8, 2),
        fresh_producer_id=-1,
        now_ms=NOW,
    )
    assert other == Refusal(ErrorCode.PRODUCER_FENCED)


def test_a_transaction_starts_with_its_first_partition_and_adding_known_ones_writes_nothing() -> None:
    started = ongoing()
    assert (started.state, started.partitions, started.start_ms) == (
        TxnState.ONGOING,
        frozenset({A}),
        NOW + 1,
    )
    assert add_partitions(started, 7, 0, frozenset({A}), NOW + 5) == Unchanged(started)
    more = add_partitions(started, 7, 0, frozenset({B}), NOW + 5)
    assert isinstance(more, Transition)
    assert more.metadata.partitions == {A, B} and more.metadata.start_ms == NOW + 1


def test_unknown_ids_and_producers_are_invalid_mappings() -> None:
    assert add_partitions(None, 7, 0, frozenset({A}), NOW) == Refusal(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    assert add_partitions(new(), 8, 0, frozenset({A}), NOW) == Refusal(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    assert end_transaction(new(), 8, 0, True, NOW) == Refusal(ErrorCode.INVALID_PRODUCER_ID_MAPPING)


def test_end_prepares_then_completes_and_retries_are_answered_as_kafka_does() -> None:
    prepared = end_transaction(ongoing(), 7, 0, True, NOW + 2)
    assert isinstance(prepared, Transition) and prepared.metadata.state is TxnState.PREPARE_COMMIT
    # while the markers are written, the next transaction and another end wait
    assert add_partitions(prepared.metadata, 7, 0, frozenset({B}), NOW) == Refusal(
        ErrorCode.CONCURRENT_TRANSACTIONS
    )
    assert end_transaction(prepared.metadata, 7, 0, True, NOW) == Refusal(ErrorCode.CONCURRENT_TRANSACTIONS)
    assert end_transaction(prepared.metadata, 7, 0, False, NOW) == Refusal(ErrorCode.INVALID_TXN_STATE)
    done = complete(prepared.metadata, NOW + 3)
    assert (done.state, done.partitions) == (TxnState.COMPLETE_COMMIT, frozenset())
    assert end_transaction(done, 7, 0, True, NOW) == Unchanged(done)
    assert end_transaction(done, 7, 0, False, NOW) == Refusal(ErrorCode.INVALID_TXN_STATE)
    assert end_transaction(new(), 7, 0, True, NOW) == Refusal(ErrorCode.INVALID_TXN_STATE)
    # the next transaction starts from CompleteCommit
    nxt = add_partitions(done, 7, 0, frozenset({B}), NOW + 4)
    assert isinstance(nxt, Transition) and nxt.metadata.start_ms == NOW + 4


def test_a_fenced_ongoing_transaction_is_aborted_with_the_bumped_epoch() -> None:
    fenced = fence(ongoing())
    assert fenced.producer_epoch == 1 and fenced.state is TxnState.ONGOING
    # the coordinator's own abort, not a client's: the bumped epoch is its to use
    aborting = end_transaction(fenced, 7, 1, False, NOW, from_client=False)
    assert isinstance(aborting, Transition)
    assert (aborting.metadata.state, aborting.metadata.producer_epoch) == (TxnState.PREPARE_ABORT, 1)
    # the old producer is fenced from then on
    assert end_transaction(aborting.metadata, 7, 0, True, NOW) == Refusal(ErrorCode.PRODUCER_FENCED)
    # InitProducerId while it is being aborted waits; afterwards it bumps again
    busy = init_producer_id(
        aborting.metadata,
        transactional_id="tx",
        timeout_ms=1000,
        expected=None,
        fresh_producer_id=-1,
        now_ms=NOW,
    )
    assert busy == Refusal(ErrorCode.CONCURRENT_TRANSACTIONS)
    after = init_producer_id(
        complete(aborting.metadata, NOW),
        transactional_id="tx",
        timeout_ms=1000,
        expected=None,
        fresh_producer_id=-1,
        now_ms=NOW,
    )
    assert isinstance(after, Transition) and after.metadata.producer_epoch == 2


def test_timeouts_and_expiry() -> None:
    started = ongoing()
    assert not started.timed_out(NOW + 1 + 60_000) and started.timed_out(NOW + 2 + 60_000)
    idle = complete(started, NOW)
    assert not idle.timed_out(NOW + 10**9)
    assert idle.expired(NOW + 1000, 1000) and not idle.expired(NOW + 999, 1000)
    assert not started.expired(NOW + 10**9, 1000)


def test_the_log_record_round_trips_with_partitions_grouped_by_topic() -> None:
    meta = replace(ongoing(), partitions=frozenset({B, A, TopicPartition("audit", 3)}))
    value = meta.record()
    assert value.partitions == (("audit", (3,)), ("orders", (0, 1)))
    again = TxnMetadata.from_record("tx", decode_transaction_value(encode_transaction_value(value)))
    assert again == replace(meta, last_producer_epoch=-1)
    assert [s.wire_name for s in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_ABORT)] == [
        "PrepareCommit",
        "CompleteAbort",
    ]
    assert (
        TxnState.from_wire_name("Ongoing") is TxnState.ONGOING and TxnState.from_wire_name("ongoing") is None
    )
