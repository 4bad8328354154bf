"""Kafka's znode paths and JSON payloads: exact shapes, Kafka-written examples, and tolerance of bad data."""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkstore import znodes
from zkstore.znodes import (
    BrokerRegistration,
    ControllerRegistration,
    Endpoint,
    LeaderIsrState,
    LeaderRecoveryState,
    TopicAssignment,
)
from zkstore.znodes.payload import encode_json

LOGGER = "zkstore.znodes"
BROKER_PATH = "/brokers/ids/1"
TOPIC_PATH = "/brokers/topics/orders"
STATE_PATH = "/brokers/topics/orders/partitions/0/state"


def as_json(data: bytes) -> object:
    return json.loads(data.decode("utf-8"))


def warnings_from(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


BASE_BROKER = BrokerRegistration(
    broker_id=1,
    endpoints=(Endpoint("PLAINTEXT", "h", 9092), Endpoint("SSL", "h", 9093)),
    listener_security_protocol_map={"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"},
    timestamp=1_700_000_000_000,
)


def broker(**changes: object) -> BrokerRegistration:
    return dataclasses.replace(BASE_BROKER, **changes)


# --- paths ------------------------------------------------------------------------------------------


def test_paths_follow_kafkas_layout() -> None:
    assert znodes.broker_path(3) == "/brokers/ids/3"
    assert znodes.topic_path("orders") == "/brokers/topics/orders"
    assert znodes.partitions_path("orders") == "/brokers/topics/orders/partitions"
    assert znodes.partition_path("orders", 7) == "/brokers/topics/orders/partitions/7"
    assert znodes.partition_state_path("orders", 7) == "/brokers/topics/orders/partitions/7/state"
    assert znodes.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert znodes.ISR_CHANGE_NOTIFICATION_PREFIX == "/isr_change_notification/isr_change_"


def test_persistent_paths_are_kafkas_startup_set() -> None:
    assert set(znodes.PERSISTENT_PATHS) == {
        "/consumers",
        "/brokers/ids",
        "/brokers/topics",
        "/config/changes",
        "/admin/delete_topics",
        "/brokers/seqid",
        "/isr_change_notification",
        "/latest_producer_id_block",
        "/log_dir_event_notification",
        "/config/topics",
        "/config/clients",
        "/config/users",
        "/config/brokers",
        "/config/ips",
    }
    assert znodes.CONTROLLER_EPOCH not in znodes.PERSISTENT_PATHS  # the first controller election creates it


@pytest.mark.parametrize("bad", ["", "a/b", ".", ".."])
def test_path_helpers_refuse_topics_that_address_another_znode(bad: str) -> None:
    with pytest.raises(ValueError):
        znodes.topic_path(bad)


@pytest.mark.parametrize("bad", [-1, True, 2**31])
def test_path_helpers_refuse_bad_ids(bad: int) -> None:
    with pytest.raises(ValueError):
        znodes.broker_path(bad)
    with pytest.raises(ValueError):
        znodes.partition_path("t", bad)


def test_partition_state_path_parses_back() -> None:
    assert znodes.parse_partition_state_path(znodes.partition_state_path("a.b-c_d", 12)) == ("a.b-c_d", 12)


@pytest.mark.parametrize(
    "path",
    [
        "/brokers/topics/t/partitions/0",
        "/brokers/topics/t/partitions/x/state",
        "/brokers/topics/t/partitions/01/state",
        "/brokers/topics/t/partitions/-1/state",
        "/brokers/topics//partitions/0/state",
        "/brokers/topics/t/partitions/0/state/extra",
        "brokers/topics/t/partitions/0/state",
        "/brokers/ids/0",
    ],
)
def test_other_paths_are_not_partition_state_paths(path: str) -> None:
    assert znodes.parse_partition_state_path(path) is None


# --- /brokers/ids/N ---------------------------------------------------------------------------------


def test_broker_v5_json_is_what_kafka_writes() -> None:
    registration = broker(rack="r1")
    assert as_json(registration.encode()) == {
        "version": 5,
        "host": "h",
        "port": 9092,
        "endpoints": ["PLAINTEXT://h:9092", "SSL://h:9093"],
        "jmx_port": -1,
        "timestamp": "1700000000000",
        "rack": "r1",
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"},
        "features": {},
    }
    assert b" " not in registration.encode()


def test_broker_host_and_port_come_from_the_first_plaintext_protocol_endpoint() -> None:
    registration = broker(
        endpoints=(Endpoint("SSL", "a", 1), Endpoint("INTERNAL", "b", 2), Endpoint("REPLICATION", "c", 3)),
        listener_security_protocol_map={"SSL": "SSL", "INTERNAL": "PLAINTEXT", "REPLICATION": "PLAINTEXT"},
    )
    payload = as_json(registration.encode())
    assert (payload["host"], payload["port"]) == ("b", 2)


def test_broker_without_plaintext_endpoint_writes_null_host_and_port_minus_one() -> None:
    registration = broker(endpoints=(Endpoint("SSL", "a", 1),), listener_security_protocol_map={"SSL": "SSL"})
    payload = as_json(registration.encode())
    assert (payload["host"], payload["port"]) == (None, -1)
    assert "rack" not in payload


def test_broker_round_trip_with_ipv6_rack_and_features() -> None:
    registration = broker(
        broker_id=42,
        endpoints=(Endpoint("PLAINTEXT", "::1", 9092), Endpoint("CONTROL_PLANE", "10.0.0.1", 9094)),
        listener_security_protocol_map={"PLAINTEXT": "PLAINTEXT", "CONTROL_PLANE": "PLAINTEXT"},
        rack="eu-1a",
        jmx_port=9999,
        features={"metadata.version": {"min_version": 1, "max_version": 7}},
    )
    data = registration.encode()
    assert as_json(data)["endpoints"][0] == "PLAINTEXT://[::1]:9092"
    assert znodes.decode_broker_registration(data, "/brokers/ids/42") == registration


def test_broker_id_comes_from_the_path() -> None:
    decoded = znodes.decode_broker_registration(broker(broker_id=1).encode(), "/brokers/ids/7")
    assert decoded is not None and decoded.broker_id == 7


def test_decode_kafka_written_broker_v4() -> None:
    data = (
        b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","CONTROLLER":"SSL"},'
        b'"endpoints":["PLAINTEXT://kafka1:9092","CONTROLLER://kafka1:9094"],"jmx_port":-1,"host":"kafka1",'
        b'"timestamp":"1589462187291","port":9092,"version":4}'
    )
    decoded = znodes.decode_broker_registration(data, "/brokers/ids/1001")
    assert decoded == BrokerRegistration(
        broker_id=1001,
        endpoints=(Endpoint("PLAINTEXT", "kafka1", 9092), Endpoint("CONTROLLER", "kafka1", 9094)),
        listener_security_protocol_map={"PLAINTEXT": "PLAINTEXT", "CONTROLLER": "SSL"},
        timestamp=1589462187291,
    )
    assert decoded.endpoint("CONTROLLER") == Endpoint("CONTROLLER", "kafka1", 9094)
    assert decoded.endpoint("SASL_SSL") is None


def test_decode_broker_tolerates_missing_optional_keys() -> None:
    decoded = znodes.decode_broker_registration(
        b'{"version":5,"endpoints":["plaintext://h:1"],"unknown":{"x":1}}', BROKER_PATH
    )
    assert decoded == BrokerRegistration(
        broker_id=1,
        endpoints=(Endpoint("PLAINTEXT", "h", 1),),
        listener_security_protocol_map={},
        timestamp=-1,
    )
    assert decoded.security_protocol(decoded.endpoints[0]) == "PLAINTEXT"


def test_decode_broker_skips_endpoints_that_do_not_parse(caplog: pytest.LogCaptureFixture) -> None:
    data = b'{"version":5,"endpoints":["PLAINTEXT://h:9092","garbage",7,"SSL://h:99999","SSL://[::1]:9093"]}'
    decoded = znodes.decode_broker_registration(data, BROKER_PATH)
    assert decoded is not None
    assert decoded.endpoints == (Endpoint("PLAINTEXT", "h", 9092), Endpoint("SSL", "::1", 9093))
    messages = warnings_from(caplog)
    assert len(messages) == 3
    assert all(BROKER_PATH in m for m in messages)
    assert any("garbage" in m for m in messages)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PLAINTEXT://host:9092", Endpoint("PLAINTEXT", "host", 9092)),
        ("ssl://host:9093", Endpoint("SSL", "host", 9093)),
        ("PLAINTEXT://[fe80::1%eth0]:9092", Endpoint("PLAINTEXT", "fe80::1%eth0", 9092)),
        ("PLAINTEXT://::1:9092", Endpoint("PLAINTEXT", "::1", 9092)),
        ("PLAINTEXT://:9092", Endpoint("PLAINTEXT", "", 9092)),
    ],
)
def test_endpoint_parse(text: str, expected: Endpoint) -> None:
    assert Endpoint.parse(text) == expected


