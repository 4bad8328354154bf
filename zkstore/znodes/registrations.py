"""Who is in the cluster: ``/brokers/ids/N``, ``/controller`` and ``/controller_epoch``, read and written."""

from __future__ import annotations

import re
import reprlib
from dataclasses import dataclass, field

from daemon.endpoint import Endpoint
from zkstore.znodes.paths import check_id, last_segment, parse_id
from zkstore.znodes.payload import (
    INT32_MAX,
    INT32_MIN,
    Invalid,
    Payload,
    decode,
    encode_json,
    read_int,
    read_list,
    read_object,
    read_optional_str,
    read_port,
    read_str,
    read_timestamp,
    warn_ignored,
)

__all__ = [
    "BrokerRegistration",
    "ControllerRegistration",
    "decode_broker_registration",
    "decode_controller_epoch",
    "decode_controller_registration",
    "encode_controller_epoch",
]

# ----------------------------------------------------------------------------------------------------
# /brokers/ids/N

_BROKER_VERSIONS = range(4, 6)
_BROKER_VERSION_WRITTEN = 5
_PLAINTEXT = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """The payload of ``/brokers/ids/N``; the id comes from the path, the broker epoch is its czxid."""

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    listener_security_protocol_map: dict[str, str]
    timestamp: int
    rack: str | None = None
    jmx_port: int = -1
    features: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_id(self.broker_id, "broker id")

    def endpoint(self, listener_name: str) -> Endpoint | None:
        return next((ep for ep in self.endpoints if ep.listener_name == listener_name), None)

    def security_protocol(self, endpoint: Endpoint) -> str:
        """Without a mapping, Kafka takes the listener name to be the protocol's name (pre-v4 behaviour)."""
        return self.listener_security_protocol_map.get(endpoint.listener_name, endpoint.listener_name)

    def encode(self) -> bytes:
        # The top-level host/port exist for clients that predate listeners: the first PLAINTEXT endpoint.
        plain = next((ep for ep in self.endpoints if self.security_protocol(ep) == _PLAINTEXT), None)
        payload: dict[str, object] = {
            "version": _BROKER_VERSION_WRITTEN,
            "host": plain.host if plain else None,
            "port": plain.port if plain else -1,
            "endpoints": [ep.connection_string for ep in self.endpoints],
            "jmx_port": self.jmx_port,
            "timestamp": str(self.timestamp),
        }
        if self.rack is not None:
            payload["rack"] = self.rack
        payload["listener_security_protocol_map"] = self.listener_security_protocol_map
        payload["features"] = self.features
        return encode_json(payload)


def _endpoint(entry: object) -> Endpoint:
    return Endpoint.parse(read_str(entry, "endpoint"))


def _protocol_mapping(item: tuple[str, object]) -> tuple[str, str]:
    return item[0], read_str(item[1], "security protocol")


def _read_broker_registration(p: Payload) -> BrokerRegistration:
    broker_id = parse_id(last_segment(p.path))
    if broker_id is None:
        raise Invalid("the path does not end in a broker id")
    p.version(_BROKER_VERSIONS)
    jmx_port = read_int(p.optional("jmx_port", -1), "jmx_port")
    timestamp = read_timestamp(p.optional("timestamp"))
    rack = read_optional_str(p.optional("rack"), "rack")
    features = read_object(p.optional("features", {}), "features")
    protocols = read_object(
        p.optional("listener_security_protocol_map", {}), "listener_security_protocol_map"
    )
    endpoints = read_list(p.required("endpoints"), "endpoints")
    return BrokerRegistration(
        broker_id=broker_id,
        endpoints=tuple(p.each(endpoints, _endpoint)),
        listener_security_protocol_map=dict(p.each(protocols.items(), _protocol_mapping)),
        timestamp=timestamp,
        rack=rack,
        jmx_port=jmx_port,
        features=features,
    )


def decode_broker_registration(data: bytes | None, path: str) -> BrokerRegistration | None:
    """Read ``/brokers/ids/N`` (v4 or v5); the top-level host/port are derived, so they are not read."""
    return decode(data, path, "broker registration", _read_broker_registration)


# ----------------------------------------------------------------------------------------------------
# /controller and /controller_epoch

_CONTROLLER_VERSIONS = range(1, 3)


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    """The payload of ``/controller``.

    ``host``/``port`` are this project's additive keys: the active controller's RPC listener, so that a broker
    can find it from ZooKeeper. Kafka ignores unknown keys, and we accept Kafka's payloads without them.
    """

    broker_id: int
    timestamp: int
    host: str | None = None
    port: int | None = None
    security_protocol: str | None = None
    """Also additive: how to connect to that listener (PLAINTEXT when absent)."""

    def __post_init__(self) -> None:
        check_id(self.broker_id, "controller id")
        if (self.host is None) != (self.port is None):
            raise ValueError("host and port come together or not at all")
        if self.port is not None:
            read_port(self.port)

    def encode(self) -> bytes:
        payload: dict[str, object] = {
            "version": 1,
            "brokerid": self.broker_id,
            "timestamp": str(self.timestamp),
        }
        if self.host is not None:
            payload["host"] = self.host
            payload["port"] = self.port
        if self.security_protocol is not None:
            payload["security_protocol"] = self.security_protocol
        return encode_json(payload)


def _read_controller_registration(p: Payload) -> ControllerRegistration:
    # v2 (Kafka 3.4+) adds kraftControllerEpoch, which stays -1 while ZooKeeper elects the controller.
    p.version(_CONTROLLER_VERSIONS)
    broker_id = read_int(p.required("brokerid"), "brokerid", 0)
    timestamp = read_timestamp(p.optional("timestamp"))
    host = read_optional_str(p.optional("host"), "host")
    raw_port = p.optional("port")
    port = None if raw_port is None else read_port(raw_port)
    if (host is None) != (port is None):
        p.skipped.append(({"host": host, "port": port}, "host and port come together; endpoint unknown"))
        host = port = None
    protocol = read_optional_str(p.optional("security_protocol"), "security_protocol")
    return ControllerRegistration(broker_id, timestamp, host, port, protocol)


def decode_controller_registration(data: bytes | None, path: str) -> ControllerRegistration | None:
    return decode(data, path, "controller registration", _read_controller_registration)


def encode_controller_epoch(epoch: int) -> bytes:
    """``/controller_epoch`` holds the epoch as bare decimal text, not JSON."""
    return str(read_int(epoch, "controller epoch")).encode("ascii")


def decode_controller_epoch(data: bytes | None, path: str) -> int | None:
    text = (data or b"").strip()
    if not re.fullmatch(rb"-?[0-9]{1,10}", text) or not INT32_MIN <= int(text) <= INT32_MAX:
        warn_ignored(path, "controller epoch", f"not a 32-bit decimal integer: {reprlib.repr(data)}")
        return None
    return int(text)
