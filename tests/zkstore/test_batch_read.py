"""Batched reads against a real ZooKeeper: multi-read results must be exactly what single gets return.

Every comparison is with ``zk.get``/``zk.get_children`` on the same session, so the tests pin the
wire format (data, Stat, child lists, per-op errors) and the chroot handling at once.
"""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError, UnimplementedError

from zkserver.server import ZooKeeperServer
from zkstore import batch_read
from zkstore.aio import AsyncZooKeeper
from zkstore.batch_read import (
    GET_CHILDREN,
    GET_DATA,
    MultiRead,
    ReadOp,
    get_children_many,
    get_data_many,
    multi_read_supported,
    server_path,
)
from zkstore.ops import Create, SetData

TOPICS = 40
PARTITIONS = 50  # 40 x 50 = 2,000 partition-state znodes
UNKNOWN_OPCODE = 99  # what a ZooKeeper without multi-read makes of opcode 22


@pytest.fixture
async def zk(zk_connect: str) -> AsyncIterator[AsyncZooKeeper]:
    client = AsyncZooKeeper(zk_connect)
    await client.start()
    try:
        yield client
    finally:
        await client.close()


def state_path(topic: int, partition: int) -> str:
    return f"/brokers/topics/topic-{topic}/partitions/{partition}/state"


def payload(topic: int, partition: int) -> bytes:
    """Partition-state-like JSON whose length varies with the partition (0 bytes for some)."""
    if partition % 17 == 0:
        return b""
    isr = ",".join(str(b) for b in range(partition % 5 + 1))
    return f'{{"controller_epoch":1,"leader":{topic},"leader_epoch":{partition},"isr":[{isr}]}}'.encode()


async def populate(zk: AsyncZooKeeper, topics: int = TOPICS, partitions: int = PARTITIONS) -> list[str]:
    """The Kafka layout, written in 500-op multis; a few znodes rewritten so versions differ."""
    ops = [Create("/brokers"), Create("/brokers/topics")]
    paths: list[str] = []
    for t in range(topics):
        ops += [Create(f"/brokers/topics/topic-{t}", b'{"version":1}')]
        ops += [Create(f"/brokers/topics/topic-{t}/partitions")]
        for p in range(partitions):
            ops += [Create(f"/brokers/topics/topic-{t}/partitions/{p}")]
            ops += [Create(state_path(t, p), payload(t, p))]
            paths.append(state_path(t, p))
    ops += [SetData(path, b"rewritten") for path in paths[::97]]
    for i in range(0, len(ops), 500):
        results = await zk.multi(ops[i : i + 500])
        assert not any(isinstance(r, Exception) for r in results)
    return paths


async def single_gets(zk: AsyncZooKeeper, paths: Sequence[str], children: bool = False) -> list[Any]:
    """The reference: one plain request per path, failures as values."""
    out: list[Any] = []
    for path in paths:
        try:
            out.append(await (zk.get_children(path) if children else zk.get(path)))
        except NoNodeError as exc:
            out.append(exc)
    return out


def assert_same(actual: Sequence[Any], expected: Sequence[Any]) -> None:
    """Equal slot by slot; exceptions compare by type (kazoo's carry no arguments)."""
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected, strict=True):
        if isinstance(want, Exception):
            assert type(got) is type(want)
        else:
            assert got == want


async def test_multi_read_request_wire_format(zk: AsyncZooKeeper) -> None:
    """The raw request: mixed op kinds, per-op errors, null data, in request order."""
    await zk.create("/a", b"hello")
    await zk.create("/a/b")
    await zk.create("/a/c")
    zk.client.create("/nulldata", None)  # kazoo's create sends a null buffer for None
    root = zk.client.chroot
    ops = [
        ReadOp(GET_DATA, root + "/a"),
        ReadOp(GET_DATA, root + "/missing"),
        ReadOp(GET_CHILDREN, root + "/a"),
        ReadOp(GET_CHILDREN, root + "/missing"),
        ReadOp(GET_DATA, root + "/nulldata"),
    ]
    results = await zk.call(MultiRead(ops))
    assert results[0] == await zk.get("/a")
    assert isinstance(results[1], NoNodeError)
    assert sorted(results[2]) == ["b", "c"]
    assert isinstance(results[3], NoNodeError)
    assert results[4] == await zk.get("/nulldata")
    assert results[4][0] is None
    assert await zk.call(MultiRead([])) == []
    with pytest.raises(ValueError, match="only GetData and GetChildren"):
        MultiRead([ReadOp(3, "/a")])