@pytest.mark.parametrize(
    "text", ["host:9092", "PLAINTEXT://host", "PLAINTEXT://[::1:9092", "://h:1", "P://h:x"]
)
def test_endpoint_parse_refuses_malformed_text(text: str) -> None:
    with pytest.raises(ValueError):
        Endpoint.parse(text)


# --- /controller and /controller_epoch --------------------------------------------------------------


def test_controller_json_is_kafkas_v1_plus_optional_rpc_endpoint() -> None:
    plain = ControllerRegistration(broker_id=2, timestamp=1_700_000_000_000)
    assert plain.encode() == b'{"version":1,"brokerid":2,"timestamp":"1700000000000"}'
    with_rpc = ControllerRegistration(broker_id=2, timestamp=5, host="c2", port=9095)
    assert as_json(with_rpc.encode()) == {
        "version": 1,
        "brokerid": 2,
        "timestamp": "5",
        "host": "c2",
        "port": 9095,
    }
    for registration in (plain, with_rpc):
        assert znodes.decode_controller_registration(registration.encode(), "/controller") == registration


@pytest.mark.parametrize(
    "data",
    [
        b'{"version":1,"brokerid":3,"timestamp":"1589462187291"}',
        b'{"version":2,"brokerid":3,"timestamp":"1589462187291","kraftControllerEpoch":-1}',
    ],
)
def test_decode_kafka_written_controller(data: bytes) -> None:
    assert znodes.decode_controller_registration(data, "/controller") == ControllerRegistration(
        3, 1589462187291
    )


