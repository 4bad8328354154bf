"""Golden-byte tests for the control-plane codec.

Every expected byte string here is derived by hand from Apache Kafka's message specs
(``reference/kafka-messages/*.json``), section 7 of ``reference/kafka-zk-control-plane.md`` and
seed 002 -- never by calling the codec.  Two styles are used:

* a few messages are written out completely as commented hex (``hx``), size prefix included;
* the rest are built field by field with the tiny primitive helpers below, in spec order.

The hex goldens double as a check of the helpers (``test_helpers_agree_with_hand_written_hex``).

API keys: LeaderAndIsr 4, StopReplica 5, UpdateMetadata 6, ControlledShutdown 7, AlterPartition 56.
Non-flexible versions: request header v1 / response header v0, int16-length strings, int32-count arrays.
Flexible (AlterPartition, all versions): request header v2 / response header v1, compact strings and
arrays (unsigned varint length+1) and an empty tagged-field section (0x00) after every struct.
"""

import struct
import uuid

import pytest

import protocol

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN, ALTER_PARTITION = 4, 5, 6, 7, 56

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


# --------------------------------------------------------------------------------------------------------
# LeaderAndIsr v2 / seed v5
#   controller_id i32, controller_epoch i32, broker_epoch|max_broker_epoch i64,
#   topic_states [topic_name str, partition_states [partition_index i32, controller_epoch i32, leader i32,
#                 leader_epoch i32, isr [i32], partition_epoch i32, replicas [i32], is_new bool]],
#   live_leaders [broker_id i32, host_name str, port i32]
# Response v2 (= seed v5): error_code i16,
#   partition_errors [topic_name str, partition_index i32, error_code i16]
# --------------------------------------------------------------------------------------------------------


def lai_partition(index, cepoch, leader, lepoch, isr, pepoch, replicas, is_new):
    d = {
        "partition_index": index,
        "controller_epoch": cepoch,
        "leader": leader,
        "leader_epoch": lepoch,
        "isr": isr,
        "partition_epoch": pepoch,
        "replicas": replicas,
        "is_new": is_new,
    }
    b = i32(index) + i32(cepoch) + i32(leader) + i32(lepoch) + i32s(isr) + i32(pepoch) + i32s(replicas)
    return d, b + boolean(is_new)


def lai_request(epoch_key, controller_id, controller_epoch, epoch, topics, leaders):
    """topics: [(name, [lai_partition(...)])], leaders: [(broker_id, host, port)]"""
    body = {
        "controller_id": controller_id,
        "controller_epoch": controller_epoch,
        epoch_key: epoch,
        "topic_states": [
            {"topic_name": name, "partition_states": [d for d, _ in parts]} for name, parts in topics
        ],
        "live_leaders": [{"broker_id": b, "host_name": h, "port": p} for b, h, p in leaders],
    }
    raw = (
        i32(controller_id)
        + i32(controller_epoch)
        + i64(epoch)
        + arr([s(name) + arr([b for _, b in parts]) for name, parts in topics])
        + arr([i32(b) + s(h) + i32(p) for b, h, p in leaders])
    )
    return body, raw


def lai_request_cases(version, epoch_key):
    tag = f"lai-v{version}"
    return [
        pytest.param(
            LEADER_AND_ISR, version, 0, None, *lai_request(epoch_key, 1, 2, 3, [], []), id=f"{tag}-empty"
        ),
        pytest.param(
            LEADER_AND_ISR,
            version,
            2**31 - 1,
            "controller-0",
            *lai_request(
                epoch_key,
                0,
                17,
                -1,  # "unknown" epoch: ff ff ff ff ff ff ff ff
                [
                    (
                        "orders",
                        [
                            lai_partition(0, 17, 1, 4, [1, 2], 9, [1, 2, 3], False),
                            lai_partition(1, 16, -1, 0, [], 0, [3], True),
                        ],
                    ),
                    (TOPIC_UTF8, [lai_partition(2**31 - 1, 1, 2, 3, [2], 2**31 - 1, [2, 1], True)]),
                ],
                [(1, "broker-1.example", 9092), (3, "10.0.0.3", 19093)],
            ),
            id=f"{tag}-two-topics-utf8",
        ),
        pytest.param(
            LEADER_AND_ISR,
            version,
            -5,
            "",
            *lai_request(epoch_key, -1, 0, 2**63 - 1, [("empty-parts", [])], [(7, "", 0)]),
            id=f"{tag}-topic-without-partitions",
        ),
    ]


def lai_response(errors, error_code=0):
    body = {
        "error_code": error_code,
        "partition_errors": [{"topic_name": t, "partition_index": p, "error_code": e} for t, p, e in errors],
    }
    return body, i16(error_code) + arr([s(t) + i32(p) + i16(e) for t, p, e in errors])


def lai_response_cases(version):
    tag = f"lai-v{version}-resp"
    return [
        pytest.param(LEADER_AND_ISR, version, 0, *lai_response([]), id=f"{tag}-empty"),
        pytest.param(
            LEADER_AND_ISR,
            version,
            77,
            *lai_response([("orders", 0, 0), ("orders", 1, 6), (TOPIC_UTF8, 3, -1)]),
            id=f"{tag}-three",
        ),
        pytest.param(LEADER_AND_ISR, version, -1, *lai_response([], error_code=77), id=f"{tag}-stale-epoch"),
    ]


# --------------------------------------------------------------------------------------------------------
# UpdateMetadata v5 / seed v7
#   controller_id i32, controller_epoch i32, broker_epoch|max_broker_epoch i64,
#   topic_states [topic_name str, partition_states [partition_index i32, controller_epoch i32, leader i32,
#                 leader_epoch i32, isr [i32], zk_version i32, replicas [i32], offline_replicas [i32]]],
#   live_brokers [id i32, endpoints [port i32, host str, listener str, security_protocol i16], rack str?]
# Response: error_code i16
# --------------------------------------------------------------------------------------------------------