async def test_get_data_many_matches_single_gets(zk: AsyncZooKeeper) -> None:
    paths = await populate(zk)
    shuffled = random.Random(7).sample(paths, len(paths)) + paths[:5]  # order and duplicates kept
    expected = await single_gets(zk, shuffled)
    # Small batches so the 2,000 reads make many multi-reads, several in flight.
    got = await get_data_many(zk, shuffled, batch_ops=97, max_in_flight=3, use_multi_read=True)
    assert_same(got, expected)
    assert await get_data_many(zk, shuffled) == got  # the defaults, in auto mode
    assert multi_read_supported(zk) is True
    assert got[0][1].dataLength == len(got[0][0])
    assert await get_data_many(zk, []) == []


async def test_missing_znodes_fill_their_slots(zk: AsyncZooKeeper) -> None:
    paths = await populate(zk, topics=3, partitions=10)
    mixed: list[str] = []
    for i, path in enumerate(paths):
        mixed.append(path)
        if i % 4 == 0:
            mixed += [path + "-gone", f"/no/such/parent/{i}"]
    got = await get_data_many(zk, mixed, batch_ops=16, use_multi_read=True)
    for path, result in zip(mixed, got, strict=True):
        if path in paths:
            assert result == await zk.get(path)
        else:
            assert isinstance(result, NoNodeError), path


async def test_chroot_and_path_normalisation(zk: AsyncZooKeeper, zk_server: ZooKeeperServer) -> None:
    await zk.create("/x/y", b"inside", makepath=True)
    chroot = zk.client.chroot
    assert chroot.startswith("/test-")
    spellings = ["/x/y", "x/y", "//x//y", "/x/y/", "/", "/x"]
    got = await get_data_many(zk, spellings, use_multi_read=True)
    assert got == [await zk.get(path) for path in spellings]
    assert server_path(chroot, "x//y/") == chroot + "/x/y"
    assert server_path("", "/") == "/"
    with pytest.raises(ValueError):
        server_path(chroot, "/x/../y")
    with pytest.raises(TypeError):
        await get_data_many(zk, [b"/x"])  # type: ignore[list-item]
    # The same znode seen without the chroot: same Stat, so the chroot was really applied.
    outside = AsyncZooKeeper(zk_server.connect_string)
    await outside.start()
    try:
        [(data, stat)] = await get_data_many(outside, [chroot + "/x/y"], use_multi_read=True)
    finally:
        await outside.close()
    assert (data, stat) == got[0]


async def test_get_children_many(zk: AsyncZooKeeper) -> None:
    await populate(zk, topics=30, partitions=7)
    topics = await zk.get_children("/brokers/topics")
    paths = [f"/brokers/topics/{t}/partitions" for t in topics] + ["/brokers/topics/nope/partitions"]
    paths += ["/brokers/topics", "/"]
    expected = await single_gets(zk, paths, children=True)
    got = await get_children_many(zk, paths, batch_ops=8, use_multi_read=True)
    assert_same(got, expected)
    assert sorted(got[0], key=int) == [str(p) for p in range(7)]
    assert isinstance(got[len(topics)], NoNodeError)
    assert_same(await get_children_many(zk, paths, use_multi_read=False), expected)


