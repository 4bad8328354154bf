"""The group coordinator's decisions (Kafka's classic protocol) over an in-memory offsets log.

The coordinator runs on the test's event loop exactly as on a broker's; only the log is a fake that
keeps what was appended (and can fail appends), so every record it writes can be loaded back.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from broker.group.config import GroupConfig
from broker.group.coordinator import GroupCoordinator
from broker.group.loader import LoadedPartition, load_batches
from broker.group.messages import JoinRequest, JoinResult
from broker.group.metadata_manager import Records
from broker.group.state import GroupState
from daemon.eventlog import EventLog
from protocol import ErrorCode
from protocol.consumer_offsets import OffsetCommitRecord, decode_key
from protocol.record_batch import build_batch
from tests.support.waiting import wait_until
from zkstore.znodes import TopicPartition

GROUP = "payments"
FAST = GroupConfig(
    offsets_topic_num_partitions=1,
    group_initial_rebalance_delay_ms=50,
    group_min_session_timeout_ms=10,
)


class MemoryOffsetsLog:
    def __init__(self) -> None:
        self.records: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.fail_with = ErrorCode.NONE

    async def append(self, partition: int, records: Records, *, replicated: bool) -> ErrorCode:
        await asyncio.sleep(0)
        if self.fail_with:
            return self.fail_with
        self.records.setdefault(partition, []).extend(records)
        return ErrorCode.NONE

    async def load(self, partition: int) -> LoadedPartition:
        return load_batches(
            [build_batch(self.records.get(partition, []))] if self.records.get(partition) else []
        )


async def started(log: MemoryOffsetsLog, tmp_path, config: GroupConfig = FAST) -> GroupCoordinator:
    coordinator = GroupCoordinator(1, config, log, EventLog(tmp_path / "events.jsonl", "broker-1"))
    coordinator.bind(asyncio.get_running_loop())
    coordinator.on_election(0, 0)
    await wait_until(lambda: 0 in coordinator.owned, "the offsets partition loaded")
    return coordinator


def join(member_id: str = "", *, client: str = "c", instance: str | None = None, session_ms: int = 10_000,
         protocols: list[tuple[str, bytes]] | None = None) -> JoinRequest:  # fmt: skip
    return JoinRequest(
        group_id=GROUP,
        member_id=member_id,
        group_instance_id=instance,
        client_id=client,
        client_host="/127.0.0.1",
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=2_000,
        protocol_type="consumer",
        protocols=protocols or [("range", b"sub-" + client.encode())],
        require_known_member_id=True,
    )


async def join_new(coordinator: GroupCoordinator, request: JoinRequest) -> asyncio.Task[JoinResult]:
    """KIP-394's two steps: MEMBER_ID_REQUIRED with an id, then the join with it (left parked)."""
    first = await coordinator.join_group(request)
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED and first.member_id.startswith(
        request.group_instance_id or request.client_id
    )
    return asyncio.create_task(coordinator.join_group(replace(request, member_id=first.member_id)))


async def form_group(coordinator: GroupCoordinator, clients: list[str]) -> list[JoinResult]:
    tasks = [await join_new(coordinator, join(client=c)) for c in clients]
    async with asyncio.timeout(5):
        results = await asyncio.gather(*tasks)
    leader = next(r for r in results if r.member_id == r.leader)
    sync = [
        coordinator.sync_group(
            GROUP,
            r.generation,
            r.member_id,
            None,
            "consumer",
            r.protocol,
            {m: f"assign-{m}".encode() for m, _, _ in leader.members} if r is leader else {},
        )
        for r in results
    ]
    async with asyncio.timeout(5):
        synced = await asyncio.gather(*sync)
    assert [s.error for s in synced] == [ErrorCode.NONE] * len(clients)
    assert [s.assignment for s in synced] == [f"assign-{r.member_id}".encode() for r in results]
    return results


async def test_three_members_form_one_generation_with_one_leader(tmp_path) -> None:
    log = MemoryOffsetsLog()
    coordinator = await started(log, tmp_path)
    results = await form_group(coordinator, ["a", "b", "c"])
    assert {r.generation for r in results} == {1}
    assert {r.protocol for r in results} == {"range"}
    leaders = [r for r in results if r.member_id == r.leader]
    assert len(leaders) == 1 and len(leaders[0].members) == 3
    assert all(not r.members for r in results if r is not leaders[0])
    group = coordinator.groups[GROUP]
    assert group.state is GroupState.STABLE
    # the assignment was written as a group record (key v2) before anyone got it
    assert [decode_key(k).topic for k, _ in log.records[0]] == [None]


