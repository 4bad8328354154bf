"""The ACL Admin API's pure parts: wire bodies to bindings and filters, and what a filter matches."""

from __future__ import annotations

import pytest

from broker.acl_apis import binding_of, described, filter_of, matching
from security.acl import (
    AclEntry,
    AclOperation,
    AclPermissionType,
    AclSnapshot,
    PatternType,
    ResourcePattern,
    ResourceType,
)

ALLOW, READ, WRITE = AclPermissionType.ALLOW, AclOperation.READ, AclOperation.WRITE
ORDERS = ResourcePattern(ResourceType.TOPIC, "orders")
PREFIX = ResourcePattern(ResourceType.TOPIC, "ord", PatternType.PREFIXED)
SNAPSHOT = AclSnapshot().with_acls(
    {
        ORDERS: {AclEntry("User:alice", ALLOW, READ), AclEntry("User:bob", ALLOW, WRITE)},
        PREFIX: {AclEntry("User:bob", ALLOW, READ)},
    }
)


def creation(**changes: object) -> dict[str, object]:
    body: dict[str, object] = {
        "resource_type": 2,
        "resource_name": "orders",
        "resource_pattern_type": 3,
        "principal": "User:alice",
        "host": "*",
        "operation": 3,
        "permission_type": 3,
    }
    return body | changes


def acl_filter(**changes: object) -> dict[str, object]:
    body: dict[str, object] = {
        "resource_type_filter": 1,
        "resource_name_filter": None,
        "pattern_type_filter": 1,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }
    return body | changes


def test_a_creation_becomes_a_binding_and_v0_means_literal() -> None:
    assert binding_of(creation()) == (ORDERS, AclEntry("User:alice", ALLOW, READ))
    del_v0 = creation()
    del del_v0["resource_pattern_type"]
    assert binding_of(del_v0)[0].pattern_type is PatternType.LITERAL


@pytest.mark.parametrize(
    "bad",
    [
        {"resource_type": 1},  # ANY is a filter, not a resource
        {"resource_pattern_type": 2},  # MATCH likewise
        {"principal": "alice"},  # no type
        {"operation": 1},
        {"permission_type": 1},
        {"resource_name": "a/b"},
        {"resource_type": 4, "resource_name": "other-cluster"},
        {"operation": 99},
    ],
)
def test_an_invalid_creation_says_why(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="invalid ACL binding"):
        binding_of(creation(**bad))


def test_filters_match_like_kafkas() -> None:
    everything = matching(SNAPSHOT, filter_of(acl_filter()))
    assert len(everything) == 3
    bobs = matching(SNAPSHOT, filter_of(acl_filter(principal_filter="User:bob")))
    assert [(p.pattern_type, e.operation) for p, e in bobs] == [
        (PatternType.PREFIXED, READ),
        (PatternType.LITERAL, WRITE),
    ]
    # MATCH: every pattern that applies to a topic named "orders", the prefix included
    applying = matching(SNAPSHOT, filter_of(acl_filter(resource_name_filter="orders", pattern_type_filter=2)))
    assert {p for p, _ in applying} == {ORDERS, PREFIX}
    literal = filter_of(acl_filter(resource_name_filter="orders", pattern_type_filter=3))
    assert {p for p, _ in matching(SNAPSHOT, literal)} == {ORDERS}
    assert matching(SNAPSHOT, filter_of(acl_filter(operation=3, permission_type=2))) == []  # no DENY


def test_described_groups_entries_by_resource() -> None:
    resources = described(matching(SNAPSHOT, filter_of(acl_filter())))
    assert [(r["resource_name"], r["pattern_type"], len(r["acls"])) for r in resources] == [
        ("ord", 4, 1),
        ("orders", 3, 2),
    ]


@pytest.mark.parametrize("bad", [{"operation": 0}, {"permission_type": 0}, {"resource_type_filter": 0}])
def test_an_unknown_filter_is_invalid(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="invalid ACL filter"):
        filter_of(acl_filter(**bad))
