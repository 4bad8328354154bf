"""The broker daemon's configuration, typed: ``BrokerConfig`` loaded from its keys, with KIP-291's checks.

The keys themselves, Kafka's names and defaults, are declared in ``broker.config_keys``. Every listener
in ``listeners`` is served; ``advertised.listeners`` (default: ``listeners``) is what the registration
in ``/brokers/ids/N`` publishes. With ``control.plane.listener.name`` set, that listener gets its own
acceptor, a queue of 20 and one handler thread (KIP-291); it must be one of the listeners and must not
be the inter-broker listener.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from admin.config_keys import topic_defaults
from admin.topic_requests import TopicDefaults
from authorizer.acl_authorizer import AuthorizerSettings
from broker.cleaner.config import CleanerConfig
from broker.config_keys import KEYS
from broker.group.config import GroupConfig
from broker.txn.config import TransactionConfig
from daemon.config import ConfigError, LoadedConfig, load_config, parse_listeners
from daemon.endpoint import Endpoint
from protocol.ibp import DEFAULT_IBP, ControlWire, control_wire
from security.config import (
    ClientSecurity,
    ListenerSecurity,
    client_security,
    listener_security,
    security_protocols,
)
from zkstore.client_config import zk_security_from_loaded
from zkstore.security import ZkSecurity

__all__ = ["CONTROL_PLANE_QUEUE_CAPACITY", "KEYS", "BrokerConfig", "from_loaded", "load"]

CONTROL_PLANE_QUEUE_CAPACITY = 20
"""Hard-coded in Kafka (``new RequestChannel(20, "ControlPlane", ...)``)."""

_MS_PER_MINUTE = 60_000
_MS_PER_HOUR = 3_600_000


@dataclass(frozen=True)
class BrokerConfig:
    broker_id: int
    zookeeper_connect: str
    listeners: tuple[Endpoint, ...]
    advertised: tuple[Endpoint, ...]
    security_protocols: dict[str, str]
    inter_broker_listener_name: str
    control_plane_listener_name: str | None
    log_dirs: tuple[Path, ...]
    num_io_threads: int
    queued_max_requests: int
    socket_request_max_bytes: int
    max_connections: int
    max_connections_per_ip: int
    connections_max_idle_ms: int
    zookeeper_session_timeout_ms: int
    zookeeper_connection_timeout_s: float
    controlled_shutdown_enable: bool
    controlled_shutdown_max_retries: int
    controlled_shutdown_retry_backoff_s: float
    controller_socket_timeout_s: float
    hw_checkpoint_interval_s: float
    metrics_port: int | None
    segment_bytes: int = 1 << 30
    segment_ms: int = 168 * _MS_PER_HOUR
    retention_ms: int = 168 * _MS_PER_HOUR
    """-1: no time limit."""
    retention_bytes: int = -1
    retention_check_interval_s: float = 300.0
    index_interval_bytes: int = 4096
    recovery_checkpoint_interval_s: float = 60.0
    message_max_bytes: int = 1048588
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 30000
    replica_fetch_max_bytes: int = 1048576
    replica_fetch_response_max_bytes: int = 10485760
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_backoff_s: float = 1.0
    replica_socket_timeout_s: float = 30.0
    num_replica_fetchers: int = 1
    group: GroupConfig = field(default_factory=GroupConfig)
    transaction: TransactionConfig = field(default_factory=TransactionConfig)
    topics: TopicDefaults = field(default_factory=TopicDefaults)
    producer_id_expiration_ms: int = 86400000
    cleanup_policy: tuple[str, ...] = ("delete",)
    """log.cleanup.policy"""
    min_cleanable_ratio: float = 0.5
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = 2**63 - 1
    cleaner: CleanerConfig = field(default_factory=CleanerConfig)
    """The log cleaner's threads, memory and I/O (``log.cleaner.*``)."""
    controller_epoch_confirmation: bool = True
    zk_security: ZkSecurity | None = None
    """ZooKeeper ACLs, identity and TLS (``zookeeper.set.acl``, ``zookeeper.ssl.*``)."""
    authorizer: AuthorizerSettings = field(default_factory=AuthorizerSettings)
    listener_security: Mapping[str, ListenerSecurity] = field(default_factory=dict)
    """How each listener authenticates its peers; a listener absent here is PLAINTEXT."""
    client_security: Callable[[str], ClientSecurity] | None = None
    """How this broker dials a listener of the given security protocol (the controller, other brokers)."""
    loaded: LoadedConfig | None = None
    inter_broker_protocol_version: str = DEFAULT_IBP
    control_wire: ControlWire = field(default_factory=lambda: control_wire(DEFAULT_IBP))
    """What ``inter.broker.protocol.version`` gives (``protocol/ibp.py``): the dialect control requests
    are read in, and the AlterPartition and ControlledShutdown versions sent."""
    rack: str | None = None
    """``broker.rack``, published in the registration."""

    def dialing(self, protocol: str) -> ClientSecurity | None:
        return None if self.client_security is None else self.client_security(protocol)

    @property
    def log_dir(self) -> Path:
        """Where this broker's own files (checkpoints, event log) go: the first log dir."""
        return self.log_dirs[0]