async def test_responses_over_a_megabyte_are_split(
    zk: AsyncZooKeeper, caplog: pytest.LogCaptureFixture
) -> None:
    """40 x 100 KB (4 MB in all) with the size hint: every response stays within the budget."""
    big = [bytes([i]) * 100_000 for i in range(40)]
    ops = [Create("/big")] + [Create(f"/big/{i}", data) for i, data in enumerate(big)]
    for i in range(0, len(ops), 8):  # a multi request is itself capped by jute.maxbuffer
        await zk.multi(ops[i : i + 8])
    paths = [f"/big/{i}" for i in range(40)]
    with caplog.at_level(logging.DEBUG, logger="zkstore.batch_read"):
        got = await get_data_many(zk, paths, expected_data_bytes=100_000, use_multi_read=True)
    assert [data for data, _ in got] == big
    sizes = [record.args[1] for record in caplog.records if record.msg.startswith("multi-read of")]
    assert len(sizes) >= 8
    assert max(sizes) <= batch_read.MAX_RESPONSE_BYTES
    # Without the hint the first batch holds all 40 (4 MB): kazoo, unlike the Java client, takes it.
    assert await get_data_many(zk, paths, use_multi_read=True) == got


async def test_fallback_gives_identical_results(zk: AsyncZooKeeper) -> None:
    paths = await populate(zk, topics=10, partitions=20)
    paths = [*paths, "/nope", "/brokers/topics/topic-1/partitions/999/state"]
    multi = await get_data_many(zk, paths, use_multi_read=True)
    single = await get_data_many(zk, paths, use_multi_read=False, fallback_in_flight=7)
    assert_same(single, multi)
    assert multi_read_supported(zk) is None  # forced modes teach the session nothing


async def test_server_without_multi_read_is_detected_once(
    zk: AsyncZooKeeper, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An unknown opcode gets what a pre-3.6 server gives opcode 22: UnimplementedError, then a drop."""
    paths = await populate(zk, topics=4, partitions=25)
    paths.append("/nope")
    expected = await get_data_many(zk, paths, use_multi_read=True)
    monkeypatch.setattr(MultiRead, "type", UNKNOWN_OPCODE)
    with pytest.raises(UnimplementedError):
        await get_data_many(zk, paths, use_multi_read=True)
    with caplog.at_level(logging.INFO, logger="zkstore.batch_read"):
        assert_same(await get_data_many(zk, paths, batch_ops=10), expected)
        assert multi_read_supported(zk) is False
        assert_same(await get_data_many(zk, paths, batch_ops=10), expected)  # no new attempt
        children = await get_children_many(zk, ["/brokers/topics", "/nope"])
    assert sorted(children[0]) == sorted(f"topic-{t}" for t in range(4))
    assert isinstance(children[1], NoNodeError)
    notices = [r for r in caplog.records if r.levelno == logging.INFO and r.name == "zkstore.batch_read"]
    assert len(notices) == 1
    assert "UnimplementedError" in notices[0].getMessage()


async def test_server_losing_multi_read_mid_call(zk: AsyncZooKeeper, monkeypatch: pytest.MonkeyPatch) -> None:
    """Several multi-reads in flight when the server turns out to lack it (a rolling downgrade): the
    first gets UnimplementedError, the rest die with the connection, and all are re-read."""
    paths = await populate(zk, topics=4, partitions=25)
    expected = await get_data_many(zk, paths)
    assert multi_read_supported(zk) is True
    monkeypatch.setattr(MultiRead, "type", UNKNOWN_OPCODE)
    assert_same(await get_data_many(zk, paths, batch_ops=10, max_in_flight=4), expected)
    assert multi_read_supported(zk) is False


def test_multi_read_from_a_sync_client_too(zk_client: KazooClient) -> None:
    """MultiRead is an ordinary kazoo request object: plain ``client._call`` works as well."""
    zk_client.create("/s", b"sync")
    result = zk_client.handler.async_result()
    zk_client._call(MultiRead([ReadOp(GET_DATA, zk_client.chroot + "/s")]), result)
    assert result.get(timeout=10) == [zk_client.get("/s")]
