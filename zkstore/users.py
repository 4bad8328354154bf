"""SCRAM credentials in ZooKeeper, where Kafka keeps them: the user's config entity znode.

``/config/users/<URL-encoded user>`` holds ``{"version":1,"config":{"SCRAM-SHA-256":"salt=...,
stored_key=...,server_key=...,iterations=4096", ...}}`` beside any quota keys, which writes keep.
Each write is followed by a ``/config/changes`` notification naming ``users/<encoded user>``, so
brokers reload that user's credentials. Reads used by listeners are tolerant: a znode or credential
that does not decode is logged and treated as absent (the user then simply cannot log in).
"""

from __future__ import annotations

import json
import logging
import reprlib
import urllib.parse
from collections.abc import Collection, Mapping, Sequence

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from placement.errors import AdminError
from security.sasl import SCRAM_MECHANISMS, ScramCredential
from zkstore.aio import AsyncZooKeeper
from zkstore.batch_read import get_data_many
from zkstore.entity_configs import decode_entity_config, notify_config_change

__all__ = [
    "USERS_CONFIG",
    "alter_scram_credentials",
    "decode_scram_credentials",
    "delete_scram_credential",
    "desanitize",
    "describe_scram_users",
    "list_users",
    "read_scram_credential",
    "read_scram_credentials",
    "sanitize",
    "set_scram_credential",
    "user_config_path",
]

log = logging.getLogger("zkstore.users")

USERS_CONFIG = "/config/users"


