"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: topic configs through the Admin API.

Topic overrides are written to ``/config/topics/<topic>`` with a ``/config/changes`` notification
(``zkstore.entity_configs.change_topic_configs``, Kafka's layout), and every broker applies them at runtime
(``broker.topic_configs``). Broker configs are described with Kafka's sources and synonyms; they
are static here (set in the properties file or the environment), so setting one is refused; deleting one,
which there never is, succeeds and changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from admin.errors import AdminFailure
from admin.topic_configs import TOPIC_CONFIGS, check_configs
from broker.log import LogConfig
from broker.metadata_cache import MetadataCache
from broker.on_loop import answer_on_loop
from broker.request_channel import Request
from broker.topic_configs import LOG_FIELDS
from daemon.config import LoadedConfig
from placement.errors import AdminError
from protocol import ErrorCode
from zkstore import entity_configs
from zkstore.aio import AsyncZooKeeper

log = logging.getLogger("broker.config_apis")

T = TypeVar("T")
Body = dict[str, Any]

TOPIC = 2
BROKER = 4
# Kafka's ConfigSource values
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
# IncrementalAlterConfigs operations
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7}
BROKER_ONLY_DEFAULTS = {"log.cleanup.policy": "delete", "unclean.leader.election.enable": "false"}
"""Synonyms of topic configs that the broker does not declare (it has no such setting of its own)."""