async def test_a_member_leaving_triggers_a_rebalance_the_others_complete(tmp_path) -> None:
    coordinator = await started(MemoryOffsetsLog(), tmp_path)
    a, b, c = await form_group(coordinator, ["a", "b", "c"])
    top, errors = await coordinator.leave_group(GROUP, [(c.member_id, None)])
    assert (top, errors) == (ErrorCode.NONE, [ErrorCode.NONE])
    assert coordinator.groups[GROUP].state is GroupState.PREPARING_REBALANCE
    assert await coordinator.heartbeat(GROUP, 1, a.member_id, None) == ErrorCode.REBALANCE_IN_PROGRESS
    async with asyncio.timeout(5):
        rejoined = await asyncio.gather(
            coordinator.join_group(join(a.member_id, client="a")),
            coordinator.join_group(join(b.member_id, client="b")),
        )
    assert [r.generation for r in rejoined] == [2, 2]
    assert sum(len(r.members) for r in rejoined) == 2
    assert await coordinator.heartbeat(GROUP, 1, a.member_id, None) == ErrorCode.ILLEGAL_GENERATION


async def test_a_member_that_stops_heartbeating_is_removed_after_its_session(tmp_path) -> None:
    coordinator = await started(MemoryOffsetsLog(), tmp_path)
    tasks = [await join_new(coordinator, join(client=c, session_ms=300)) for c in ("a", "b")]
    a, b = await asyncio.gather(*tasks)
    for r in (a, b):
        assert (
            await coordinator.sync_group(GROUP, 1, r.member_id, None, None, None, {})
        ).error == ErrorCode.NONE

    async def b_expired() -> bool:
        heartbeat = await coordinator.heartbeat(GROUP, 1, a.member_id, None)
        assert heartbeat in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS)
        return b.member_id not in coordinator.groups[GROUP].members

    await wait_until(b_expired, "b removed after its session", interval=0.05)
    assert a.member_id in coordinator.groups[GROUP].members


async def test_offsets_are_committed_to_the_log_and_fetched_back(tmp_path) -> None:
    log = MemoryOffsetsLog()
    coordinator = await started(log, tmp_path)
    (only,) = await form_group(coordinator, ["a"])
    tp = TopicPartition("orders", 2)
    errors = await coordinator.commit_offsets(
        GROUP, only.generation, only.member_id, None, {tp: OffsetCommitRecord(17, "meta", 1)}
    )
    assert errors == {tp: ErrorCode.NONE}
    error, fetched = await coordinator.fetch_offsets(GROUP, [tp, TopicPartition("orders", 3)])
    assert error == ErrorCode.NONE
    assert (fetched[tp].offset, fetched[tp].metadata) == (17, "meta")
    assert fetched[TopicPartition("orders", 3)].offset == -1
    # generation and membership are checked
    stale = await coordinator.commit_offsets(
        GROUP, 0, only.member_id, None, {tp: OffsetCommitRecord(1, "", 1)}
    )
    assert stale == {tp: ErrorCode.ILLEGAL_GENERATION}
    stranger = await coordinator.commit_offsets(GROUP, 1, "nobody", None, {tp: OffsetCommitRecord(1, "", 1)})
    assert stranger == {tp: ErrorCode.UNKNOWN_MEMBER_ID}
    assert (await coordinator.fetch_offsets(GROUP, [tp]))[1][tp].offset == 17


async def test_a_failed_append_is_translated_and_nothing_is_cached(tmp_path) -> None:
    log = MemoryOffsetsLog()
    coordinator = await started(log, tmp_path)
    tp = TopicPartition("orders", 0)
    log.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    errors = await coordinator.commit_offsets(GROUP, -1, "", None, {tp: OffsetCommitRecord(5, "", 1)})
    assert errors == {tp: ErrorCode.NOT_COORDINATOR}
    assert (await coordinator.fetch_offsets(GROUP, [tp]))[1][tp].offset == -1


async def test_a_new_leader_loads_groups_and_offsets_from_the_log(tmp_path) -> None:
    log = MemoryOffsetsLog()
    first = await started(log, tmp_path)
    a, b = await form_group(first, ["a", "b"])
    tp = TopicPartition("orders", 0)
    await first.commit_offsets(GROUP, 1, a.member_id, None, {tp: OffsetCommitRecord(3, "", 1)})
    await first.commit_offsets(GROUP, 1, b.member_id, None, {tp: OffsetCommitRecord(9, "", 2)})
    second = await started(log, tmp_path / "other")
    group = second.groups[GROUP]
    assert (group.state, group.generation, set(group.members)) == (
        GroupState.STABLE,
        1,
        {a.member_id, b.member_id},
    )
    assert (await second.fetch_offsets(GROUP, [tp]))[1][tp].offset == 9  # the latest commit wins
    # members keep their generation across the failover: a heartbeat is just accepted
    assert await second.heartbeat(GROUP, 1, a.member_id, None) == ErrorCode.NONE


