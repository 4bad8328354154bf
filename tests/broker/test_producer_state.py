"""Idempotent producers' state: Kafka's epoch and sequence rules, duplicates, expiration and the
snapshot format. The log's use of them is in ``test_producer_state_log.py``."""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log import (
    BatchMetadata,
    CorruptSnapshot,
    InvalidProducerEpoch,
    OutOfOrderSequence,
    ProducerStateEntry,
)
from broker.log.producer_state import (
    INT32_MAX,
    NUM_BATCHES_TO_RETAIN,
    ProducerStateTable,
    decode_snapshot,
    decrement_sequence,
    encode_snapshot,
    increment_sequence,
    snapshot_file_name,
)
from protocol.record_batch import RecordBatchHeader, parse_header
from tests.broker.log_builders import (
    NOW,
    PID,
    batch,
    producer_batch,
)


def header(
    epoch: int, sequence: int, records: int = 1, *, pid: int = PID, ts: int = NOW, control: bool = False
) -> RecordBatchHeader:
    parsed = parse_header(producer_batch(pid, epoch, sequence, records, timestamp=ts))
    if not control:
        return parsed
    fields = {name: getattr(parsed, name) for name in RecordBatchHeader.__dataclass_fields__}
    return RecordBatchHeader(**{**fields, "attributes": parsed.attributes | 0x20})


def leader_append(
    table: ProducerStateTable, base_offset: int, *headers: RecordBatchHeader
) -> BatchMetadata | None:
    """Check and store ``headers`` as one leader append at ``base_offset``; the duplicate, if one."""
    bases, offset = [], base_offset
    for h in headers:
        bases.append(offset)
        offset += h.last_offset_delta + 1
    check = table.check_leader_append(zip(headers, bases, strict=True))
    if check.duplicate is None:
        table.apply(check.updates)
    return check.duplicate


def table_with(*entries: ProducerStateEntry) -> ProducerStateTable:
    return ProducerStateTable(entries)


def cached(epoch: int, *last_seqs: int) -> ProducerStateEntry:
    """An entry of ``epoch`` holding one-record batches ending at ``last_seqs`` (offsets 0, 1, ...)."""
    batches = tuple(BatchMetadata(seq, i, 0, NOW) for i, seq in enumerate(last_seqs))
    return ProducerStateEntry(PID, epoch, NOW, batches)


# ---------------------------------------------------------------- sequences


def test_sequences_wrap_at_int_max() -> None:
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 2, 5) == 2
    assert increment_sequence(7, 3) == 10
    assert decrement_sequence(0, 1) == INT32_MAX
    assert decrement_sequence(2, 5) == INT32_MAX - 2
    assert (
        BatchMetadata(last_seq=2, last_offset=50, offset_delta=5, max_timestamp=0).first_seq == INT32_MAX - 2
    )


# ---------------------------------------------------------------- Kafka's validation table


ACCEPTED = None


@pytest.mark.parametrize(
    ("stored", "epoch", "sequence", "outcome"),
    [
        pytest.param(cached(5, 3), 4, 4, InvalidProducerEpoch, id="older-epoch"),
        pytest.param(cached(5, 3), 4, 0, InvalidProducerEpoch, id="older-epoch-even-at-0"),
        pytest.param(None, 0, 0, ACCEPTED, id="unknown-producer-at-0"),
        pytest.param(None, 3, 12345, ACCEPTED, id="unknown-producer-any-sequence"),
        pytest.param(cached(-1, 10), -1, 99, ACCEPTED, id="epoch-minus-1-any-sequence"),
        pytest.param(ProducerStateEntry(PID), 2, 77, ACCEPTED, id="empty-entry-new-epoch-any-sequence"),
        pytest.param(cached(5, 3), 6, 1, OutOfOrderSequence, id="new-epoch-not-at-0"),
        pytest.param(cached(5, 3), 6, 0, ACCEPTED, id="new-epoch-at-0"),
        pytest.param(cached(5, 3), 5, 4, ACCEPTED, id="next-sequence"),
        pytest.param(cached(5, INT32_MAX), 5, 0, ACCEPTED, id="wraps-after-int-max"),
        pytest.param(cached(5, INT32_MAX), 5, 1, OutOfOrderSequence, id="after-int-max-only-0"),
        pytest.param(ProducerStateEntry(PID, 5), 5, 0, ACCEPTED, id="same-epoch-nothing-cached-at-0"),
        pytest.param(ProducerStateEntry(PID, 5), 5, 1, OutOfOrderSequence, id="same-epoch-nothing-cached"),
        pytest.param(cached(5, 3), 5, 5, OutOfOrderSequence, id="gap"),
        pytest.param(cached(5, 1, 2, 3), 5, 1, OutOfOrderSequence, id="older-than-the-cache-tail"),
        pytest.param(cached(5, 3), 5, 0, OutOfOrderSequence, id="restart-at-0-same-epoch"),
    ],
)
def test_client_batches_follow_kafkas_table(
    stored: ProducerStateEntry | None, epoch: int, sequence: int, outcome: type[Exception] | None
) -> None:
    table = table_with(stored) if stored is not None else ProducerStateTable()
    before = table.entries()
    incoming = header(epoch, sequence, records=2)
    if outcome is ACCEPTED:
        assert leader_append(table, 100, incoming) is None
        entry = table.get(PID)
        assert entry is not None and entry.epoch == epoch
        assert entry.batches[-1] == BatchMetadata(increment_sequence(sequence, 1), 101, 1, NOW + 1)
    else:
        with pytest.raises(outcome) as err:
            leader_append(table, 100, incoming)
        assert f"producer {PID}" in str(err.value)
        assert table.entries() == before


