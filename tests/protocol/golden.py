"""Golden bytes for the control-plane codec, written by hand: the primitive encoders and fixed values.

Every expected byte string in the golden tests is derived by hand from Apache Kafka's message specs
(``reference/kafka-messages/*.json``), section 7 of ``reference/kafka-zk-control-plane.md`` and
seed 002 -- never by calling the codec.  Two styles are used:

* a few messages are written out completely as commented hex (``hx``), size prefix included
  (:mod:`tests.protocol.golden_hex`);
* the rest are built field by field with the tiny primitive helpers below, in spec order
  (:mod:`tests.protocol.golden_control`, :mod:`tests.protocol.golden_broker`).

The hex goldens double as a check of the helpers (``test_helpers_agree_with_hand_written_hex``).

API keys: LeaderAndIsr 4, StopReplica 5, UpdateMetadata 6, ControlledShutdown 7, AlterPartition 56.
Non-flexible versions: request header v1 / response header v0, int16-length strings, int32-count arrays.
Flexible (AlterPartition, all versions, and the versions Kafka 3.9 sends, in
:mod:`tests.protocol.golden_kafka39`): request header v2 / response header v1, compact strings and
arrays (unsigned varint length+1) and a tagged-field section (0x00 when empty) after every struct.
The data-plane goldens (``test_golden_data_plane*.py``) write whole frames in hex with ``hex_frame``.
"""

from __future__ import annotations

import struct
import uuid

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN, ALTER_PARTITION = 4, 5, 6, 7, 56
PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, OFFSET_FOR_LEADER_EPOCH = 0, 1, 2, 3, 18, 23

# --------------------------------------------------------------------------------------------------------
# Primitive encoders (one per wire type; messages below are spelled out field by field with these)
# --------------------------------------------------------------------------------------------------------


def hx(*parts: str) -> bytes:
    """Hand-written hex, spaces allowed."""
    return bytes.fromhex("".join(parts))


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def boolean(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


def s(text: str) -> bytes:
    """Non-flexible STRING: int16 byte length + UTF-8."""
    raw = text.encode("utf-8")
    return i16(len(raw)) + raw


def ns(text: str | None) -> bytes:
    """Non-flexible NULLABLE_STRING: -1 length for None."""
    return i16(-1) if text is None else s(text)


def arr(items: list[bytes]) -> bytes:
    """Non-flexible ARRAY of already-encoded elements: int32 count."""
    return i32(len(items)) + b"".join(items)


def i32s(values: list[int]) -> bytes:
    """Non-flexible []int32."""
    return arr([i32(v) for v in values])


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def cs(text: str) -> bytes:
    """COMPACT_STRING: uvarint(byte length + 1) + UTF-8."""
    raw = text.encode("utf-8")
    return uvarint(len(raw) + 1) + raw


def carr(items: list[bytes]) -> bytes:
    """COMPACT_ARRAY: uvarint(count + 1)."""
    return uvarint(len(items) + 1) + b"".join(items)


def ci32s(values: list[int]) -> bytes:
    return carr([i32(v) for v in values])


def uid(u: uuid.UUID) -> bytes:
    return u.bytes  # 16 raw bytes: most significant 64 bits first, big-endian


TAGS = b"\x00"  # empty tagged-field section


def frame(payload: bytes) -> bytes:
    return i32(len(payload)) + payload


def hex_frame(*parts: str) -> bytes:
    """A whole frame written in hex (``hx``) but for its size prefix, which is computed."""
    return frame(hx(*parts))


def req_header_v1(api_key: int, version: int, correlation_id: int, client_id: str | None) -> bytes:
    return i16(api_key) + i16(version) + i32(correlation_id) + ns(client_id)


def req_header_v2(api_key: int, version: int, correlation_id: int, client_id: str | None) -> bytes:
    # client_id stays an int16-length nullable string in header v2; then the header's tagged fields.
    return req_header_v1(api_key, version, correlation_id, client_id) + TAGS


def resp_header_v0(correlation_id: int) -> bytes:
    return i32(correlation_id)


def resp_header_v1(correlation_id: int) -> bytes:
    return i32(correlation_id) + TAGS


FLEXIBLE_APIS = {ALTER_PARTITION}


def request_frame(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: bytes
) -> bytes:
    hdr = req_header_v2 if api_key in FLEXIBLE_APIS else req_header_v1
    return frame(hdr(api_key, version, correlation_id, client_id) + body)


def response_frame(api_key: int, correlation_id: int, body: bytes) -> bytes:
    hdr = resp_header_v1 if api_key in FLEXIBLE_APIS else resp_header_v0
    return frame(hdr(correlation_id) + body)


def flexible_request_frame(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: bytes
) -> bytes:
    """A request frame of any flexible version: request header v2, then ``body``."""
    return frame(req_header_v2(api_key, version, correlation_id, client_id) + body)


def flexible_response_frame(correlation_id: int, body: bytes) -> bytes:
    """A response frame of any flexible version: response header v1, then ``body``."""
    return frame(resp_header_v1(correlation_id) + body)


def cns(text: str | None) -> bytes:
    """COMPACT_NULLABLE_STRING: 0 for null."""
    return b"\x00" if text is None else cs(text)


def norm(x):
    """Make bools distinguishable from ints (True == 1) and lists from tuples irrelevant."""
    if isinstance(x, dict):
        return {k: norm(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [norm(v) for v in x]
    if isinstance(x, bool):
        return ("bool", x)
    return x


# --------------------------------------------------------------------------------------------------------
# Fixed values
# --------------------------------------------------------------------------------------------------------

TOPIC_UTF8 = "tëst-主题"  # t ë(c3ab) s t - 主(e4b8bb) 题(e9a298) -> 12 bytes, 8 characters
assert len(TOPIC_UTF8.encode()) == 12
LONG_TOPIC = "a" * 200  # compact length 201 -> uvarint c9 01
TID1 = uuid.UUID("0123456789abcdef0123456789abcdef")
TID2 = uuid.UUID("fedcba98-7654-3210-8000-00000000ffff")
ORDERS = "0006 6f7264657273"  # "orders": int16 length 6, then ASCII (data-plane goldens)
BLOB = bytes(range(0x10, 0x1A))  # 10 opaque bytes standing for record batches
BLOB_HEX = "0000000a 10111213141516171819"  # int32 length 10, then the bytes
