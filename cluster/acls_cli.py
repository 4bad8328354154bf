"""``python -m cluster acls``: kafka-acls.sh's add, remove and list, writing ZooKeeper directly.

``kafka-acls.sh --authorizer-properties zookeeper.connect=Z --add --allow-principal User:alice
--operation Read --topic orders`` works with the command name changed (``--zookeeper Z`` is the
short form). ACLs go where Kafka's AclAuthorizer keeps them (``/kafka-acl``,
``/kafka-acl-extended``), each change with its notification, so running brokers pick it up at once;
``zkstore.acls`` does the writing.

One departure, so that a removal takes what it names: ``--remove`` without ``--operation`` takes
the named principals' entries for every operation, and without a host from every host (kafka-acls.sh
would default to ``All`` and ``*`` and take only entries with exactly those).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cluster import admin_cli
from placement.errors import AdminError
from security.acl import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    AclEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    check_principal,
    parse_enum,
    pascal_case,
    validate_pattern,
)
from zkstore import acls
from zkstore.aio import AsyncZooKeeper

__all__ = ["VALID_OPERATIONS", "register", "run_acls"]

Op = AclOperation
VALID_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {
            Op.READ,
            Op.WRITE,
            Op.CREATE,
            Op.DESCRIBE,
            Op.DELETE,
            Op.ALTER,
            Op.DESCRIBE_CONFIGS,
            Op.ALTER_CONFIGS,
            Op.ALL,
        }
    ),
    ResourceType.GROUP: frozenset({Op.READ, Op.DESCRIBE, Op.DELETE, Op.ALL}),
    ResourceType.CLUSTER: frozenset(
        {
            Op.CREATE,
            Op.CLUSTER_ACTION,
            Op.DESCRIBE_CONFIGS,
            Op.ALTER_CONFIGS,
            Op.IDEMPOTENT_WRITE,
            Op.ALTER,
            Op.DESCRIBE,
            Op.ALL,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({Op.DESCRIBE, Op.WRITE, Op.ALL}),
    ResourceType.DELEGATION_TOKEN: frozenset({Op.DESCRIBE, Op.ALL}),
    ResourceType.USER: frozenset({Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS, Op.ALL}),
}
"""The operations kafka-acls.sh accepts per resource type: others could be stored but never asked for."""

PRODUCER_OPERATIONS = {
    ResourceType.TOPIC: frozenset({Op.WRITE, Op.DESCRIBE, Op.CREATE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({Op.WRITE, Op.DESCRIBE}),
}
CONSUMER_OPERATIONS = {
    ResourceType.TOPIC: frozenset({Op.READ, Op.DESCRIBE}),
    ResourceType.GROUP: frozenset({Op.READ}),
}
PATTERN_TYPES = {
    "literal": PatternType.LITERAL,
    "prefixed": PatternType.PREFIXED,
    "any": PatternType.ANY,
    "match": PatternType.MATCH,
}


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add ``acls`` to ``python -m cluster``'s subcommands."""
    parser = commands.add_parser(
        "acls",
        parents=[common],
        help="add, remove and list ACLs stored in ZooKeeper (kafka-acls.sh's flags)",
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--add", action="store_true")
    mode.add_argument("--remove", action="store_true")
    mode.add_argument("--list", action="store_true")
    many = {"action": "append", "default": []}
    parser.add_argument("--allow-principal", metavar="TYPE:NAME", **many)
    parser.add_argument("--deny-principal", metavar="TYPE:NAME", **many)
    parser.add_argument("--allow-host", metavar="IP", help="default: * (every host)", **many)
    parser.add_argument("--deny-host", metavar="IP", help="default: * (every host)", **many)
    parser.add_argument("--principal", metavar="TYPE:NAME", help="with --list: only this principal", **many)
    parser.add_argument("--operation", metavar="OP", help="Read, Write, Describe, ... (default: All)", **many)
    parser.add_argument("--topic", metavar="TOPIC", **many)
    parser.add_argument("--group", metavar="GROUP", **many)
    parser.add_argument("--transactional-id", metavar="ID", **many)
    parser.add_argument("--cluster", action="store_true", help=f"the cluster resource ({CLUSTER_NAME})")
    parser.add_argument(
        "--resource-pattern-type",
        choices=sorted(PATTERN_TYPES),
        type=str.lower,
        help="literal (default) or prefixed; --list and --remove also take any (the name exactly, "
        "any pattern type) and match (every pattern that applies to the name)",
    )
    parser.add_argument(
        "--producer",
        action="store_true",
        help="Write, Describe and Create on the topics (Write and Describe on transactional ids)",
    )
    parser.add_argument(
        "--consumer", action="store_true", help="Read and Describe on the topics, Read on the groups"
    )
    parser.add_argument(
        "--idempotent", action="store_true", help="with --producer: IdempotentWrite on the cluster"
    )
    parser.add_argument(
        "--authorizer-properties",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="kafka-acls.sh's way of naming ZooKeeper: zookeeper.connect=HOST:PORT (same as --zookeeper)",
    )
    parser.add_argument("--force", action="store_true", help="accepted for kafka-acls.sh's sake; never asks")
    parser.set_defaults(run=admin_cli.guarded(run_acls))


# ----------------------------------------------------------------------------------------------------
# From flags to ACLs (pure)


@dataclass(frozen=True)
class Binding:
    """One ACL entry on one pattern: a row of the output."""

    pattern: ResourcePattern
    entry: AclEntry

    def as_json(self) -> dict[str, str]:
        return {
            "resourceType": self.pattern.resource_type.name,
            "name": self.pattern.name,
            "patternType": self.pattern.pattern_type.name,
            "principal": self.entry.principal,
            "host": self.entry.host,
            "operation": self.entry.operation.name,
            "permissionType": self.entry.permission.name,
        }

    def row(self) -> tuple[str, ...]:
        return tuple(self.as_json().values())


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    named = [
        *((ResourceType.TOPIC, t) for t in args.topic),
        *((ResourceType.GROUP, g) for g in args.group),
        *((ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id),
    ]
    if args.cluster or args.idempotent:
        named.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return named


def _operations(args: argparse.Namespace, resource_type: ResourceType) -> frozenset[AclOperation] | None:
    """The operations the flags name for one resource type (None: any, for --remove)."""
    if args.producer or args.consumer:
        ops: set[AclOperation] = set()
        if args.producer:
            ops |= PRODUCER_OPERATIONS.get(resource_type, frozenset())
            if args.idempotent and resource_type is ResourceType.CLUSTER:
                ops.add(Op.IDEMPOTENT_WRITE)
        if args.consumer:
            ops |= CONSUMER_OPERATIONS.get(resource_type, frozenset())
        return frozenset(ops)
    if not args.operation:
        return None if args.remove else frozenset({Op.ALL})
    try:
        ops = {parse_enum(AclOperation, text) for text in args.operation}
    except ValueError as exc:
        raise AdminError(str(exc)) from None
    invalid = ops - VALID_OPERATIONS[resource_type]
    if invalid:
        allowed = ", ".join(sorted(pascal_case(o) for o in VALID_OPERATIONS[resource_type]))
        raise AdminError(
            f"{', '.join(sorted(pascal_case(o) for o in invalid))} cannot apply to a "
            f"{pascal_case(resource_type)} resource (valid: {allowed})"
        )
    return frozenset(ops)


def _check_flags(args: argparse.Namespace) -> str | None:
    """A usage error the flags make, before anything is read or written."""
    principals = args.allow_principal or args.deny_principal
    if args.list:
        if principals or args.producer or args.consumer:
            return "--list filters by resource and --principal only"
        return None
    rules = (
        (bool(args.principal), "--principal is for --list; use --allow-principal or --deny-principal"),
        (not _resources(args), "name a resource: --topic, --group, --transactional-id or --cluster"),
        (
            (args.producer or args.consumer) and args.operation,
            "--producer and --consumer choose the operations",
        ),
        (args.consumer and not (args.topic and args.group), "--consumer needs --topic and --group"),
        (
            args.producer and not (args.topic or args.transactional_id),
            "--producer needs --topic or --transactional-id",
        ),
        (args.idempotent and not args.producer, "--idempotent goes with --producer"),
        (args.add and not principals, "--add needs --allow-principal or --deny-principal"),
        (
            args.add and args.resource_pattern_type in ("any", "match"),
            f"--add needs a literal or prefixed pattern, not {args.resource_pattern_type}",
        ),
        (args.allow_host and not args.allow_principal, "--allow-host goes with --allow-principal"),
        (args.deny_host and not args.deny_principal, "--deny-host goes with --deny-principal"),
    )
    return next((message for broken, message in rules if broken), None)


def _principals(names: Iterable[str]) -> list[str]:
    out = [name.strip() for name in names]
    for principal in out:
        try:
            check_principal(principal)
        except ValueError as exc:
            raise AdminError(str(exc)) from None
    return out


def entries_to_add(args: argparse.Namespace, resource_type: ResourceType) -> frozenset[AclEntry]:
    """Every principal x host x operation the flags ask for, allowed and denied."""
    ops = _operations(args, resource_type) or frozenset()
    out: set[AclEntry] = set()
    for permission, principals, hosts in (
        (AclPermissionType.ALLOW, args.allow_principal, args.allow_host),
        (AclPermissionType.DENY, args.deny_principal, args.deny_host),
    ):
        for principal in _principals(principals):
            for host in hosts or [WILDCARD_HOST]:
                out.update(AclEntry(principal, permission, op, host) for op in ops)
    return frozenset(out)


def removal_filter(args: argparse.Namespace, resource_type: ResourceType) -> Callable[[AclEntry], bool]:
    """Which entries ``--remove`` takes away: those of the named principals (every entry when none
    is named), for the named operations and hosts (all when none is named)."""
    ops = _operations(args, resource_type)
    wanted: list[tuple[AclPermissionType, str, frozenset[str]]] = [
        (permission, principal, frozenset(hosts))
        for permission, principals, hosts in (
            (AclPermissionType.ALLOW, args.allow_principal, args.allow_host),
            (AclPermissionType.DENY, args.deny_principal, args.deny_host),
        )
        for principal in _principals(principals)
    ]

    def selected(entry: AclEntry) -> bool:
        if ops is not None and entry.operation not in ops:
            return False
        if not wanted:
            return True
        return any(
            entry.permission is permission
            and entry.principal == principal
            and (not hosts or entry.host in hosts)
            for permission, principal, hosts in wanted
        )

    return selected


def _patterns_to_add(args: argparse.Namespace) -> list[ResourcePattern]:
    pattern_type = PATTERN_TYPES[args.resource_pattern_type or "literal"]
    patterns = [ResourcePattern(t, name, pattern_type) for t, name in _resources(args)]
    for pattern in patterns:
        try:
            validate_pattern(pattern)
        except ValueError as exc:
            raise AdminError(f"invalid resource {pattern}: {exc}") from None
    return patterns


def _filters(args: argparse.Namespace) -> list[ResourcePatternFilter]:
    explicit = args.resource_pattern_type
    named = _resources(args)
    if not named:  # --list of everything (of one pattern type, when given)
        return [ResourcePatternFilter(pattern_type=PATTERN_TYPES[explicit] if explicit else PatternType.ANY)]
    pattern_type = PATTERN_TYPES[explicit or "literal"]
    return [ResourcePatternFilter(t, name, pattern_type) for t, name in named]


# ----------------------------------------------------------------------------------------------------
# Commands


def run_acls(args: argparse.Namespace) -> int:
    for item in args.authorizer_properties:
        key, _, value = item.partition("=")
        if key.strip() != "zookeeper.connect" or not value.strip():
            return admin_cli.usage_error(
                f"--authorizer-properties takes zookeeper.connect=HOST:PORT, not {item!r}"
            )
        args.zookeeper = args.zookeeper or value.strip()
    problem = _check_flags(args)
    if problem:
        return admin_cli.usage_error(problem)
    if args.list:
        found = admin_cli.with_zookeeper(
            args, lambda zk: _list(zk, _filters(args), set(_principals(args.principal)))
        )
        _show(args, found, title="Current ACLs:")
        return 0
    if args.add:
        plan = {p: entries_to_add(args, p.resource_type) for p in _patterns_to_add(args)}
        plan = {p: entries for p, entries in plan.items() if entries}  # --producer names no group op
        updates = admin_cli.with_zookeeper(args, lambda zk: _add(zk, plan))
    else:
        _filters(args)  # flags checked before connecting
        updates = admin_cli.with_zookeeper(args, lambda zk: _remove(zk, args))
    changed = [Binding(u.pattern, e) for u in updates for e in sorted(u.added | u.removed)]
    current = [Binding(u.pattern, e) for u in updates for e in sorted(u.after)]
    verb = "Added" if args.add else "Removed"
    if args.json:
        admin_cli.print_json(
            {
                "added" if args.add else "removed": [b.as_json() for b in changed],
                "current": [b.as_json() for b in current],
            }
        )
        return 0
    resources = len({u.pattern for u in updates})
    print(f"{verb} {len(changed)} ACL(s) on {resources} resource(s).")
    _show(args, current, title="Current ACLs of the resources changed:")
    return 0


def _show(args: argparse.Namespace, bindings: Sequence[Binding], *, title: str) -> None:
    if args.json and args.list:
        admin_cli.print_json([b.as_json() for b in bindings])
        return
    admin_cli.print_table(
        ("RESOURCE-TYPE", "NAME", "PATTERN-TYPE", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"),
        [b.row() for b in bindings],
        title=title,
    )


async def _list(
    zk: AsyncZooKeeper, filters: Sequence[ResourcePatternFilter], principals: set[str]
) -> list[Binding]:
    stored = await acls.read_all_acls(zk)
    return [
        Binding(pattern, entry)
        for pattern in sorted(stored)
        if any(f.matches(pattern) for f in filters)
        for entry in sorted(stored[pattern])
        if not principals or entry.principal in principals
    ]


async def _add(zk: AsyncZooKeeper, plan: dict[ResourcePattern, frozenset[AclEntry]]) -> list[acls.AclUpdate]:
    return [await _update(zk, pattern, acls.adding(new)) for pattern, new in plan.items()]


async def _remove(zk: AsyncZooKeeper, args: argparse.Namespace) -> list[acls.AclUpdate]:
    filters = _filters(args)
    stored = await acls.read_all_acls(zk)
    updates = []
    for pattern in sorted(p for p in stored if any(f.matches(p) for f in filters)):
        updates.append(await _update(zk, pattern, acls.removing(removal_filter(args, pattern.resource_type))))
    return updates


async def _update(
    zk: AsyncZooKeeper,
    pattern: ResourcePattern,
    change: acls.AclChange,
) -> acls.AclUpdate:
    try:
        return await acls.update_resource_acls(zk, pattern, change)
    except (ValueError, acls.AclUpdateFailed) as exc:
        raise AdminError(str(exc)) from None