def um_partition(index, cepoch, leader, lepoch, isr, zk_version, replicas, offline):
    d = {
        "partition_index": index,
        "controller_epoch": cepoch,
        "leader": leader,
        "leader_epoch": lepoch,
        "isr": isr,
        "zk_version": zk_version,
        "replicas": replicas,
        "offline_replicas": offline,
    }
    b = i32(index) + i32(cepoch) + i32(leader) + i32(lepoch) + i32s(isr) + i32(zk_version) + i32s(replicas)
    return d, b + i32s(offline)


def um_broker(broker_id, endpoints, rack):
    """endpoints: [(port, host, listener, security_protocol)]"""
    d = {
        "id": broker_id,
        "endpoints": [
            {"port": p, "host": h, "listener": ln, "security_protocol": sp} for p, h, ln, sp in endpoints
        ],
        "rack": rack,
    }
    b = i32(broker_id) + arr([i32(p) + s(h) + s(ln) + i16(sp) for p, h, ln, sp in endpoints]) + ns(rack)
    return d, b


def um_request(epoch_key, controller_id, controller_epoch, epoch, topics, brokers):
    body = {
        "controller_id": controller_id,
        "controller_epoch": controller_epoch,
        epoch_key: epoch,
        "topic_states": [
            {"topic_name": name, "partition_states": [d for d, _ in parts]} for name, parts in topics
        ],
        "live_brokers": [d for d, _ in brokers],
    }
    raw = (
        i32(controller_id)
        + i32(controller_epoch)
        + i64(epoch)
        + arr([s(name) + arr([b for _, b in parts]) for name, parts in topics])
        + arr([b for _, b in brokers])
    )
    return body, raw


def um_request_cases(version, epoch_key):
    tag = f"um-v{version}"
    return [
        pytest.param(
            UPDATE_METADATA, version, 1, None, *um_request(epoch_key, 0, 1, 0, [], []), id=f"{tag}-empty"
        ),
        pytest.param(
            UPDATE_METADATA,
            version,
            99,
            "c",
            *um_request(
                epoch_key,
                2,
                8,
                0x0123456789ABCDEF,
                [
                    (
                        "orders",
                        [
                            um_partition(0, 8, 1, 3, [1, 2], 5, [1, 2, 3], [3]),
                            um_partition(1, 7, -1, 2, [], 0, [2, 3], []),
                        ],
                    ),
                    (TOPIC_UTF8, [um_partition(0, 8, 2, 0, [2], 1, [2], [])]),
                ],
                [
                    um_broker(1, [(9092, "b1", "PLAINTEXT", 0), (9093, "b1", "CONTROLLER", 1)], "rack-a"),
                    um_broker(2, [(9092, "b2", "PLAINTEXT", 0)], None),  # null rack: ff ff
                    um_broker(3, [], ""),  # empty (not null) rack: 00 00
                ],
            ),
            id=f"{tag}-two-topics-null-rack",
        ),
    ]


def um_response_cases(version):
    tag = f"um-v{version}-resp"
    return [
        pytest.param(UPDATE_METADATA, version, 5, {"error_code": 0}, i16(0), id=f"{tag}-ok"),
        pytest.param(UPDATE_METADATA, version, 6, {"error_code": 77}, i16(77), id=f"{tag}-stale"),
        pytest.param(UPDATE_METADATA, version, 7, {"error_code": -1}, i16(-1), id=f"{tag}-unknown"),
    ]


# --------------------------------------------------------------------------------------------------------
# StopReplica v1 / seed v4
#   controller_id i32, controller_epoch i32, broker_epoch|max_broker_epoch i64, delete_partitions bool,
#   topics [name str, partition_indexes [i32]]
# Response v1 (= seed v4): error_code i16,
#   partition_errors [topic_name str, partition_index i32, error_code i16]
# --------------------------------------------------------------------------------------------------------


def sr_request(epoch_key, controller_id, controller_epoch, epoch, delete, topics):
    body = {
        "controller_id": controller_id,
        "controller_epoch": controller_epoch,
        epoch_key: epoch,
        "delete_partitions": delete,
        "topics": [{"name": n, "partition_indexes": ps} for n, ps in topics],
    }
    raw = (
        i32(controller_id)
        + i32(controller_epoch)
        + i64(epoch)
        + boolean(delete)
        + arr([s(n) + i32s(ps) for n, ps in topics])
    )
    return body, raw


def sr_request_cases(version, epoch_key):
    tag = f"sr-v{version}"
    return [
        pytest.param(
            STOP_REPLICA, version, 0, None, *sr_request(epoch_key, 0, 0, 0, False, []), id=f"{tag}-empty"
        ),
        pytest.param(
            STOP_REPLICA,
            version,
            12,
            "ctl",
            *sr_request(epoch_key, 1, 3, 4294967296, True, [("orders", [0, 1, 2]), (TOPIC_UTF8, [])]),
            id=f"{tag}-delete-two-topics",
        ),
        pytest.param(
            STOP_REPLICA,
            version,
            13,
            "ctl",
            *sr_request(epoch_key, 1, 3, -1, False, [("x", [7])]),
            id=f"{tag}-no-delete",
        ),
    ]


def sr_response(errors, error_code=0):
    body = {
        "error_code": error_code,
        "partition_errors": [{"topic_name": t, "partition_index": p, "error_code": e} for t, p, e in errors],
    }
    return body, i16(error_code) + arr([s(t) + i32(p) + i16(e) for t, p, e in errors])


def sr_response_cases(version):
    tag = f"sr-v{version}-resp"
    return [
        pytest.param(STOP_REPLICA, version, 0, *sr_response([]), id=f"{tag}-empty"),
        pytest.param(
            STOP_REPLICA, version, 3, *sr_response([("orders", 0, 0), (TOPIC_UTF8, 1, 3)]), id=f"{tag}-two"
        ),
        pytest.param(STOP_REPLICA, version, 4, *sr_response([], error_code=11), id=f"{tag}-stale-controller"),
    ]