def test_a_new_epoch_forgets_the_older_epochs_batches() -> None:
    table = table_with(cached(1, 0, 1, 2))
    leader_append(table, 3, header(2, 0))
    entry = table.get(PID)
    assert entry is not None and (entry.epoch, [b.last_seq for b in entry.batches]) == (2, [0])


def test_only_the_last_five_batches_are_kept() -> None:
    table = ProducerStateTable()
    for seq in range(8):
        leader_append(table, seq * 2, header(0, seq * 2, records=2))
    entry = table.get(PID)
    assert entry is not None and len(entry.batches) == NUM_BATCHES_TO_RETAIN
    assert [(b.first_seq, b.last_seq) for b in entry.batches] == [(s, s + 1) for s in range(6, 16, 2)]
    assert entry.last_timestamp == NOW + 1  # the last batch's largest


def test_batches_of_one_request_are_checked_one_after_the_other() -> None:
    table = ProducerStateTable()
    assert leader_append(table, 0, header(0, 0, 2), header(0, 2, 3), header(1, 0)) is None
    entry = table.get(PID)
    assert entry is not None and [(b.first_offset, b.last_offset) for b in entry.batches] == [(5, 5)]
    with pytest.raises(OutOfOrderSequence):
        leader_append(table, 6, header(1, 1), header(1, 3))  # the second one leaves a gap
    assert table.get(PID) == entry  # nothing of the request is stored


def test_producers_are_independent_and_unknown_ones_start_anywhere() -> None:
    table = ProducerStateTable()
    leader_append(table, 0, header(0, 0, pid=1), header(3, 500, pid=2), header(0, 1, pid=1))
    assert len(table) == 2
    assert [(e.producer_id, e.epoch, e.last_seq) for e in table.entries()] == [(1, 0, 1), (2, 3, 500)]


def test_batches_without_a_producer_id_and_control_batches_change_nothing() -> None:
    table = ProducerStateTable()
    plain = parse_header(batch(3))
    assert leader_append(table, 0, plain, header(0, 7, control=True)) is None
    table.apply_replicated(plain)
    table.apply_replicated(header(0, 7, control=True))
    assert len(table) == 0


# ---------------------------------------------------------------- duplicates


def test_a_retry_of_a_cached_batch_is_a_duplicate_with_its_offsets_and_timestamp() -> None:
    table = ProducerStateTable()
    leader_append(table, 10, header(0, 0, 3, ts=NOW + 10))
    leader_append(table, 20, header(0, 3, 2, ts=NOW + 20))
    assert leader_append(table, 30, header(0, 0, 3)) == BatchMetadata(2, 12, 2, NOW + 12)
    assert leader_append(table, 30, header(0, 3, 2)) == BatchMetadata(4, 21, 1, NOW + 21)
    entry = table.get(PID)
    assert entry is not None and len(entry.batches) == 2  # nothing stored twice


def test_a_duplicate_needs_the_same_epoch_and_both_sequences() -> None:
    table = ProducerStateTable()
    leader_append(table, 0, header(0, 0, 3))
    with pytest.raises(OutOfOrderSequence):
        leader_append(table, 3, header(0, 0, 2))  # same first sequence, another last one
    leader_append(table, 3, header(1, 0, 3))
    with pytest.raises(InvalidProducerEpoch):
        leader_append(table, 6, header(0, 0, 3))  # the retry of the older epoch is stale now
    assert leader_append(table, 6, header(1, 0, 3)) == BatchMetadata(2, 5, 2, NOW + 2)