def sanitize(name: str) -> str:
    """A user name as a znode name, as Kafka's Sanitizer writes it: Java's URL encoding of UTF-8
    (``A-Za-z0-9._-*`` kept, space as ``+``), then ``*`` as ``%2A`` and ``+`` as ``%20``."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    """The user name a ``/config/users`` child stands for (Java's URL decoding: ``+`` is a space)."""
    return urllib.parse.unquote_plus(name)


def user_config_path(user: str) -> str:
    if not user:
        raise ValueError("a user name must not be empty")
    return f"{USERS_CONFIG}/{sanitize(user)}"


def _encode(config: Mapping[str, str]) -> bytes:
    return json.dumps({"version": 1, "config": dict(config)}, separators=(",", ":")).encode()


def decode_scram_credentials(data: bytes | None, path: str) -> dict[str, ScramCredential]:
    """The SCRAM credentials in a user's entity znode, by mechanism; what does not decode is logged
    and left out."""
    try:
        config = decode_entity_config(data, path)
    except AdminError as exc:
        log.warning("%s: ignoring the user's SCRAM credentials: %s", path, exc)
        return {}
    found: dict[str, ScramCredential] = {}
    for mechanism in SCRAM_MECHANISMS:
        text = config.get(mechanism)
        if text is None:
            continue
        try:
            found[mechanism] = ScramCredential.from_string(text)
        except ValueError as exc:
            log.warning("%s: ignoring the %s credential %s: %s", path, mechanism, reprlib.repr(text), exc)
    return found


async def read_scram_credentials(zk: AsyncZooKeeper, user: str) -> dict[str, ScramCredential]:
    """Every SCRAM credential stored for ``user`` ({} when none, or when the znode is unreadable)."""
    path = user_config_path(user)
    try:
        data, _ = await zk.get(path)
    except NoNodeError:
        return {}
    return decode_scram_credentials(data, path)


async def read_scram_credential(zk: AsyncZooKeeper, user: str, mechanism: str) -> ScramCredential | None:
    """What a SCRAM listener looks up between the client's first message and its reply."""
    return (await read_scram_credentials(zk, user)).get(mechanism)


async def list_users(zk: AsyncZooKeeper) -> list[str]:
    """Every user with a config entity (credentials or quotas; ``<default>`` included), sorted."""
    try:
        children = await zk.get_children(USERS_CONFIG)
    except NoNodeError:
        return []
    return sorted(desanitize(child) for child in children)


async def describe_scram_users(
    zk: AsyncZooKeeper, users: Sequence[str] | None = None
) -> dict[str, dict[str, int]]:
    """user -> {mechanism: iterations}: what can be shown without salts or keys. Without ``users``,
    only the users that have a credential; a named user without one maps to {}."""
    names = list(users) if users is not None else await list_users(zk)
    paths = [user_config_path(name) for name in names]
    described: dict[str, dict[str, int]] = {}
    for name, path, result in zip(names, paths, await get_data_many(zk, paths), strict=True):
        if isinstance(result, NoNodeError):
            credentials = {}
        elif isinstance(result, Exception):
            raise result
        else:
            credentials = decode_scram_credentials(result[0], path)
        if credentials or users is not None:
            described[name] = {m: c.iterations for m, c in sorted(credentials.items())}
    return described


async def alter_scram_credentials(
    zk: AsyncZooKeeper,
    user: str,
    upserts: Mapping[str, ScramCredential],
    deletions: Collection[str] = (),
) -> None:
    """Set and remove some of ``user``'s SCRAM credentials in one write, keeping the znode's other
    keys, then notify the brokers.

    AdminError (with Kafka's error name as ``kind``) for an unknown mechanism, a mechanism both set
    and deleted, a deletion of a credential that is not stored, or a znode that is not Kafka's JSON.
    The write is a compare-and-set, retried if another writer got in between; a user left with no
    config and no children loses its znode, as Kafka cleans empty user entities.
    """
    path = user_config_path(user)
    unknown = sorted(set(upserts).union(deletions).difference(SCRAM_MECHANISMS))
    if unknown:
        raise AdminError(
            f"unknown SCRAM mechanism(s) {', '.join(unknown)} (supported: {', '.join(SCRAM_MECHANISMS)})",
            kind="UNSUPPORTED_SASL_MECHANISM",
        )
    both = sorted(set(upserts).intersection(deletions))
    if both:
        raise AdminError(f"{', '.join(both)} both set and deleted for user {user}", kind="DUPLICATE_RESOURCE")
    if not upserts and not deletions:
        return
    while not await _write_once(zk, user, path, upserts, deletions):
        log.info("%s changed while being written; reading it again", path)
    await notify_config_change(zk, f"users/{sanitize(user)}")


async def _write_once(
    zk: AsyncZooKeeper,
    user: str,
    path: str,
    upserts: Mapping[str, ScramCredential],
    deletions: Collection[str],
) -> bool:
    """One read-modify-write; False when another writer changed the znode in between."""
    try:
        data, stat = await zk.get(path)
    except NoNodeError:
        data, stat = None, None
    config = decode_entity_config(data, path)
    missing = sorted(m for m in deletions if m not in config)
    if missing:
        raise AdminError(
            f"user {user} has no {', '.join(missing)} credential to delete", kind="RESOURCE_NOT_FOUND"
        )
    updated = {k: v for k, v in config.items() if k not in deletions}
    updated.update((mechanism, str(credential)) for mechanism, credential in upserts.items())
    try:
        if stat is None:
            await zk.create(path, _encode(updated), makepath=True)
        elif not updated and stat.numChildren == 0:
            await zk.delete(path, version=stat.version)
        else:
            await zk.set(path, _encode(updated), version=stat.version)
    except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
        return False
    return True


async def set_scram_credential(
    zk: AsyncZooKeeper, user: str, mechanism: str, credential: ScramCredential
) -> None:
    """Store (or replace) one mechanism's credential for ``user``."""
    await alter_scram_credentials(zk, user, {mechanism: credential})


async def delete_scram_credential(zk: AsyncZooKeeper, user: str, mechanism: str) -> None:
    """Remove one mechanism's credential; AdminError (RESOURCE_NOT_FOUND) if it is not stored."""
    await alter_scram_credentials(zk, user, {}, [mechanism])
