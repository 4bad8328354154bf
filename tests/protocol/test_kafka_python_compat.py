"""Wire compatibility with a real client: kafka-python's own encoders and decoders against ours.

kafka-python 3.x carries two independent implementations of the protocol, and both are checked:

* the classes its client sends and reads (``kafka.protocol.metadata``, ``.producer``, ``.consumer``),
  generated at run time from Kafka's JSON specs, for the versions kafka-python declares valid;
* its older hand-written schemas (``kafka.protocol.old``), one class per version: every non-flexible
  version of the older data-plane APIs implemented here (their flexible ones, Fetch v12+, ListOffsets
  v6+ and OffsetForLeaderEpoch v4, are the client classes' alone), and the non-flexible versions of
  the group, coordinator and producer-id APIs. These are compared by position, so any difference in
  field order, type or presence between the two transcriptions shows up.

Requests go kafka-python -> bytes -> ``decode_request``; responses go ``encode_response`` -> bytes ->
kafka-python. Bodies are drawn from our schemas, so every field of every version is exercised.
"""

from __future__ import annotations

from typing import Any

import pytest
from construct import Renamed
from hypothesis import given
from hypothesis import strategies as st

import protocol
from protocol import ApiKey
from protocol.api import DEFAULT_DIALECT
from protocol.registry import SUPPORTED_VERSIONS, api_spec, message_codec
from protocol.types import KArray, KBytes, KString, KStruct, KTaggedFields
from tests.protocol.strategies import body_strategy, per_message

kafka_protocol = pytest.importorskip("kafka.protocol")
pytest.importorskip("kafka.protocol.old")

