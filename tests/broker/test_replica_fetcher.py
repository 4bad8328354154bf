"""A follower whose leader has not taken its LeaderAndIsr yet keeps asking, and then replicates.

At topic creation the follower's LeaderAndIsr can arrive before the leader's: the first answers are
UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER. Giving up on them would leave a replica in
the ISR that never fetches, and acks=all would wait until the ISR shrinks. The leader here is a
scripted socket server; the follower is a real fetcher thread and a real log.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.log import Log, LogConfig
from broker.partition import Partition
from broker.replica_fetcher import FetcherSettings, ReplicaFetcher, Truncation, truncation_point
from protocol import ApiKey, ErrorCode, decode_request, encode_response
from protocol.record_batch import build_batch, parse_batches, with_base_offset_and_epoch
from zkstore.znodes import TopicPartition

TP = TopicPartition("t", 0)
WAIT_S = 10.0
SETTINGS = FetcherSettings(
    2,
    max_wait_ms=10,
    min_bytes=1,
    max_bytes=1 << 20,
    partition_max_bytes=1 << 20,
    backoff_s=0.05,
    socket_timeout_s=5,
)


class FakeLeader:
    """A leader on a socket of its own, answering one follower's requests with ``_answer``."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            conn, _ = self.server.accept()
            while True:
                prefix = _read(conn, 4)
                header, body = decode_request(prefix + _read(conn, struct.unpack(">i", prefix)[0]))
                answer = self._answer(header.api_key, body)
                conn.sendall(
                    encode_response(header.api_key, header.api_version, header.correlation_id, answer)
                )

    def _answer(self, api: int, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError


class ScriptedLeader(FakeLeader):
    """Answers OffsetForLeaderEpoch with the epoch's end, and Fetch from a list of partition errors,
    then with three records once the script is exhausted."""

    def __init__(self, fetch_errors: list[ErrorCode]) -> None:
        self.fetch_errors = list(fetch_errors)
        self.fetches = 0
        self.records = with_base_offset_and_epoch(
            build_batch([(None, b"a"), (None, b"b"), (None, b"c")], 0), 0, 3
        )
        super().__init__()

    def _answer(self, api: int, body: dict[str, Any]) -> dict[str, Any]:
        if api == ApiKey.OFFSET_FOR_LEADER_EPOCH:
            part = {"error_code": 0, "partition": 0, "leader_epoch": 3, "end_offset": 0}
            return {"throttle_time_ms": 0, "topics": [{"topic": "t", "partitions": [part]}]}
        self.fetches += 1
        error = self.fetch_errors.pop(0) if self.fetch_errors else ErrorCode.NONE
        offset = body["topics"][0]["partitions"][0]["fetch_offset"]
        records = self.records if error == ErrorCode.NONE and offset == 0 else b""
        part = {
            "partition_index": 0,
            "error_code": error,
            "high_watermark": 3 if error == ErrorCode.NONE else -1,
            "last_stable_offset": 3,
            "log_start_offset": 0,
            "aborted_transactions": [],
            "preferred_read_replica": -1,
            "records": records,
        }
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "session_id": 0,
            "responses": [{"topic": "t", "partitions": [part]}],
        }