def test_controller_with_half_an_endpoint_keeps_the_id(caplog: pytest.LogCaptureFixture) -> None:
    decoded = znodes.decode_controller_registration(b'{"version":1,"brokerid":3,"host":"c3"}', "/controller")
    assert decoded == ControllerRegistration(3, -1)
    assert len(warnings_from(caplog)) == 1


def test_controller_epoch_is_plain_decimal_text() -> None:
    assert znodes.encode_controller_epoch(5) == b"5"
    assert znodes.decode_controller_epoch(b"5", znodes.CONTROLLER_EPOCH) == 5
    assert znodes.decode_controller_epoch(b"0", znodes.CONTROLLER_EPOCH) == 0


@pytest.mark.parametrize("data", [b"", None, b"five", b"1.5", b'{"epoch":1}', b"99999999999", b"\xff"])
def test_bad_controller_epoch_is_none_with_one_warning(
    data: bytes | None, caplog: pytest.LogCaptureFixture
) -> None:
    assert znodes.decode_controller_epoch(data, znodes.CONTROLLER_EPOCH) is None
    messages = warnings_from(caplog)
    assert len(messages) == 1 and znodes.CONTROLLER_EPOCH in messages[0]


# --- /brokers/topics/T ------------------------------------------------------------------------------


def test_topic_id_text_is_base64url_without_padding() -> None:
    assert znodes.format_topic_id(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert znodes.format_topic_id(uuid.UUID(int=2**128 - 1)) == "_____________________w"
    for text in ("_____________________w", "_____________________w=="):
        assert znodes.parse_topic_id(text) == uuid.UUID(int=2**128 - 1)


@pytest.mark.parametrize("text", ["", "AAAA", "AAAAAAAAAAAAAAAAAAAA+/", "AAAAAAAAAAAAAAAAAAAAAQ=", "A" * 24])
def test_parse_topic_id_refuses_other_text(text: str) -> None:
    with pytest.raises(ValueError):
        znodes.parse_topic_id(text)


def test_new_topic_ids_are_never_zero_nor_look_like_options() -> None:
    for _ in range(500):
        text = znodes.format_topic_id(znodes.new_topic_id())
        assert text != "AAAAAAAAAAAAAAAAAAAAAA" and not text.startswith("-") and len(text) == 22


def test_topic_v3_json_is_what_kafka_writes() -> None:
    assignment = TopicAssignment(
        topic="orders",
        partitions={1: (2, 3), 0: (1, 2, 3)},
        adding_replicas={0: (3,)},
        removing_replicas={0: (1,)},
        topic_id=uuid.UUID(int=2**128 - 1),
    )
    assert assignment.encode() == (
        b'{"version":3,"partitions":{"0":[1,2,3],"1":[2,3]},"adding_replicas":{"0":[3]},'
        b'"removing_replicas":{"0":[1]},"topic_id":"_____________________w"}'
    )
    assert znodes.decode_topic_assignment(assignment.encode(), TOPIC_PATH) == assignment


def test_topic_without_id_writes_empty_reassignment_maps_and_no_id() -> None:
    payload = as_json(TopicAssignment("orders", {0: (1,)}).encode())
    assert payload == {"version": 3, "partitions": {"0": [1]}, "adding_replicas": {}, "removing_replicas": {}}


@pytest.mark.parametrize(
    "data",
    [
        b'{"version":1,"partitions":{"0":[1,2],"1":[2,3]}}',
        b'{"version":2,"partitions":{"1":[2,3],"0":[1,2]},"adding_replicas":{},"removing_replicas":{}}',
    ],
)
def test_decode_kafka_written_topic_without_id(data: bytes) -> None:
    assert znodes.decode_topic_assignment(data, TOPIC_PATH) == TopicAssignment(
        "orders", {0: (1, 2), 1: (2, 3)}
    )


def test_decode_topic_reads_the_zero_id_as_no_id() -> None:
    data = b'{"version":3,"partitions":{"0":[1]},"topic_id":"AAAAAAAAAAAAAAAAAAAAAA=="}'
    decoded = znodes.decode_topic_assignment(data, TOPIC_PATH)
    assert decoded is not None and decoded.topic_id is None


def test_decode_topic_skips_bad_partitions(caplog: pytest.LogCaptureFixture) -> None:
    data = b'{"version":3,"partitions":{"0":[1],"x":[2],"1":[true],"2":"3","3":[3]}}'
    decoded = znodes.decode_topic_assignment(data, TOPIC_PATH)
    assert decoded is not None and decoded.partitions == {0: (1,), 3: (3,)}
    messages = warnings_from(caplog)
    assert len(messages) == 3 and all(TOPIC_PATH in m for m in messages)


topic_names = st.text("abcxyzABC0123456789._-", min_size=1, max_size=30).filter(
    lambda t: t not in (".", "..")
)
int32s = st.integers(-(2**31), 2**31 - 1)
replica_maps = st.dictionaries(
    st.integers(0, 2**31 - 1), st.lists(st.integers(0, 2**31 - 1), max_size=5).map(tuple), max_size=8
)


@given(
    topic=topic_names,
    partitions=replica_maps,
    adding=replica_maps,
    removing=replica_maps,
    topic_id=st.none() | st.uuids().filter(lambda u: u.int != 0),
)
def test_topic_assignment_round_trip(
    topic: str, partitions: dict, adding: dict, removing: dict, topic_id: uuid.UUID | None
) -> None:
    assignment = TopicAssignment(topic, partitions, adding, removing, topic_id)
    assert znodes.decode_topic_assignment(assignment.encode(), znodes.topic_path(topic)) == assignment


# --- /brokers/topics/T/partitions/P/state -----------------------------------------------------------


def test_partition_state_json_is_what_kafka_writes() -> None:
    state = LeaderIsrState(leader=1, leader_epoch=4, controller_epoch=2, isr=(1, 2, 3))
    assert state.encode() == b'{"version":1,"leader":1,"leader_epoch":4,"controller_epoch":2,"isr":[1,2,3]}'
    recovering = LeaderIsrState(2, 5, 2, (2,), LeaderRecoveryState.RECOVERING)
    assert as_json(recovering.encode())["leader_recovery_state"] == 1


def test_decode_kafka_written_partition_state() -> None:
    data = b'{"controller_epoch":7,"leader":-1,"version":1,"leader_epoch":12,"isr":[3]}'
    assert znodes.decode_leader_isr_state(data, STATE_PATH) == LeaderIsrState(znodes.NO_LEADER, 12, 7, (3,))


@given(
    leader=int32s,
    leader_epoch=int32s,
    controller_epoch=int32s,
    isr=st.lists(int32s, max_size=6).map(tuple),
    recovery=st.sampled_from(LeaderRecoveryState),
)
def test_leader_isr_state_round_trip(
    leader: int, leader_epoch: int, controller_epoch: int, isr: tuple[int, ...], recovery: LeaderRecoveryState
) -> None:
    state = LeaderIsrState(leader, leader_epoch, controller_epoch, isr, recovery)
    assert znodes.decode_leader_isr_state(state.encode(), STATE_PATH) == state
    # the direct template writes exactly the JSON encoder's bytes (Kafka's Jackson layout)
    written: dict[str, object] = {
        "version": 1,
        "leader": leader,
        "leader_epoch": leader_epoch,
        "controller_epoch": controller_epoch,
        "isr": list(isr),
    }
    if recovery != LeaderRecoveryState.RECOVERED:
        written["leader_recovery_state"] = int(recovery)
    assert state.encode() == encode_json(written)


# --- admin payloads ---------------------------------------------------------------------------------


def test_admin_payloads_round_trip() -> None:
    reassignment = {("orders", 0): (1, 2, 3), ("audit", 4): (2,)}
    data = znodes.encode_reassignment(reassignment)
    assert as_json(data) == {
        "version": 1,
        "partitions": [
            {"topic": "audit", "partition": 4, "replicas": [2]},
            {"topic": "orders", "partition": 0, "replicas": [1, 2, 3]},
        ],
    }
    assert znodes.decode_reassignment(data, znodes.REASSIGN_PARTITIONS) == reassignment

    partitions = {("orders", 0), ("orders", 1)}
    election = znodes.encode_preferred_replica_election(partitions)
    assert election == (
        b'{"version":1,"partitions":[{"topic":"orders","partition":0},{"topic":"orders","partition":1}]}'
    )
    assert znodes.decode_preferred_replica_election(election, znodes.PREFERRED_REPLICA_ELECTION) == partitions
    notification = znodes.encode_isr_change_notification(partitions)
    path = znodes.ISR_CHANGE_NOTIFICATION_PREFIX + "0000000001"
    assert znodes.decode_isr_change_notification(notification, path) == partitions


def test_reassignment_keeps_good_entries(caplog: pytest.LogCaptureFixture) -> None:
    data = json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": "t", "partition": 0, "replicas": [1, 2]},
                {"topic": "t", "partition": "1", "replicas": [1]},
                {"topic": "t", "partition": True, "replicas": [1]},
                {"topic": "t", "partition": 2},
                {"topic": "t", "partition": 3, "replicas": [1, False]},
                {"topic": 5, "partition": 4, "replicas": [1]},
                "junk",
                {"topic": "t", "partition": 5, "replicas": [3], "extra": "ignored"},
            ],
        }
    ).encode()
    decoded = znodes.decode_reassignment(data, znodes.REASSIGN_PARTITIONS)
    assert decoded == {("t", 0): (1, 2), ("t", 5): (3,)}
    messages = warnings_from(caplog)
    assert len(messages) == 6 and all(znodes.REASSIGN_PARTITIONS in m for m in messages)


