"""Registration, election and fenced writes against a real ZooKeeper (KIP-380, KAFKA-6082)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Iterator

import pytest
from kazoo.exceptions import BadVersionError, KazooException, NoNodeError

from tests.support.waiting import wait_until
from tests.support.zookeeper import expire_session, session
from zkstore.aio import ConnectionEvent
from zkstore.election import read_controller_epoch, resign, try_elect
from zkstore.fencing import IN_FLIGHT, ControllerMoved, FencedWriter
from zkstore.ops import Create, SetData
from zkstore.registration import BrokerIdInUse, register_broker
from zkstore.znodes import CONTROLLER

pytestmark = pytest.mark.zookeeper


# ---------------------------------------------------------------- the asyncio bridge


async def test_watch_events_arrive_on_the_loop_thread(zk_connect: str) -> None:
    zk = await session(zk_connect)
    try:
        await zk.create("/watched", b"a")
        seen: list[tuple[str, bool]] = []
        loop_thread = threading.get_ident()

        def on_change(event) -> None:
            seen.append((event.type, threading.get_ident() == loop_thread))

        await zk.get("/watched", watch=on_change)
        await zk.set("/watched", b"b")
        await wait_until(lambda: bool(seen), what="the data watch")
        assert seen == [("CHANGED", True)]
        with pytest.raises(NoNodeError):
            await zk.get("/missing")
    finally:
        await zk.close()


async def test_session_expiry_is_reported_as_an_event(zk_connect: str) -> None:
    zk = await session(zk_connect)
    events: list[ConnectionEvent] = []
    zk.on_connection_event(events.append)
    old_session = zk.session_id
    await expire_session(zk)
    with contextlib.suppress(KazooException):
        await zk.exists("/")  # contact the server so the client learns of the expiry
    try:
        await wait_until(lambda: ConnectionEvent.EXPIRED in events, what="the expiry event")
        await wait_until(
            lambda: zk.connected and zk.session_id not in (None, old_session), what="a new session"
        )
        assert events[-1] == ConnectionEvent.RECONNECTED
    finally:
        await zk.close()


async def test_multi_writes_land_under_the_chroot_whatever_the_paths_shape(zk_connect: str) -> None:
    """Normal paths skip kazoo's normalization (a controlled shutdown writes 100,000 of them); the
    others still go through it, and both end up under the session's chroot."""
    root = await session(zk_connect)
    await root.create("/rooted/a/b", b"", makepath=True)
    await root.create("/rooted/.hidden", b"")
    chrooted = await session(f"{zk_connect}/rooted")
    try:
        ops = [SetData("/a", b"1"), SetData("/a//b", b"2"), SetData("/.hidden", b"3")]
        assert all(not isinstance(r, Exception) for r in await chrooted.multi(ops))
        assert [(await root.get(p))[0] for p in ("/rooted/a", "/rooted/a/b", "/rooted/.hidden")] == [
            b"1",
            b"2",
            b"3",
        ]
    finally:
        await chrooted.close()
        await root.close()


# ---------------------------------------------------------------- registration (KIP-380)


async def test_registration_returns_the_czxid_as_broker_epoch(zk_connect: str) -> None:
    zk = await session(zk_connect)
    try:
        epoch = await register_broker(zk, 1, b'{"version":5}')
        data, stat = await zk.get("/brokers/ids/1")
        assert (data, stat.czxid, stat.ephemeralOwner) == (b'{"version":5}', epoch, zk.session_id)
        assert await register_broker(zk, 1, b'{"version":5}') == epoch  # same session: already registered
    finally:
        await zk.close()


async def test_a_second_live_session_cannot_take_the_broker_id(zk_connect: str) -> None:
    first, second = await session(zk_connect), await session(zk_connect)
    try:
        await register_broker(first, 2, b"{}")
        with pytest.raises(BrokerIdInUse, match=r"broker id 2 .* another live ZooKeeper session"):
            await register_broker(second, 2, b"{}")
    finally:
        await first.close()
        await second.close()


