"""Entity configs in ``/config/<type>/<name>`` and the ``/config/changes`` notices that tell brokers.

Kafka's JSON (``{"version":1,"config":{...}}``) as ``AdminZkClient`` writes it: a topic's overrides
before it exists, a change to them followed by a sequential notice naming the entity, which every
broker watches (``broker.topic_configs``); ``zkstore.users`` keeps SCRAM credentials the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from kazoo.exceptions import NodeExistsError, NoNodeError

from placement.errors import AdminError
from zkstore.aio import AsyncZooKeeper
from zkstore.cluster_reads import read_data

__all__ = [
    "CONFIG_CHANGES",
    "CONFIG_CHANGE_PREFIX",
    "change_topic_configs",
    "decode_entity_config",
    "notify_config_change",
    "read_topic_configs",
    "topic_config_path",
    "write_topic_configs",
]

CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"


def topic_config_path(topic: str) -> str:
    return f"/config/topics/{topic}"


def decode_entity_config(data: bytes | None, path: str) -> dict[str, str]:
    """``{"version":1,"config":{...}}``; AdminError naming the path if it is not that."""
    raw = data or b"{}"
    try:
        config = json.loads(raw).get("config", {})
    except (ValueError, AttributeError):
        raise AdminError(f"{path} does not hold Kafka's config JSON: {raw[:80]!r}") from None
    if not isinstance(config, dict) or not all(isinstance(v, str) for v in config.values()):
        raise AdminError(f"{path} does not hold Kafka's config JSON: {raw[:80]!r}")
    return dict(config)


async def write_topic_configs(zk: AsyncZooKeeper, topic: str, configs: Mapping[str, str]) -> None:
    """``/config/topics/T`` as Kafka writes it before a new topic: always, ``{}`` without overrides,
    and without a ``/config/changes`` notification (nothing reads the topic's config before it exists)."""
    data = json.dumps({"version": 1, "config": dict(configs)}).encode()
    try:
        await zk.create(f"/config/topics/{topic}", data, makepath=True)
    except NodeExistsError:  # left by a topic of that name deleted before: the new one's replaces it
        await zk.set(f"/config/topics/{topic}", data)


async def read_topic_configs(zk: AsyncZooKeeper, topic: str) -> dict[str, str]:
    """A topic's overrides in ``/config/topics/T`` ({} when none are stored)."""
    found = await read_data(zk, topic_config_path(topic))
    return {} if found is None else decode_entity_config(found[0], topic_config_path(topic))


async def change_topic_configs(zk: AsyncZooKeeper, topic: str, configs: Mapping[str, str]) -> None:
    """Replace a topic's overrides and tell the brokers, as Kafka's AdminZkClient does: the entity
    znode, then a sequential ``/config/changes/config_change_`` naming it (``topics/T``)."""
    data = json.dumps({"version": 1, "config": dict(configs)}).encode()
    try:
        await zk.set(topic_config_path(topic), data)
    except NoNodeError:
        await zk.create(topic_config_path(topic), data, makepath=True)
    await notify_config_change(zk, f"topics/{topic}")


async def notify_config_change(zk: AsyncZooKeeper, entity_path: str) -> None:
    """Tell every broker an entity's config changed: a sequential ``/config/changes/config_change_``
    naming it (``topics/T``, ``users/<sanitized user>``); brokers then re-read the entity's znode."""
    notification = json.dumps({"version": 2, "entity_path": entity_path}).encode()
    await zk.create(f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}", notification, sequence=True, makepath=True)
