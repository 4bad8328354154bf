"""Topic-level config overrides in ZooKeeper, applied to this broker's logs at runtime, without restarts.

Kafka's names, synonyms and value checks are :mod:`admin.topic_configs`, shared with the Admin API's
checks before anything is written; this module applies what is in ZooKeeper.

Overrides live in ``/config/topics/<topic>`` (``{"version":1,"config":{...}}``, Kafka's layout). Each
change is announced by a sequential ``/config/changes/config_change_`` naming ``topics/<topic>``;
every broker watches that directory, re-reads the named topic's znode and applies it, as Kafka's
dynamic config manager does (a broker starting up reads every topic's overrides first, so it never
depends on old notifications); a topic created with overrides is seen through a child watch on
``/config/topics``, since Kafka writes no notification then. What a topic's overrides change here:
its logs' segment size and age, retention time and size, maximum batch size and index interval,
cleanup policy and compaction settings, and its ``min.insync.replicas``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import WatchedEvent

from admin.topic_configs import InvalidTopicConfig, check_value, cleanup_policies
from broker.log import LogConfig
from daemon.supervision import start_supervised
from placement.errors import AdminError
from zkstore import entity_configs
from zkstore.aio import AsyncZooKeeper
from zkstore.batch_read import get_data_many

log = logging.getLogger("broker.topic_configs")

TOPIC_CONFIGS_PATH = "/config/topics"


LOG_FIELDS: dict[str, str] = {
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "max.message.bytes": "max_batch_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "min.cleanable.dirty.ratio": "min_cleanable_ratio",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
}
"""The :class:`LogConfig` field each topic config sets, for those that set one."""


def log_config_for(base: LogConfig, overrides: Mapping[str, str]) -> LogConfig:
    """The broker's log settings with a topic's overrides (values already checked).

    ``cleanup.policy`` says whether retention applies (``delete``) and whether the log cleaner
    compacts the log (``compact``, as Kafka stores ``__consumer_offsets``' config); with ``compact``
    alone, time and size retention are off, as in Kafka."""
    changes: dict[str, Any] = {
        field: float(overrides[name]) if field == "min_cleanable_ratio" else int(overrides[name])
        for name, field in LOG_FIELDS.items()
        if name in overrides
    }
    if "cleanup.policy" in overrides:
        policies = cleanup_policies(overrides["cleanup.policy"])
        changes.update(delete="delete" in policies, compact="compact" in policies)
    return replace(base, **changes) if changes else base


class TopicConfigStore:
    """Every topic's overrides, kept current from ZooKeeper on the event loop (the one writer);
    ``apply(topic, overrides)`` is called for each topic at start-up and after every change."""

    def __init__(self, zk: AsyncZooKeeper, apply: Callable[[str, dict[str, str]], None]) -> None:
        self.zk = zk
        self.apply = apply
        self.overrides: dict[str, dict[str, str]] = {}
        self._last_change = -1

    async def start(self) -> None:
        await self.zk.ensure_path(entity_configs.CONFIG_CHANGES)
        # Changes from here on are seen, and then every topic's current overrides are read, so none is
        # missed between the two.
        await self._changes()
        await self.zk.ensure_path(TOPIC_CONFIGS_PATH)
        await self._topics()

    async def _topics(self) -> None:
        """Read the overrides of every topic not known yet: a topic created with configs has its
        ``/config/topics/T`` written (without a notification) before its assignment."""
        children = await self.zk.get_children(TOPIC_CONFIGS_PATH, watch=self._watch_topics)
        new = [topic for topic in children if topic not in self.overrides]
        found = await get_data_many(self.zk, [entity_configs.topic_config_path(topic) for topic in new])
        for topic, result in zip(new, found, strict=True):
            if isinstance(result, NoNodeError):
                self._install(topic, None)
            elif isinstance(result, Exception):
                raise result
            else:
                self._install(topic, result[0])

    def _watch_topics(self, event: WatchedEvent) -> None:
        start_supervised("topic-configs", self._topics)

    async def _changes(self) -> None:
        children = await self.zk.get_children(entity_configs.CONFIG_CHANGES, watch=self._watch)
        for name in sorted(children):
            sequence = _sequence(name)
            if sequence is None or sequence <= self._last_change:
                continue
            self._last_change = sequence
            try:
                data, _ = await self.zk.get(f"{entity_configs.CONFIG_CHANGES}/{name}")
                entity = json.loads(data).get("entity_path", "")
            except (NoNodeError, ValueError, AttributeError):
                continue  # gone already, or not Kafka's JSON: ignored, as Kafka does
            kind, _, topic = str(entity).partition("/")
            if kind == "topics" and topic:
                await self._reload(topic)

    def _watch(self, event: WatchedEvent) -> None:
        """A change notification was added (on the loop): read it, again after any failure."""
        start_supervised("topic-config-changes", self._changes)

    async def _reload(self, topic: str) -> None:
        try:
            data, _ = await self.zk.get(entity_configs.topic_config_path(topic))
        except NoNodeError:
            data = None
        self._install(topic, data)

    def _install(self, topic: str, data: bytes | None) -> None:
        """Apply a topic's ``/config/topics/T`` as read (None: gone), if it changed what is in force."""
        path = entity_configs.topic_config_path(topic)
        try:
            overrides = {} if data is None else entity_configs.decode_entity_config(data, path)
        except AdminError as exc:
            log.error("skipping the configs of topic %s: %s", topic, exc)
            return
        valid = {}
        for name, value in overrides.items():
            try:
                check_value(name, value)
            except InvalidTopicConfig as exc:
                log.error("topic %s: ignoring %s=%s: %s", topic, name, value, exc)
                continue
            valid[name] = value
        if self.overrides.get(topic, {}) == valid and topic in self.overrides:
            return
        self.overrides[topic] = valid
        self.apply(topic, valid)


def _sequence(name: str) -> int | None:
    if not name.startswith(entity_configs.CONFIG_CHANGE_PREFIX):
        return None
    digits = name[len(entity_configs.CONFIG_CHANGE_PREFIX) :]
    return int(digits) if digits.isdigit() else None