def _read(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError
        data += chunk
    return data


@pytest.fixture
def follower(tmp_path: Path) -> Iterator[Partition]:
    p = Partition(TP, 2, replicas=(1, 2), leader=1, leader_epoch=3, isr=(1, 2))
    p.log = Log.open(tmp_path / "t-0", LogConfig())
    yield p
    p.log.close()


@pytest.mark.parametrize(
    "errors",
    [
        [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION],
        [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 2,
        [ErrorCode.UNKNOWN_LEADER_EPOCH],
    ],
)
def test_a_leader_not_ready_yet_is_asked_again(follower: Partition, errors: list[ErrorCode]) -> None:
    leader = ScriptedLeader(errors)
    changed = threading.Event()
    fetcher = ReplicaFetcher(
        1, ("127.0.0.1", leader.port), SETTINGS, lambda tp: changed.set(), lambda *a, **k: None
    )
    fetcher.start()
    try:
        fetcher.add(follower, 3)
        assert changed.wait(WAIT_S), "the follower never appended"
        assert follower.log is not None and follower.log.log_end_offset == 3
        assert leader.fetches >= len(errors) + 1
    finally:
        fetcher.shutdown()


def test_a_fenced_leader_epoch_waits_for_the_next_leader_and_isr(follower: Partition) -> None:
    leader = ScriptedLeader([ErrorCode.FENCED_LEADER_EPOCH])
    failed = threading.Event()
    fetcher = ReplicaFetcher(
        1,
        ("127.0.0.1", leader.port),
        SETTINGS,
        lambda tp: None,
        lambda kind, **k: failed.set() if kind == "fetch_partition_failed" else None,
    )
    fetcher.start()
    try:
        fetcher.add(follower, 3)
        assert failed.wait(WAIT_S)
        assert leader.fetches == 1 and follower.log is not None and follower.log.log_end_offset == 0
    finally:
        fetcher.shutdown()


# ---------------------------------------------------------------- divergent logs (KIP-101/279)


class LogLeader(FakeLeader):
    """A leader answering OffsetForLeaderEpoch and Fetch from a real log, as a broker's handlers do."""

    def __init__(self, log: Log, epoch: int) -> None:
        self.log, self.epoch = log, epoch
        self.asked: list[int] = []
        """The epochs the follower asked about, in order."""
        super().__init__()

    def _answer(self, api: int, body: dict[str, Any]) -> dict[str, Any]:
        asked = body["topics"][0]["partitions"][0]
        if api == ApiKey.OFFSET_FOR_LEADER_EPOCH:
            self.asked.append(asked["leader_epoch"])
            epoch, end = self.log.end_offset_for_epoch(asked["leader_epoch"])
            part = {"error_code": 0, "partition": 0, "leader_epoch": epoch, "end_offset": end}
            return {"throttle_time_ms": 0, "topics": [{"topic": "t", "partitions": [part]}]}
        end = self.log.log_end_offset
        part = {
            "partition_index": 0,
            "error_code": 0,
            "high_watermark": end,
            "last_stable_offset": end,
            "log_start_offset": 0,
            "aborted_transactions": [],
            "preferred_read_replica": -1,
            "records": self.log.read(asked["fetch_offset"], 1 << 20) if asked["fetch_offset"] < end else b"",
        }
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "session_id": 0,
            "responses": [{"topic": "t", "partitions": [part]}],
        }


def written(log: Log, epochs: list[tuple[int, int]]) -> Log:
    """``log`` after leaders of each (epoch, record count) appended in turn, one record per batch."""
    for epoch, count in epochs:
        for i in range(count):
            log.append_as_leader(build_batch([(None, f"{epoch}-{i}".encode())], 0), epoch)
    return log


def batches(log: Log) -> list[tuple[int, int, int]]:
    """(base offset, leader epoch, CRC) of every batch: what two replicas must agree on."""
    data = log.read(0, 1 << 24) if log.log_end_offset else b""
    return [(h.base_offset, h.partition_leader_epoch, h.crc) for h, _, _ in parse_batches(data)]


@pytest.mark.parametrize(
    ("leader_epochs", "follower_epochs", "asked"),
    [
        # The leader answers epoch 0, which the follower also has but ended at 3, not at its log end.
        ([(0, 5), (3, 1)], [(0, 3), (2, 2)], [2]),
        # The leader answers epoch 2, which the follower never had: truncate to the end of epoch 1 and
        # ask again with epoch 1, then agree on epoch 0.
        ([(0, 2), (2, 3), (4, 1)], [(0, 2), (1, 2), (3, 2)], [3, 1]),
    ],
    ids=["same-epoch-ended-early", "unknown-epoch-asks-again"],
)
def test_a_divergent_follower_ends_with_the_leaders_batches(
    tmp_path: Path,
    leader_epochs: list[tuple[int, int]],
    follower_epochs: list[tuple[int, int]],
    asked: list[int],
) -> None:
    latest = max(e for e, _ in leader_epochs) + 1
    leader_log = written(Log.open(tmp_path / "leader" / "t-0", LogConfig()), leader_epochs)
    leader_log.assign_epoch(latest, leader_log.log_end_offset)
    leader = LogLeader(leader_log, latest)
    p = Partition(TP, 2, replicas=(1, 2), leader=1, leader_epoch=latest, isr=(1, 2))
    p.log = written(Log.open(tmp_path / "follower" / "t-0", LogConfig()), follower_epochs)
    caught_up = threading.Event()

    def changed(tp: TopicPartition) -> None:
        assert p.log is not None
        if p.log.log_end_offset == leader_log.log_end_offset:
            caught_up.set()

    fetcher = ReplicaFetcher(1, ("127.0.0.1", leader.port), SETTINGS, changed, lambda *a, **k: None)
    fetcher.start()
    try:
        fetcher.add(p, latest)
        assert caught_up.wait(WAIT_S), "the follower never caught up"
        assert batches(p.log) == batches(leader_log)
        assert leader.asked == asked
    finally:
        fetcher.shutdown()
        p.log.close()
        leader_log.close()


@pytest.mark.parametrize(
    ("leader", "local", "log_end", "expected"),
    [
        ((5, 100), (5, 120), 120, Truncation(100, complete=True)),  # the leader's epoch ended earlier
        ((5, 100), (5, 80), 120, Truncation(80, complete=True)),  # ours ended earlier: we led epoch 6
        ((5, 100), (5, 120), 90, Truncation(90, complete=True)),  # nothing past our log end
        ((5, 100), (3, 70), 120, Truncation(70, complete=False)),  # we never had 5: back to 3, ask again
        ((5, 100), (-1, -1), 120, Truncation(100, complete=True)),  # no epoch <= 5 here
    ],
)
def test_truncation_point(
    leader: tuple[int, int], local: tuple[int, int], log_end: int, expected: Truncation
) -> None:
    assert truncation_point(*leader, local, log_end) == expected