class ConfigApis:
    def __init__(
        self,
        broker_id: int,
        loaded: LoadedConfig | None,
        log_defaults: LogConfig,
        zk: Callable[[], AsyncZooKeeper],
        loop: Callable[[], asyncio.AbstractEventLoop],
        cache: MetadataCache,
    ) -> None:
        self.broker_id = broker_id
        self.loaded = loaded
        self.log_defaults = log_defaults
        """The broker's log settings: the broker-wide values behind the topic configs that set them."""
        self.zk = zk
        self.loop = loop
        self.cache = cache

    def _run(self, coro: Coroutine[Any, Any, T], answer: Callable[[T], Body]) -> Future[Body]:
        return answer_on_loop(self.loop(), coro, answer, "a config request")

    # ------------------------------------------------------------------ DescribeConfigs

    def describe_configs(self, request: Request, body: Body) -> Future[Body]:
        synonyms = bool(body.get("include_synonyms", False))

        async def describe_all() -> list[Body]:
            results = []
            for resource in body["resources"]:
                kind, name = resource["resource_type"], resource["resource_name"]
                keys = resource["configuration_keys"]
                result: Body = {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": kind,
                                "resource_name": name, "configs": []}  # fmt: skip
                try:
                    configs = await self._describe(kind, name, synonyms)
                except AdminFailure as exc:
                    results.append({**result, "error_code": exc.code, "error_message": str(exc)})
                    continue
                result["configs"] = [c for c in configs if keys is None or c["name"] in keys]
                results.append(result)
            return results

        return self._run(describe_all(), lambda results: {"throttle_time_ms": 0, "results": results})

    async def _describe(self, kind: int, name: str, synonyms: bool) -> list[Body]:
        if kind == TOPIC:
            if name not in self.cache.snapshot.topics:
                raise AdminFailure(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
            try:  # what ZooKeeper holds, as Kafka answers, even before this broker applied a change
                overrides = await entity_configs.read_topic_configs(self.zk(), name)
            except AdminError as exc:
                raise AdminFailure(ErrorCode.INVALID_CONFIG, str(exc)) from None
            return [self._topic_entry(spec.name, overrides, synonyms) for spec in TOPIC_CONFIGS.values()]
        if kind == BROKER:
            self._check_broker(name)
            return self._broker_entries(synonyms)
        raise AdminFailure(ErrorCode.INVALID_REQUEST, f"resource type {kind} is not described here")

    def _check_broker(self, name: str) -> None:
        """A broker resource names this broker, or is the default ("")."""
        if name not in ("", str(self.broker_id)):
            raise AdminFailure(
                ErrorCode.INVALID_REQUEST,
                f"Unexpected broker id, expected {self.broker_id} but received {name}",
            )

    def _broker_value(self, key: str) -> tuple[str | None, int]:
        """A broker setting as a string, and Kafka's source for it (file or environment: static)."""
        if self.loaded is None or key not in self.loaded.values:
            return BROKER_ONLY_DEFAULTS.get(key), DEFAULT_CONFIG
        value = self.loaded[key]
        origin = self.loaded.origins.get(key, "default")
        text = (
            None
            if value is None
            else (
                ",".join(map(str, value))
                if isinstance(value, list)
                else str(value).lower()
                if isinstance(value, bool)
                else str(value)
            )
        )
        return text, STATIC_BROKER_CONFIG if origin in ("file", "env") else DEFAULT_CONFIG

    def _topic_entry(self, name: str, overrides: dict[str, str], synonyms: bool) -> Body:
        spec = TOPIC_CONFIGS[name]
        broker_value, broker_source = self._broker_value(spec.broker_key)
        log_field = LOG_FIELDS.get(name)
        if (
            log_field is not None
        ):  # the broker's effective setting (log.retention.hours and the like folded in)
            broker_value = str(getattr(self.log_defaults, log_field))
        found: list[Body] = [
            *(
                [{"name": name, "value": overrides[name], "source": DYNAMIC_TOPIC_CONFIG}]
                if name in overrides
                else []
            ),
            {"name": spec.broker_key, "value": broker_value, "source": broker_source},
        ]
        return {
            "name": name,
            "value": found[0]["value"],
            "read_only": False,
            "config_source": found[0]["source"],
            "is_sensitive": False,
            "synonyms": found if synonyms else [],
            "config_type": CONFIG_TYPES.get(spec.kind, 0),
            "documentation": None,
        }

    def _broker_entries(self, synonyms: bool) -> list[Body]:
        if self.loaded is None:
            return []
        entries = []
        for key in sorted(self.loaded.values):
            value, source = self._broker_value(key)
            entries.append(
                {
                    "name": key,
                    "value": value,
                    "read_only": True,  # no dynamic broker configs here
                    "config_source": source,
                    "is_sensitive": False,
                    "synonyms": [{"name": key, "value": value, "source": source}] if synonyms else [],
                    "config_type": 0,
                    "documentation": None,
                }
            )
        return entries

    # ------------------------------------------------------------------ AlterConfigs / Incremental

    def alter_configs(self, request: Request, body: Body) -> Future[Body]:
        def replace_all(current: dict[str, str], configs: list[Body]) -> dict[str, str]:
            del current  # the legacy API replaces the whole entity
            return {c["name"]: _non_null(c["name"], c["value"]) for c in configs}

        return self._alter(body, replace_all)

    def incremental_alter_configs(self, request: Request, body: Body) -> Future[Body]:
        return self._alter(body, _incremental)

    def _alter(
        self, body: Body, change: Callable[[dict[str, str], list[Body]], dict[str, str]]
    ) -> Future[Body]:
        async def alter_all() -> list[Body]:
            results = []
            kinds_names = [(r["resource_type"], r["resource_name"]) for r in body["resources"]]
            for resource in body["resources"]:
                kind, name = resource["resource_type"], resource["resource_name"]
                result: Body = {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": kind,
                                "resource_name": name}  # fmt: skip
                try:
                    if kinds_names.count((kind, name)) > 1:
                        raise AdminFailure(ErrorCode.INVALID_REQUEST, f"Duplicate resource {name}")
                    await self._alter_one(kind, name, resource["configs"], change, body["validate_only"])
                except AdminFailure as exc:
                    result.update(error_code=exc.code, error_message=str(exc))
                results.append(result)
            return results

        return self._run(alter_all(), lambda results: {"throttle_time_ms": 0, "responses": results})

    async def _alter_one(
        self,
        kind: int,
        name: str,
        configs: list[Body],
        change: Callable[[dict[str, str], list[Body]], dict[str, str]],
        validate_only: bool,
    ) -> None:
        if kind == BROKER:
            self._check_broker(name)
            # No dynamic broker config is ever set here, so deleting one (what kafka-reassign-partitions
            # --verify does to clear replication throttles) leaves things as they are: it succeeds.
            if any(c.get("config_operation", SET) != DELETE for c in configs):
                raise AdminFailure(
                    ErrorCode.INVALID_REQUEST,
                    "broker configs are static here: set them in the broker's properties file or environment",
                )
            return
        if kind != TOPIC:
            raise AdminFailure(ErrorCode.INVALID_REQUEST, f"resource type {kind} cannot be altered here")
        if name not in self.cache.snapshot.topics:
            raise AdminFailure(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        keys = [c["name"] for c in configs]
        if len(set(keys)) != len(keys):
            raise AdminFailure(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
        zk = self.zk()
        updated = change(await entity_configs.read_topic_configs(zk, name), configs)
        check_configs(dict(updated))
        if not validate_only:
            await entity_configs.change_topic_configs(zk, name, updated)


def _non_null(name: str, value: str | None) -> str:
    if value is None:
        raise AdminFailure(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")
    return value


def _incremental(current: dict[str, str], configs: list[Body]) -> dict[str, str]:
    """Kafka's operations on one entity's current overrides."""
    updated = dict(current)
    for config in configs:
        name, operation, value = config["name"], config["config_operation"], config["value"]
        if operation == SET:
            updated[name] = _non_null(name, value)
        elif operation == DELETE:
            updated.pop(name, None)
        elif operation in (APPEND, SUBTRACT):
            if name != "cleanup.policy":  # the one list-typed topic config applied here
                raise AdminFailure(
                    ErrorCode.INVALID_CONFIG, f"Config value append is not allowed for config key: {name}"
                )
            items = [i for i in updated.get(name, "delete").split(",") if i]
            given = [i for i in _non_null(name, value).split(",") if i]
            items = (
                [*items, *(i for i in given if i not in items)]
                if operation == APPEND
                else [i for i in items if i not in given]
            )
            updated[name] = ",".join(items)
        else:
            raise AdminFailure(ErrorCode.INVALID_REQUEST, f"Unknown config operation {operation}")
    return updated