# --------------------------------------------------------------------------------------------------------
# ControlledShutdown v2: broker_id i32, broker_epoch i64
# Response: error_code i16, remaining_partitions [topic_name str, partition_index i32]
# --------------------------------------------------------------------------------------------------------


def cs_response(error_code, remaining):
    body = {
        "error_code": error_code,
        "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining],
    }
    return body, i16(error_code) + arr([s(t) + i32(p) for t, p in remaining])


CS_REQUEST_CASES = [
    pytest.param(
        CONTROLLED_SHUTDOWN,
        2,
        1,
        "broker-3",
        {"broker_id": 3, "broker_epoch": 4294967338},
        i32(3) + i64(4294967338),
        id="cs-v2-basic",
    ),
    pytest.param(
        CONTROLLED_SHUTDOWN,
        2,
        -1,
        None,
        {"broker_id": -1, "broker_epoch": -1},
        i32(-1) + i64(-1),
        id="cs-v2-minus-one",
    ),
]

CS_RESPONSE_CASES = [
    pytest.param(CONTROLLED_SHUTDOWN, 2, 1, *cs_response(0, []), id="cs-v2-resp-done"),
    pytest.param(
        CONTROLLED_SHUTDOWN,
        2,
        2,
        *cs_response(0, [("orders", 0), (TOPIC_UTF8, 5)]),
        id="cs-v2-resp-remaining",
    ),
    pytest.param(CONTROLLED_SHUTDOWN, 2, 3, *cs_response(77, []), id="cs-v2-resp-stale"),
]


# --------------------------------------------------------------------------------------------------------
# AlterPartition v0-v2 (flexible)
#   broker_id i32, broker_epoch i64,
#   topics [topic_name cstr (v0-1) | topic_id uuid (v2),
#           partitions [partition_index i32, leader_epoch i32, new_isr [i32], leader_recovery_state i8 (v1+),
#                       partition_epoch i32, TAGS], TAGS], TAGS
# Response: throttle_time_ms i32, error_code i16,
#   topics [topic_name | topic_id, partitions [partition_index i32, error_code i16, leader_id i32,
#           leader_epoch i32, isr [i32], leader_recovery_state i8 (v1+), partition_epoch i32, TAGS],
#    TAGS], TAGS
# --------------------------------------------------------------------------------------------------------


def ap_topic_key(version, topic):
    if version >= 2:
        return {"topic_id": topic}, uid(topic)
    return {"topic_name": topic}, cs(topic)


def ap_request(version, broker_id, broker_epoch, topics):
    """topics: [(name_or_id, [(partition_index, leader_epoch, new_isr, lrs, partition_epoch)])]"""
    body_topics, raw_topics = [], []
    for topic, parts in topics:
        kd, kb = ap_topic_key(version, topic)
        dparts, bparts = [], []
        for index, lepoch, isr, lrs, pepoch in parts:
            d = {"partition_index": index, "leader_epoch": lepoch, "new_isr": isr}
            b = i32(index) + i32(lepoch) + ci32s(isr)
            if version >= 1:
                d["leader_recovery_state"] = lrs
                b += i8(lrs)
            d["partition_epoch"] = pepoch
            dparts.append(d)
            bparts.append(b + i32(pepoch) + TAGS)
        body_topics.append({**kd, "partitions": dparts})
        raw_topics.append(kb + carr(bparts) + TAGS)
    body = {"broker_id": broker_id, "broker_epoch": broker_epoch, "topics": body_topics}
    return body, i32(broker_id) + i64(broker_epoch) + carr(raw_topics) + TAGS


def ap_response(version, throttle, error_code, topics):
    """topics: [(name_or_id, [(partition_index, error_code, leader_id, leader_epoch, isr, lrs, pepoch)])]"""
    body_topics, raw_topics = [], []
    for topic, parts in topics:
        kd, kb = ap_topic_key(version, topic)
        dparts, bparts = [], []
        for index, err, leader, lepoch, isr, lrs, pepoch in parts:
            d = {
                "partition_index": index,
                "error_code": err,
                "leader_id": leader,
                "leader_epoch": lepoch,
                "isr": isr,
            }
            b = i32(index) + i16(err) + i32(leader) + i32(lepoch) + ci32s(isr)
            if version >= 1:
                d["leader_recovery_state"] = lrs
                b += i8(lrs)
            d["partition_epoch"] = pepoch
            dparts.append(d)
            bparts.append(b + i32(pepoch) + TAGS)
        body_topics.append({**kd, "partitions": dparts})
        raw_topics.append(kb + carr(bparts) + TAGS)
    body = {"throttle_time_ms": throttle, "error_code": error_code, "topics": body_topics}
    return body, i32(throttle) + i16(error_code) + carr(raw_topics) + TAGS


def ap_request_cases(version):
    tag = f"ap-v{version}"
    t1, t2 = (TID1, TID2) if version >= 2 else ("orders", TOPIC_UTF8)
    return [
        pytest.param(ALTER_PARTITION, version, 0, None, *ap_request(version, 1, 2, []), id=f"{tag}-empty"),
        pytest.param(
            ALTER_PARTITION,
            version,
            31,
            "broker-1",
            *ap_request(
                version,
                1,
                4294967296,
                [(t1, [(0, 5, [1, 2], 0, 10), (3, 2, [], 1, 0)]), (t2, [(1, 0, [1], 1, -1)])],
            ),
            id=f"{tag}-two-topics",
        ),
        pytest.param(
            ALTER_PARTITION,
            version,
            32,
            "",
            # 127 ISR entries -> compact count 128 -> uvarint 80 01
            *ap_request(version, 2, -1, [(t1, [(0, 1, list(range(127)), 0, 3)]), (t2, [])]),
            id=f"{tag}-long-isr-empty-partitions",
        ),
    ]