def _advertised(loaded: LoadedConfig, listeners: list[Endpoint], names: list[str]) -> list[Endpoint]:
    """advertised.listeners, completed with the listeners it leaves out (Kafka's rule)."""
    if not loaded["advertised.listeners"]:
        return list(listeners)
    advertised = parse_listeners("advertised.listeners", loaded["advertised.listeners"])
    unknown = [e.listener_name for e in advertised if e.listener_name not in names]
    if unknown:
        raise ConfigError("advertised.listeners", f"listeners {unknown} are not in listeners {names}")
    given = {e.listener_name for e in advertised}
    return advertised + [e for e in listeners if e.listener_name not in given]


def _inter_broker(loaded: LoadedConfig, names: list[str], protocols: Mapping[str, str]) -> str:
    """``inter.broker.listener.name``, or the listener named after ``security.inter.broker.protocol``."""
    by_protocol = loaded["security.inter.broker.protocol"]
    if by_protocol is None:
        inter_broker = str(loaded["inter.broker.listener.name"]).upper()
    elif loaded.origins["inter.broker.listener.name"] != "default":
        raise ConfigError(
            "security.inter.broker.protocol", "set either it or inter.broker.listener.name, not both"
        )
    else:
        inter_broker = by_protocol.upper()
    if inter_broker not in names:
        raise ConfigError("inter.broker.listener.name", f"{inter_broker} is not one of the listeners {names}")
    return inter_broker


def _control_plane(loaded: LoadedConfig, names: list[str], inter_broker: str) -> str | None:
    """KIP-291's listener: one of the listeners, and not the inter-broker one."""
    control_plane: str | None = loaded["control.plane.listener.name"].upper() or None
    if control_plane is None:
        return None
    if control_plane not in names:
        raise ConfigError(
            "control.plane.listener.name", f"{control_plane} is not one of the listeners {names}"
        )
    if control_plane == inter_broker:
        raise ConfigError(
            "control.plane.listener.name",
            f"{control_plane} is also inter.broker.listener.name; the control plane needs its own",
        )
    return control_plane


def _check_broker_id(loaded: LoadedConfig) -> None:
    if loaded["broker.id"] > loaded["reserved.broker.max.id"]:
        raise ConfigError(
            "broker.id",
            f"{loaded['broker.id']} is above reserved.broker.max.id ({loaded['reserved.broker.max.id']}): "
            "ids above it belong to controllers",
        )


