"""Kafka's per-API checks split a request into what may run and what is refused, and record each refusal."""

from __future__ import annotations

from typing import Any

from authorizer.acl_authorizer import AclAuthorizer, AuthorizerSettings
from broker.authorization import RequestAuthorizer
from protocol import ApiKey, ErrorCode
from security.acl import AclOperation, ResourceType


def gate(api_key: int, version: int, body: dict[str, Any], *, super_user: bool = False) -> Any:
    settings = AuthorizerSettings(enabled=True, super_users=frozenset({"User:admin"}))
    authorizer = AclAuthorizer(None, settings)  # type: ignore[arg-type]  # decisions read no ZooKeeper
    principal = "User:admin" if super_user else "User:alice"
    return RequestAuthorizer(authorizer).gate(principal, "127.0.0.1", api_key, version, body)


def test_refused_topics_are_answered_beside_the_rest_and_each_refusal_is_recorded() -> None:
    for api_key, version, body, field in (
        (
            ApiKey.CREATE_PARTITIONS,
            3,
            {"topics": [{"name": "a", "count": 2, "assignments": None}]},
            "results",
        ),
        (
            ApiKey.CREATE_TOPICS,
            5,
            {"topics": [{"name": "a"}], "timeout_ms": 0, "validate_only": False},
            "topics",
        ),
        (ApiKey.DELETE_TOPICS, 4, {"topic_names": ["a"], "timeout_ms": 0}, "responses"),
    ):
        result = gate(api_key, version, body)
        assert result.refusal is None
        assert result.body[next(k for k in body if isinstance(body[k], list))] == []
        [entry] = result.finish({field: []})[field]
        assert entry["name"] == "a" and entry["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        [denial] = result.denials
        assert denial.resource_type == ResourceType.TOPIC and denial.name == "a"
        assert gate(api_key, version, body, super_user=True).denials == []


def test_listings_keep_only_what_may_be_described() -> None:
    result = gate(ApiKey.LIST_GROUPS, 4, {"states_filter": []})
    assert result.finish({"groups": [{"group_id": "g"}]}) == {"groups": []}
    # Metadata encodes each topic as it builds it: the handler is told what it may list instead
    result = gate(ApiKey.METADATA, 8, {"topics": None})
    assert result.keep is None and result.describable is not None and not result.describable("t")
    assert gate(ApiKey.METADATA, 8, {"topics": None}, super_user=True).describable("t")
    result = gate(ApiKey.LIST_GROUPS, 4, {"states_filter": []}, super_user=True)
    assert result.finish({"groups": [{"group_id": "g"}]}) == {"groups": [{"group_id": "g"}]}


def test_a_control_request_is_refused_whole() -> None:
    result = gate(ApiKey.UPDATE_METADATA, 7, {"controller_id": 1001})
    assert result.refusal == {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    assert [d.operation for d in result.denials] == [AclOperation.CLUSTER_ACTION]
