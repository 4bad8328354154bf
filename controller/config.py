"""The controller daemon's configuration: Kafka's key names, defaults and checks.

``inter.broker.protocol.version`` chooses the control-request versions, in one place for both daemons:
``protocol/ibp.py`` (``2.2``: Kafka's per-broker-epoch versions; ``2.3-IV2``, the default, to ``3.3``:
the seed's ``max_broker_epoch`` variants; ``3.4`` to ``3.9``: Apache Kafka 3.9's wire, for clusters
shared with Kafka brokers). ``docs/protocol.md`` has the table.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from admin.config_keys import TOPIC_DEFAULT_KEYS, topic_defaults
from admin.topic_requests import TopicDefaults
from authorizer.acl_authorizer import AUTHORIZER_KEYS, AuthorizerSettings
from controller.request_batch import EpochProtocol
from daemon.config import (
    CONNECTIONS_MAX_IDLE_MS,
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_IP,
    METRICS_PORT,
    RESERVED_BROKER_MAX_ID,
    ZOOKEEPER_CONNECT,
    ZOOKEEPER_CONNECTION_TIMEOUT_MS,
    ZOOKEEPER_SESSION_TIMEOUT_MS,
    ConfigError,
    ConfigKey,
    LoadedConfig,
    at_least,
    between,
    listener_name,
    load_config,
    parse_listeners,
)
from protocol import WireDialect
from protocol.ibp import DEFAULT_IBP, ControlWire, control_wire
from security.config import (
    LISTENER_SECURITY_PROTOCOL_MAP,
    PROTOCOLS,
    SECURITY_KEYS,
    ClientSecurity,
    ListenerSecurity,
    client_security,
    listener_security,
    security_protocols,
)
from zkstore.client_config import ZOOKEEPER_SECURITY_KEYS, zk_security_from_loaded
from zkstore.security import ZkSecurity
from zkstore.znodes import Endpoint


def epoch_protocol_for(ibp: str) -> EpochProtocol:
    """Which epoch field control requests carry at ``ibp`` (:func:`protocol.ibp.control_wire` decides);
    ValueError if it has no wire."""
    return EpochProtocol.of(control_wire(ibp))


def _check_ibp(value: str) -> None:
    epoch_protocol_for(value)


def _percentage(value: int) -> None:
    between(0, 100)(value)


KEYS = (
    ConfigKey(
        "controller.id",
        "int",
        doc="this candidate's id, written to `/controller`; above `reserved.broker.max.id`, so that it is "
        "never a broker's id",
        check=at_least(0),
    ),
    RESERVED_BROKER_MAX_ID,
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_IP,
    CONNECTIONS_MAX_IDLE_MS,
    ZOOKEEPER_CONNECT,
    ZOOKEEPER_SESSION_TIMEOUT_MS,
    ZOOKEEPER_CONNECTION_TIMEOUT_MS,
    ConfigKey(
        "listeners",
        "list",
        ["PLAINTEXT://127.0.0.1:0"],
        doc="the RPC listener brokers send ControlledShutdown and AlterPartition to (port 0: any free "
        "port), then any client listeners: at IBP `3.4` and later UpdateMetadata lists the controller "
        "under each one's name, so clients of Kafka brokers' listener of that name reach it for the "
        "controller-bound Admin API ([controller](controller.md#clients-of-kafka-brokers))",
    ),
    ConfigKey(
        "advertised.listeners",
        "list",
        None,
        shown_default="`listeners`",
        doc="the endpoints published, by listener name: the RPC listener's in `/controller`, the others "
        "in UpdateMetadata (a wildcard host becomes the machine's name)",
    ),
    LISTENER_SECURITY_PROTOCOL_MAP,
    *SECURITY_KEYS,
    *ZOOKEEPER_SECURITY_KEYS,
    *AUTHORIZER_KEYS,
    ConfigKey(
        "control.plane.listener.name",
        "string",
        "",
        check=listener_name,
        shown_default="unset",
        doc="the broker listener control requests go to when a broker advertises it (KIP-291)",
    ),
    ConfigKey(
        "inter.broker.listener.name",
        "string",
        "PLAINTEXT",
        check=listener_name,
        doc="the broker listener used otherwise, and the one LeaderAndIsr's live leaders name",
    ),
    ConfigKey(
        "inter.broker.protocol.version",
        "string",
        DEFAULT_IBP,
        check=_check_ibp,
        doc="the control-plane wire: Kafka's per-broker epochs at `2.2`, the seed's `max_broker_epoch` "
        "from `2.3-IV2` to `3.3`, Apache Kafka 3.9's from `3.4` "
        "([controller](controller.md#interbrokerprotocolversion))",
    ),
    ConfigKey(
        "auto.leader.rebalance.enable",
        "bool",
        True,
        doc="periodically move leadership back to preferred replicas",
    ),
    ConfigKey(
        "leader.imbalance.per.broker.percentage",
        "int",
        10,
        check=_percentage,
        doc="rebalance a broker once more than this share of its preferred partitions is led elsewhere",
    ),
    ConfigKey(
        "leader.imbalance.check.interval.seconds",
        "int",
        300,
        check=at_least(1),
        doc="the rebalance check's period (the first check runs 5 s after failover)",
    ),
    ConfigKey(
        "unclean.leader.election.enable",
        "bool",
        False,
        doc="elect a live replica outside the ISR when no ISR member is live",
    ),
    ConfigKey(
        "delete.topic.enable",
        "bool",
        True,
        doc="act on `/admin/delete_topics`; when false the requests are removed and the topics kept",
    ),
    *TOPIC_DEFAULT_KEYS,
    ConfigKey(
        "controller.socket.timeout.ms",
        "int",
        30000,
        check=at_least(1),
        doc="connect and request timeout towards brokers; a timed-out request is resent",
    ),
    METRICS_PORT,
    ConfigKey(
        "log.dir",
        "string",
        "",
        shown_default="empty",
        doc="directory of the JSON-lines event log `events.jsonl` ([events](events.md)); empty: none",
    ),
)


@dataclass(frozen=True)
class ClientListener:
    """A listener where clients that take the controller for a broker reach it (Kafka 3.9 clusters)."""

    listener: Endpoint
    advertised: Endpoint
    security: ListenerSecurity | None
    """TLS and SASL; None: PLAINTEXT."""

    @property
    def name(self) -> str:
        return self.listener.listener_name

    @property
    def protocol(self) -> str:
        return self.security.protocol if self.security is not None else "PLAINTEXT"


@dataclass(frozen=True)
class ControllerConfig:
    controller_id: int
    zookeeper_connect: str
    listener: Endpoint
    advertised: Endpoint
    control_plane_listener_name: str | None
    inter_broker_listener_name: str
    inter_broker_protocol_version: str
    epoch_protocol: EpochProtocol
    control_wire: ControlWire
    """The control-plane versions and dialect of ``inter_broker_protocol_version`` (protocol/ibp.py)."""
    auto_leader_rebalance_enable: bool
    leader_imbalance_per_broker_percentage: int
    leader_imbalance_check_interval_s: float
    unclean_leader_election_enable: bool
    delete_topic_enable: bool
    socket_timeout_s: float
    max_connections: int
    max_connections_per_ip: int
    connections_max_idle_ms: int
    zookeeper_session_timeout_ms: int
    zookeeper_connection_timeout_s: float
    metrics_port: int | None
    log_dir: str
    zk_security: ZkSecurity | None = None
    """ZooKeeper ACLs, identity and TLS (``zookeeper.set.acl``, ``zookeeper.ssl.*``)."""
    authorizer: AuthorizerSettings = field(default_factory=AuthorizerSettings)
    listener_security: ListenerSecurity | None = None
    """TLS and SASL on the RPC listener; None: PLAINTEXT."""
    client_security: Callable[[str], ClientSecurity] | None = None
    """How this controller dials a broker listener of the given security protocol."""
    client_listeners: tuple[ClientListener, ...] = ()
    """``listeners`` after the first: where clients of Kafka brokers reach this controller."""
    topic_defaults: TopicDefaults = field(default_factory=TopicDefaults)
    """What CreateTopics and Metadata's auto-creation leave open, from clients of Kafka brokers."""
    loaded: LoadedConfig | None = None

    @property
    def listener_protocol(self) -> str:
        return self.listener_security.protocol if self.listener_security is not None else "PLAINTEXT"

    @property
    def listed_as_broker(self) -> bool:
        """Whether UpdateMetadata lists this controller among the live brokers: on Kafka 3.9's wire (IBP
        3.4 and later), since Kafka's brokers look for the controller nowhere else."""
        return self.control_wire.dialect is WireDialect.KAFKA and self.control_wire.update_metadata >= 8

    @property
    def broker_facing_listener_names(self) -> tuple[str, ...]:
        """The broker listener names Kafka's brokers look the controller up by: the control-plane one
        (AlterPartition, when set) and the inter-broker one (ControlledShutdown, and AlterPartition
        otherwise). The RPC listener is advertised under each when ``listed_as_broker``."""
        names = (self.control_plane_listener_name, self.inter_broker_listener_name)
        return tuple(dict.fromkeys(n for n in names if n))

    def dialing(self, protocol: str) -> ClientSecurity | None:
        return None if self.client_security is None else self.client_security(protocol)