def from_loaded(loaded: LoadedConfig) -> BrokerConfig:
    _check_broker_id(loaded)
    listeners = parse_listeners("listeners", loaded["listeners"])
    if not listeners:
        raise ConfigError("listeners", "at least one listener is needed")
    names = [e.listener_name for e in listeners]
    advertised = _advertised(loaded, listeners, names)
    protocols = security_protocols(loaded, names)
    inter_broker = _inter_broker(loaded, names, protocols)
    control_plane = _control_plane(loaded, names, inter_broker)
    log_dirs = tuple(Path(d) for d in (loaded["log.dirs"] or [f"/tmp/kafka-logs-{loaded['broker.id']}"]))
    if len(log_dirs) > 1:
        raise ConfigError("log.dirs", "more than one log directory is not supported; give one")
    session_ms = loaded["zookeeper.session.timeout.ms"]
    return BrokerConfig(
        broker_id=loaded["broker.id"],
        zookeeper_connect=loaded["zookeeper.connect"],
        listeners=tuple(listeners),
        advertised=tuple(advertised),
        security_protocols=protocols,
        inter_broker_listener_name=inter_broker,
        control_plane_listener_name=control_plane,
        log_dirs=log_dirs,
        num_io_threads=loaded["num.io.threads"],
        queued_max_requests=loaded["queued.max.requests"],
        socket_request_max_bytes=loaded["socket.request.max.bytes"],
        max_connections=loaded["max.connections"],
        max_connections_per_ip=loaded["max.connections.per.ip"],
        connections_max_idle_ms=loaded["connections.max.idle.ms"],
        zookeeper_session_timeout_ms=session_ms,
        zookeeper_connection_timeout_s=(loaded["zookeeper.connection.timeout.ms"] or session_ms) / 1000.0,
        controlled_shutdown_enable=loaded["controlled.shutdown.enable"],
        controlled_shutdown_max_retries=loaded["controlled.shutdown.max.retries"],
        controlled_shutdown_retry_backoff_s=loaded["controlled.shutdown.retry.backoff.ms"] / 1000.0,
        controller_socket_timeout_s=loaded["controller.socket.timeout.ms"] / 1000.0,
        hw_checkpoint_interval_s=loaded["replica.high.watermark.checkpoint.interval.ms"] / 1000.0,
        metrics_port=loaded["metrics.port"],
        segment_bytes=loaded["log.segment.bytes"],
        segment_ms=loaded["log.roll.ms"] or loaded["log.roll.hours"] * _MS_PER_HOUR,
        retention_ms=_retention_ms(loaded),
        retention_bytes=loaded["log.retention.bytes"],
        retention_check_interval_s=loaded["log.retention.check.interval.ms"] / 1000.0,
        index_interval_bytes=loaded["log.index.interval.bytes"],
        recovery_checkpoint_interval_s=loaded["log.flush.offset.checkpoint.interval.ms"] / 1000.0,
        message_max_bytes=loaded["message.max.bytes"],
        min_insync_replicas=loaded["min.insync.replicas"],
        replica_lag_time_max_ms=loaded["replica.lag.time.max.ms"],
        replica_fetch_max_bytes=loaded["replica.fetch.max.bytes"],
        replica_fetch_response_max_bytes=loaded["replica.fetch.response.max.bytes"],
        replica_fetch_wait_max_ms=loaded["replica.fetch.wait.max.ms"],
        replica_fetch_min_bytes=loaded["replica.fetch.min.bytes"],
        replica_fetch_backoff_s=loaded["replica.fetch.backoff.ms"] / 1000.0,
        replica_socket_timeout_s=loaded["replica.socket.timeout.ms"] / 1000.0,
        num_replica_fetchers=loaded["num.replica.fetchers"],
        group=_group_config(loaded),
        transaction=_transaction_config(loaded),
        topics=topic_defaults(loaded),
        producer_id_expiration_ms=loaded["producer.id.expiration.ms"],
        cleanup_policy=tuple(loaded["log.cleanup.policy"]),
        min_cleanable_ratio=float(loaded["log.cleaner.min.cleanable.ratio"]),
        delete_retention_ms=loaded["log.cleaner.delete.retention.ms"],
        min_compaction_lag_ms=loaded["log.cleaner.min.compaction.lag.ms"],
        max_compaction_lag_ms=loaded["log.cleaner.max.compaction.lag.ms"],
        cleaner=_cleaner_config(loaded),
        controller_epoch_confirmation=loaded["controller.epoch.confirmation.enable"],
        listener_security={
            n: listener_security(loaded, n, p)
            for n, p in protocols.items()
            if n in names and p != "PLAINTEXT"
        },
        client_security=client_security(loaded, inter_broker),
        zk_security=zk_security_from_loaded(loaded),
        authorizer=AuthorizerSettings.from_loaded(loaded),
        loaded=loaded,
        inter_broker_protocol_version=loaded["inter.broker.protocol.version"],
        control_wire=control_wire(loaded["inter.broker.protocol.version"]),
        rack=loaded["broker.rack"] or None,
    )