def test_a_batch_older_than_the_five_cached_is_out_of_order_not_a_duplicate() -> None:
    table = ProducerStateTable()
    for seq in range(6):
        leader_append(table, seq, header(0, seq))
    with pytest.raises(OutOfOrderSequence):
        leader_append(table, 6, header(0, 0))
    assert leader_append(table, 6, header(0, 1)) == BatchMetadata(1, 1, 0, NOW)


def test_a_duplicate_anywhere_in_a_request_answers_for_the_whole_request() -> None:
    table = ProducerStateTable()
    leader_append(table, 0, header(0, 0))
    before = table.entries()
    assert leader_append(table, 1, header(0, 0, pid=9), header(0, 0)) == BatchMetadata(0, 0, 0, NOW)
    assert table.entries() == before


# ---------------------------------------------------------------- replication and expiration


def test_replicated_batches_are_stored_without_checks(caplog: pytest.LogCaptureFixture) -> None:
    table = ProducerStateTable()
    for base, h in ((0, header(2, 10)), (1, header(2, 50)), (2, header(1, 0))):
        fields = {name: getattr(h, name) for name in RecordBatchHeader.__dataclass_fields__}
        table.apply_replicated(RecordBatchHeader(**{**fields, "base_offset": base}))
    entry = table.get(PID)
    assert entry is not None and (entry.epoch, entry.batches) == (1, (BatchMetadata(0, 2, 0, NOW),))
    assert any(
        "older than its epoch 2" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
    )


def test_producers_expire_after_the_expiration_time_since_their_last_batch() -> None:
    table = ProducerStateTable()
    leader_append(table, 0, header(0, 0, pid=1, ts=1000), header(0, 0, pid=2, ts=2000))
    assert table.remove_expired(now_ms=1999, expiration_ms=1000) == []
    assert table.remove_expired(now_ms=2000, expiration_ms=1000) == [1]
    assert table.remove_expired(now_ms=2999, expiration_ms=1000) == []
    assert table.remove_expired(now_ms=3000, expiration_ms=1000) == [2]
    in_txn = ProducerStateEntry(3, 0, 0, (), current_txn_first_offset=5)
    assert table_with(in_txn).remove_expired(now_ms=10**12, expiration_ms=1) == []


# ---------------------------------------------------------------- a producer's life, at random

producer_ops = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.integers(1, 4)),
        st.tuples(st.just("retry"), st.integers(0, 7)),
        st.tuples(st.just("bump"), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([0, INT32_MAX - 6]), producer_ops)
def test_retries_are_never_stored_twice(first_sequence: int, ops: list[tuple[str, int]]) -> None:
    """A producer sends, retries any of its earlier batches, and bumps its epoch: a retry among the
    last five of its epoch is a duplicate answered with the original offsets, an older one is refused,
    and every (epoch, sequence) reaches the log once."""
    table = ProducerStateTable()
    stored: list[tuple[int, int, int, int, int]] = []  # epoch, first seq, records, first and last offset
    epoch, sequence, log_end = 0, first_sequence, 0
    for op, arg in ops:
        known_epoch = stored[-1][0] if stored else None  # the broker learns of a bump from a batch
        if op == "send":
            assert leader_append(table, log_end, header(epoch, sequence, arg)) is None
            stored.append((epoch, sequence, arg, log_end, log_end + arg - 1))
            sequence, log_end = increment_sequence(sequence, arg), log_end + arg
        elif op == "bump":
            epoch, sequence = epoch + 1, 0
        elif stored:
            sent_epoch, first, records, first_offset, last_offset = stored[-1 - arg % len(stored)]
            recent = [s for s in stored if s[0] == known_epoch][-NUM_BATCHES_TO_RETAIN:]
            retry = header(sent_epoch, first, records)
            if known_epoch is not None and sent_epoch < known_epoch:
                with pytest.raises(InvalidProducerEpoch):
                    leader_append(table, log_end, retry)
            elif (sent_epoch, first, records, first_offset, last_offset) in recent:
                duplicate = leader_append(table, log_end, retry)
                assert duplicate is not None
                assert (duplicate.first_offset, duplicate.last_offset) == (first_offset, last_offset)
            else:
                with pytest.raises(OutOfOrderSequence):
                    leader_append(table, log_end, retry)
    assert len({(e, s) for e, s, *_ in stored}) == len(stored)
    entry = table.get(PID)
    if stored:
        assert entry is not None and entry.epoch == stored[-1][0]
        expected = [s for s in stored if s[0] == entry.epoch][-NUM_BATCHES_TO_RETAIN:]
        assert [(b.first_seq, b.first_offset, b.last_offset) for b in entry.batches] == [
            (s[1], s[3], s[4]) for s in expected
        ]


