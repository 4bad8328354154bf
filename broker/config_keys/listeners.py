"""The broker's listener and network keys: what it serves and publishes, KIP-291's control plane, threads."""

from __future__ import annotations

from daemon.config import (
    CONNECTIONS_MAX_IDLE_MS,
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_IP,
    ConfigKey,
    at_least,
    listener_name,
)
from security.config import LISTENER_SECURITY_PROTOCOL_MAP, protocol_name

__all__ = ["LISTENER_KEYS", "NETWORK_KEYS"]

LISTENER_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey(
        "listeners",
        "list",
        ["PLAINTEXT://127.0.0.1:9092"],
        doc="every listener served, `NAME://host:port` (port 0: any free port)",
    ),
    ConfigKey(
        "advertised.listeners",
        "list",
        None,
        shown_default="`listeners`",
        doc="what the registration in `/brokers/ids/N` publishes; listeners it omits are published as bound",
    ),
    LISTENER_SECURITY_PROTOCOL_MAP,
    ConfigKey(
        "inter.broker.listener.name",
        "string",
        "PLAINTEXT",
        check=listener_name,
        doc="the listener followers fetch from and LeaderAndIsr's live leaders name",
    ),
    ConfigKey(
        "security.inter.broker.protocol",
        "string",
        None,
        check=protocol_name,
        shown_default="unset",
        doc="instead of `inter.broker.listener.name`: the listener named after this protocol (set one of "
        "the two)",
    ),
    ConfigKey(
        "control.plane.listener.name",
        "string",
        "",
        check=listener_name,
        aliases=("controller.listener.name",),
        shown_default="unset",
        doc="the KIP-291 control-plane listener (queue of 20, one handler thread): one of `listeners`, "
        "not the inter-broker one; unset: control requests share the data plane",
    ),
)
"""What the broker serves and publishes, and which listener carries what."""

NETWORK_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("num.io.threads", "int", 8, check=at_least(1), doc="data-plane handler threads"),
    ConfigKey("queued.max.requests", "int", 500, check=at_least(1), doc="data-plane request queue capacity"),
    ConfigKey(
        "socket.request.max.bytes",
        "int",
        100 * 1024 * 1024,
        check=at_least(1024),
        doc="a larger request frame closes its connection",
    ),
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_IP,
    CONNECTIONS_MAX_IDLE_MS,
)
"""The data plane's threads and queue, frame size and connection limits."""