def _group_config(loaded: LoadedConfig) -> GroupConfig:
    minimum, maximum = loaded["group.min.session.timeout.ms"], loaded["group.max.session.timeout.ms"]
    if minimum > maximum:
        raise ConfigError(
            "group.min.session.timeout.ms", f"{minimum} is above group.max.session.timeout.ms {maximum}"
        )
    return GroupConfig(
        offsets_topic_num_partitions=loaded["offsets.topic.num.partitions"],
        offsets_topic_replication_factor=loaded["offsets.topic.replication.factor"],
        offsets_commit_timeout_ms=loaded["offsets.commit.timeout.ms"],
        offset_metadata_max_bytes=loaded["offset.metadata.max.bytes"],
        offsets_retention_minutes=loaded["offsets.retention.minutes"],
        offsets_retention_check_interval_ms=loaded["offsets.retention.check.interval.ms"],
        group_initial_rebalance_delay_ms=loaded["group.initial.rebalance.delay.ms"],
        group_min_session_timeout_ms=minimum,
        group_max_session_timeout_ms=maximum,
        group_max_size=loaded["group.max.size"],
    )


def _transaction_config(loaded: LoadedConfig) -> TransactionConfig:
    return TransactionConfig(
        transaction_state_log_num_partitions=loaded["transaction.state.log.num.partitions"],
        transaction_state_log_replication_factor=loaded["transaction.state.log.replication.factor"],
        transaction_state_log_min_isr=loaded["transaction.state.log.min.isr"],
        transaction_state_log_segment_bytes=loaded["transaction.state.log.segment.bytes"],
        transaction_max_timeout_ms=loaded["transaction.max.timeout.ms"],
        transactional_id_expiration_ms=loaded["transactional.id.expiration.ms"],
        transaction_abort_timed_out_transaction_cleanup_interval_ms=loaded[
            "transaction.abort.timed.out.transaction.cleanup.interval.ms"
        ],
        transaction_remove_expired_transaction_cleanup_interval_ms=loaded[
            "transaction.remove.expired.transaction.cleanup.interval.ms"
        ],
    )


def _cleaner_config(loaded: LoadedConfig) -> CleanerConfig:
    return CleanerConfig(
        enable=loaded["log.cleaner.enable"],
        threads=loaded["log.cleaner.threads"],
        dedupe_buffer_size=loaded["log.cleaner.dedupe.buffer.size"],
        dedupe_buffer_load_factor=float(loaded["log.cleaner.io.buffer.load.factor"]),
        io_buffer_size=loaded["log.cleaner.io.buffer.size"],
        io_max_bytes_per_second=float(loaded["log.cleaner.io.max.bytes.per.second"]),
        backoff_ms=loaded["log.cleaner.backoff.ms"],
    )


def _retention_ms(loaded: LoadedConfig) -> int:
    """Kafka's precedence: log.retention.ms, then .minutes, then .hours; -1 in any means no limit."""
    if loaded["log.retention.ms"] is not None:
        return int(loaded["log.retention.ms"])
    if loaded["log.retention.minutes"] is not None:
        minutes = int(loaded["log.retention.minutes"])
        return -1 if minutes < 0 else minutes * _MS_PER_MINUTE
    hours = int(loaded["log.retention.hours"])
    return -1 if hours < 0 else hours * _MS_PER_HOUR


def load(path: str | os.PathLike[str] | None, environ: Mapping[str, str] | None = None) -> BrokerConfig:
    return from_loaded(load_config(KEYS, path, environ))
