"""DescribeAcls, CreateAcls and DeleteAcls: the Admin API's ACL calls, on the ACL authorizer's store.

Reads answer from the authorizer's snapshot. Writes go to ZooKeeper as ``python -m cluster acls``
writes them (``zkstore.acls``: compare-and-set per resource, with a change notification that every
broker follows), and the writing broker applies its own change at once, so that a describe right after
a create sees it. A broker without an authorizer answers SECURITY_DISABLED, as Kafka does. Who may
call them (Describe or Alter on the cluster) is decided before, in ``broker.authorization``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from itertools import groupby
from typing import Any, TypeVar

from authorizer.acl_authorizer import AclAuthorizer
from broker.on_loop import answer_on_loop
from broker.request_channel import Request
from protocol import ErrorCode
from security.acl import (
    AclEntry,
    AclEntryFilter,
    AclOperation,
    AclPermissionType,
    AclSnapshot,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    validate_pattern,
)
from zkstore import acls as store
from zkstore.aio import AsyncZooKeeper

__all__ = ["AclApis", "Binding", "binding_of", "filter_of", "matching"]

log = logging.getLogger(__name__)

Body = dict[str, Any]
T = TypeVar("T")
Binding = tuple[ResourcePattern, AclEntry]
Filter = tuple[ResourcePatternFilter, AclEntryFilter]
DISABLED = "no authorizer is configured on this broker (authorizer.class.name)"


# -- the functional core: wire bodies to bindings and filters, and back


def binding_of(creation: Body) -> Binding:
    """The ACL one CreateAcls entry asks for; ValueError (INVALID_REQUEST) saying what is wrong."""
    try:
        pattern = ResourcePattern(
            ResourceType(creation["resource_type"]),
            creation["resource_name"],
            PatternType(creation.get("resource_pattern_type", PatternType.LITERAL)),
        )
        validate_pattern(pattern)
        entry = AclEntry(
            creation["principal"],
            AclPermissionType(creation["permission_type"]),
            AclOperation(creation["operation"]),
            creation["host"],
        )
    except ValueError as exc:
        raise ValueError(f"invalid ACL binding: {exc}") from None
    return pattern, entry


def filter_of(body: Body) -> Filter:
    """A DescribeAcls body or DeleteAcls filter as pattern and entry filters; ValueError if invalid."""
    try:
        resource_type = ResourceType(body["resource_type_filter"])
        pattern_type = PatternType(body.get("pattern_type_filter", PatternType.LITERAL))
        operation = AclOperation(body["operation"])
        permission = AclPermissionType(body["permission_type"])
    except ValueError as exc:
        raise ValueError(f"invalid ACL filter: {exc}") from None
    if resource_type is ResourceType.UNKNOWN or pattern_type is PatternType.UNKNOWN:
        raise ValueError("invalid ACL filter: the resource and pattern types must not be UNKNOWN")
    try:
        entries = AclEntryFilter(body["principal_filter"], body["host_filter"], operation, permission)
    except ValueError as exc:
        raise ValueError(f"invalid ACL filter: {exc}") from None
    return ResourcePatternFilter(resource_type, body["resource_name_filter"], pattern_type), entries


def matching(snapshot: AclSnapshot, wanted: Filter) -> list[Binding]:
    """Every stored binding ``wanted`` matches, in a stable order."""
    patterns, entries = wanted
    return [
        (pattern, entry)
        for pattern in sorted(snapshot)
        if patterns.matches(pattern)
        for entry in sorted(snapshot[pattern])
        if entries.matches(entry)
    ]


def _entry_body(entry: AclEntry) -> Body:
    return {
        "principal": entry.principal,
        "host": entry.host,
        "operation": int(entry.operation),
        "permission_type": int(entry.permission),
    }


def _pattern_body(pattern: ResourcePattern) -> Body:
    return {
        "resource_type": int(pattern.resource_type),
        "resource_name": pattern.name,
        "pattern_type": int(pattern.pattern_type),
    }


def described(bindings: list[Binding]) -> list[Body]:
    """DescribeAcls' ``resources``: the bindings grouped by pattern."""
    return [
        {**_pattern_body(pattern), "acls": [_entry_body(e) for _, e in group]}
        for pattern, group in groupby(bindings, key=lambda binding: binding[0])
    ]


