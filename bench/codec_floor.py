"""The codec benchmark's floor: hand-written ``struct`` loops for exactly the messages bench.codec times.

Each encoder writes one layout and version (UpdateMetadata v5, whose layout the seed's v7 shares with
``max_broker_epoch`` for ``broker_epoch``, and LeaderAndIsr v2) with precompiled ``struct.Struct``
packs, one per partition state, appended to one ``bytearray`` (a list of small ``bytes`` joined at
the end measured 1.6x slower here); each decoder reads the bytes back with an ``unpack_from`` loop
into the same dicts the codec returns. They check nothing (no types, no counts, no bounds): that is
what makes them a floor, the cost of the wire work alone, which the generated fast path is measured
against. Decoders pause the cyclic collector as ``MessageCodec.decode_from`` does, so both are timed
alike.
"""

from __future__ import annotations

import functools
import gc
import struct
from collections.abc import Callable
from typing import Any, NamedTuple, ParamSpec

from protocol import ApiKey

Body = dict[str, Any]
P = ParamSpec("P")

_HEADER = struct.Struct(">iiqi")  # controller_id, controller_epoch, epoch, topic count
_PARTITION_HEAD_N = struct.Struct(">iiiii")  # index, controller epoch, leader, leader epoch, ISR count
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I32_I32 = struct.Struct(">ii")
_I32_I16 = struct.Struct(">ih")
_BOOL = struct.Struct(">?")


_SMALL_ARRAY = 64
_ITEMS = [struct.Struct(f">{n}i") for n in range(_SMALL_ARRAY)]
"""``_ITEMS[n]`` unpacks ``n`` int32s; a list index is the cheapest lookup there is."""


def _int32s(n: int) -> struct.Struct:
    """``n`` int32s, for the arrays longer than ``_ITEMS`` holds."""
    return struct.Struct(f">{n}i")


class _PartitionStructs(dict[tuple[int, ...], struct.Struct]):
    """Array counts -> the ``struct.Struct`` of a whole partition state with arrays that long, built on
    first use from ``layout`` (its ``{}`` are the counts): one pack per partition."""

    def __init__(self, layout: str) -> None:
        super().__init__()
        self.layout = layout

    def __missing__(self, counts: tuple[int, ...]) -> struct.Struct:
        packer = self[counts] = struct.Struct(self.layout.format(*counts))
        return packer


_UPDATE_METADATA_PARTITIONS = _PartitionStructs(">4i i{}i i i{}i i{}i")
"""Four int32s, the ISR (count, items), zk_version, replicas, offline_replicas."""
_LEADER_AND_ISR_PARTITIONS = _PartitionStructs(">4i i{}i i i{}i ?")
"""Four int32s, the ISR (count, items), partition_epoch, replicas, is_new."""