# ---------------------------------------------------------------- snapshots

batch_metadata = st.builds(
    BatchMetadata,
    last_seq=st.integers(-1, INT32_MAX),
    last_offset=st.integers(0, 2**62),
    offset_delta=st.integers(0, 1000),
    max_timestamp=st.integers(-1, 2**50),
)


@st.composite
def entries(draw: st.DrawFn) -> list[ProducerStateEntry]:
    pids = draw(st.lists(st.integers(0, 2**63 - 1), unique=True, max_size=6))
    out = []
    for pid in sorted(pids):
        batches = draw(st.lists(batch_metadata, max_size=NUM_BATCHES_TO_RETAIN))
        timestamp = batches[-1].max_timestamp if batches else draw(st.integers(-1, 2**50))
        out.append(
            ProducerStateEntry(
                pid,
                draw(st.integers(-1, 2**15 - 1)),
                timestamp,
                tuple(batches),
                draw(st.integers(-1, 100)),
                draw(st.integers(-1, 2**40)),
            )
        )
    return out


@given(entries())
def test_a_snapshot_round_trip_keeps_each_producers_last_batch(written: list[ProducerStateEntry]) -> None:
    data = encode_snapshot(written)
    assert len(data) == 10 + 46 * len(written)
    read = decode_snapshot(data)
    assert read == [
        ProducerStateEntry(
            e.producer_id,
            e.epoch,
            e.last_timestamp,
            e.batches[-1:],
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
        for e in written
    ]
    assert encode_snapshot(read) == data


def test_the_snapshot_layout_byte_for_byte() -> None:
    entry = ProducerStateEntry(
        producer_id=1000,
        epoch=2,
        last_timestamp=1_700_000_000_000,
        batches=(BatchMetadata(4, 90, 4, 1), BatchMetadata(9, 109, 4, 1_700_000_000_000)),
    )
    body = bytes.fromhex(
        "00000001"  # one producer
        "00000000000003e8"  # producer id 1000
        "0002"  # epoch 2
        "00000009"  # last sequence 9
        "000000000000006d"  # last offset 109
        "00000004"  # offset delta 4
        "0000018bcfe56800"  # timestamp 1700000000000
        "ffffffff"  # coordinator epoch -1
        "ffffffffffffffff"  # no open transaction
    )
    assert encode_snapshot([entry]) == b"\x00\x01" + struct.pack(">I", crc32c.crc32c(body)) + body
    # CRC-32C of the four zero bytes of an empty table: the well-known check value 0x48674bc7
    assert encode_snapshot([]) == bytes.fromhex("000148674bc700000000")
    assert ProducerStateEntry(7, 3, 55) == decode_snapshot(encode_snapshot([ProducerStateEntry(7, 3, 55)]))[0]
    assert encode_snapshot([ProducerStateEntry(7, 3, 55)])[10:] == bytes.fromhex(
        "0000000000000007" "0003" "ffffffff" "ffffffffffffffff" "00000000" "0000000000000037" "ffffffff"
        "ffffffffffffffff"
    )  # fmt: skip


def _with_crc(data: bytearray) -> bytes:
    struct.pack_into(">I", data, 2, crc32c.crc32c(bytes(data[6:])))
    return bytes(data)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        pytest.param(lambda d: d[:5], "cannot hold a snapshot header", id="short"),
        pytest.param(lambda d: b"\x00\x02" + d[2:], "unknown snapshot version 2", id="version"),
        pytest.param(lambda d: d[:20] + bytes([d[20] ^ 1]) + d[21:], "CRC mismatch", id="flipped-byte"),
        pytest.param(lambda d: d[:-1], "CRC mismatch", id="torn"),
        pytest.param(lambda d: _with_crc(bytearray(d[:-1])), "55 bytes for 1 producers", id="length"),
        pytest.param(lambda d: _with_crc(bytearray(d + bytes(46))), "102 bytes for 1 producers", id="extra"),
    ],
)
def test_a_corrupt_snapshot_is_refused(damage: Callable[[bytes], bytes], message: str) -> None:
    good = encode_snapshot([ProducerStateEntry(1, 0, NOW, (BatchMetadata(0, 0, 0, NOW),))])
    with pytest.raises(CorruptSnapshot, match=message):
        decode_snapshot(damage(good))


def test_snapshot_files_are_named_by_their_offset() -> None:
    assert snapshot_file_name(1234) == "00000000000000001234.snapshot"
