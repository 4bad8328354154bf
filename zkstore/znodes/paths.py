"""Where Kafka keeps things in ZooKeeper: the znode paths, built from and parsed back to their parts."""

from __future__ import annotations

from collections.abc import Iterable

from protocol.topic_partition import TopicPartition

__all__ = [
    "BROKER_IDS",
    "BROKER_TOPICS",
    "CONTROLLER",
    "CONTROLLER_EPOCH",
    "DELETE_TOPICS",
    "ISR_CHANGE_NOTIFICATION",
    "ISR_CHANGE_NOTIFICATION_PREFIX",
    "PERSISTENT_PATHS",
    "PREFERRED_REPLICA_ELECTION",
    "REASSIGN_PARTITIONS",
    "TopicPartition",
    "broker_path",
    "check_id",
    "check_topic",
    "delete_topic_path",
    "is_topic_name",
    "last_segment",
    "parse_id",
    "parse_partition_state_path",
    "partition_path",
    "partition_state_path",
    "partition_state_paths",
    "partitions_path",
    "topic_path",
]


_INT32_MAX = 2**31 - 1  # ids in paths are Java ints

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
# Notifications are PERSISTENT_SEQUENTIAL children; ZooKeeper appends the 10-digit sequence number.
ISR_CHANGE_NOTIFICATION_PREFIX = ISR_CHANGE_NOTIFICATION + "/isr_change_"

# What a Kafka broker makes sure exists at startup (ZkData.PersistentZkPaths), in creation order.
PERSISTENT_PATHS: tuple[str, ...] = (
    "/consumers",
    BROKER_IDS,
    BROKER_TOPICS,
    "/config/changes",
    DELETE_TOPICS,
    "/brokers/seqid",
    ISR_CHANGE_NOTIFICATION,
    "/latest_producer_id_block",
    "/log_dir_event_notification",
    "/config/topics",
    "/config/clients",
    "/config/users",
    "/config/brokers",
    "/config/ips",
)


def is_topic_name(name: str) -> bool:
    """Refuse only what would address the wrong znode; Kafka's naming rules belong to the admin tools."""
    return bool(name) and "/" not in name and name not in (".", "..")


def check_topic(topic: str) -> str:
    if not isinstance(topic, str) or not is_topic_name(topic):
        raise ValueError(f"not a usable topic name: {topic!r}")
    return topic


def check_id(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _INT32_MAX:
        raise ValueError(f"{what} must be a non-negative 32-bit integer, got {value!r}")
    return value


def parse_id(text: str) -> int | None:
    """An id as Kafka writes it in a path (canonical decimal), so that it maps back to the same path."""
    if not (text.isascii() and text.isdigit()) or str(int(text)) != text or int(text) > _INT32_MAX:
        return None
    return int(text)


def last_segment(path: str) -> str:
    return path.rpartition("/")[2]


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{check_id(broker_id, 'broker id')}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{check_topic(topic)}"


def partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{partitions_path(topic)}/{check_id(partition, 'partition')}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def partition_state_paths(partitions: Iterable[TopicPartition]) -> list[str]:
    """``partition_state_path`` of many partitions, each topic's name checked once (a million paths
    are built at every failover)."""
    checked: set[str] = set()
    paths = []
    for topic, partition in partitions:
        if topic not in checked:
            check_topic(topic)
            checked.add(topic)
        paths.append(f"{BROKER_TOPICS}/{topic}/partitions/{check_id(partition, 'partition')}/state")
    return paths


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{check_topic(topic)}"


def parse_partition_state_path(path: str) -> TopicPartition | None:
    """The inverse of ``partition_state_path`` (for watch events and multi-op results); ``None`` otherwise."""
    match path.split("/"):
        case ["", "brokers", "topics", topic, "partitions", partition_text, "state"] if is_topic_name(topic):
            partition = parse_id(partition_text)
            return None if partition is None else TopicPartition(topic, partition)
    return None