def ap_response_cases(version):
    tag = f"ap-v{version}-resp"
    t1, t2 = (TID1, TID2) if version >= 2 else ("orders", TOPIC_UTF8)
    err = 107 if version >= 2 else 55
    return [
        pytest.param(ALTER_PARTITION, version, 0, *ap_response(version, 0, 0, []), id=f"{tag}-empty"),
        pytest.param(
            ALTER_PARTITION,
            version,
            44,
            *ap_response(
                version,
                100,
                0,
                [(t1, [(0, 0, 1, 6, [1, 2, 3], 0, 11), (1, err, -1, -1, [], 1, -1)]), (t2, [])],
            ),
            id=f"{tag}-two-topics",
        ),
        pytest.param(
            ALTER_PARTITION, version, 45, *ap_response(version, 0, 41, []), id=f"{tag}-top-level-error"
        ),
    ]


# A 200-byte topic name needs a two-byte varint length (only named-topic versions).
LONG_NAME_CASES = [
    pytest.param(
        ALTER_PARTITION,
        v,
        46,
        None,
        *ap_request(v, 1, 1, [(LONG_TOPIC, [(0, 0, [1], 0, 0)])]),
        id=f"ap-v{v}-200-byte-topic-name",
    )
    for v in (0, 1)
]

REQUEST_CASES = [
    *lai_request_cases(2, "broker_epoch"),
    *lai_request_cases(5, "max_broker_epoch"),
    *um_request_cases(5, "broker_epoch"),
    *um_request_cases(7, "max_broker_epoch"),
    *sr_request_cases(1, "broker_epoch"),
    *sr_request_cases(4, "max_broker_epoch"),
    *CS_REQUEST_CASES,
    *ap_request_cases(0),
    *ap_request_cases(1),
    *ap_request_cases(2),
    *LONG_NAME_CASES,
]

RESPONSE_CASES = [
    *lai_response_cases(2),
    *lai_response_cases(5),
    *um_response_cases(5),
    *um_response_cases(7),
    *sr_response_cases(1),
    *sr_response_cases(4),
    *CS_RESPONSE_CASES,
    *ap_response_cases(0),
    *ap_response_cases(1),
    *ap_response_cases(2),
]


# --------------------------------------------------------------------------------------------------------
# Completely hand-written hex goldens (also used to check the helpers above)
# --------------------------------------------------------------------------------------------------------

HEX_LAI_V2 = hx(
    "0000006d",  # size = 109
    "0004",  # api_key 4 (LeaderAndIsr)
    "0002",  # api_version 2
    "0000002a",  # correlation_id 42
    "0003 63746c",  # client_id "ctl"
    "00000001",  # controller_id 1
    "00000005",  # controller_epoch 5
    "0000000100000000",  # broker_epoch 2**32
    "00000001",  # topic_states: 1
    "0005 74c3ab7374",  # topic_name "tëst" (5 UTF-8 bytes)
    "00000001",  # partition_states: 1
    "00000000",  # partition_index 0
    "00000005",  # controller_epoch 5
    "00000002",  # leader 2
    "00000007",  # leader_epoch 7
    "00000002 00000002 00000003",  # isr [2, 3]
    "00000009",  # partition_epoch 9
    "00000003 00000002 00000003 00000004",  # replicas [2, 3, 4]
    "01",  # is_new true
    "00000001",  # live_leaders: 1
    "00000002",  # broker_id 2
    "0002 6832",  # host_name "h2"
    "00002384",  # port 9092
)
HEX_LAI_V2_BODY = {
    "controller_id": 1,
    "controller_epoch": 5,
    "broker_epoch": 2**32,
    "topic_states": [
        {
            "topic_name": "tëst",
            "partition_states": [
                {
                    "partition_index": 0,
                    "controller_epoch": 5,
                    "leader": 2,
                    "leader_epoch": 7,
                    "isr": [2, 3],
                    "partition_epoch": 9,
                    "replicas": [2, 3, 4],
                    "is_new": True,
                }
            ],
        }
    ],
    "live_leaders": [{"broker_id": 2, "host_name": "h2", "port": 9092}],
}

HEX_UM_V7 = hx(
    "00000040",  # size = 64
    "0006 0007 00000003",  # UpdateMetadata, v7 (seed), correlation_id 3
    "ffff",  # client_id null
    "00000000",  # controller_id 0
    "00000001",  # controller_epoch 1
    "00000000000000ff",  # max_broker_epoch 255
    "00000000",  # topic_states: 0
    "00000001",  # live_brokers: 1
    "00000004",  # id 4
    "00000001",  # endpoints: 1
    "0000238c",  # port 9100
    "0001 68",  # host "h"
    "0009 504c41494e54455854",  # listener "PLAINTEXT"
    "0000",  # security_protocol 0
    "ffff",  # rack null
)
HEX_UM_V7_BODY = {
    "controller_id": 0,
    "controller_epoch": 1,
    "max_broker_epoch": 255,
    "topic_states": [],
    "live_brokers": [
        {
            "id": 4,
            "endpoints": [{"port": 9100, "host": "h", "listener": "PLAINTEXT", "security_protocol": 0}],
            "rack": None,
        }
    ],
}

HEX_SR_V4 = hx(
    "0000002e",  # size = 46
    "0005 0004 00000009",  # StopReplica, v4 (seed), correlation_id 9
    "0000",  # client_id ""
    "00000001 00000002",  # controller_id 1, controller_epoch 2
    "fffffffffffffffe",  # max_broker_epoch -2
    "01",  # delete_partitions true
    "00000001",  # topics: 1
    "0001 74",  # name "t"
    "00000002 00000000 00000001",  # partition_indexes [0, 1]
)
HEX_SR_V4_BODY = {
    "controller_id": 1,
    "controller_epoch": 2,
    "max_broker_epoch": -2,
    "delete_partitions": True,
    "topics": [{"name": "t", "partition_indexes": [0, 1]}],
}