async def test_re_registration_waits_for_the_old_session_and_gets_a_higher_epoch(
    zk_connect: str, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = await session(zk_connect), await session(zk_connect)
    try:
        old_epoch = await register_broker(first, 3, b"{}")
        caplog.set_level(logging.INFO, logger="zkstore.registration")
        waiting = asyncio.create_task(register_broker(second, 3, b"{}", wait_for_owner_s=20))
        await wait_until(lambda: "waiting for it to expire" in caplog.text, what="the second broker to wait")
        await first.close()
        new_epoch = await asyncio.wait_for(waiting, 20)
        assert new_epoch > old_epoch
    finally:
        await second.close()


# ---------------------------------------------------------------- election and fencing (KAFKA-6082)


async def test_first_controller_gets_epoch_one_and_a_second_candidate_loses(zk_connect: str) -> None:
    a, b = await session(zk_connect), await session(zk_connect)
    try:
        token = await try_elect(a, 1, b'{"version":1,"brokerid":1}')
        assert token is not None and token.epoch == 1
        assert await read_controller_epoch(a) == (1, token.zk_version)
        assert await try_elect(b, 2, b'{"version":1,"brokerid":2}') is None
        assert await resign(a, token)
        token_b = await try_elect(b, 2, b'{"version":1,"brokerid":2}')
        assert token_b is not None and token_b.epoch == 2
        assert token_b.zk_version > token.zk_version
    finally:
        await a.close()
        await b.close()


async def test_a_deposed_controller_can_write_nothing(zk_connect: str) -> None:
    """A zombie: its session expired while it was paused and another controller took over."""
    a, b = await session(zk_connect), await session(zk_connect)
    try:
        await a.create("/brokers/topics/t/partitions/0/state", b"v0", makepath=True)
        token_a = await try_elect(a, 1, b"{}")
        assert token_a is not None
        writer_a = FencedWriter(a, token_a)
        assert not isinstance(
            (await writer_a.commit([SetData("/brokers/topics/t/partitions/0/state", b"a1")]))[0], Exception
        )
        await expire_session(a)
        # /controller goes with a's session; b wins once it is gone
        token_b = await wait_until(lambda: try_elect(b, 2, b"{}"), "b to win the election", interval=0.1)
        assert token_b is not None and token_b.epoch == token_a.epoch + 1
        await wait_until(lambda: a.connected, what="the zombie's new session")
        with pytest.raises(ControllerMoved):
            await writer_a.commit([SetData("/brokers/topics/t/partitions/0/state", b"zombie")])
        assert (await b.get("/brokers/topics/t/partitions/0/state"))[0] == b"a1"
        assert not await resign(a, token_a)
    finally:
        await a.close()
        await b.close()


async def test_large_batches_are_split_and_each_part_is_fenced(zk_connect: str) -> None:
    zk = await session(zk_connect)
    try:
        token = await try_elect(zk, 1, b"{}")
        assert token is not None
        writer = FencedWriter(zk, token, max_batch_ops=100)
        ops = [Create(f"/many/{i}", b"x" * 10) for i in range(250)]
        await zk.ensure_path("/many")
        assert len(writer.batches(ops)) == 3
        assert all(not isinstance(r, Exception) for r in await writer.commit(ops))
        assert len(await zk.get_children("/many")) == 250

        big = [Create(f"/big-{i}", b"y" * 100_000) for i in range(25)]
        assert len(FencedWriter(zk, token).batches(big)) == 3  # 2.5 MB cannot go in one request
        assert all(not isinstance(r, Exception) for r in await FencedWriter(zk, token).commit(big))
    finally:
        await zk.close()


async def test_data_writes_in_many_batches_go_in_flight_together_and_all_take(zk_connect: str) -> None:
    """SetData-only batches are pipelined (a controlled shutdown's new leaders); each keeps its fence."""
    zk, other = await session(zk_connect), await session(zk_connect)
    try:
        token = await try_elect(zk, 1, b"{}")
        assert token is not None
        for p in range(1000):
            await zk.create(f"/pipelined/{p}", b"v0", makepath=True)
        writer = FencedWriter(zk, token, max_batch_ops=100)
        ops = [SetData(f"/pipelined/{p}", b"v1", 0) for p in range(1000)]
        assert len(writer.batches(ops)) == 10
        results = await writer.commit(ops)
        assert [r.version for r in results] == [1] * 1000
        # another controller takes over: every batch fails its fence, and none is applied
        await other.set("/controller_epoch", b"99")
        with pytest.raises(ControllerMoved):
            await writer.commit([SetData(f"/pipelined/{p}", b"v2", 1) for p in range(1000)])
        assert {(await zk.get(f"/pipelined/{p}"))[0] for p in range(0, 1000, 97)} == {b"v1"}
    finally:
        await zk.close()
        await other.close()


async def test_a_stream_of_data_writes_is_sent_while_it_is_produced(zk_connect: str) -> None:
    """``commit_stream`` pulls the next ops only once earlier multi-ops are on their way, answers
    each multi-op as it comes (the caller works on those answers while the rest are in flight), and
    returns the results in the order of the ops, as ``commit`` does."""
    zk = await session(zk_connect)
    try:
        token = await try_elect(zk, 1, b"{}")
        assert token is not None
        for p in range(1000):
            await zk.create(f"/streamed/{p}", b"v0", makepath=True)
        await zk.set("/streamed/250", b"moved")
        writer = FencedWriter(zk, token, max_batch_ops=100)
        produced: list[int] = []
        answered: list[tuple[int, int, int]] = []

        def ops() -> Iterator[SetData]:
            for p in range(1000):
                produced.append(p)
                yield SetData(f"/streamed/{p}", b"v1", 0)

        def on_answer(offset: int, results: list[object]) -> None:
            answered.append((offset, len(results), len(produced)))

        results = await writer.commit_stream(ops(), on_answer)
        assert isinstance(results[250], BadVersionError)
        assert [r.version for i, r in enumerate(results) if i != 250] == [1] * 999
        assert sorted(a[:2] for a in answered) == [(offset, 100) for offset in range(0, 1000, 100)]
        # IN_FLIGHT multi-ops are sent, the next one is produced, and nothing more until an answer
        assert answered[0][2] <= (IN_FLIGHT + 1) * 100
        assert (await zk.get("/streamed/999"))[0] == b"v1"
    finally:
        await zk.close()


async def test_a_stream_that_is_fenced_off_raises_and_writes_nothing_more(zk_connect: str) -> None:
    zk, other = await session(zk_connect), await session(zk_connect)
    try:
        token = await try_elect(zk, 1, b"{}")
        assert token is not None
        for p in range(300):
            await zk.create(f"/fenced/{p}", b"v0", makepath=True)
        await other.set("/controller_epoch", b"99")
        writer = FencedWriter(zk, token, max_batch_ops=100)
        with pytest.raises(ControllerMoved):
            await writer.commit_stream(SetData(f"/fenced/{p}", b"v1", 0) for p in range(300))
        assert {(await zk.get(f"/fenced/{p}"))[0] for p in range(0, 300, 7)} == {b"v0"}
    finally:
        await zk.close()
        await other.close()


async def test_a_stream_with_creates_commits_them_in_order(zk_connect: str) -> None:
    """From the first multi-op with a create on, a stream's multi-ops go one after another: a child
    is created only after the multi-op that creates its parent has been answered."""
    zk = await session(zk_connect)
    try:
        token = await try_elect(zk, 1, b"{}")
        assert token is not None
        writer = FencedWriter(zk, token, max_batch_ops=2)
        ops = [Create("/ordered"), Create("/ordered/a"), Create("/ordered/a/b"), Create("/ordered/a/b/c")]
        results = await writer.commit_stream(iter(ops))
        assert results == ["/ordered", "/ordered/a", "/ordered/a/b", "/ordered/a/b/c"]
    finally:
        await zk.close()


async def test_one_stale_compare_and_set_does_not_roll_back_the_rest(zk_connect: str) -> None:
    zk = await session(zk_connect)
    try:
        token = await try_elect(zk, 1, b"{}")
        assert token is not None
        for p in range(5):
            await zk.create(f"/state/{p}", b"v0", makepath=True)
        await zk.set("/state/2", b"moved")  # someone else's write: /state/2 is now at version 1
        ops = [SetData(f"/state/{p}", b"v1", 0) for p in range(5)]
        results = await FencedWriter(zk, token).commit(ops)
        assert isinstance(results[2], BadVersionError)
        assert [r.version for i, r in enumerate(results) if i != 2] == [1, 1, 1, 1]
        assert [(await zk.get(f"/state/{p}"))[0] for p in range(5)] == [b"v1", b"v1", b"moved", b"v1", b"v1"]
    finally:
        await zk.close()


async def test_the_controller_znode_is_ephemeral(zk_connect: str) -> None:
    a, b = await session(zk_connect), await session(zk_connect)
    try:
        assert await try_elect(a, 1, b"{}")
        await a.close()
        assert await b.exists(CONTROLLER) is None
    finally:
        await b.close()