@pytest.mark.parametrize(
    "decode", [znodes.decode_preferred_replica_election, znodes.decode_isr_change_notification]
)
def test_partition_lists_keep_good_entries(
    decode: Callable[[bytes, str], object], caplog: pytest.LogCaptureFixture
) -> None:
    data = (
        b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"t"},{"topic":"t","partition":-1}]}'
    )
    assert decode(data, "/admin/x") == {("t", 0)}
    messages = warnings_from(caplog)
    assert len(messages) == 2 and all("/admin/x" in m for m in messages)


# --- corrupt payloads: None and exactly one warning naming the path -----------------------------------

DECODERS: dict[str, tuple[Callable[[bytes | None, str], object], str]] = {
    "broker": (znodes.decode_broker_registration, BROKER_PATH),
    "controller": (znodes.decode_controller_registration, znodes.CONTROLLER),
    "topic": (znodes.decode_topic_assignment, TOPIC_PATH),
    "state": (znodes.decode_leader_isr_state, STATE_PATH),
    "reassignment": (znodes.decode_reassignment, znodes.REASSIGN_PARTITIONS),
    "election": (znodes.decode_preferred_replica_election, znodes.PREFERRED_REPLICA_ELECTION),
    "isr_change": (
        znodes.decode_isr_change_notification,
        znodes.ISR_CHANGE_NOTIFICATION_PREFIX + "0000000001",
    ),
}
NOT_A_PAYLOAD = [b"", None, b"not json", b"[1,2]", b'"text"', b"null", b"\xff\xfe{}", b'{"version":1', b"{}"]
GOOD_STATE = {"version": 1, "leader": 1, "leader_epoch": 0, "controller_epoch": 1, "isr": [1]}
MISSING = object()