HEX_CS_V2 = hx(
    "00000018",  # size = 24
    "0007 0002 00000001",  # ControlledShutdown, v2, correlation_id 1
    "0002 6231",  # client_id "b1"
    "00000001",  # broker_id 1
    "0000000000000100",  # broker_epoch 256
)

HEX_CS_V2_RESP = hx(
    "00000013",  # size = 19
    "00000001",  # correlation_id 1 (response header v0: nothing else)
    "0000",  # error_code 0
    "00000001",  # remaining_partitions: 1
    "0003 666f6f",  # topic_name "foo"
    "00000002",  # partition_index 2
)

HEX_AP_V0 = hx(
    "00000039",  # size = 57
    "0038 0000 00000001",  # AlterPartition (56), v0, correlation_id 1
    "ffff",  # client_id null (int16 length even in header v2)
    "00",  # header tagged fields
    "00000003",  # broker_id 3
    "0000000000000064",  # broker_epoch 100
    "02",  # topics: compact count 1+1
    "04 666f6f",  # topic_name compact "foo"
    "02",  # partitions: 1
    "00000000",  # partition_index 0
    "00000004",  # leader_epoch 4
    "04 00000001 00000002 00000003",  # new_isr [1, 2, 3]
    "00000006",  # partition_epoch 6
    "00",  # partition tagged fields
    "00",  # topic tagged fields
    "00",  # top-level tagged fields
)
HEX_AP_V0_BODY = {
    "broker_id": 3,
    "broker_epoch": 100,
    "topics": [
        {
            "topic_name": "foo",
            "partitions": [
                {"partition_index": 0, "leader_epoch": 4, "new_isr": [1, 2, 3], "partition_epoch": 6}
            ],
        }
    ],
}

HEX_AP_V1_RESP = hx(
    "00000030",  # size = 48
    "00000007",  # correlation_id 7
    "00",  # response header v1 tagged fields
    "00000000",  # throttle_time_ms 0
    "0000",  # error_code 0
    "02",  # topics: 1
    "04 666f6f",  # topic_name "foo"
    "02",  # partitions: 1
    "00000000",  # partition_index 0
    "0000",  # error_code 0
    "00000003",  # leader_id 3
    "00000004",  # leader_epoch 4
    "03 00000003 00000001",  # isr [3, 1]
    "01",  # leader_recovery_state 1 (RECOVERING)
    "00000007",  # partition_epoch 7
    "00 00 00",  # tagged fields: partition, topic, top level
)
HEX_AP_V1_RESP_BODY = {
    "throttle_time_ms": 0,
    "error_code": 0,
    "topics": [
        {
            "topic_name": "foo",
            "partitions": [
                {
                    "partition_index": 0,
                    "error_code": 0,
                    "leader_id": 3,
                    "leader_epoch": 4,
                    "isr": [3, 1],
                    "leader_recovery_state": 1,
                    "partition_epoch": 7,
                }
            ],
        }
    ],
}

HEX_AP_V2 = hx(
    "0000003b",  # size = 59
    "0038 0002 00000002",  # AlterPartition, v2, correlation_id 2
    "0001 78",  # client_id "x"
    "00",  # header tagged fields
    "00000001",  # broker_id 1
    "0000000000000001",  # broker_epoch 1
    "02",  # topics: 1
    "0123456789abcdef0123456789abcdef",  # topic_id (16 raw bytes)
    "02",  # partitions: 1
    "00000002",  # partition_index 2
    "00000003",  # leader_epoch 3
    "01",  # new_isr: [] (compact count 0+1)
    "00",  # leader_recovery_state 0
    "00000004",  # partition_epoch 4
    "00 00 00",  # tagged fields
)
HEX_AP_V2_BODY = {
    "broker_id": 1,
    "broker_epoch": 1,
    "topics": [
        {
            "topic_id": TID1,
            "partitions": [
                {
                    "partition_index": 2,
                    "leader_epoch": 3,
                    "new_isr": [],
                    "leader_recovery_state": 0,
                    "partition_epoch": 4,
                }
            ],
        }
    ],
}

HEX_REQUEST_CASES = [
    pytest.param(LEADER_AND_ISR, 2, 42, "ctl", HEX_LAI_V2_BODY, HEX_LAI_V2, id="hex-lai-v2"),
    pytest.param(UPDATE_METADATA, 7, 3, None, HEX_UM_V7_BODY, HEX_UM_V7, id="hex-um-v7-seed"),
    pytest.param(STOP_REPLICA, 4, 9, "", HEX_SR_V4_BODY, HEX_SR_V4, id="hex-sr-v4-seed"),
    pytest.param(
        CONTROLLED_SHUTDOWN, 2, 1, "b1", {"broker_id": 1, "broker_epoch": 256}, HEX_CS_V2, id="hex-cs-v2"
    ),
    pytest.param(ALTER_PARTITION, 0, 1, None, HEX_AP_V0_BODY, HEX_AP_V0, id="hex-ap-v0"),
    pytest.param(ALTER_PARTITION, 2, 2, "x", HEX_AP_V2_BODY, HEX_AP_V2, id="hex-ap-v2"),
]

HEX_RESPONSE_CASES = [
    pytest.param(
        CONTROLLED_SHUTDOWN,
        2,
        1,
        {"error_code": 0, "remaining_partitions": [{"topic_name": "foo", "partition_index": 2}]},
        HEX_CS_V2_RESP,
        id="hex-cs-v2-resp",
    ),
    pytest.param(ALTER_PARTITION, 1, 7, HEX_AP_V1_RESP_BODY, HEX_AP_V1_RESP, id="hex-ap-v1-resp"),
    pytest.param(
        UPDATE_METADATA, 7, 256, {"error_code": 77}, hx("00000006", "00000100", "004d"), id="hex-um-v7-resp"
    ),
]