# -- the shell


class AclApis:
    def __init__(
        self,
        authorizer: Callable[[], AclAuthorizer],
        zk: Callable[[], AsyncZooKeeper],
        loop: Callable[[], asyncio.AbstractEventLoop],
    ) -> None:
        self.authorizer = authorizer
        self.zk = zk
        self.loop = loop

    @property
    def _enabled(self) -> bool:
        return self.authorizer().settings.enabled

    def _run(self, coro: Coroutine[Any, Any, T], answer: Callable[[T], Body]) -> Future[Body]:
        return answer_on_loop(self.loop(), coro, answer, "an ACL request")

    def describe_acls(self, request: Request, body: Body) -> Body:
        answer: Body = {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "resources": [],
        }
        if not self._enabled:
            return answer | {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": DISABLED}
        try:
            wanted = filter_of(body)
        except ValueError as exc:
            return answer | {"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(exc)}
        return answer | {"resources": described(matching(self.authorizer().snapshot, wanted))}

    def create_acls(self, request: Request, body: Body) -> Future[Body] | Body:
        creations = body["creations"]
        if not self._enabled:
            refused = {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": DISABLED}
            return {"throttle_time_ms": 0, "results": [refused] * len(creations)}
        bindings: list[Binding | str] = []  # per creation, its binding, or why it is invalid
        for creation in creations:
            try:
                bindings.append(binding_of(creation))
            except ValueError as exc:
                bindings.append(str(exc))
        wanted: dict[ResourcePattern, frozenset[AclEntry]] = {}
        for binding in bindings:
            if not isinstance(binding, str):
                wanted[binding[0]] = wanted.get(binding[0], frozenset()) | {binding[1]}

        async def create() -> dict[ResourcePattern, Body]:
            return {
                pattern: await self._update(pattern, store.adding(entries))
                for pattern, entries in wanted.items()
            }

        def answer(outcomes: dict[ResourcePattern, Body]) -> Body:
            invalid = ErrorCode.INVALID_REQUEST
            return {
                "throttle_time_ms": 0,
                "results": [
                    {"error_code": invalid, "error_message": b} if isinstance(b, str) else outcomes[b[0]]
                    for b in bindings
                ],
            }

        return self._run(create(), answer)

    def delete_acls(self, request: Request, body: Body) -> Future[Body] | Body:
        filters = body["filters"]
        if not self._enabled:
            refused = {
                "error_code": ErrorCode.SECURITY_DISABLED,
                "error_message": DISABLED,
                "matching_acls": [],
            }
            return {"throttle_time_ms": 0, "filter_results": [refused] * len(filters)}

        async def delete() -> list[Body]:
            results = []
            for given in filters:
                try:
                    wanted = filter_of(given)
                except ValueError as exc:
                    error = {"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(exc)}
                    results.append({**error, "matching_acls": []})
                    continue
                found = matching(self.authorizer().snapshot, wanted)
                outcome: dict[ResourcePattern, Body] = {}
                for pattern in {p for p, _ in found}:
                    gone = frozenset(e for p, e in found if p == pattern)
                    outcome[pattern] = await self._update(pattern, store.removing(gone.__contains__))
                matched = [{**outcome[p], **_pattern_body(p), **_entry_body(e)} for p, e in found]
                results.append(
                    {"error_code": ErrorCode.NONE, "error_message": None, "matching_acls": matched}
                )
            return results

        return self._run(delete(), lambda results: {"throttle_time_ms": 0, "filter_results": results})

    async def _update(self, pattern: ResourcePattern, change: store.AclChange) -> Body:
        """Write one resource's change and apply it here at once; its outcome as an error body."""
        try:
            update = await store.update_resource_acls(self.zk(), pattern, change)
        except (store.AclUpdateFailed, ValueError) as exc:
            log.warning("ACL update of %s failed: %s", pattern, exc)
            return {"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "error_message": str(exc)}
        self.authorizer().apply(update)
        return {"error_code": ErrorCode.NONE, "error_message": None}
