"""Kafka's AclAuthorizer for ZooKeeper mode: every ACL in memory, kept current from ZooKeeper.

``start()`` loads every ACL, then follows both change directories (``/kafka-acl-changes`` and
``/kafka-acl-extended-changes``): a notification re-reads the one resource it names. ZooKeeper is
the truth and watches are hints, so after a reconnect everything is read again, and any failure
while following changes also ends in a full reload. The decisions themselves
(:meth:`AclAuthorizer.authorize`) run on request-handler threads: they read the current
:class:`~security.acl.AclSnapshot`, which the event loop replaces whole and never mutates, so no
lock is needed.

The three configuration keys are declared here once; a daemon adds :data:`AUTHORIZER_KEYS` to its
own and builds :class:`AuthorizerSettings` from what it loaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import WatchedEvent

from daemon.config import ConfigKey, LoadedConfig
from daemon.supervision import start_supervised
from security.acl import AclOperation, AclSnapshot, ResourcePattern, ResourceType, check_principal
from zkstore import acls as store
from zkstore.acls import AclUpdate
from zkstore.aio import AsyncZooKeeper, ConnectionEvent
from zkstore.batch_read import get_data_many

__all__ = [
    "ACCEPTED_AUTHORIZERS",
    "ALLOW_EVERYONE_IF_NO_ACL_FOUND",
    "AUTHORIZER_CLASS_NAME",
    "AUTHORIZER_KEYS",
    "SUPER_USERS",
    "AclAuthorizer",
    "AuthorizerSettings",
    "DeniedCallback",
    "parse_super_users",
]

log = logging.getLogger("authorizer.acl_authorizer")
audit = logging.getLogger("authorizer.acl_authorizer.audit")
"""Kafka's ``kafka.authorizer.logger``: denials at INFO, grants at DEBUG."""

ACCEPTED_AUTHORIZERS = (
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
    "acl",
)
"""Names that select this authorizer: Kafka's class name, its pre-2.4 name, and a short one."""

CHANGE_EXPIRATION_S = 15 * 60.0
"""Change notifications older than this are deleted (by whichever node sees them first), as Kafka does."""

DeniedCallback = Callable[[str, str, AclOperation, ResourceType, str | None], None]
"""Told ``(principal, host, operation, resource type, name)`` of each denial (name None when the
question was about any resource of the type); called on the thread that asked."""


def _accepted_authorizer(value: str) -> None:
    if value and value not in ACCEPTED_AUTHORIZERS:
        choices = ", ".join(repr(v) for v in ("", *ACCEPTED_AUTHORIZERS))
        raise ValueError(f"unknown authorizer; accepted values are {choices} (empty: no authorizer)")


def parse_super_users(text: str) -> frozenset[str]:
    """``User:admin;User:CN=broker-1,O=x`` -> the principals; ``;`` separates, since names may hold
    commas. Raises ValueError on an entry that is not ``Type:Name``."""
    users = [item.strip() for item in text.split(";") if item.strip()]
    for principal in users:
        check_principal(principal)
    return frozenset(users)


def _super_users_check(value: str) -> None:
    parse_super_users(value)


AUTHORIZER_CLASS_NAME = ConfigKey(
    "authorizer.class.name",
    "string",
    "",
    check=_accepted_authorizer,
    doc="empty: no authorization; `kafka.security.authorizer.AclAuthorizer` (or "
    "`kafka.security.auth.SimpleAclAuthorizer`, or `acl`): ACLs stored in ZooKeeper",
)
SUPER_USERS = ConfigKey(
    "super.users",
    "string",
    "",
    check=_super_users_check,
    doc="`;`-separated principals (`User:admin;User:CN=broker-1,O=x`) allowed everything, ACLs or not",
)
ALLOW_EVERYONE_IF_NO_ACL_FOUND = ConfigKey(
    "allow.everyone.if.no.acl.found",
    "bool",
    False,
    doc="allow any request on a resource that no ACL names (otherwise only super users may)",
)
AUTHORIZER_KEYS: tuple[ConfigKey, ...] = (AUTHORIZER_CLASS_NAME, SUPER_USERS, ALLOW_EVERYONE_IF_NO_ACL_FOUND)