def test_helpers_agree_with_hand_written_hex():
    assert uvarint(0) == b"\x00"
    assert uvarint(127) == b"\x7f"
    assert uvarint(128) == hx("8001")
    assert uvarint(201) == hx("c901")
    assert uvarint(300) == hx("ac02")
    assert cs(LONG_TOPIC)[:2] == hx("c901")
    assert s(TOPIC_UTF8) == hx("000c 74c3ab73742d e4b8bb e9a298")
    assert uid(TID2) == hx("fedcba9876543210800000000000ffff")
    assert (
        request_frame(
            LEADER_AND_ISR,
            2,
            42,
            "ctl",
            lai_request(
                "broker_epoch",
                1,
                5,
                2**32,
                [("tëst", [lai_partition(0, 5, 2, 7, [2, 3], 9, [2, 3, 4], True)])],
                [(2, "h2", 9092)],
            )[1],
        )
        == HEX_LAI_V2
    )
    assert (
        request_frame(
            UPDATE_METADATA,
            7,
            3,
            None,
            um_request(
                "max_broker_epoch", 0, 1, 255, [], [um_broker(4, [(9100, "h", "PLAINTEXT", 0)], None)]
            )[1],
        )
        == HEX_UM_V7
    )
    assert (
        request_frame(
            STOP_REPLICA, 4, 9, "", sr_request("max_broker_epoch", 1, 2, -2, True, [("t", [0, 1])])[1]
        )
        == HEX_SR_V4
    )
    assert request_frame(CONTROLLED_SHUTDOWN, 2, 1, "b1", i32(1) + i64(256)) == HEX_CS_V2
    assert response_frame(CONTROLLED_SHUTDOWN, 1, cs_response(0, [("foo", 2)])[1]) == HEX_CS_V2_RESP
    assert (
        request_frame(
            ALTER_PARTITION, 0, 1, None, ap_request(0, 3, 100, [("foo", [(0, 4, [1, 2, 3], 0, 6)])])[1]
        )
        == HEX_AP_V0
    )
    assert (
        request_frame(ALTER_PARTITION, 2, 2, "x", ap_request(2, 1, 1, [(TID1, [(2, 3, [], 0, 4)])])[1])
        == HEX_AP_V2
    )
    assert (
        response_frame(ALTER_PARTITION, 7, ap_response(1, 0, 0, [("foo", [(0, 0, 3, 4, [3, 1], 1, 7)])])[1])
        == HEX_AP_V1_RESP
    )
    assert ap_request(0, 3, 100, [("foo", [(0, 4, [1, 2, 3], 0, 6)])])[0] == HEX_AP_V0_BODY


# --------------------------------------------------------------------------------------------------------
# Round trips against the goldens
# --------------------------------------------------------------------------------------------------------

ALL_REQUESTS = [
    *HEX_REQUEST_CASES,
    *(
        pytest.param(k, v, c, cid, body, request_frame(k, v, c, cid, raw), id=p.id)
        for p in REQUEST_CASES
        for (k, v, c, cid, body, raw) in [p.values]
    ),
]
ALL_RESPONSES = [
    *HEX_RESPONSE_CASES,
    *(
        pytest.param(k, v, c, body, response_frame(k, c, raw), id=p.id)
        for p in RESPONSE_CASES
        for (k, v, c, body, raw) in [p.values]
    ),
]


@pytest.mark.parametrize(("api_key", "version", "corr", "client_id", "body", "expected"), ALL_REQUESTS)
def test_encode_request_golden(api_key, version, corr, client_id, body, expected):
    assert bytes(protocol.encode_request(api_key, version, corr, client_id, body)).hex() == expected.hex()


@pytest.mark.parametrize(("api_key", "version", "corr", "client_id", "body", "expected"), ALL_REQUESTS)
def test_decode_request_golden(api_key, version, corr, client_id, body, expected):
    header, decoded = protocol.decode_request(expected)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        api_key,
        version,
        corr,
        client_id,
    )
    assert norm(decoded) == norm(body)


@pytest.mark.parametrize(("api_key", "version", "corr", "body", "expected"), ALL_RESPONSES)
def test_encode_response_golden(api_key, version, corr, body, expected):
    assert bytes(protocol.encode_response(api_key, version, corr, body)).hex() == expected.hex()


@pytest.mark.parametrize(("api_key", "version", "corr", "body", "expected"), ALL_RESPONSES)
def test_decode_response_golden(api_key, version, corr, body, expected):
    decoded_corr, decoded = protocol.decode_response(api_key, version, expected)
    assert decoded_corr == corr
    assert norm(decoded) == norm(body)


# --------------------------------------------------------------------------------------------------------
# Headers
# --------------------------------------------------------------------------------------------------------

CS_BODY = {"broker_id": 1, "broker_epoch": 256}
CS_BODY_BYTES = hx("00000001 0000000000000100")
AP_EMPTY_BODY = {"broker_id": 1, "broker_epoch": 2, "topics": []}
AP_EMPTY_BODY_BYTES = hx("00000001 0000000000000002 01 00")  # broker_id, broker_epoch, topics [] , tags


