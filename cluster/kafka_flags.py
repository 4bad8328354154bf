"""Kafka's own spellings of the topics command, and the Admin API path of the commands that take
``--bootstrap-server`` (topics, configs, elect-leaders, consumer-groups).

``kafka-topics.sh --bootstrap-server localhost:9092 --create --topic orders --partitions 3`` works as
``python -m cluster topics --bootstrap-server localhost:9092 --create --topic orders --partitions 3``:
:func:`translate` turns the action flags and ``--topic`` into this CLI's ``topics create orders``
form before parsing. With ``--bootstrap-server`` the work goes through the brokers' Admin API
(confluent-kafka's AdminClient), as Kafka 3.x's tools do; with ``--zookeeper`` (or neither) it goes
through ZooKeeper, as ``kafka-topics.sh --zookeeper`` did.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

ACTIONS = ("--create", "--describe", "--list", "--delete", "--alter")
TOPIC_ACTIONS = {"create", "delete", "alter", "describe"}
TIMEOUT_S = 30.0


def translate(argv: Sequence[str]) -> list[str]:
    """``topics --create --topic T ...`` -> ``topics create T ...``; anything else is left alone."""
    args = list(argv)
    if not args or args[0] != "topics" or (len(args) > 1 and not args[1].startswith("-")):
        return args
    found = [a for a in args[1:] if a in ACTIONS]
    if len(found) != 1:
        return args  # none or several: argparse says what is wrong
    action = found[0][2:]
    rest = [a for a in args[1:] if a != found[0]]
    topic: list[str] = []
    if "--topic" in rest and action in TOPIC_ACTIONS:
        at = rest.index("--topic")
        topic = rest[at + 1 : at + 2]
        del rest[at : at + 2]
    return ["topics", action, *topic, *rest]


class AdminApiError(Exception):
    """The Admin API refused (Kafka's error name and message)."""


def admin_client(brokers: Mapping[str, str]) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(dict(brokers))


def result(future: Any) -> Any:
    """An AdminClient future's outcome; a Kafka error becomes an AdminApiError naming it."""
    from confluent_kafka import KafkaException

    try:
        return future.result(TIMEOUT_S)
    except KafkaException as exc:
        error = exc.args[0]
        raise AdminApiError(f"{error.name()}: {error.str()}") from None


def create(
    brokers: Mapping[str, str],
    topic: str,
    partitions: int | None,
    replication_factor: int | None,
    assignment: dict[int, tuple[int, ...]] | None,
    configs: dict[str, str],
) -> None:
    from confluent_kafka.admin import NewTopic

    if assignment is not None:
        replicas = [list(assignment[p]) for p in sorted(assignment)]
        new = NewTopic(topic, len(assignment), replica_assignment=replicas, config=configs)
    else:
        new = NewTopic(topic, partitions or -1, replication_factor or -1, config=configs)
    client = admin_client(brokers)  # held until the answer: a collected client cancels its requests
    result(client.create_topics([new], operation_timeout=TIMEOUT_S)[topic])


def delete(brokers: Mapping[str, str], topic: str) -> None:
    client = admin_client(brokers)
    result(client.delete_topics([topic], operation_timeout=TIMEOUT_S)[topic])


def alter(brokers: Mapping[str, str], topic: str, partitions: int) -> None:
    from confluent_kafka.admin import NewPartitions

    client = admin_client(brokers)
    result(client.create_partitions([NewPartitions(topic, partitions)], operation_timeout=TIMEOUT_S)[topic])


def describe(
    brokers: Mapping[str, str], topic: str | None
) -> list[tuple[str, int, int, list[int], list[int]]]:
    """(topic, partition, leader, ISR, replicas) from the brokers' metadata, sorted."""
    metadata = admin_client(brokers).list_topics(topic, timeout=TIMEOUT_S)
    rows = []
    for name, found in sorted(metadata.topics.items()):
        if found.error is not None:
            raise AdminApiError(f"{found.error.name()}: topic {name}")
        for index, p in sorted(found.partitions.items()):
            rows.append((name, index, p.leader, list(p.isrs), list(p.replicas)))
    return rows


def list_topics(brokers: Mapping[str, str]) -> list[str]:
    return sorted(
        t for t in admin_client(brokers).list_topics(timeout=TIMEOUT_S).topics if not t.startswith("__")
    )


# -- configs


class ConfigValue(NamedTuple):
    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool


def _resource(kind: str, name: str, **kwargs: Any) -> Any:
    from confluent_kafka.admin import ConfigResource, ResourceType

    return ConfigResource(ResourceType[kind], name, **kwargs)


def describe_configs(brokers: Mapping[str, str], kind: str, name: str) -> list[ConfigValue]:
    """Every config of a topic or broker (``kind`` TOPIC or BROKER), sorted by name."""
    from confluent_kafka.admin import ConfigSource

    client = admin_client(brokers)
    (future,) = client.describe_configs([_resource(kind, name)]).values()
    return sorted(
        ConfigValue(e.name, e.value, ConfigSource(e.source).name, e.is_read_only, e.is_sensitive)
        for e in result(future).values()
    )


def alter_configs(
    brokers: Mapping[str, str], kind: str, name: str, added: dict[str, str], deleted: Sequence[str]
) -> None:
    """IncrementalAlterConfigs: set ``added`` and remove ``deleted``, leaving the other overrides."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in added.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in deleted]
    client = admin_client(brokers)
    (future,) = client.incremental_alter_configs(
        [_resource(kind, name, incremental_configs=entries)]
    ).values()
    result(future)


# -- leader elections


def elect_leaders(
    brokers: Mapping[str, str], unclean: bool, partitions: Sequence[tuple[str, int]] | None
) -> dict[tuple[str, int], str | None]:
    """ElectLeaders for ``partitions`` (None: every partition); each one's error name, None when elected."""
    from confluent_kafka import ElectionType, TopicPartition

    kind = ElectionType.UNCLEAN if unclean else ElectionType.PREFERRED
    asked = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
    client = admin_client(brokers)
    done = result(client.elect_leaders(kind, asked))  # its timeout keywords fail in confluent-kafka 2.16
    return {(tp.topic, tp.partition): error_name(e) for tp, e in done.items()}


def error_name(outcome: Any) -> str | None:
    """A per-partition outcome of confluent-kafka: None, a KafkaError, or a KafkaException holding one."""
    if outcome is None:
        return None
    error = outcome.args[0] if getattr(outcome, "args", None) else outcome
    return str(error.name())
