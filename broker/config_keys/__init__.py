"""Every key the broker reads, in the order ``docs/configuration.md`` lists them.

Declared by area, one module each (listeners and network, the controller link, logs, replication,
topics, groups); the keys both daemons share come from ``daemon.config``, and security's from
``security.config``, ``zkstore.client_config`` and the authorizer.
"""

from __future__ import annotations

from authorizer.acl_authorizer import AUTHORIZER_KEYS
from broker.config_keys.controller_link import BROKER_ID, BROKER_RACK, CONTROLLER_KEYS
from broker.config_keys.groups import GROUP_KEYS
from broker.config_keys.listeners import LISTENER_KEYS, NETWORK_KEYS
from broker.config_keys.logs import LOG_DIRS, LOG_KEYS, PRODUCER_ID_EXPIRATION_MS
from broker.config_keys.replication import HW_CHECKPOINT_INTERVAL_MS, NUM_REPLICA_FETCHERS, REPLICATION_KEYS
from broker.config_keys.topics import TOPIC_KEYS
from broker.config_keys.transactions import TRANSACTION_KEYS
from daemon.config import (
    METRICS_PORT,
    RESERVED_BROKER_MAX_ID,
    ZOOKEEPER_CONNECT,
    ZOOKEEPER_CONNECTION_TIMEOUT_MS,
    ZOOKEEPER_SESSION_TIMEOUT_MS,
    ConfigKey,
)
from security.config import SECURITY_KEYS
from zkstore.client_config import ZOOKEEPER_SECURITY_KEYS

__all__ = ["KEYS"]

KEYS: tuple[ConfigKey, ...] = (
    BROKER_ID,
    BROKER_RACK,
    RESERVED_BROKER_MAX_ID,
    ZOOKEEPER_CONNECT,
    *LISTENER_KEYS,
    LOG_DIRS,
    *NETWORK_KEYS,
    ZOOKEEPER_SESSION_TIMEOUT_MS,
    ZOOKEEPER_CONNECTION_TIMEOUT_MS,
    *SECURITY_KEYS,
    *ZOOKEEPER_SECURITY_KEYS,
    *AUTHORIZER_KEYS,
    *CONTROLLER_KEYS,
    HW_CHECKPOINT_INTERVAL_MS,
    METRICS_PORT,
    # -- the data plane: logs, replication, ISR
    *LOG_KEYS,
    *REPLICATION_KEYS,
    # -- topics created through the Admin API or on first use
    *TOPIC_KEYS,
    # -- consumer groups (the coordinator of the groups whose __consumer_offsets partition is led here)
    *GROUP_KEYS,
    # -- transactions (the coordinator of the ids whose __transaction_state partition is led here)
    *TRANSACTION_KEYS,
    PRODUCER_ID_EXPIRATION_MS,
    NUM_REPLICA_FETCHERS,
)