@pytest.mark.parametrize(
    ("client_id", "header_hex"),
    [
        pytest.param(None, "0007 0002 0000000b ffff", id="null"),
        pytest.param("", "0007 0002 0000000b 0000", id="empty"),
        pytest.param("kafka", "0007 0002 0000000b 0005 6b61666b61", id="ascii"),
        pytest.param("é", "0007 0002 0000000b 0002 c3a9", id="utf8-byte-length"),
    ],
)
def test_request_header_v1(client_id, header_hex):
    expected = frame(hx(header_hex) + CS_BODY_BYTES)
    assert bytes(protocol.encode_request(CONTROLLED_SHUTDOWN, 2, 11, client_id, CS_BODY)) == expected
    header, body = protocol.decode_request(expected)
    assert header.client_id == client_id
    assert (header.api_key, header.api_version, header.correlation_id) == (7, 2, 11)
    assert body == CS_BODY


@pytest.mark.parametrize(
    ("client_id", "header_hex"),
    [
        # client_id keeps its int16 length in header v2; then one 0x00 for the empty tagged-field section.
        pytest.param(None, "0038 0001 fffffffe ffff 00", id="null"),
        pytest.param("", "0038 0001 fffffffe 0000 00", id="empty"),
        pytest.param("b-2", "0038 0001 fffffffe 0003 622d32 00", id="ascii"),
    ],
)
def test_request_header_v2(client_id, header_hex):
    expected = frame(hx(header_hex) + AP_EMPTY_BODY_BYTES)
    assert bytes(protocol.encode_request(ALTER_PARTITION, 1, -2, client_id, AP_EMPTY_BODY)) == expected
    header, body = protocol.decode_request(expected)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        56,
        1,
        -2,
        client_id,
    )
    assert body == AP_EMPTY_BODY


def test_response_header_v0_is_only_correlation_id():
    expected = hx("00000006", "7fffffff", "0000")
    assert bytes(protocol.encode_response(UPDATE_METADATA, 5, 2**31 - 1, {"error_code": 0})) == expected
    assert protocol.decode_response(UPDATE_METADATA, 5, expected) == (2**31 - 1, {"error_code": 0})


def test_response_header_v1_has_tagged_fields():
    body = {"throttle_time_ms": 5, "error_code": 0, "topics": []}
    expected = hx("0000000d", "80000000", "00", "00000005", "0000", "01", "00")
    assert bytes(protocol.encode_response(ALTER_PARTITION, 2, -(2**31), body)) == expected
    assert protocol.decode_response(ALTER_PARTITION, 2, expected) == (-(2**31), body)


def test_unknown_tagged_fields_are_skipped_on_decode():
    # Request header v2 and the body's top level each carry one unknown tag (tag 7, 2 bytes of data).
    frame_bytes = frame(
        hx("0038 0000 00000001 ffff", "01 07 02 abcd")  # header: 1 tagged field: tag 7, size 2, data
        + hx("00000001 0000000000000002 01", "01 07 02 abcd")  # body, top-level tagged fields likewise
    )
    header, body = protocol.decode_request(frame_bytes)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (56, 0, 1, None)
    assert body == AP_EMPTY_BODY


def test_decoded_booleans_are_bool():
    body = protocol.decode_request(HEX_SR_V4)[1]
    assert body["delete_partitions"] is True
    body = protocol.decode_request(HEX_LAI_V2)[1]
    assert body["topic_states"][0]["partition_states"][0]["is_new"] is True


def test_seed_versions_do_not_carry_broker_epoch():
    for frame_bytes in (HEX_UM_V7, HEX_SR_V4):
        body = protocol.decode_request(frame_bytes)[1]
        assert "broker_epoch" not in body
        assert "max_broker_epoch" in body


# --------------------------------------------------------------------------------------------------------
# Malformed input -> protocol.ProtocolError
# --------------------------------------------------------------------------------------------------------

CS_HEADER = hx("0007 0002 00000001 ffff")
SR_V1_HEADER = hx("0005 0001 00000001 ffff")
LAI_V2_HEADER = hx("0004 0002 00000001 ffff")
AP_V0_HEADER = hx("0038 0000 00000001 ffff 00")


def _payload(frame_bytes: bytes) -> bytes:
    return frame_bytes[4:]


