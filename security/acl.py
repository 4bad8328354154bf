"""Kafka's ACL model and its authorization rules, with no I/O.

The enums carry Kafka's wire ids (DescribeAcls/CreateAcls use them), the ACL znode JSON is Kafka's
byte for byte, and :class:`AclSnapshot` answers "may this principal do this here?" exactly as Kafka's
AclAuthorizer does in ZooKeeper mode: super users first, then deny before allow, with Describe and
DescribeConfigs implied by the operations that need them. A snapshot is immutable, so the threads
that ask can read it while the event loop builds the next one.

Principals are ``Type:Name`` strings (``User:alice``, ``User:CN=broker-1,O=x``); hosts are the
client's IP address as a string, or ``*``.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Iterator, Mapping, Set
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = [
    "CLUSTER_NAME",
    "CONCRETE_RESOURCE_TYPES",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "AclEntry",
    "AclEntryFilter",
    "AclOperation",
    "AclPermissionType",
    "AclSnapshot",
    "PatternType",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
    "check_principal",
    "decode_acls",
    "encode_acls",
    "parse_enum",
    "pascal_case",
    "validate_pattern",
]

WILDCARD_RESOURCE = "*"
"""A literal resource name that stands for every resource of its type."""
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"
"""The one name a Cluster resource has."""


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


_E = TypeVar("_E", bound=enum.IntEnum)

CONCRETE_RESOURCE_TYPES = tuple(t for t in ResourceType if t > ResourceType.ANY)
"""The types an ACL can be stored for: each has its directory under every ACL root."""

_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}
"""Operations an ALLOW for which also grants the key. Deny has no such widening."""


def pascal_case(member: enum.Enum) -> str:
    """``TRANSACTIONAL_ID`` -> ``TransactionalId``: how ACL znodes and their paths spell enum values."""
    return "".join(word.capitalize() for word in member.name.split("_"))


def parse_enum(kind: type[_E], text: str) -> _E:
    """A member of ``kind`` from any of Kafka's spellings: ``DescribeConfigs``, ``DESCRIBECONFIGS``,
    ``DESCRIBE_CONFIGS`` (and ``describe-configs``, as people type it). Raises ValueError otherwise."""
    wanted = text.strip().replace("_", "").replace("-", "").upper()
    for member in kind:
        if member.name.replace("_", "") == wanted:
            return member
    choices = ", ".join(pascal_case(m) for m in kind if m.name not in ("UNKNOWN",))
    raise ValueError(f"unknown {kind.__name__} {text!r} (expected one of {choices})")


def check_principal(principal: str) -> None:
    """Kafka's ``Type:Name`` form, both parts non-empty; raises ValueError saying what is wrong."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise ValueError(f"expected a principal in the form Type:Name (like User:alice), got {principal!r}")


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    """What an ACL is attached to: a literal resource (``*`` for all of a type) or a name prefix."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        if self.resource_type not in CONCRETE_RESOURCE_TYPES:
            raise ValueError(f"an ACL needs a concrete resource type, not {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise ValueError(f"an ACL's pattern is LITERAL or PREFIXED, not {self.pattern_type.name}")

    def __str__(self) -> str:
        return f"{self.resource_type.name}:{self.name} ({self.pattern_type.name})"


def validate_pattern(pattern: ResourcePattern) -> None:
    """The rules Kafka checks before storing an ACL (its INVALID_REQUEST cases); raises ValueError.

    A ``/`` would change the znode path; the Cluster resource has exactly one name."""
    if not pattern.name:
        raise ValueError("the resource name must not be empty")
    if "/" in pattern.name:
        raise ValueError(f"the resource name {pattern.name!r} must not contain '/'")
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise ValueError(f"the Cluster resource is named {CLUSTER_NAME!r}, not {pattern.name!r}")


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Which stored patterns a DescribeAcls/DeleteAcls (or ``acls --list``) is about.

    ``pattern_type`` ANY: the name exactly, whatever its pattern; MATCH: every pattern that would
    apply to a resource of that name (itself, ``*``, and the prefixes of it); LITERAL/PREFIXED:
    that pattern only. A ``name`` of None matches every name."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type is not ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        exact = self.pattern_type in (PatternType.ANY, pattern.pattern_type)
        if not exact and self.pattern_type is not PatternType.MATCH:
            return False
        if self.name is None:
            return True
        if exact:
            return self.name == pattern.name
        if pattern.pattern_type is PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        return self.name.startswith(pattern.name)


@dataclass(frozen=True, slots=True, order=True)
class AclEntry:
    """One rule on a resource: ``principal`` from ``host`` is allowed or denied ``operation``."""

    principal: str
    permission: AclPermissionType
    operation: AclOperation
    host: str = WILDCARD_HOST

    def __post_init__(self) -> None:
        check_principal(self.principal)
        if self.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise ValueError(f"an ACL allows or denies, not {self.permission.name}")
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"an ACL needs a concrete operation, not {self.operation.name}")
        if not self.host:
            raise ValueError("an ACL's host is an IP address or '*', not empty")

    def applies_to(self, principal: str, host: str) -> bool:
        return self.principal in (principal, WILDCARD_PRINCIPAL) and self.host in (host, WILDCARD_HOST)

    def __str__(self) -> str:
        return f"{self.principal} from {self.host} {self.permission.name} {self.operation.name}"


@dataclass(frozen=True, slots=True)
class AclEntryFilter:
    """Which entries of the matched patterns a DescribeAcls/DeleteAcls is about: None (principal,
    host) or ANY (operation, permission) matches every value."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def __post_init__(self) -> None:
        if self.operation is AclOperation.UNKNOWN or self.permission is AclPermissionType.UNKNOWN:
            raise ValueError("a filter's operation and permission type must not be UNKNOWN")

    def matches(self, entry: AclEntry) -> bool:
        return (
            self.principal in (None, entry.principal)
            and self.host in (None, entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission in (AclPermissionType.ANY, entry.permission)
        )


# ----------------------------------------------------------------------------------------------------
# The ACL znode: {"version":1,"acls":[{"principal":..,"permissionType":..,"operation":..,"host":..}]}


def encode_acls(entries: Iterable[AclEntry]) -> bytes:
    """The znode JSON Kafka writes; entries sorted so equal sets give equal bytes."""
    acls = [
        {
            "principal": e.principal,
            "permissionType": pascal_case(e.permission),
            "operation": pascal_case(e.operation),
            "host": e.host,
        }
        for e in sorted(set(entries))
    ]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(data: bytes | None, where: str = "ACL znode") -> frozenset[AclEntry]:
    """The entries of an ACL znode; anything unusable raises ValueError naming ``where`` and why.

    Empty data reads as no entries (a znode created without content). Callers that read many
    znodes log the error and skip that one: one bad edit must not stop a broker authorizing."""
    if not data:
        return frozenset()
    try:
        document: Any = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{where}: not JSON ({exc})") from None
    if not isinstance(document, dict) or not isinstance(document.get("acls"), list):
        raise ValueError(f'{where}: expected {{"version":1,"acls":[...]}}, got {_short(document)}')
    entries = []
    for index, item in enumerate(document["acls"]):
        try:
            entries.append(_decode_entry(item))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{where}: ACL #{index} {_short(item)}: {exc}") from None
    return frozenset(entries)


def _decode_entry(item: Any) -> AclEntry:
    if not isinstance(item, dict):
        raise ValueError("not an object")
    fields = {}
    for key in ("principal", "permissionType", "operation", "host"):
        value = item.get(key)
        if not isinstance(value, str):
            raise ValueError(f"{key!r} must be a string")
        fields[key] = value
    return AclEntry(
        principal=fields["principal"],
        permission=parse_enum(AclPermissionType, fields["permissionType"]),
        operation=parse_enum(AclOperation, fields["operation"]),
        host=fields["host"],
    )


def _short(value: object, limit: int = 80) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ----------------------------------------------------------------------------------------------------
# Decisions


class AclSnapshot(Mapping[ResourcePattern, frozenset[AclEntry]]):
    """Every stored ACL at one moment, with the settings that decide alongside them.

    Immutable: :meth:`with_resource` returns a new snapshot, so a reader holding one never sees it
    change. Lookups are by name and by each of the name's prefixes, so a decision costs a few dict
    probes however many ACLs exist.
    """

    __slots__ = ("_acls", "_literal", "_prefixed", "allow_everyone_if_no_acl_found", "super_users")

    def __init__(
        self,
        acls: Mapping[ResourcePattern, Set[AclEntry]] | None = None,
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self._acls: dict[ResourcePattern, frozenset[AclEntry]] = {
            pattern: frozenset(entries) for pattern, entries in (acls or {}).items() if entries
        }
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._literal: dict[tuple[ResourceType, str], frozenset[AclEntry]] = {}
        self._prefixed: dict[ResourceType, dict[str, frozenset[AclEntry]]] = {}
        for pattern, entries in self._acls.items():
            if pattern.pattern_type is PatternType.LITERAL:
                self._literal[(pattern.resource_type, pattern.name)] = entries
            else:
                self._prefixed.setdefault(pattern.resource_type, {})[pattern.name] = entries

    # -- the Mapping protocol: pattern -> entries (patterns without entries are absent)

    def __getitem__(self, pattern: ResourcePattern) -> frozenset[AclEntry]:
        return self._acls[pattern]

    def __iter__(self) -> Iterator[ResourcePattern]:
        return iter(self._acls)

    def __len__(self) -> int:
        return len(self._acls)

    def __repr__(self) -> str:
        return f"AclSnapshot({len(self._acls)} resources, super_users={sorted(self.super_users)})"

    def with_resource(self, pattern: ResourcePattern, entries: Set[AclEntry]) -> AclSnapshot:
        """This snapshot with ``pattern``'s entries replaced (an empty set removes it)."""
        acls: dict[ResourcePattern, Set[AclEntry]] = dict(self._acls)
        acls[pattern] = entries
        return self.with_acls(acls)

    def with_acls(self, acls: Mapping[ResourcePattern, Set[AclEntry]]) -> AclSnapshot:
        """Other ACLs under the same settings."""
        return AclSnapshot(
            acls,
            super_users=self.super_users,
            allow_everyone_if_no_acl_found=self.allow_everyone_if_no_acl_found,
        )

    def matching(self, resource_type: ResourceType, name: str) -> Iterator[AclEntry]:
        """The entries that apply to the resource ``name``: its own, the type's ``*``, and every
        PREFIXED pattern the name starts with."""
        yield from self._literal.get((resource_type, name), ())
        if name != WILDCARD_RESOURCE:
            yield from self._literal.get((resource_type, WILDCARD_RESOURCE), ())
        prefixes = self._prefixed.get(resource_type)
        if prefixes:
            for end in range(1, len(name) + 1):
                yield from prefixes.get(name[:end], ())

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        """Kafka's decision for one literal resource (AclAuthorizer ``authorizeAction``)."""
        _check_request(operation, resource_type)
        if principal in self.super_users:
            return True
        matching = list(self.matching(resource_type, name))
        if not matching:
            return self.allow_everyone_if_no_acl_found
        applicable = [e for e in matching if e.applies_to(principal, host)]
        if any(
            e.permission is AclPermissionType.DENY and e.operation in (operation, AclOperation.ALL)
            for e in applicable
        ):
            return False
        granting = _IMPLIED_BY.get(operation, frozenset({operation})) | {AclOperation.ALL}
        return any(e.permission is AclPermissionType.ALLOW and e.operation in granting for e in applicable)

    def authorize_any(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """May the principal do ``operation`` on at least one resource of the type? (Kafka's
        ``authorizeByResourceType``, which idempotent producers need: WRITE on any topic.)

        Allowed when some ALLOW (literal or prefixed) survives the DENYs: a literal allow is beaten by
        a deny on the same name or on a prefix of it, a prefixed allow by a deny prefix of it; a
        literal DENY on ``*`` denies outright. Implied operations do not count here, as in Kafka."""
        _check_request(operation, resource_type)
        if principal in self.super_users:
            return True
        found: dict[tuple[AclPermissionType, PatternType], set[str]] = {
            (permission, kind): set()
            for permission in (AclPermissionType.ALLOW, AclPermissionType.DENY)
            for kind in (PatternType.LITERAL, PatternType.PREFIXED)
        }
        for pattern, entries in self._acls.items():
            if pattern.resource_type != resource_type:
                continue
            for entry in entries:
                if entry.operation in (operation, AclOperation.ALL) and entry.applies_to(principal, host):
                    found[(entry.permission, pattern.pattern_type)].add(pattern.name)
        deny_literals = found[(AclPermissionType.DENY, PatternType.LITERAL)]
        deny_prefixes = found[(AclPermissionType.DENY, PatternType.PREFIXED)]
        if WILDCARD_RESOURCE in deny_literals:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True

        def dominated(name: str) -> bool:
            return any(name.startswith(prefix) for prefix in deny_prefixes)

        allow_literals = found[(AclPermissionType.ALLOW, PatternType.LITERAL)]
        allow_prefixes = found[(AclPermissionType.ALLOW, PatternType.PREFIXED)]
        return any(not dominated(p) for p in allow_prefixes) or any(
            not dominated(n) and n not in deny_literals for n in allow_literals
        )


def _check_request(operation: AclOperation, resource_type: ResourceType) -> None:
    """A question is about one concrete operation on one concrete type; anything else is a bug."""
    if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise ValueError(f"cannot authorize operation {operation.name}")
    if resource_type not in CONCRETE_RESOURCE_TYPES:
        raise ValueError(f"cannot authorize on resource type {resource_type.name}")