from kafka.protocol.consumer import (  # noqa: E402
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.metadata import (  # noqa: E402
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.old import (  # noqa: E402
    admin as old_admin,
)
from kafka.protocol.old import (  # noqa: E402
    api_versions as old_api_versions,
)
from kafka.protocol.old import (  # noqa: E402
    commit as old_commit,
)
from kafka.protocol.old import (  # noqa: E402
    fetch as old_fetch,
)
from kafka.protocol.old import (  # noqa: E402
    find_coordinator as old_find_coordinator,
)
from kafka.protocol.old import (  # noqa: E402
    group as old_group,
)
from kafka.protocol.old import (  # noqa: E402
    init_producer_id as old_init_producer_id,
)
from kafka.protocol.old import (  # noqa: E402
    list_offsets as old_list_offsets,
)
from kafka.protocol.old import (  # noqa: E402
    metadata as old_metadata,
)
from kafka.protocol.old import (  # noqa: E402
    offset_for_leader_epoch as old_offset_for_leader_epoch,
)
from kafka.protocol.old import (  # noqa: E402
    produce as old_produce,
)
from kafka.protocol.old.struct import Struct as OldStruct  # noqa: E402
from kafka.protocol.old.types import Array as OldArray  # noqa: E402
from kafka.protocol.old.types import BitField as OldBitField  # noqa: E402
from kafka.protocol.old.types import Schema as OldSchema  # noqa: E402
from kafka.protocol.producer import ProduceRequest, ProduceResponse  # noqa: E402

kafka_groups = pytest.importorskip("kafka.protocol.consumer.group")
from kafka.protocol.admin.cluster import (  # noqa: E402
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from kafka.protocol.admin.configs import (  # noqa: E402
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafka.protocol.admin.groups import (  # noqa: E402
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.admin.topics import (  # noqa: E402
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kafka.protocol.consumer.group import (  # noqa: E402
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata.find_coordinator import (  # noqa: E402
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse  # noqa: E402

CLIENT_CLASSES: dict[ApiKey, tuple[Any, Any]] = {
    ApiKey.API_VERSIONS: (ApiVersionsRequest, ApiVersionsResponse),
    ApiKey.METADATA: (MetadataRequest, MetadataResponse),
    ApiKey.PRODUCE: (ProduceRequest, ProduceResponse),
    ApiKey.FETCH: (FetchRequest, FetchResponse),
    ApiKey.LIST_OFFSETS: (ListOffsetsRequest, ListOffsetsResponse),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
    ApiKey.FIND_COORDINATOR: (FindCoordinatorRequest, FindCoordinatorResponse),
    ApiKey.JOIN_GROUP: (JoinGroupRequest, JoinGroupResponse),
    ApiKey.SYNC_GROUP: (SyncGroupRequest, SyncGroupResponse),
    ApiKey.HEARTBEAT: (HeartbeatRequest, HeartbeatResponse),
    ApiKey.LEAVE_GROUP: (LeaveGroupRequest, LeaveGroupResponse),
    ApiKey.OFFSET_COMMIT: (OffsetCommitRequest, OffsetCommitResponse),
    ApiKey.OFFSET_FETCH: (OffsetFetchRequest, OffsetFetchResponse),
    ApiKey.LIST_GROUPS: (ListGroupsRequest, ListGroupsResponse),
    ApiKey.DESCRIBE_GROUPS: (DescribeGroupsRequest, DescribeGroupsResponse),
    ApiKey.DELETE_GROUPS: (DeleteGroupsRequest, DeleteGroupsResponse),
    ApiKey.INIT_PRODUCER_ID: (InitProducerIdRequest, InitProducerIdResponse),
    ApiKey.CREATE_TOPICS: (CreateTopicsRequest, CreateTopicsResponse),
    ApiKey.DELETE_TOPICS: (DeleteTopicsRequest, DeleteTopicsResponse),
    ApiKey.CREATE_PARTITIONS: (CreatePartitionsRequest, CreatePartitionsResponse),
    ApiKey.DESCRIBE_CLUSTER: (DescribeClusterRequest, DescribeClusterResponse),
    ApiKey.DESCRIBE_CONFIGS: (DescribeConfigsRequest, DescribeConfigsResponse),
    ApiKey.ALTER_CONFIGS: (AlterConfigsRequest, AlterConfigsResponse),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse),
    ApiKey.DESCRIBE_LOG_DIRS: (DescribeLogDirsRequest, DescribeLogDirsResponse),
}
HAND_WRITTEN_CLASSES: dict[ApiKey, tuple[list[Any], list[Any]]] = {
    ApiKey.API_VERSIONS: (old_api_versions.ApiVersionsRequest, old_api_versions.ApiVersionsResponse),
    ApiKey.METADATA: (old_metadata.MetadataRequest, old_metadata.MetadataResponse),
    ApiKey.PRODUCE: (old_produce.ProduceRequest, old_produce.ProduceResponse),
    ApiKey.FETCH: (old_fetch.FetchRequest, old_fetch.FetchResponse),
    ApiKey.LIST_OFFSETS: (old_list_offsets.ListOffsetsRequest, old_list_offsets.ListOffsetsResponse),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (
        old_offset_for_leader_epoch.OffsetForLeaderEpochRequest,
        old_offset_for_leader_epoch.OffsetForLeaderEpochResponse,
    ),
    # The group, coordinator and producer-id APIs: kafka-python's hand-written schemas reach some of
    # the non-flexible versions only (GROUP_AND_PRODUCER_ID_APIS below), the client classes all.
    ApiKey.FIND_COORDINATOR: (
        old_find_coordinator.FindCoordinatorRequest,
        old_find_coordinator.FindCoordinatorResponse,
    ),
    ApiKey.JOIN_GROUP: (old_group.JoinGroupRequest, old_group.JoinGroupResponse),
    ApiKey.SYNC_GROUP: (old_group.SyncGroupRequest, old_group.SyncGroupResponse),
    ApiKey.HEARTBEAT: (old_group.HeartbeatRequest, old_group.HeartbeatResponse),
    ApiKey.LEAVE_GROUP: (old_group.LeaveGroupRequest, old_group.LeaveGroupResponse),
    ApiKey.OFFSET_COMMIT: (old_commit.OffsetCommitRequest, old_commit.OffsetCommitResponse),
    ApiKey.OFFSET_FETCH: (old_commit.OffsetFetchRequest, old_commit.OffsetFetchResponse),
    ApiKey.LIST_GROUPS: (old_admin.ListGroupsRequest, old_admin.ListGroupsResponse),
    ApiKey.DESCRIBE_GROUPS: (old_admin.DescribeGroupsRequest, old_admin.DescribeGroupsResponse),
    ApiKey.DELETE_GROUPS: (old_admin.DeleteGroupsRequest, old_admin.DeleteGroupsResponse),
    ApiKey.INIT_PRODUCER_ID: (
        old_init_producer_id.InitProducerIdRequest,
        old_init_producer_id.InitProducerIdResponse,
    ),
}
DATA_PLANE_HAND_WRITTEN = {
    ApiKey.API_VERSIONS,
    ApiKey.METADATA,
    ApiKey.PRODUCE,
    ApiKey.FETCH,
    ApiKey.LIST_OFFSETS,
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
}
"""The APIs whose hand-written schemas reach every version implemented here."""


def _client_versions(key: ApiKey) -> list[int]:
    """Our versions that kafka-python's client declares valid (its JSON specs drop old ones)."""
    low, high = CLIENT_CLASSES[key][0].valid_versions
    return [v for v in SUPPORTED_VERSIONS[key] if low <= v <= high]


CLIENT_CASES = [(key, v) for key in CLIENT_CLASSES for v in _client_versions(key)]


def _hand_written_cases(kind: int) -> list[tuple[ApiKey, int]]:
    """Our non-flexible versions kafka-python has a hand-written class for, labelled with that version.

    (Its ``ListGroupsRequest[2]`` says ``API_VERSION = 1``, so ListGroups v2 requests are left to the
    client classes.)
    """
    return [
        (key, v)
        for key, classes in HAND_WRITTEN_CLASSES.items()
        for v in SUPPORTED_VERSIONS[key]
        if v < len(classes[kind])
        and v == classes[kind][v].API_VERSION
        and not api_spec(key).is_flexible(v, DEFAULT_DIALECT)  # positional: no tagged-field sections
    ]


HAND_WRITTEN_REQUEST_CASES = _hand_written_cases(0)
HAND_WRITTEN_RESPONSE_CASES = _hand_written_cases(1)
HAND_WRITTEN_CASES = sorted({*HAND_WRITTEN_REQUEST_CASES, *HAND_WRITTEN_RESPONSE_CASES})


def _case_id(case: Any) -> str:
    return f"{ApiKey(case[0]).name}-v{case[1]}" if isinstance(case, tuple) else str(case)


def _in_field_order(con: Any, value: Any) -> Any:
    """``value`` with every dict's keys in the schema's field order (drawn dicts need not be)."""
    while isinstance(con, Renamed):
        con = con.subcon
    if isinstance(con, KStruct) and isinstance(value, dict):
        ordered = {sc.name: _in_field_order(sc, value[sc.name]) for sc in con.subcons if sc.name in value}
        for f in _tagged_fields(con):  # after the others, in tag order, as Kafka's specs list them last
            if f.name in value:
                ordered[f.name] = _in_field_order(f, value[f.name])
        return ordered
    if isinstance(con, KArray) and isinstance(value, list):
        return [_in_field_order(con.element, item) for item in value]
    return value


def _tagged_fields(con: KStruct) -> list[Any]:
    """The tagged fields a struct declares (its tagged-field section's)."""
    return [f for sc in con.subcons if isinstance(sc, KTaggedFields) for f in sc.fields]


def _draw(data: st.DataObject, key: ApiKey, version: int, kind: str) -> dict[str, Any]:
    schema = message_codec(key, version, kind).schema
    body = _in_field_order(schema, data.draw(body_strategy(schema)))
    if key == ApiKey.API_VERSIONS and kind == "response" and version > 0:
        # Clients read any ApiVersions answer carrying an error as v0 (a broker refusing a version
        # replies in v0), so only error-free bodies keep their version's layout.
        body["error_code"] = 0
    return body


def _plain(value: Any) -> Any:
    """Buffers as bytes and tuples as lists, so values from either side compare equal."""
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# ---------------------------------------------------------------- kafka-python's client classes


def _to_client(cls: Any, body: dict[str, Any], version: int) -> Any:
    """Our body as an instance of kafka-python's class; a field name it does not know fails here."""
    values = {}
    for name, value in body.items():
        field = cls.fields[name]
        if value is not None and field.is_struct_array():
            value = [_to_client(field.data_class, item, version) for item in value]
        elif value is not None and field.is_struct():  # a tagged struct (Fetch's replica_state)
            value = _to_client(field.data_class, value, version)
        values[name] = value
    return cls(version=version, **values)


def _bitfield(value: int) -> set[int] | None:
    """kafka-python reads an authorized-operations int32 as the set of its bits; bit 31 alone (Kafka's
    'not requested', -2**31) as None."""
    bits = {i for i in range(32) if (value & 0xFFFFFFFF) >> i & 1}
    return None if bits == {31} else bits


def _as_client_reads(key: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
    """Our response body as kafka-python's ``to_dict(json=False)`` spells it."""
    body = _plain(body)
    if key == ApiKey.METADATA and "cluster_authorized_operations" in body:
        body["authorized_operations"] = _bitfield(body.pop("cluster_authorized_operations"))
        for topic in body["topics"]:
            topic["authorized_operations"] = _bitfield(topic.pop("topic_authorized_operations"))
    if key == ApiKey.CREATE_TOPICS:  # v5+'s tagged field, never written: read as its default
        for topic in body["topics"]:
            if "num_partitions" in topic:
                topic["topic_config_error_code"] = 0
    if key == ApiKey.DESCRIBE_CLUSTER:
        body["authorized_operations"] = _bitfield(body.pop("cluster_authorized_operations"))
    if key == ApiKey.DESCRIBE_GROUPS:
        for group in body["groups"]:
            if "authorized_operations" in group:
                group["authorized_operations"] = _bitfield(group["authorized_operations"])
    return body


@pytest.mark.parametrize("case", CLIENT_CASES, ids=_case_id)
@per_message
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1), client_id=st.text(max_size=8))
def test_client_requests_decode_here(case, data, correlation_id, client_id):
    key, version = case
    body = _draw(data, key, version, "request")
    request = _to_client(CLIENT_CLASSES[key][0], body, version)
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    frame = bytes(request.encode(header=True, framed=True))
    header, decoded = protocol.decode_request(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        key,
        version,
        correlation_id,
        client_id,
    )
    assert decoded == body
    assert frame == protocol.encode_request(key, version, correlation_id, client_id, body)


@pytest.mark.parametrize("case", CLIENT_CASES, ids=_case_id)
@per_message
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_our_responses_decode_in_the_client(case, data, correlation_id):
    key, version = case
    body = _draw(data, key, version, "response")
    frame = protocol.encode_response(key, version, correlation_id, body)
    response = CLIENT_CLASSES[key][1][version].decode(frame, header=True, framed=True)
    assert response.header.correlation_id == correlation_id
    assert _plain(response.to_dict(json=False)) == _as_client_reads(key, body)


_CLIENT_NAMES = {"cluster_authorized_operations": "authorized_operations"}
_CLIENT_NAMES_IN_TOPICS = {"topic_authorized_operations": "authorized_operations"}
"""kafka-python's own spellings of a few fields (it reads the int32 as a set of operations)."""

KNOWN_TAGGED = {(ApiKey.CREATE_TOPICS, "topic_config_error_code")}
"""Tagged fields of the versions implemented here, never written (see ``_as_client_reads``)."""


def _field_differences(key: ApiKey, ours: Any, theirs: Any, version: int, path: str) -> list[str]:
    """Where our struct and kafka-python's field tree disagree on the fields present in ``version``,
    their order, or which strings, byte strings and arrays may be null."""
    while isinstance(ours, Renamed):
        ours = ours.subcon
    mine = [sc for sc in ours.subcons if sc.name]
    present = [f for f in theirs.fields.values() if f.for_version_q(version)]
    untagged = [f for f in present if not f.tagged_field_q(version)]
    names = {**_CLIENT_NAMES, **(_CLIENT_NAMES_IN_TOPICS if path.endswith("topics[]") else {})}
    ours_tagged = {f.name for f in _tagged_fields(ours)}
    diffs = [
        f"{path}: tagged field {f.name} unknown here"
        for f in present
        if f.tagged_field_q(version) and f.name not in ours_tagged and (key, f.name) not in KNOWN_TAGGED
    ]
    if [names.get(sc.name, sc.name) for sc in mine] != [f.name for f in untagged]:
        return [*diffs, f"{path}: fields {[sc.name for sc in mine]} != {[f.name for f in untagged]}"]
    for sc, field in zip(mine, untagged, strict=True):
        con = sc.subcon
        while isinstance(con, Renamed):
            con = con.subcon
        if isinstance(con, (KString, KBytes, KArray)) and con.nullable != field.nullable_for_version_q(
            version
        ):
            diffs.append(f"{path}.{sc.name}: nullable {con.nullable} here")
        if field.is_struct_array():
            diffs += _field_differences(key, con.element, field, version, f"{path}.{sc.name}[]")
    return diffs


@pytest.mark.parametrize("case", CLIENT_CASES, ids=_case_id)
def test_fields_and_nullability_match_the_client(case):
    """The same fields, in the same order, nullable in the same versions: bodies drawn from our
    schemas never hold a null our schema forbids, so only this catches a field we wrongly refuse
    to read as null."""
    key, version = case
    for kind, cls in zip(("request", "response"), CLIENT_CLASSES[key], strict=True):
        schema = message_codec(key, version, kind).schema
        assert _field_differences(key, schema, cls, version, kind) == []


# ---------------------------------------------------------------- kafka-python's hand-written schemas


def _positional(schema: Any, value: Any) -> Any:
    """A body as nested lists in field order, shaped like kafka-python's hand-written ``schema``.

    Those schemas write a one-field struct as the field itself (Metadata's topics are an array of
    strings there, of ``{name}`` structs in Kafka's spec): the same bytes, so it is unwrapped here.
    """
    if isinstance(schema, OldSchema):
        assert len(schema.fields) == len(value), (schema.names, list(value))
        return [_positional(t, v) for t, v in zip(schema.fields, value.values(), strict=True)]
    if isinstance(schema, OldArray):
        if value is None:
            return None
        element = schema.array_of
        if not isinstance(element, OldSchema):
            value = [next(iter(item.values())) if isinstance(item, dict) else item for item in value]
        return [_positional(element, item) for item in value]
    if schema is OldBitField:
        return _bitfield(value)
    return _plain(value)


def _hand_written_positional(value: Any) -> Any:
    if isinstance(value, OldStruct):
        return [_hand_written_positional(getattr(value, name)) for name in value.SCHEMA.names]
    if isinstance(value, (list, tuple)):
        return [_hand_written_positional(v) for v in value]
    return _plain(value)


@pytest.mark.parametrize("case", HAND_WRITTEN_REQUEST_CASES, ids=_case_id)
@per_message
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1), client_id=st.text(max_size=8))
def test_hand_written_requests_decode_here(case, data, correlation_id, client_id):
    key, version = case
    body = _draw(data, key, version, "request")
    cls = HAND_WRITTEN_CLASSES[key][0][version]
    request = cls(*_positional(cls.SCHEMA, body))
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    frame = request.encode(header=True, framed=True)
    header, decoded = protocol.decode_request(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        key,
        version,
        correlation_id,
        client_id,
    )
    assert decoded == body


@pytest.mark.parametrize("case", HAND_WRITTEN_RESPONSE_CASES, ids=_case_id)
@per_message
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_our_responses_decode_in_hand_written_schemas(case, data, correlation_id):
    key, version = case
    body = _draw(data, key, version, "response")
    frame = protocol.encode_response(key, version, correlation_id, body)
    schema = HAND_WRITTEN_CLASSES[key][1][version]
    response = schema.decode(frame, header=True, framed=True)
    assert response.header.correlation_id == correlation_id
    expected = _positional(schema.SCHEMA, body)
    assert _hand_written_positional(response) == expected
    assert len(frame) == 8 + len(schema(*expected).encode())  # nothing left over


GROUP_AND_PRODUCER_ID_APIS = {
    # API: (versions implemented, versions kafka-python's hand-written schemas also check)
    ApiKey.FIND_COORDINATOR: (range(0, 5), range(0, 3)),
    ApiKey.JOIN_GROUP: (range(0, 8), range(0, 6)),
    ApiKey.SYNC_GROUP: (range(0, 6), range(0, 4)),
    ApiKey.HEARTBEAT: (range(0, 5), range(0, 4)),
    ApiKey.LEAVE_GROUP: (range(0, 5), range(0, 4)),
    ApiKey.OFFSET_COMMIT: (range(2, 9), range(2, 8)),
    ApiKey.OFFSET_FETCH: (range(1, 8), range(1, 6)),
    ApiKey.LIST_GROUPS: (range(0, 5), range(0, 3)),
    ApiKey.DESCRIBE_GROUPS: (range(0, 6), range(0, 4)),
    ApiKey.DELETE_GROUPS: (range(0, 3), range(0, 2)),
    ApiKey.INIT_PRODUCER_ID: (range(0, 5), range(0, 2)),
}


def test_every_data_plane_version_is_cross_checked():
    """Every version implemented is checked against at least one of kafka-python's implementations:
    the hand-written schemas reach every version of the older data-plane APIs, the client classes the
    recent ones and every version of the group and producer-id APIs, whose older versions the
    hand-written schemas check a second time."""
    for key in CLIENT_CLASSES:
        for cases in (HAND_WRITTEN_REQUEST_CASES, HAND_WRITTEN_RESPONSE_CASES):
            checked = {v for k, v in [*cases, *CLIENT_CASES] if k == key}
            assert checked == set(SUPPORTED_VERSIONS[key]), ApiKey(key).name
    for key in DATA_PLANE_HAND_WRITTEN:  # to the first flexible version (Fetch v12+: the client's)
        classic = {v for v in SUPPORTED_VERSIONS[key] if not api_spec(key).is_flexible(v, DEFAULT_DIALECT)}
        assert {v for k, v in HAND_WRITTEN_REQUEST_CASES if k == key} == classic
        assert {v for k, v in HAND_WRITTEN_RESPONSE_CASES if k == key} == classic
    for key, (versions, hand_written) in GROUP_AND_PRODUCER_ID_APIS.items():
        name = ApiKey(key).name
        assert SUPPORTED_VERSIONS[key] == tuple(versions), name
        assert {v for k, v in CLIENT_CASES if k == key} == set(versions), name
        assert {v for k, v in HAND_WRITTEN_RESPONSE_CASES if k == key} == set(hand_written), name
        requests = {v for k, v in HAND_WRITTEN_REQUEST_CASES if k == key}
        assert requests == set(hand_written) - ({2} if key == ApiKey.LIST_GROUPS else set()), name
    assert {v for k, v in CLIENT_CASES if k == ApiKey.FETCH} == set(range(4, 18))
    assert {v for k, v in CLIENT_CASES if k == ApiKey.PRODUCE} == set(range(3, 9))