BAD_REQUESTS = [
    pytest.param(b"", id="empty"),
    pytest.param(hx("0000"), id="partial-size-prefix"),
    pytest.param(frame(b""), id="zero-length-frame"),
    pytest.param(frame(hx("0007 0002 0000")), id="truncated-header"),
    pytest.param(frame(hx("0007 0002 00000001 0005 6162")), id="truncated-client-id"),
    pytest.param(frame(CS_HEADER + hx("00000001 00000000")), id="truncated-body-int64"),
    pytest.param(frame(_payload(HEX_LAI_V2)[:-1]), id="truncated-lai-last-byte"),
    pytest.param(frame(_payload(HEX_AP_V0)[:-1]), id="truncated-ap-missing-final-tags"),
    pytest.param(frame(_payload(HEX_AP_V2)[:-20]), id="truncated-ap-inside-uuid"),
    pytest.param(HEX_CS_V2[:-1], id="size-prefix-larger-than-frame"),
    pytest.param(HEX_CS_V2 + b"\x00", id="size-prefix-smaller-than-frame"),
    pytest.param(i32(-1) + _payload(HEX_CS_V2), id="negative-size-prefix"),
    pytest.param(frame(_payload(HEX_CS_V2) + b"\x00"), id="trailing-garbage-cs"),
    pytest.param(frame(_payload(HEX_LAI_V2) + hx("deadbeef")), id="trailing-garbage-lai"),
    pytest.param(frame(_payload(HEX_AP_V0) + b"\x00"), id="trailing-garbage-ap"),
    pytest.param(
        frame(LAI_V2_HEADER + hx("00000001 00000001 0000000000000001", "fffffffe")), id="array-count-minus-2"
    ),
    pytest.param(
        frame(LAI_V2_HEADER + hx("00000001 00000001 0000000000000001", "ffffffff 00000000")),
        id="non-nullable-array-count-minus-1",
    ),
    pytest.param(
        frame(SR_V1_HEADER + hx("00000001 00000001 0000000000000001 00", "00000001", "0001 74", "80000000")),
        id="int32-array-count-min-int",
    ),
    pytest.param(
        frame(LAI_V2_HEADER + hx("00000001 00000001 0000000000000001", "7fffffff")), id="array-count-past-end"
    ),
    pytest.param(
        frame(SR_V1_HEADER + hx("00000001 00000001 0000000000000001 00", "00000001", "0064 6162")),
        id="string-length-past-end",
    ),
    pytest.param(
        frame(SR_V1_HEADER + hx("00000001 00000001 0000000000000001 00", "00000001", "ffff 00000000")),
        id="non-nullable-string-null",
    ),
    pytest.param(
        frame(SR_V1_HEADER + hx("00000001 00000001 0000000000000001 00", "00000001", "fffe 00000000")),
        id="string-length-minus-2",
    ),
    pytest.param(
        frame(
            SR_V1_HEADER + hx("00000001 00000001 0000000000000001 00", "00000001", "0002 fffe", "00000000")
        ),
        id="invalid-utf8-topic",
    ),
    pytest.param(frame(hx("0007 0002 00000001 0002 c328") + CS_BODY_BYTES), id="invalid-utf8-client-id"),
    pytest.param(
        frame(AP_V0_HEADER + hx("00000001 0000000000000002", "02", "03 ff c0", "01 00 00")), id="ap-bad-utf8"
    ),
    pytest.param(
        frame(AP_V0_HEADER + hx("00000001 0000000000000002", "00", "00")), id="ap-null-compact-array"
    ),
    pytest.param(
        frame(AP_V0_HEADER + hx("00000001 0000000000000002", "02", "00", "01 00 00")),
        id="ap-null-compact-str",
    ),
    pytest.param(
        frame(AP_V0_HEADER + hx("00000001 0000000000000002", "02", "7f 61", "01 00 00")),
        id="ap-compact-str-past-end",
    ),
    pytest.param(
        frame(AP_V0_HEADER + hx("00000001 0000000000000002", "ffffffffffffffffffff01", "00")),
        id="ap-varint-too-long",
    ),
    pytest.param(frame(AP_V0_HEADER + hx("00000001 0000000000000002", "80")), id="ap-varint-truncated"),
    pytest.param(
        frame(AP_V0_HEADER + hx("00000001 0000000000000002 01", "01 07 05 abcd")),
        id="ap-tagged-field-past-end",
    ),
    pytest.param(frame(hx("270f 0000 00000001 ffff") + CS_BODY_BYTES), id="unknown-api-key-9999"),
    pytest.param(frame(hx("0004 0003 00000001 ffff") + _payload(HEX_LAI_V2)[13:]), id="lai-v3-unsupported"),
    pytest.param(frame(hx("0006 0006 00000001 ffff") + _payload(HEX_UM_V7)[10:]), id="um-v6-unsupported"),
    pytest.param(frame(hx("0005 0003 00000001 ffff") + _payload(HEX_SR_V4)[10:]), id="sr-v3-unsupported"),
    pytest.param(frame(hx("0004 ffff 00000001 ffff") + _payload(HEX_LAI_V2)[13:]), id="lai-negative-version"),
]


@pytest.mark.parametrize("data", BAD_REQUESTS)
def test_decode_request_rejects_malformed(data):
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_request(data)


BAD_RESPONSES = [
    pytest.param(UPDATE_METADATA, 5, b"", id="empty"),
    pytest.param(UPDATE_METADATA, 5, frame(hx("00000001 00")), id="truncated-error-code"),
    pytest.param(UPDATE_METADATA, 5, frame(hx("00000001 0000 00")), id="trailing-garbage"),
    pytest.param(UPDATE_METADATA, 5, hx("00000007 00000001 0000"), id="size-prefix-mismatch"),
    pytest.param(STOP_REPLICA, 1, frame(hx("00000001 0000 ffffffff")), id="sr-array-count-minus-1"),
    pytest.param(STOP_REPLICA, 1, frame(hx("00000001 0000 00000001 0009 61")), id="sr-string-past-end"),
    pytest.param(
        CONTROLLED_SHUTDOWN, 2, frame(hx("00000001 0000 00000001 0001 ff 00000000")), id="cs-invalid-utf8"
    ),
    pytest.param(LEADER_AND_ISR, 2, frame(hx("00000001 0000 00000001 0001 61 00000000")), id="lai-truncated"),
    pytest.param(
        ALTER_PARTITION, 0, frame(hx("00000001", "00000000 0000 01 00")), id="ap-missing-header-tags"
    ),
    pytest.param(
        ALTER_PARTITION, 2, frame(hx("00000001 00", "00000000 0000 02", "0123")), id="ap-truncated-uuid"
    ),
    pytest.param(9999, 0, frame(hx("00000001 0000")), id="unknown-api-key"),
    pytest.param(LEADER_AND_ISR, 3, frame(hx("00000001 0000 00000000")), id="lai-v3-unsupported"),
]


@pytest.mark.parametrize(("api_key", "version", "data"), BAD_RESPONSES)
def test_decode_response_rejects_malformed(api_key, version, data):
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_response(api_key, version, data)


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        pytest.param(9999, 0, CS_BODY, id="unknown-api-key"),
        pytest.param(LEADER_AND_ISR, 3, HEX_LAI_V2_BODY, id="lai-v3"),
        pytest.param(UPDATE_METADATA, 6, HEX_UM_V7_BODY, id="um-v6"),
        pytest.param(STOP_REPLICA, 3, HEX_SR_V4_BODY, id="sr-v3"),
    ],
)
def test_encode_rejects_unknown_api_or_version(api_key, version, body):
    with pytest.raises(protocol.ProtocolError):
        protocol.encode_request(api_key, version, 1, None, body)
    with pytest.raises(protocol.ProtocolError):
        protocol.encode_response(api_key, version, 1, {"error_code": 0})
