"""``__consumer_offsets`` records in Kafka's formats, and Kafka's choice of a group's partition."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.consumer_offsets import (
    GroupMember,
    GroupMetadataRecord,
    OffsetCommitRecord,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_metadata_record,
    java_string_hash,
    offset_commit_record,
    partition_for,
)
from protocol.errors import ProtocolError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("my-group", -1906497762),  # values computed with Java 17
        ("polygenelubricants", -(2**31)),  # Java's famous Integer.MIN_VALUE hash
        ("\U0001f600", 1772899),  # one character outside the BMP counts as two UTF-16 units
    ],
)
def test_java_string_hash_matches_java(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_partition_for_uses_kafkas_abs_where_min_value_maps_to_zero() -> None:
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("my-group", 50) == 1906497762 % 50


def test_offset_commit_record_layout_is_kafkas_key_v1_value_v3() -> None:
    key, value = offset_commit_record("g", "t", 3, OffsetCommitRecord(42, "m", 1000, leader_epoch=7))
    assert key == struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 3)
    assert value == struct.pack(">hqi", 3, 42, 7) + struct.pack(">h", 1) + b"m" + struct.pack(">q", 1000)
    decoded = decode_key(key)
    assert (decoded.group, decoded.topic, decoded.partition) == ("g", "t", 3)
    assert decode_offset_value(value) == OffsetCommitRecord(42, "m", 1000, leader_epoch=7)


def test_an_explicit_expiry_is_written_as_value_v1() -> None:
    _, value = offset_commit_record("g", "t", 0, OffsetCommitRecord(1, "", 5, expire_timestamp=9))
    assert struct.unpack_from(">h", value)[0] == 1
    assert decode_offset_value(value).expire_timestamp == 9


members = st.builds(
    GroupMember,
    member_id=st.text(max_size=20),
    group_instance_id=st.none() | st.text(max_size=10),
    client_id=st.text(max_size=10),
    client_host=st.text(max_size=10),
    rebalance_timeout=st.integers(0, 2**31 - 1),
    session_timeout=st.integers(0, 2**31 - 1),
    subscription=st.binary(max_size=30),
    assignment=st.binary(max_size=30),
).map(lambda m: m)


@given(
    st.builds(
        GroupMetadataRecord,
        protocol_type=st.text(max_size=10),
        generation=st.integers(0, 2**31 - 1),
        protocol=st.none() | st.text(max_size=10),
        leader=st.none() | st.text(max_size=10),
        current_state_timestamp=st.integers(-1, 2**62),
        members=st.lists(members, max_size=4).map(tuple),
    )
)
def test_group_metadata_round_trips(record: GroupMetadataRecord) -> None:
    key, value = group_metadata_record("grp", record)
    assert struct.unpack_from(">h", key)[0] == 2 and struct.unpack_from(">h", value)[0] == 3
    assert decode_key(key).topic is None
    assert decode_group_value(value) == record


def test_group_value_v0_takes_the_session_timeout_as_rebalance_timeout() -> None:
    v0 = (
        struct.pack(">h", 0)
        + struct.pack(">h", 8) + b"consumer"
        + struct.pack(">i", 4)
        + struct.pack(">h", 5) + b"range"
        + struct.pack(">h", 1) + b"m"
        + struct.pack(">i", 1)
        + struct.pack(">h", 1) + b"m" + struct.pack(">h", 1) + b"c" + struct.pack(">h", 2) + b"/h"
        + struct.pack(">i", 10000)
        + struct.pack(">i", 0) + struct.pack(">i", 0)
    )  # fmt: skip
    decoded = decode_group_value(v0)
    assert decoded.generation == 4 and decoded.members[0].rebalance_timeout == 10000


@pytest.mark.parametrize("data", [b"", b"\x00", struct.pack(">h", 9) + b"x", struct.pack(">h", 1) + b"\x00"])
def test_unreadable_keys_raise_protocol_errors(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_key(data)