def _gc_paused(decode: Callable[P, Body]) -> Callable[P, Body]:
    """``decode`` with the cyclic collector off while it runs (its hundreds of thousands of dicts and
    lists hold no cycle), as ``MessageCodec.decode_from`` does for big bodies."""

    @functools.wraps(decode)
    def paused(*args: P.args, **kwargs: P.kwargs) -> Body:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return decode(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return paused


# ---------------------------------------------------------------- UpdateMetadata v5 (and the seed's v7)


def encode_update_metadata(body: Body, epoch_key: str) -> bytes:
    topics = body["topic_states"]
    out = bytearray(
        _HEADER.pack(body["controller_id"], body["controller_epoch"], body[epoch_key], len(topics))
    )
    partitions, i16, i32 = _UPDATE_METADATA_PARTITIONS, _I16.pack, _I32.pack
    for topic in topics:
        name = topic["topic_name"].encode()
        states = topic["partition_states"]
        out += i16(len(name))
        out += name
        out += i32(len(states))
        for p in states:
            isr, replicas, offline = p["isr"], p["replicas"], p["offline_replicas"]
            n_isr, n_replicas, n_offline = len(isr), len(replicas), len(offline)
            out += partitions[n_isr, n_replicas, n_offline].pack(
                p["partition_index"], p["controller_epoch"], p["leader"], p["leader_epoch"],
                n_isr, *isr, p["zk_version"], n_replicas, *replicas, n_offline, *offline,
            )  # fmt: skip
    brokers = body["live_brokers"]
    out += i32(len(brokers))
    for broker in brokers:
        endpoints = broker["endpoints"]
        out += _I32_I32.pack(broker["id"], len(endpoints))
        for endpoint in endpoints:
            host = endpoint["host"].encode()
            listener = endpoint["listener"].encode()
            out += _I32_I16.pack(endpoint["port"], len(host))
            out += host
            out += i16(len(listener))
            out += listener
            out += i16(endpoint["security_protocol"])
        rack = broker["rack"]
        if rack is None:
            out += i16(-1)
        else:
            raw = rack.encode()
            out += i16(len(raw))
            out += raw
    return bytes(out)


@_gc_paused
def decode_update_metadata(data: bytes, epoch_key: str) -> Body:
    b = data
    controller_id, controller_epoch, epoch, topic_count = _HEADER.unpack_from(b, 0)
    o = 20
    head, i32, i32_i32, i16, items = (
        _PARTITION_HEAD_N.unpack_from,
        _I32.unpack_from,
        _I32_I32.unpack_from,
        _I16.unpack_from,
        _ITEMS,
    )
    topics = []
    for _ in range(topic_count):
        (n,) = i16(b, o)
        o += 2
        name = b[o : o + n].decode()
        o += n
        (count,) = i32(b, o)
        o += 4
        states: list[Body] = []
        append = states.append
        for _ in range(count):
            index, p_controller_epoch, leader, leader_epoch, n = head(b, o)
            o += 20
            isr = list((items[n] if n < _SMALL_ARRAY else _int32s(n)).unpack_from(b, o))
            o += 4 * n
            zk_version, n = i32_i32(b, o)
            o += 8
            replicas = list((items[n] if n < _SMALL_ARRAY else _int32s(n)).unpack_from(b, o))
            o += 4 * n
            (n,) = i32(b, o)
            o += 4
            offline = list((items[n] if n < _SMALL_ARRAY else _int32s(n)).unpack_from(b, o))
            o += 4 * n
            append(
                {
                    "partition_index": index,
                    "controller_epoch": p_controller_epoch,
                    "leader": leader,
                    "leader_epoch": leader_epoch,
                    "isr": isr,
                    "zk_version": zk_version,
                    "replicas": replicas,
                    "offline_replicas": offline,
                }
            )
        topics.append({"topic_name": name, "partition_states": states})
    brokers, o = _decode_live_brokers(b, o)
    return {
        "controller_id": controller_id,
        "controller_epoch": controller_epoch,
        epoch_key: epoch,
        "topic_states": topics,
        "live_brokers": brokers,
    }


def _read_string(b: bytes, o: int) -> tuple[str | None, int]:
    (n,) = _I16.unpack_from(b, o)
    o += 2
    if n < 0:
        return None, o
    return b[o : o + n].decode(), o + n


def _decode_live_brokers(b: bytes, o: int) -> tuple[list[Body], int]:
    (count,) = _I32.unpack_from(b, o)
    o += 4
    brokers = []
    for _ in range(count):
        broker_id, endpoint_count = _I32_I32.unpack_from(b, o)
        o += 8
        endpoints = []
        for _ in range(endpoint_count):
            port, n = _I32_I16.unpack_from(b, o)
            o += 6
            host = b[o : o + n].decode()
            o += n
            listener, o = _read_string(b, o)
            (security_protocol,) = _I16.unpack_from(b, o)
            o += 2
            endpoints.append(
                {"port": port, "host": host, "listener": listener, "security_protocol": security_protocol}
            )
        rack, o = _read_string(b, o)
        brokers.append({"id": broker_id, "endpoints": endpoints, "rack": rack})
    return brokers, o


# ---------------------------------------------------------------- LeaderAndIsr v2


def encode_leader_and_isr(body: Body) -> bytes:
    topics = body["topic_states"]
    out = bytearray(
        _HEADER.pack(body["controller_id"], body["controller_epoch"], body["broker_epoch"], len(topics))
    )
    partitions, i16, i32 = _LEADER_AND_ISR_PARTITIONS, _I16.pack, _I32.pack
    for topic in topics:
        name = topic["topic_name"].encode()
        states = topic["partition_states"]
        out += i16(len(name))
        out += name
        out += i32(len(states))
        for p in states:
            isr, replicas = p["isr"], p["replicas"]
            n_isr, n_replicas = len(isr), len(replicas)
            out += partitions[n_isr, n_replicas].pack(
                p["partition_index"], p["controller_epoch"], p["leader"], p["leader_epoch"],
                n_isr, *isr, p["partition_epoch"], n_replicas, *replicas, p["is_new"],
            )  # fmt: skip
    leaders = body["live_leaders"]
    out += i32(len(leaders))
    for leader in leaders:
        host = leader["host_name"].encode()
        out += _I32_I16.pack(leader["broker_id"], len(host))
        out += host
        out += i32(leader["port"])
    return bytes(out)


@_gc_paused
def decode_leader_and_isr(data: bytes) -> Body:
    b = data
    controller_id, controller_epoch, broker_epoch, topic_count = _HEADER.unpack_from(b, 0)
    o = 20
    head, i32, i32_i32, i16, flag, items = (
        _PARTITION_HEAD_N.unpack_from,
        _I32.unpack_from,
        _I32_I32.unpack_from,
        _I16.unpack_from,
        _BOOL.unpack_from,
        _ITEMS,
    )
    topics = []
    for _ in range(topic_count):
        (n,) = i16(b, o)
        o += 2
        name = b[o : o + n].decode()
        o += n
        (count,) = i32(b, o)
        o += 4
        states: list[Body] = []
        append = states.append
        for _ in range(count):
            index, p_controller_epoch, leader, leader_epoch, n = head(b, o)
            o += 20
            isr = list((items[n] if n < _SMALL_ARRAY else _int32s(n)).unpack_from(b, o))
            o += 4 * n
            partition_epoch, n = i32_i32(b, o)
            o += 8
            replicas = list((items[n] if n < _SMALL_ARRAY else _int32s(n)).unpack_from(b, o))
            o += 4 * n
            (is_new,) = flag(b, o)
            o += 1
            append(
                {
                    "partition_index": index,
                    "controller_epoch": p_controller_epoch,
                    "leader": leader,
                    "leader_epoch": leader_epoch,
                    "isr": isr,
                    "partition_epoch": partition_epoch,
                    "replicas": replicas,
                    "is_new": is_new,
                }
            )
        topics.append({"topic_name": name, "partition_states": states})
    (count,) = i32(b, o)
    o += 4
    leaders = []
    for _ in range(count):
        broker_id, n = _I32_I16.unpack_from(b, o)
        o += 6
        host = b[o : o + n].decode()
        o += n
        (port,) = i32(b, o)
        o += 4
        leaders.append({"broker_id": broker_id, "host_name": host, "port": port})
    return {
        "controller_id": controller_id,
        "controller_epoch": controller_epoch,
        "broker_epoch": broker_epoch,
        "topic_states": topics,
        "live_leaders": leaders,
    }


class Floor(NamedTuple):
    """One message's hand-written encoder and decoder."""

    encode: Callable[[Body], bytes]
    decode: Callable[[bytes], Body]


FLOORS: dict[tuple[int, int], Floor] = {
    (ApiKey.UPDATE_METADATA, 5): Floor(
        functools.partial(encode_update_metadata, epoch_key="broker_epoch"),
        functools.partial(decode_update_metadata, epoch_key="broker_epoch"),
    ),
    (ApiKey.UPDATE_METADATA, 7): Floor(
        functools.partial(encode_update_metadata, epoch_key="max_broker_epoch"),
        functools.partial(decode_update_metadata, epoch_key="max_broker_epoch"),
    ),
    (ApiKey.LEADER_AND_ISR, 2): Floor(encode_leader_and_isr, decode_leader_and_isr),
}
"""(API key, version in the default SEED dialect) -> its floor: the messages bench.codec times."""