def payload(**fields: object) -> bytes:
    return json.dumps({k: v for k, v in fields.items() if v is not MISSING}).encode()


def state(**changes: object) -> bytes:
    return payload(**{**GOOD_STATE, **changes})


BAD_FIELDS = [
    ("broker", payload(version=3, endpoints=[])),
    ("broker", payload(version=True, endpoints=[])),
    ("broker", payload(version=5)),
    ("broker", payload(version=5, endpoints="PLAINTEXT://h:1")),
    ("broker", payload(version=5, endpoints=[], jmx_port="1")),
    ("broker", payload(version=5, endpoints=[], rack=1)),
    ("broker", payload(version=5, endpoints=[], timestamp="yesterday")),
    ("broker", payload(version=5, endpoints=[], features=[])),
    ("controller", payload(version=1)),
    ("controller", payload(version=1, brokerid=True)),
    ("controller", payload(version=1, brokerid="1")),
    ("controller", payload(version=3, brokerid=1)),
    ("controller", payload(version=1, brokerid=1, host="c", port=1e3)),
    ("topic", payload(version=3)),
    ("topic", payload(version=4, partitions={})),
    ("topic", payload(version=3, partitions=[[1]])),
    ("topic", payload(version=3, partitions={}, adding_replicas=1)),
    ("topic", payload(version=3, partitions={}, topic_id="nope")),
    ("state", state(leader_epoch=MISSING)),
    ("state", state(leader=True)),
    ("state", state(leader_epoch=0.0)),
    ("state", state(leader_epoch=2**32)),
    ("state", state(isr=[1, "2"])),
    ("state", state(isr=None)),
    ("state", state(leader_recovery_state=2)),
    ("state", b"[" * 100_000 + b"]" * 100_000),
    ("reassignment", payload(version=1, partitions={})),
    ("reassignment", payload(version="1", partitions=[])),
    ("election", payload(version=1)),
    ("isr_change", payload(version=2, partitions=[])),
]
CORRUPT_CASES = [(kind, data) for kind in DECODERS for data in NOT_A_PAYLOAD] + BAD_FIELDS


@pytest.mark.parametrize(("kind", "data"), CORRUPT_CASES, ids=[f"{k}-{d!r}"[:70] for k, d in CORRUPT_CASES])
def test_corrupt_payload_is_none_with_one_warning_naming_the_path(
    kind: str, data: bytes | None, caplog: pytest.LogCaptureFixture
) -> None:
    decode, path = DECODERS[kind]
    assert decode(data, path) is None
    messages = warnings_from(caplog)
    assert len(messages) == 1, messages
    assert path in messages[0]


@pytest.mark.parametrize(
    ("decode", "path", "data"),
    [
        (znodes.decode_broker_registration, "/brokers/ids/x", payload(version=5, endpoints=[])),
        (znodes.decode_broker_registration, "/brokers/ids/01", payload(version=5, endpoints=[])),
        (znodes.decode_topic_assignment, "/brokers/topics/", payload(version=3, partitions={})),
    ],
)
def test_payload_whose_path_names_no_entity_is_none(
    decode: Callable[[bytes | None, str], object], path: str, data: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    assert decode(data, path) is None
    assert len(warnings_from(caplog)) == 1
