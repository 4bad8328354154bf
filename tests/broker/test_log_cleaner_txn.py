"""The log cleaner and producers: aborted transactions' records go at once, markers stay until
nothing of their transaction is left and their delete horizon passed, and an idempotent producer's
last batch stays (emptied if need be) so its sequence survives a rebuild of its state from the log."""

from __future__ import annotations

from pathlib import Path

from broker.log.segment import wall_clock_ms
from tests.broker.cleaner_builders import (
    DAY_MS,
    NOW,
    KeyedProducer,
    batches,
    compacted_log,
    harness,
    latest_values,
    markers,
    put,
    records,
    roll_past,
)
from tests.broker.test_log_transactions import txn_index_entries

P1, P2 = 8001, 8002


def test_aborted_records_go_and_their_marker_stays_while_the_producers_last_batch_does(
    tmp_path: Path,
) -> None:
    log = compacted_log(tmp_path, min_cleanable_ratio=0.0)
    p1, p2 = KeyedProducer(P1), KeyedProducer(P2)
    put(log, "k1", "committed-before")
    p1.send(log, "k1", "aborted-1", transactional=True)
    p1.send(log, "k2", "aborted-2", transactional=True)
    abort_at = p1.end(log, commit=False)
    p2.send(log, "k3", "committed", transactional=True)
    p2.end(log, commit=True)
    roll_past(log, "a")
    h = harness(tmp_path, log)
    assert h.clean()
    values = {(s.key, s.value) for s in records(log)}
    assert (b"k1", b"aborted-1") not in values and (b"k2", b"aborted-2") not in values
    assert latest_values(log)["k1"] == "committed-before" and latest_values(log)["k3"] == "committed"
    # p1's last batch stays, emptied, for its sequence; so does the abort marker, indexed again
    [emptied] = [h for h, _ in batches(log) if h.producer_id == P1 and not h.is_control]
    assert emptied.records_count == 0 and emptied.base_sequence == 1
    assert [m.base_offset for m in markers(log) if m.producer_id == P1] == [abort_at]
    assert [e[1:4] for e in txn_index_entries(log.directory)] == [(P1, 1, abort_at)]


def test_a_marker_without_records_left_goes_after_its_delete_horizon(tmp_path: Path) -> None:
    log = compacted_log(tmp_path, min_cleanable_ratio=0.0, delete_retention_ms=DAY_MS)
    p1 = KeyedProducer(P1)
    p1.send(log, "k1", "aborted", transactional=True)
    abort_at = p1.end(log, commit=False)
    p1.send(log, "k2", "kept", transactional=True)
    commit_at = p1.end(log, commit=True)
    roll_past(log, "a")
    h = harness(tmp_path, log)
    assert h.clean(NOW)  # the aborted batch goes; its marker stays: this pass still met the batch
    assert {m.base_offset: m.delete_horizon_ms for m in markers(log)} == {abort_at: None, commit_at: None}
    roll_past(log, "b")
    assert h.clean(NOW)
    abort = next(m for m in markers(log) if m.base_offset == abort_at)
    assert abort.delete_horizon_ms == NOW + DAY_MS  # nothing of its transaction is left
    assert any(m.base_offset == commit_at and m.delete_horizon_ms is None for m in markers(log))
    roll_past(log, "b2")
    assert h.clean(NOW + DAY_MS - 1)
    assert abort_at in {m.base_offset for m in markers(log)}
    roll_past(log, "c")
    assert h.clean(NOW + DAY_MS)
    assert abort_at not in {m.base_offset for m in markers(log)}
    assert not txn_index_entries(log.directory)
    assert latest_values(log)["k2"] == "kept"


def test_an_idempotent_producers_state_survives_cleaning_and_a_rebuild(tmp_path: Path) -> None:
    now = wall_clock_ms()  # producer state older than producer.id.expiration.ms is dropped on load
    log = compacted_log(tmp_path, min_cleanable_ratio=0.0)
    producer = KeyedProducer(P1, epoch=3)
    producer.send(log, "k1", "v1", now=now)
    producer.send(log, "k1", "v2", now=now)
    put(log, "k1", "v3", now=now)  # supersedes both of the producer's records
    roll_past(log, "a", now=now)
    assert harness(tmp_path, log).clean(now)
    kept = [h for h, _ in batches(log) if h.producer_id == P1]
    assert [(h.base_sequence, h.records_count, h.producer_epoch) for h in kept] == [(1, 0, 3)]
    log.flush()
    log.close()
    for snapshot in log.directory.glob("*.snapshot"):
        snapshot.unlink()  # the state is rebuilt from the batches alone
    reopened = compacted_log(tmp_path)
    entry = reopened.producer_entry(P1)
    assert entry is not None and (entry.epoch, entry.last_seq) == (3, 1)
    producer.send(reopened, "k1", "v4", now=now)  # sequence 2 follows: no OutOfOrderSequence
    assert latest_values(reopened)["k1"] == "v4"
    reopened.close()