def from_loaded(loaded: LoadedConfig) -> ControllerConfig:
    highest_broker = loaded["reserved.broker.max.id"]
    if loaded["controller.id"] <= highest_broker:
        raise ConfigError(
            "controller.id",
            f"{loaded['controller.id']} is not above reserved.broker.max.id ({highest_broker}), the highest "
            f"broker id: controller ids start at {highest_broker + 1}, so that none is also a broker's",
        )
    listeners = parse_listeners("listeners", loaded["listeners"])
    if not listeners:
        raise ConfigError("listeners", "the controller needs its RPC listener")
    published = {e.listener_name: e for e in listeners}
    if loaded["advertised.listeners"]:
        for adv in parse_listeners("advertised.listeners", loaded["advertised.listeners"]):
            if adv.listener_name not in published:
                raise ConfigError("advertised.listeners", f"{adv.listener_name} is not in listeners")
            published[adv.listener_name] = adv
    name = listeners[0].listener_name
    advertised = published[name]
    # Unmapped, a listener not named after a protocol is PLAINTEXT: the RPC listener predates the map.
    unmapped = not loaded["listener.security.protocol.map"] and name not in PROTOCOLS
    protocol = "PLAINTEXT" if unmapped else security_protocols(loaded, [name])[name]
    extra = [e.listener_name for e in listeners[1:]]
    broker_facing = {
        loaded["inter.broker.listener.name"].upper(),
        loaded["control.plane.listener.name"].upper(),
    }
    if clash := broker_facing.intersection(extra):
        raise ConfigError(
            "listeners",
            f"{sorted(clash)[0]} names the RPC listener for brokers (inter.broker.listener.name or "
            "control.plane.listener.name): a client listener needs a name of its own",
        )
    extra_protocols = security_protocols(loaded, extra) if extra else {}
    clients = tuple(
        ClientListener(
            e,
            published[e.listener_name],
            None
            if extra_protocols[e.listener_name] == "PLAINTEXT"
            else listener_security(loaded, e.listener_name, extra_protocols[e.listener_name]),
        )
        for e in listeners[1:]
    )
    session_ms = loaded["zookeeper.session.timeout.ms"]
    connection_ms = loaded["zookeeper.connection.timeout.ms"] or session_ms
    return ControllerConfig(
        controller_id=loaded["controller.id"],
        zookeeper_connect=loaded["zookeeper.connect"],
        listener=listeners[0],
        advertised=advertised,
        control_plane_listener_name=loaded["control.plane.listener.name"].upper() or None,
        inter_broker_listener_name=loaded["inter.broker.listener.name"].upper(),
        inter_broker_protocol_version=loaded["inter.broker.protocol.version"],
        epoch_protocol=epoch_protocol_for(loaded["inter.broker.protocol.version"]),
        control_wire=control_wire(loaded["inter.broker.protocol.version"]),
        auto_leader_rebalance_enable=loaded["auto.leader.rebalance.enable"],
        leader_imbalance_per_broker_percentage=loaded["leader.imbalance.per.broker.percentage"],
        leader_imbalance_check_interval_s=float(loaded["leader.imbalance.check.interval.seconds"]),
        unclean_leader_election_enable=loaded["unclean.leader.election.enable"],
        delete_topic_enable=loaded["delete.topic.enable"],
        socket_timeout_s=loaded["controller.socket.timeout.ms"] / 1000.0,
        max_connections=loaded["max.connections"],
        max_connections_per_ip=loaded["max.connections.per.ip"],
        connections_max_idle_ms=loaded["connections.max.idle.ms"],
        zookeeper_session_timeout_ms=session_ms,
        zookeeper_connection_timeout_s=connection_ms / 1000.0,
        metrics_port=loaded["metrics.port"],
        log_dir=loaded["log.dir"],
        listener_security=None if protocol == "PLAINTEXT" else listener_security(loaded, name, protocol),
        client_security=client_security(loaded, name),
        client_listeners=clients,
        topic_defaults=topic_defaults(loaded),
        zk_security=zk_security_from_loaded(loaded),
        authorizer=AuthorizerSettings.from_loaded(loaded),
        loaded=loaded,
    )


def load(path: str | os.PathLike[str] | None, environ: Mapping[str, str] | None = None) -> ControllerConfig:
    """Read and check the configuration; ConfigError names the offending key."""
    return from_loaded(load_config(KEYS, path, environ))