@dataclass(frozen=True)
class AuthorizerSettings:
    """What decides besides the ACLs. Not ``enabled``: every request is allowed, as in Kafka
    without an authorizer, and ZooKeeper's ACLs are never read."""

    enabled: bool = False
    super_users: frozenset[str] = field(default_factory=frozenset)
    allow_everyone_if_no_acl_found: bool = False

    @classmethod
    def from_loaded(cls, loaded: LoadedConfig) -> AuthorizerSettings:
        return cls(
            enabled=bool(loaded[AUTHORIZER_CLASS_NAME.name]),
            super_users=parse_super_users(loaded[SUPER_USERS.name]),
            allow_everyone_if_no_acl_found=bool(loaded[ALLOW_EVERYONE_IF_NO_ACL_FOUND.name]),
        )


class AclAuthorizer:
    """ACL decisions from an in-memory copy of ZooKeeper's ACLs, followed through change notifications."""

    def __init__(
        self,
        zk: AsyncZooKeeper,
        settings: AuthorizerSettings,
        on_denied: DeniedCallback | None = None,
        *,
        change_expiration_s: float = CHANGE_EXPIRATION_S,
    ) -> None:
        self.zk = zk
        self.settings = settings
        self.on_denied = on_denied
        self.change_expiration_s = change_expiration_s
        self._snapshot = AclSnapshot(
            super_users=settings.super_users,
            allow_everyone_if_no_acl_found=settings.allow_everyone_if_no_acl_found,
        )
        self._last_seen = dict.fromkeys(store.CHANGE_ROOTS, -1)
        """Per change directory, the highest notification sequence already acted on."""
        self._created_ms: dict[str, int] = {}
        """Creation times (ZooKeeper's ctime) of notifications seen, for purging old ones."""
        self._wake = asyncio.Event()
        self._reload_all = False
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self.reloads = 0
        """Full reloads done (start-up included): for tests and logs."""

    @property
    def snapshot(self) -> AclSnapshot:
        """The ACLs in force now (an immutable value: DescribeAcls can list it safely)."""
        return self._snapshot

    def apply(self, update: AclUpdate) -> None:
        """Take a change this node has just written (CreateAcls, DeleteAcls) at once, before its
        notification comes back; the notification then finds nothing new."""
        self._snapshot = self._snapshot.with_resource(update.pattern, update.after)

    # -- lifecycle (on the event loop)

    async def start(self) -> None:
        """Create Kafka's ACL paths, load every ACL, then follow changes. Returns once loaded."""
        if not self.settings.enabled:
            return
        await store.create_acl_paths(self.zk)
        self.zk.on_connection_event(self._on_connection_event)
        await self._reload_everything()
        self._task = start_supervised("acl-changes", self._follow_changes)

    async def stop(self) -> None:
        self._stopped = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _on_connection_event(self, event: ConnectionEvent) -> None:
        # Watches set before the connection dropped may have fired unseen: read everything again.
        if event is ConnectionEvent.RECONNECTED and not self._stopped:
            self._reload_all = True
            self._wake.set()

    def _on_change(self, event: WatchedEvent) -> None:
        if not self._stopped:
            self._wake.set()

    async def _follow_changes(self) -> None:
        """The one task that replaces the snapshot after start-up; an error means a full reload."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            full, self._reload_all = self._reload_all, False
            try:
                if full:
                    await self._reload_everything()
                else:
                    await self._apply_changes()
            except Exception:
                self._reload_all = True
                self._wake.set()
                raise  # logged by the supervisor, which runs this again after a pause

    async def _reload_everything(self) -> None:
        # Listing (and watching) the change directories first means a change made during the
        # read below is announced afterwards, so nothing falls between the two.
        listings = {root: await self._watch_changes(root) for root in store.CHANGE_ROOTS}
        acls = await store.read_all_acls(self.zk)
        self._snapshot = self._snapshot.with_acls(acls)
        self.reloads += 1
        for root, sequences in listings.items():
            self._last_seen[root] = max(sequences, default=-1)
        log.info("loaded ACLs of %d resources", len(acls))
        await self._purge(listings)

    async def _watch_changes(self, root: str) -> dict[int, str]:
        """The notifications under ``root`` by sequence, with the child watch (re-)armed."""
        children = await self.zk.get_children(root, watch=self._on_change)
        return {seq: name for name in children if (seq := store.change_sequence(name)) is not None}

    async def _apply_changes(self) -> None:
        listings = {root: await self._watch_changes(root) for root in store.CHANGE_ROOTS}
        changed: set[ResourcePattern] = set()
        for root, sequences in listings.items():
            fresh = sorted(seq for seq in sequences if seq > self._last_seen[root])
            paths = [f"{root}/{sequences[seq]}" for seq in fresh]
            for path, result in zip(paths, await get_data_many(self.zk, paths), strict=True):
                if isinstance(result, NoNodeError):
                    # Purged by another node before we read it: what it named is unknown.
                    log.warning("change notification %s vanished unread; reloading every ACL", path)
                    self._reload_all = True
                    self._wake.set()
                    continue
                if isinstance(result, Exception):
                    raise result
                data, stat = result
                self._created_ms[path] = stat.ctime
                try:
                    changed.add(store.decode_change(root, data))
                except ValueError as exc:
                    log.warning("ignoring change notification %s: %s", path, exc)
            if fresh:
                self._last_seen[root] = fresh[-1]
        snapshot = self._snapshot
        for pattern in sorted(changed):
            try:
                entries = (await store.read_resource_acls(self.zk, pattern)).entries
            except ValueError as exc:
                # As at start-up: a znode that cannot be read contributes no ACLs.
                log.error("skipping the ACLs of %s: %s", pattern, exc)
                entries = frozenset()
            log.info("ACLs of %s changed: %d entries now", pattern, len(entries))
            snapshot = snapshot.with_resource(pattern, entries)
        self._snapshot = snapshot
        await self._purge(listings)

    async def _purge(self, listings: dict[str, dict[int, str]]) -> None:
        """Delete notifications already acted on and older than the expiration, as Kafka's
        listeners do; their creation times are read once."""
        seen = [
            f"{root}/{name}"
            for root, sequences in listings.items()
            for seq, name in sequences.items()
            if seq <= self._last_seen[root]
        ]
        unknown = [path for path in seen if path not in self._created_ms]
        for path, result in zip(unknown, await get_data_many(self.zk, unknown), strict=True):
            if not isinstance(result, Exception):
                self._created_ms[path] = result[1].ctime
        self._created_ms = {p: self._created_ms[p] for p in seen if p in self._created_ms}
        horizon_ms = (time.time() - self.change_expiration_s) * 1000
        for path, created_ms in list(self._created_ms.items()):
            if created_ms < horizon_ms:
                with contextlib.suppress(NoNodeError):
                    await self.zk.delete(path)
                del self._created_ms[path]

    # -- decisions (any thread)

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        """May ``principal`` connected from ``host`` (an IP address) do ``operation`` on the resource?"""
        if not self.settings.enabled:
            return True
        allowed = self._snapshot.authorize(principal, host, operation, resource_type, name)
        self._audit(allowed, principal, host, operation, resource_type, name)
        return allowed

    def authorize_any(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """May ``principal`` do ``operation`` on some resource of the type (e.g. WRITE on any topic)?"""
        if not self.settings.enabled:
            return True
        allowed = self._snapshot.authorize_any(principal, host, operation, resource_type)
        self._audit(allowed, principal, host, operation, resource_type, None)
        return allowed

    def _audit(
        self,
        allowed: bool,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str | None,
    ) -> None:
        resource = f"{resource_type.name}:{'<any>' if name is None else name}"
        if allowed:
            audit.debug("%s from %s allowed %s on %s", principal, host, operation.name, resource)
            return
        audit.info("%s from %s denied %s on %s", principal, host, operation.name, resource)
        if self.on_denied is not None:
            try:
                self.on_denied(principal, host, operation, resource_type, name)
            except Exception:
                log.exception("the denial callback failed for %s on %s", principal, resource)
