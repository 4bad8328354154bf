"""Kafka's ACL decision rules, the ACL znode JSON and the enum spellings, with no server."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from security.acl import (
    AclEntry,
    AclOperation,
    AclPermissionType,
    AclSnapshot,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    decode_acls,
    encode_acls,
    parse_enum,
    pascal_case,
    validate_pattern,
)

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def topic(name: str, prefixed: bool = False) -> ResourcePattern:
    return ResourcePattern(TOPIC, name, PatternType.PREFIXED if prefixed else PatternType.LITERAL)


def allow(op: AclOperation, principal: str = ALICE, host: str = "*") -> AclEntry:
    return AclEntry(principal, ALLOW, op, host)


def deny(op: AclOperation, principal: str = ALICE, host: str = "*") -> AclEntry:
    return AclEntry(principal, DENY, op, host)


def snapshot(*acls: tuple[ResourcePattern, AclEntry], **settings: object) -> AclSnapshot:
    grouped: dict[ResourcePattern, set[AclEntry]] = {}
    for pattern, entry in acls:
        grouped.setdefault(pattern, set()).add(entry)
    return AclSnapshot(grouped, **settings)  # type: ignore[arg-type]


def may(
    s: AclSnapshot, op: AclOperation, name: str = "orders", principal: str = ALICE, host: str = HOST
) -> bool:
    return s.authorize(principal, host, op, TOPIC, name)


# -- wire ids and spellings


def test_enum_ids_are_kafkas() -> None:
    assert [(t.name, int(t)) for t in ResourceType][2:] == [
        ("TOPIC", 2),
        ("GROUP", 3),
        ("CLUSTER", 4),
        ("TRANSACTIONAL_ID", 5),
        ("DELEGATION_TOKEN", 6),
        ("USER", 7),
    ]
    assert (Op.ALL, Op.READ, Op.DESCRIBE_CONFIGS, Op.DESCRIBE_TOKENS) == (2, 3, 10, 14)
    assert (PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED) == (2, 3, 4)
    assert (DENY, ALLOW) == (2, 3)


@pytest.mark.parametrize(
    "text", ["DescribeConfigs", "DESCRIBECONFIGS", "DESCRIBE_CONFIGS", "describe-configs"]
)
def test_operation_names_parse_in_every_spelling(text: str) -> None:
    assert parse_enum(AclOperation, text) is Op.DESCRIBE_CONFIGS


def test_unknown_name_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown AclOperation 'Reed'.*Read"):
        parse_enum(AclOperation, "Reed")


def test_paths_use_pascal_case() -> None:
    assert pascal_case(ResourceType.TRANSACTIONAL_ID) == "TransactionalId"
    assert pascal_case(Op.CLUSTER_ACTION) == "ClusterAction"


# -- the ACL znode


def znode(**fields: str | None) -> bytes:
    """An ACL znode with one entry: User:a allowed Read from *, with ``fields`` changed (None: left out)."""
    entry = {"principal": "User:a", "permissionType": "Allow", "operation": "Read", "host": "*", **fields}
    return json.dumps({"version": 1, "acls": [{k: v for k, v in entry.items() if v is not None}]}).encode()


def test_znode_json_is_kafkas() -> None:
    data = encode_acls([allow(Op.READ), deny(Op.DESCRIBE_CONFIGS, BOB, HOST)])
    assert json.loads(data) == {
        "version": 1,
        "acls": [
            {"principal": ALICE, "permissionType": "Allow", "operation": "Read", "host": "*"},
            {"principal": BOB, "permissionType": "Deny", "operation": "DescribeConfigs", "host": HOST},
        ],
    }
    assert b" " not in data


def test_upper_case_names_decode() -> None:
    data = znode(permissionType="ALLOW", operation="READ")
    assert decode_acls(data) == {AclEntry("User:a", ALLOW, Op.READ)}


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"{not json", "not JSON"),
        (b'{"version":1}', "expected"),
        (znode(principal="alice"), "Type:Name"),
        (znode(operation="Fly"), "Fly"),
        (znode(host=None), "host"),
        (znode(permissionType="Any"), "ANY"),
    ],
)
def test_unusable_znode_raises_value_error_naming_it(data: bytes, reason: str) -> None:
    with pytest.raises(ValueError, match=reason) as raised:
        decode_acls(data, "/kafka-acl/Topic/t")
    assert "/kafka-acl/Topic/t" in str(raised.value)


entries = st.builds(
    AclEntry,
    st.sampled_from([ALICE, BOB, "User:*", "User:CN=broker-1,O=x"]),
    st.sampled_from([ALLOW, DENY]),
    st.sampled_from([op for op in Op if op > Op.ANY]),
    st.sampled_from(["*", HOST, "::1"]),
)


@given(st.frozensets(entries))
def test_znode_round_trip(acls: frozenset[AclEntry]) -> None:
    assert decode_acls(encode_acls(acls)) == acls


# -- patterns


def test_patterns_are_concrete() -> None:
    with pytest.raises(ValueError):
        ResourcePattern(ResourceType.ANY, "t")
    with pytest.raises(ValueError):
        ResourcePattern(TOPIC, "t", PatternType.MATCH)


@pytest.mark.parametrize(
    "pattern", [topic(""), topic("a/b"), ResourcePattern(CLUSTER, "other"), ResourcePattern(CLUSTER, "")]
)
def test_kafka_refuses_to_store(pattern: ResourcePattern) -> None:
    with pytest.raises(ValueError):
        validate_pattern(pattern)


def test_filters() -> None:
    stored = [topic("orders"), topic("*"), topic("ord", prefixed=True), topic("x", prefixed=True)]
    match = ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH)
    assert [p for p in stored if match.matches(p)] == stored[:3]
    any_type = ResourcePatternFilter(TOPIC, "ord", PatternType.ANY)
    assert [p for p in stored if any_type.matches(p)] == [topic("ord", prefixed=True)]
    literal = ResourcePatternFilter(TOPIC, "orders", PatternType.LITERAL)
    assert [p for p in stored if literal.matches(p)] == [topic("orders")]
    assert not ResourcePatternFilter(GROUP).matches(topic("orders"))


# -- decisions


def test_no_acl_denies_unless_allow_everyone() -> None:
    assert not may(snapshot(), Op.READ)
    assert may(snapshot(allow_everyone_if_no_acl_found=True), Op.READ)


def test_acls_for_someone_else_still_count_as_acls() -> None:
    """allow.everyone.if.no.acl.found only helps when no ACL names the resource at all."""
    s = snapshot((topic("orders"), allow(Op.READ, BOB)), allow_everyone_if_no_acl_found=True)
    assert not may(s, Op.READ)
    assert may(s, Op.READ, name="other")


def test_super_user_is_allowed_even_when_denied() -> None:
    s = snapshot((topic("orders"), deny(Op.ALL)), super_users={ALICE})
    assert may(s, Op.DELETE)
    assert not may(s, Op.DELETE, principal=BOB)


def test_deny_beats_allow() -> None:
    s = snapshot((topic("orders"), allow(Op.ALL)), (topic("orders"), deny(Op.WRITE)))
    assert may(s, Op.READ)
    assert not may(s, Op.WRITE)


def test_describe_is_implied_but_deny_is_not_widened() -> None:
    s = snapshot((topic("orders"), allow(Op.READ)), (topic("orders"), allow(Op.ALTER_CONFIGS)))
    assert may(s, Op.DESCRIBE)
    assert may(s, Op.DESCRIBE_CONFIGS)
    assert not may(s, Op.WRITE)
    denied_read = snapshot((topic("orders"), allow(Op.DESCRIBE)), (topic("orders"), deny(Op.READ)))
    assert may(denied_read, Op.DESCRIBE)


def test_wildcards_principal_host_and_resource() -> None:
    s = snapshot((topic("*"), allow(Op.READ, "User:*")))
    assert may(s, Op.READ, name="anything", principal=BOB)
    by_host = snapshot((topic("orders"), allow(Op.READ, host=HOST)))
    assert may(by_host, Op.READ)
    assert not may(by_host, Op.READ, host="10.0.0.2")


def test_prefixed_acls_apply_to_names_they_start() -> None:
    s = snapshot(
        (topic("ord", prefixed=True), allow(Op.READ)), (topic("orders-", prefixed=True), deny(Op.READ))
    )
    assert may(s, Op.READ, name="ord")
    assert may(s, Op.READ, name="orders")
    assert not may(s, Op.READ, name="orders-eu")
    assert not may(s, Op.READ, name="or")


def test_acls_of_another_type_do_not_apply() -> None:
    s = snapshot((ResourcePattern(GROUP, "orders"), allow(Op.READ)))
    assert not may(s, Op.READ)


def test_with_resource_leaves_the_original_unchanged() -> None:
    before = snapshot((topic("orders"), allow(Op.READ)))
    after = before.with_resource(topic("orders"), set())
    assert may(before, Op.READ)
    assert topic("orders") not in after
    assert after.super_users == before.super_users


def test_questions_must_be_concrete() -> None:
    with pytest.raises(ValueError):
        snapshot().authorize(ALICE, HOST, Op.ANY, TOPIC, "t")
    with pytest.raises(ValueError):
        snapshot().authorize_any(ALICE, HOST, Op.READ, ResourceType.ANY)


principals = st.sampled_from([ALICE, BOB, "User:*"])
hosts = st.sampled_from(["*", HOST, "10.0.0.2"])
operations = st.sampled_from([Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS])
names = st.sampled_from(["orders", "*", "ord", "o"])
acl = st.tuples(
    st.builds(
        ResourcePattern,
        st.just(TOPIC),
        names.filter(lambda n: n != "*") | st.just("*"),
        st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    ),
    st.builds(AclEntry, principals, st.sampled_from([ALLOW, DENY]), operations, hosts),
)
questions = st.tuples(
    st.sampled_from([ALICE, BOB]),
    st.sampled_from([HOST, "10.0.0.2"]),
    operations,
    st.sampled_from(["orders", "other"]),
)


@given(st.lists(acl, max_size=8), questions)
def test_a_matching_deny_always_wins(
    acls: list[tuple[ResourcePattern, AclEntry]], question: tuple[str, str, AclOperation, str]
) -> None:
    principal, host, op, name = question
    pattern = topic(name)
    s = snapshot(*acls, (pattern, AclEntry(principal, DENY, op, host)), (pattern, allow(Op.ALL, principal)))
    assert not s.authorize(principal, host, op, TOPIC, name)


@given(st.lists(acl, max_size=8), questions)
def test_adding_an_allow_never_takes_access_away(
    acls: list[tuple[ResourcePattern, AclEntry]], question: tuple[str, str, AclOperation, str]
) -> None:
    principal, host, op, name = question
    before = snapshot(*acls).authorize(principal, host, op, TOPIC, name)
    after = snapshot(*acls, (topic(name), allow(op, principal, host))).authorize(
        principal, host, op, TOPIC, name
    )
    assert after or not before
    if not any(e.permission is DENY for _, e in acls):
        assert after


@given(st.lists(acl.filter(lambda a: a[1].permission is ALLOW), max_size=8), questions)
def test_by_type_without_denies_is_any_applicable_allow(
    acls: list[tuple[ResourcePattern, AclEntry]], question: tuple[str, str, AclOperation, str]
) -> None:
    principal, host, op, _ = question
    expected = any(e.applies_to(principal, host) and e.operation in (op, Op.ALL) for _, e in acls)
    assert snapshot(*acls).authorize_any(principal, host, op, TOPIC) == expected


# -- authorize_any (authorizeByResourceType)


def any_topic(s: AclSnapshot, op: AclOperation = Op.WRITE, principal: str = ALICE) -> bool:
    return s.authorize_any(principal, HOST, op, TOPIC)


def test_by_type_needs_an_allow() -> None:
    assert not any_topic(snapshot())
    assert any_topic(snapshot((topic("orders"), allow(Op.WRITE))))
    assert any_topic(snapshot((topic("ord", prefixed=True), allow(Op.ALL))))
    assert not any_topic(snapshot((topic("orders"), allow(Op.READ))))
    assert not any_topic(snapshot((topic("orders"), allow(Op.WRITE, BOB))))


def test_by_type_allow_dominated_by_deny_does_not_count() -> None:
    assert not any_topic(snapshot((topic("orders"), allow(Op.WRITE)), (topic("orders"), deny(Op.WRITE))))
    assert not any_topic(
        snapshot((topic("orders"), allow(Op.WRITE)), (topic("ord", prefixed=True), deny(Op.WRITE)))
    )
    assert not any_topic(
        snapshot(
            (topic("orders", prefixed=True), allow(Op.WRITE)), (topic("ord", prefixed=True), deny(Op.WRITE))
        )
    )
    assert any_topic(
        snapshot(
            (topic("ord", prefixed=True), allow(Op.WRITE)), (topic("orders", prefixed=True), deny(Op.WRITE))
        )
    )
    assert any_topic(snapshot((topic("a"), allow(Op.WRITE)), (topic("b"), deny(Op.WRITE))))


def test_by_type_literal_wildcard_deny_denies_even_with_allow_everyone() -> None:
    s = snapshot((topic("*"), deny(Op.WRITE, "User:*")), allow_everyone_if_no_acl_found=True)
    assert not any_topic(s)
    assert any_topic(snapshot((topic("orders"), allow(Op.READ, BOB)), allow_everyone_if_no_acl_found=True))


def test_by_type_super_user() -> None:
    assert any_topic(snapshot((topic("*"), deny(Op.ALL)), super_users={ALICE}))
