"""Apache Kafka's ZooKeeper layout in one import: the znode paths and the JSON payloads stored in them.

Pure functions and frozen dataclasses, no I/O, so that the ZooKeeper bridge, the controller, the brokers and
the tools share one definition of each format, and tests can pin the exact bytes Kafka writes. The
package's modules, each behind this import:

- ``paths``: the paths, built from and parsed back to topics, partitions and ids;
- ``payload``: tolerant reading of untrusted JSON, and writing it as Kafka does;
- ``registrations``: ``/brokers/ids/N``, ``/controller``, ``/controller_epoch``;
- ``topics``: ``/brokers/topics/T``, topic ids, and each partition's ``state``;
- ``partition_lists``: reassignment and preferred-election requests, ISR change notifications.

Decoders never raise. ZooKeeper content comes from other processes (a real Kafka of another version, an old
tool, a half-finished manual edit), and one bad znode must not take a daemon down: a payload that cannot be
used is logged once and read as ``None``; a bad entry inside a usable payload is logged and skipped.
"""

from __future__ import annotations

from daemon.endpoint import Endpoint
from zkstore.znodes.partition_lists import (
    decode_isr_change_notification,
    decode_preferred_replica_election,
    decode_reassignment,
    encode_isr_change_notification,
    encode_preferred_replica_election,
    encode_reassignment,
)
from zkstore.znodes.paths import (
    BROKER_IDS,
    BROKER_TOPICS,
    CONTROLLER,
    CONTROLLER_EPOCH,
    DELETE_TOPICS,
    ISR_CHANGE_NOTIFICATION,
    ISR_CHANGE_NOTIFICATION_PREFIX,
    PERSISTENT_PATHS,
    PREFERRED_REPLICA_ELECTION,
    REASSIGN_PARTITIONS,
    TopicPartition,
    broker_path,
    delete_topic_path,
    parse_partition_state_path,
    partition_path,
    partition_state_path,
    partition_state_paths,
    partitions_path,
    topic_path,
)
from zkstore.znodes.registrations import (
    BrokerRegistration,
    ControllerRegistration,
    decode_broker_registration,
    decode_controller_epoch,
    decode_controller_registration,
    encode_controller_epoch,
)
from zkstore.znodes.topics import (
    NO_LEADER,
    LeaderIsrState,
    LeaderRecoveryState,
    ReplicaMap,
    TopicAssignment,
    decode_leader_isr_state,
    decode_topic_assignment,
    format_topic_id,
    new_topic_id,
    parse_topic_id,
)

__all__ = [
    "BROKER_IDS",
    "BROKER_TOPICS",
    "CONTROLLER",
    "CONTROLLER_EPOCH",
    "DELETE_TOPICS",
    "ISR_CHANGE_NOTIFICATION",
    "ISR_CHANGE_NOTIFICATION_PREFIX",
    "NO_LEADER",
    "PERSISTENT_PATHS",
    "PREFERRED_REPLICA_ELECTION",
    "REASSIGN_PARTITIONS",
    "BrokerRegistration",
    "ControllerRegistration",
    "Endpoint",
    "LeaderIsrState",
    "LeaderRecoveryState",
    "ReplicaMap",
    "TopicAssignment",
    "TopicPartition",
    "broker_path",
    "decode_broker_registration",
    "decode_controller_epoch",
    "decode_controller_registration",
    "decode_isr_change_notification",
    "decode_leader_isr_state",
    "decode_preferred_replica_election",
    "decode_reassignment",
    "decode_topic_assignment",
    "delete_topic_path",
    "encode_controller_epoch",
    "encode_isr_change_notification",
    "encode_preferred_replica_election",
    "encode_reassignment",
    "format_topic_id",
    "new_topic_id",
    "parse_partition_state_path",
    "parse_topic_id",
    "partition_path",
    "partition_state_path",
    "partition_state_paths",
    "partitions_path",
    "topic_path",
]
