"""ACLs in ZooKeeper, in Kafka's layout, so that Kafka's tools and brokers and ours share them.

Literal ACLs live in ``/kafka-acl/<Type>/<name>`` and prefixed ones in
``/kafka-acl-extended/prefixed/<Type>/<prefix>`` (``<Type>`` in PascalCase: ``Topic``,
``TransactionalId``). Every change is announced by a sequential ``acl_changes_`` znode: under
``/kafka-acl-changes`` with ``TOPIC:orders`` for a literal resource, under
``/kafka-acl-extended-changes`` with a small JSON document otherwise; brokers watch both and re-read
the resource named.

Writes are compare-and-set on the znode version and retried on a conflict, so two tools adding ACLs
to one resource at once both land. The write and its notification go in one multi-op: a writer that
dies between the two cannot leave brokers unaware of a change.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError

from security.acl import (
    CONCRETE_RESOURCE_TYPES,
    AclEntry,
    PatternType,
    ResourcePattern,
    ResourceType,
    decode_acls,
    encode_acls,
    parse_enum,
    pascal_case,
)
from zkstore.aio import AsyncZooKeeper
from zkstore.batch_read import get_children_many, get_data_many
from zkstore.ops import Create, Delete, Op, SetData

__all__ = [
    "ACL_CHANGE_PREFIX",
    "CHANGE_ROOTS",
    "EXTENDED_ACL_CHANGES",
    "LITERAL_ACL_CHANGES",
    "MAX_UPDATE_RETRIES",
    "AclChange",
    "AclUpdate",
    "AclUpdateFailed",
    "VersionedAcls",
    "adding",
    "change_root",
    "change_sequence",
    "create_acl_paths",
    "decode_change",
    "encode_change",
    "read_all_acls",
    "read_resource_acls",
    "removing",
    "resource_path",
    "store_root",
    "update_resource_acls",
]

log = logging.getLogger("zkstore.acls")

LITERAL_ACL_ROOT = "/kafka-acl"
PREFIXED_ACL_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
CHANGE_ROOTS = (LITERAL_ACL_CHANGES, EXTENDED_ACL_CHANGES)
ACL_CHANGE_PREFIX = "acl_changes_"

MAX_UPDATE_RETRIES = 10
RETRY_BACKOFF_S = 0.1
RETRY_JITTER_S = 0.05
"""Kafka's pause between two attempts of a conflicting write: 100 ms plus up to 50 ms at random,
so that writers that collided do not collide again in step."""

_STORES = {PatternType.LITERAL: LITERAL_ACL_ROOT, PatternType.PREFIXED: PREFIXED_ACL_ROOT}


# ----------------------------------------------------------------------------------------------------
# Paths and notification payloads (pure)


def store_root(pattern_type: PatternType) -> str:
    """Where the ACLs of one pattern type live (the path segment is ``prefixed``, lower case)."""
    try:
        return _STORES[pattern_type]
    except KeyError:
        raise ValueError(f"no ACLs are stored for pattern type {pattern_type.name}") from None


def resource_path(pattern: ResourcePattern) -> str:
    """The znode holding one pattern's ACLs, e.g. ``/kafka-acl/Topic/orders``."""
    if not pattern.name or "/" in pattern.name:
        raise ValueError(f"resource name {pattern.name!r} cannot be a znode name")
    return f"{store_root(pattern.pattern_type)}/{pascal_case(pattern.resource_type)}/{pattern.name}"


def change_root(pattern_type: PatternType) -> str:
    return LITERAL_ACL_CHANGES if pattern_type is PatternType.LITERAL else EXTENDED_ACL_CHANGES