async def test_resigning_answers_parked_joins_with_not_coordinator(tmp_path) -> None:
    coordinator = await started(
        MemoryOffsetsLog(), tmp_path, replace(FAST, group_initial_rebalance_delay_ms=5_000)
    )
    parked = await join_new(coordinator, join(client="a"))
    await wait_until(
        lambda: coordinator.groups[GROUP].awaiting_join_count() == 1, "the join parked", timeout=5
    )
    coordinator.on_resignation(0, 1)
    async with asyncio.timeout(5):
        result = await parked
    assert result.error == ErrorCode.NOT_COORDINATOR
    assert await coordinator.heartbeat(GROUP, 1, result.member_id, None) == ErrorCode.NOT_COORDINATOR


async def test_requests_while_loading_and_for_other_partitions(tmp_path) -> None:
    log = MemoryOffsetsLog()
    coordinator = GroupCoordinator(
        1, replace(FAST, offsets_topic_num_partitions=2), log, EventLog(tmp_path / "e.jsonl", "broker-1")
    )
    coordinator.bind(asyncio.get_running_loop())
    load_started, loading = asyncio.Event(), asyncio.Event()

    async def slow_load(partition: int) -> LoadedPartition:
        load_started.set()
        await loading.wait()
        return LoadedPartition()

    log.load = slow_load  # type: ignore[method-assign]
    mine = coordinator.partition_of(GROUP)
    coordinator.on_election(mine, 0)
    async with asyncio.timeout(5):
        await load_started.wait()
    assert (await coordinator.join_group(join())).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert (
        await coordinator.sync_group(GROUP, 1, "m", None, None, None, {})
    ).error == ErrorCode.REBALANCE_IN_PROGRESS
    other = next(g for g in (f"g{i}" for i in range(100)) if coordinator.partition_of(g) != mine)
    assert (await coordinator.join_group(replace(join(), group_id=other))).error == ErrorCode.NOT_COORDINATOR
    loading.set()
    await wait_until(lambda: mine in coordinator.owned, "the offsets partition loaded")
    assert (await coordinator.join_group(join())).error == ErrorCode.MEMBER_ID_REQUIRED


async def test_a_static_member_rejoining_with_the_same_protocols_causes_no_rebalance(tmp_path) -> None:
    coordinator = await started(MemoryOffsetsLog(), tmp_path)
    request = join(client="a", instance="host-1")
    first = await coordinator.join_group(request)  # static members get their id at once
    assert first.error == ErrorCode.NONE and first.member_id.startswith("host-1-")
    assert (
        await coordinator.sync_group(GROUP, 1, first.member_id, "host-1", None, None, {first.member_id: b"x"})
    ).assignment == b"x"
    again = await coordinator.join_group(request)
    assert again.error == ErrorCode.NONE and again.generation == 1 and again.member_id != first.member_id
    assert coordinator.groups[GROUP].state is GroupState.STABLE
    assert await coordinator.heartbeat(GROUP, 1, first.member_id, "host-1") == ErrorCode.FENCED_INSTANCE_ID
    assert await coordinator.heartbeat(GROUP, 1, again.member_id, "host-1") == ErrorCode.NONE


async def test_delete_groups_only_removes_empty_groups(tmp_path) -> None:
    log = MemoryOffsetsLog()
    coordinator = await started(log, tmp_path)
    (member,) = await form_group(coordinator, ["a"])
    assert await coordinator.delete_groups([GROUP, "unknown"]) == {
        GROUP: ErrorCode.NON_EMPTY_GROUP,
        "unknown": ErrorCode.GROUP_ID_NOT_FOUND,
    }
    await coordinator.leave_group(GROUP, [(member.member_id, None)])
    await wait_until(lambda: coordinator.groups[GROUP].state is GroupState.EMPTY, "the group empty")
    assert await coordinator.delete_groups([GROUP]) == {GROUP: ErrorCode.NONE}
    await wait_until(lambda: any(v is None for _, v in log.records[0]), "the tombstones written", timeout=5)
    assert log.records[0][-1][1] is None  # a tombstone for the group record


@pytest.mark.parametrize("session_ms", [5, 10_000_000])
async def test_session_timeouts_outside_the_broker_bounds_are_refused(tmp_path, session_ms: int) -> None:
    coordinator = await started(MemoryOffsetsLog(), tmp_path)
    assert (
        await coordinator.join_group(join(session_ms=session_ms))
    ).error == ErrorCode.INVALID_SESSION_TIMEOUT