def encode_change(pattern: ResourcePattern) -> bytes:
    """What a change notification names: ``TOPIC:orders`` for a literal pattern (the enum's upper-case
    name, unlike the PascalCase of the paths), Kafka's JSON for the others."""
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    document = {
        "version": 1,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return json.dumps(document, separators=(",", ":")).encode()


def decode_change(root: str, data: bytes | None) -> ResourcePattern:
    """The pattern a notification under ``root`` names; ValueError when it names none."""
    try:
        text = (data or b"").decode()
    except UnicodeDecodeError:
        raise ValueError("notification is not UTF-8") from None
    if root == LITERAL_ACL_CHANGES:
        kind, sep, name = text.partition(":")
        if not sep:
            raise ValueError(f"expected TYPE:name, got {text!r}")
        return ResourcePattern(parse_enum(ResourceType, kind), name, PatternType.LITERAL)
    return _decode_extended_change(text)


def _decode_extended_change(text: str) -> ResourcePattern:
    try:
        document: Any = json.loads(text)
    except ValueError:
        raise ValueError(f"not JSON: {text!r}") from None
    if not isinstance(document, dict) or document.get("version") != 1:
        raise ValueError(f"expected a version 1 JSON object, got {text!r}")
    kind, name, pattern = (document.get(key) for key in ("resourceType", "name", "patternType"))
    if not (isinstance(kind, str) and isinstance(name, str) and isinstance(pattern, str)):
        raise ValueError(f"resourceType, name and patternType must be strings: {text!r}")
    return ResourcePattern(parse_enum(ResourceType, kind), name, parse_enum(PatternType, pattern))


def change_sequence(name: str) -> int | None:
    """The counter ZooKeeper appended to ``acl_changes_``; None for any other child."""
    digits = name.removeprefix(ACL_CHANGE_PREFIX)
    return int(digits) if digits != name and digits.isdigit() else None


# ----------------------------------------------------------------------------------------------------
# Reads


@dataclass(frozen=True, slots=True)
class VersionedAcls:
    """One resource's ACLs and the version of their znode (None: no znode)."""

    entries: frozenset[AclEntry]
    version: int | None


async def create_acl_paths(zk: AsyncZooKeeper) -> None:
    """Every ACL directory Kafka creates at start-up: one per resource type under both stores,
    and both change directories."""
    paths = [f"{root}/{pascal_case(t)}" for root in _STORES.values() for t in CONCRETE_RESOURCE_TYPES]
    await asyncio.gather(*(zk.ensure_path(p) for p in (*paths, *CHANGE_ROOTS)))


async def read_resource_acls(zk: AsyncZooKeeper, pattern: ResourcePattern) -> VersionedAcls:
    """One resource's ACLs; a znode that cannot be decoded raises ValueError naming it."""
    path = resource_path(pattern)
    try:
        data, stat = await zk.get(path)
    except NoNodeError:
        return VersionedAcls(frozenset(), None)
    return VersionedAcls(decode_acls(data, path), stat.version)


async def read_all_acls(zk: AsyncZooKeeper) -> dict[ResourcePattern, frozenset[AclEntry]]:
    """Every stored ACL, by pattern. A znode that cannot be decoded, or a directory that is not a
    resource type, is logged and skipped: the rest still protect the cluster."""
    patterns = await _stored_patterns(zk)
    found = await get_data_many(zk, [resource_path(p) for p in patterns])
    acls: dict[ResourcePattern, frozenset[AclEntry]] = {}
    for pattern, result in zip(patterns, found, strict=True):
        if isinstance(result, NoNodeError):
            continue  # deleted since the listing
        if isinstance(result, Exception):
            raise result
        try:
            entries = decode_acls(result[0], resource_path(pattern))
        except ValueError as exc:
            log.error("skipping the ACLs of %s: %s", pattern, exc)
            continue
        if entries:
            acls[pattern] = entries
    return acls


async def _stored_patterns(zk: AsyncZooKeeper) -> list[ResourcePattern]:
    """Every pattern that has a znode, from the listings of both stores' type directories."""
    type_dirs: list[tuple[PatternType, ResourceType, str]] = []
    for pattern_type, root in _STORES.items():
        try:
            children = await zk.get_children(root)
        except NoNodeError:
            continue
        for child in sorted(children):
            resource_type = _resource_type_dir(child)
            if resource_type is None:
                log.warning("ignoring %s/%s: not a resource type's ACL directory", root, child)
                continue
            type_dirs.append((pattern_type, resource_type, f"{root}/{child}"))
    listings = await get_children_many(zk, [path for _, _, path in type_dirs])
    patterns: list[ResourcePattern] = []
    for (pattern_type, resource_type, _), names in zip(type_dirs, listings, strict=True):
        if isinstance(names, NoNodeError):
            continue
        if isinstance(names, Exception):
            raise names
        patterns.extend(ResourcePattern(resource_type, name, pattern_type) for name in sorted(names))
    return patterns


def _resource_type_dir(name: str) -> ResourceType | None:
    """The type a directory under an ACL store is for, if spelled as Kafka spells it."""
    for resource_type in CONCRETE_RESOURCE_TYPES:
        if pascal_case(resource_type) == name:
            return resource_type
    return None


# ----------------------------------------------------------------------------------------------------
# Writes


AclChange = Callable[[frozenset[AclEntry]], AbstractSet[AclEntry]]


def adding(new: AbstractSet[AclEntry]) -> AclChange:
    """The change that adds ``new`` to a resource's entries."""
    return lambda current: current | new


def removing(selected: Callable[[AclEntry], bool]) -> AclChange:
    """The change that removes the entries ``selected`` picks."""
    return lambda current: frozenset(e for e in current if not selected(e))


"""A resource's entries now -> what they should become; pure, since a conflict means calling it again."""


class AclUpdateFailed(Exception):
    """Other writers kept changing the resource; nothing of this update was written."""


@dataclass(frozen=True, slots=True)
class AclUpdate:
    """A resource's ACLs before and after an update (equal when there was nothing to change)."""

    pattern: ResourcePattern
    before: frozenset[AclEntry]
    after: frozenset[AclEntry]

    @property
    def changed(self) -> bool:
        return self.before != self.after

    @property
    def added(self) -> frozenset[AclEntry]:
        return self.after - self.before

    @property
    def removed(self) -> frozenset[AclEntry]:
        return self.before - self.after


async def update_resource_acls(
    zk: AsyncZooKeeper,
    pattern: ResourcePattern,
    change: AclChange,
    *,
    max_retries: int = MAX_UPDATE_RETRIES,
    rng: random.Random | None = None,
) -> AclUpdate:
    """Apply ``change`` (current entries -> new entries) to one resource, compare-and-set.

    The znode is created when absent, rewritten at the version read, and deleted when no entry is
    left; a change notification goes in the same multi-op. A conflicting writer (BadVersion,
    NoNode, NodeExists) means reading again and re-applying ``change``, which must therefore be a
    pure function of its argument. A lost reply retried by the session is harmless for the same
    reason: the retry finds its own write and changes nothing. A znode that cannot be decoded raises
    ValueError rather than being overwritten.
    """
    path = resource_path(pattern)
    notification_root = change_root(pattern.pattern_type)
    rng = rng or random.Random()
    await _ensure_parents(zk, path, notification_root)
    for attempt in range(max_retries + 1):
        current = await read_resource_acls(zk, pattern)
        after = frozenset(change(current.entries))
        if after == current.entries:
            return AclUpdate(pattern, current.entries, after)
        write: Op
        if current.version is None:
            write = Create(path, encode_acls(after))
        elif after:
            write = SetData(path, encode_acls(after), current.version)
        else:
            write = Delete(path, current.version)
        notify = Create(f"{notification_root}/{ACL_CHANGE_PREFIX}", encode_change(pattern), sequence=True)
        failure = _failure(await zk.multi([write, notify]))
        if failure is None:
            log.info(
                "ACLs of %s: %d -> %d entries (version %s)",
                pattern,
                len(current.entries),
                len(after),
                current.version,
            )
            return AclUpdate(pattern, current.entries, after)
        if not isinstance(failure, BadVersionError | NoNodeError | NodeExistsError):
            raise failure
        if isinstance(failure, NoNodeError):
            await _ensure_parents(zk, path, notification_root)  # removed under us, or the znode was
        if attempt < max_retries:
            log.info(
                "ACLs of %s changed while being updated (%s); trying again", pattern, type(failure).__name__
            )
            await asyncio.sleep(RETRY_BACKOFF_S + rng.uniform(0, RETRY_JITTER_S))
    raise AclUpdateFailed(
        f"could not update the ACLs of {pattern}: changed by others {max_retries + 1} times in a row"
    )


async def _ensure_parents(zk: AsyncZooKeeper, path: str, notification_root: str) -> None:
    await asyncio.gather(zk.ensure_path(path.rpartition("/")[0]), zk.ensure_path(notification_root))


def _failure(results: list[Any]) -> Exception | None:
    """The error that failed a multi-op (the other ops only report being rolled back)."""
    errors = [r for r in results if isinstance(r, Exception)]
    own = [e for e in errors if not isinstance(e, RolledBackError)]
    return next(iter(own or errors), None)
