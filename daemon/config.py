"""Java-properties configuration with Kafka's key names, shared by the controller and broker daemons.

A daemon declares its keys once (name, type, default, check); :func:`load_config` reads a properties
file, applies ``KAFKA_<KEY_UPPER_SNAKE>`` environment overrides (the container convention: ``.`` to
``_``, ``_`` to ``__``, ``-`` to ``___``), converts and validates every value, and fails with a
:class:`ConfigError` naming the key and the reason. Unknown keys are reported, not fatal, as Kafka
does ("supplied but isn't a known config").
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from daemon.endpoint import Endpoint

__all__ = [
    "REQUIRED",
    "WILDCARD_HOSTS",
    "ConfigError",
    "ConfigKey",
    "LoadedConfig",
    "advertised",
    "env_var_name",
    "listener_name",
    "load_config",
    "parse_listeners",
    "parse_properties",
]

log = logging.getLogger("daemon.config")


class ConfigError(Exception):
    """A configuration value that is missing or invalid; the message starts with the key."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()
"""Default of a key that has none: loading fails when neither the file nor the environment sets it."""


# ---------------------------------------------------------------- properties files


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """Physical lines joined where a line ends in an odd number of backslashes."""
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip() if pending else raw
        if not pending:
            start = number
            stripped = line.lstrip()
            if not stripped or stripped[0] in "#!":
                continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending.append(line[:-1])
            continue
        pending.append(line)
        yield start, "".join(pending)
        pending = []
    if pending:
        yield start, "".join(pending)


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text: ``key=value``, ``key: value`` or ``key value``, with comments."""
    result: dict[str, str] = {}
    for _, line in _logical_lines(text):
        line = line.lstrip()
        match = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:\s]?\s*(.*)$", line, re.S)
        key, value = (match.group(1), match.group(2)) if match else (line, "")
        result[_unescape(key)] = _unescape(value)
    return result


# ---------------------------------------------------------------- key declarations


def _to_int(text: str) -> int:
    return int(text.strip())


def _to_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"expected true or false, got {text!r}")
    return lowered == "true"


def _to_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _to_str(text: str) -> str:
    return text.strip()


_CONVERTERS: dict[str, Callable[[str], Any]] = {
    "int": _to_int,
    "long": _to_int,
    "bool": _to_bool,
    "list": _to_list,
    "string": _to_str,
}


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One configuration key: Kafka's name, its type, default and an optional check.

    ``check`` receives the converted value and raises ValueError with a reason when it is invalid.
    ``None`` as a default means "unset is allowed". ``doc`` and ``shown_default`` (for defaults that
    are derived, not literal) feed the configuration reference, ``docs/configuration.md``.
    """

    name: str
    type: str
    default: Any = REQUIRED
    doc: str = ""
    check: Callable[[Any], None] | None = None
    aliases: tuple[str, ...] = ()
    shown_default: str = ""
    per_listener: bool = False
    """May also be set for one listener as ``listener.name.<listener>.<key>`` (and, for SASL keys,
    ``listener.name.<listener>.<mechanism>.<key>``), as Kafka allows."""
    sensitive: bool = False
    """A secret (a password, a private key): the start-up log shows ``[hidden]``, as Kafka's does."""

    def default_text(self) -> str:
        """The default as the configuration reference shows it."""
        if self.shown_default:
            return self.shown_default
        if self.default is REQUIRED:
            return "required"
        if self.default is None:
            return "unset"
        if isinstance(self.default, bool):
            return f"`{str(self.default).lower()}`"
        if isinstance(self.default, list):
            return f"`{','.join(self.default)}`"
        return f"`{self.default}`"

    def convert(self, text: str) -> Any:
        try:
            value = _CONVERTERS[self.type](text)
        except ValueError as exc:
            raise ConfigError(self.name, f"invalid {self.type} value {text!r}: {exc}") from None
        self.validate(value)
        return value

    def validate(self, value: Any) -> None:
        if self.check is not None and value is not None:
            try:
                self.check(value)
            except ValueError as exc:
                raise ConfigError(self.name, f"invalid value {value!r}: {exc}") from None


def at_least(minimum: int) -> Callable[[int], None]:
    def check(value: int) -> None:
        if value < minimum:
            raise ValueError(f"must be at least {minimum}")

    return check


def between(low: int, high: int) -> Callable[[int], None]:
    def check(value: int) -> None:
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}")

    return check


# Keys both daemons read, declared once.
ZOOKEEPER_CONNECT = ConfigKey("zookeeper.connect", "string", doc="`host:port[,host:port…][/chroot]`")
ZOOKEEPER_SESSION_TIMEOUT_MS = ConfigKey(
    "zookeeper.session.timeout.ms", "int", 18000, check=at_least(1000), doc="ZooKeeper session timeout"
)
ZOOKEEPER_CONNECTION_TIMEOUT_MS = ConfigKey(
    "zookeeper.connection.timeout.ms",
    "int",
    None,
    check=at_least(1),
    shown_default="the session timeout",
    doc="how long to wait for the first connection",
)
RESERVED_BROKER_MAX_ID = ConfigKey(
    "reserved.broker.max.id",
    "int",
    1000,
    check=at_least(0),
    doc="the highest broker id (Kafka's rule); controller ids must be above it, so that no controller "
    "and broker ever share an id",
)
MAX_CONNECTIONS = ConfigKey(
    "max.connections",
    "int",
    2147483647,
    check=at_least(0),
    doc="connections the listeners accept together (a broker's control-plane listener does not count); "
    "more are closed at once",
)
MAX_CONNECTIONS_PER_IP = ConfigKey(
    "max.connections.per.ip", "int", 2147483647, check=at_least(0), doc="connections one address may hold"
)
CONNECTIONS_MAX_IDLE_MS = ConfigKey(
    "connections.max.idle.ms",
    "long",
    600000,
    check=at_least(1),
    doc="a connection that sends no request (or not the rest of one) for this long is closed",
)
METRICS_PORT = ConfigKey(
    "metrics.port",
    "int",
    None,
    check=between(0, 65535),
    shown_default="unset",
    doc="serve Prometheus metrics at `/metrics` on this port",
)


_CONFIG_ENV = re.compile(r"KAFKA_[A-Z0-9]+(?:_[A-Z0-9]+)*")
NOT_CONFIG_ENV = frozenset(
    {"KAFKA_HEAP_OPTS", "KAFKA_OPTS", "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_GC_LOG_OPTS",
     "KAFKA_JMX_OPTS", "KAFKA_DEBUG"}
)  # fmt: skip
"""Kafka's start scripts read these; they are not broker settings."""


def env_var_name(key: str) -> str:
    """``zookeeper.connect`` -> ``KAFKA_ZOOKEEPER_CONNECT`` (``_`` -> ``__``, ``-`` -> ``___``)."""
    return "KAFKA_" + key.replace("-", "\0").replace("_", "__").replace(".", "_").replace("\0", "___").upper()


@dataclass(frozen=True)
class LoadedConfig:
    """Converted values by key, and where each came from (``file``, ``env`` or ``default``)."""

    values: Mapping[str, Any]
    origins: Mapping[str, str]
    unknown: tuple[str, ...] = field(default=())
    listener_values: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Per-listener overrides by upper-case listener name, then key (``<mechanism>.<key>`` for a
    mechanism's own value)."""
    sensitive: frozenset[str] = frozenset()
    """Keys whose values are secrets, never written to a log."""

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def for_listener(self, listener: str, key: str, mechanism: str | None = None) -> Any:
        """``key`` for one listener: its mechanism's override, its own override, else the global value."""
        own = self.listener_values.get(listener.upper(), {})
        if mechanism is not None and f"{mechanism.lower()}.{key}" in own:
            return own[f"{mechanism.lower()}.{key}"]
        return own.get(key, self.values[key])

    def describe(self) -> str:
        """One ``key=value (origin)`` per line, for the start-up log; secrets show as ``[hidden]``."""
        lines = [(k, self.values[k], self.origins[k]) for k in sorted(self.values)]
        lines += [
            (f"listener.name.{listener.lower()}.{k}", value, "file")
            for listener, overrides in sorted(self.listener_values.items())
            for k, value in sorted(overrides.items())
        ]
        return "\n".join(f"  {k}={self._shown(k, v)} ({origin})" for k, v, origin in lines)

    def _shown(self, key: str, value: Any) -> str:
        secret = any(key == s or key.endswith("." + s) for s in self.sensitive)
        return "[hidden]" if secret and value is not None else repr(value)


def load_config(
    keys: Iterable[ConfigKey],
    path: str | os.PathLike[str] | None,
    environ: Mapping[str, str] | None = None,
) -> LoadedConfig:
    """Read ``path`` (may be None), apply environment overrides, convert and validate every key."""
    environ = os.environ if environ is None else environ
    raw: dict[str, str] = {}
    if path is not None:
        try:
            raw = parse_properties(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError("--config", f"cannot read {path}: {exc.strerror or exc}") from None
    declared = list(keys)
    known = {k.name for k in declared} | {alias for k in declared for alias in k.aliases}
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for key in declared:
        names = (key.name, *key.aliases)
        env_hit = next((environ[env_var_name(n)] for n in names if env_var_name(n) in environ), None)
        file_hit = next((raw[n] for n in names if n in raw), None)
        if env_hit is not None:
            values[key.name], origins[key.name] = key.convert(env_hit), "env"
        elif file_hit is not None:
            values[key.name], origins[key.name] = key.convert(file_hit), "file"
        elif key.default is REQUIRED:
            raise ConfigError(key.name, f"is required (set it in the file or as {env_var_name(key.name)})")
        else:
            key.validate(key.default)
            values[key.name], origins[key.name] = key.default, "default"
    listener_values = _listener_overrides(declared, raw)
    overrides = {f"listener.name.{n.lower()}.{k}" for n, keys in listener_values.items() for k in keys}
    unknown = tuple(sorted(k for k in raw if k not in known and k.lower() not in overrides))
    for name in unknown:
        log.warning("the configuration %s was supplied but is not a known key; ignored", name)
    known_env = {env_var_name(n) for n in known}
    unknown_env = tuple(
        sorted(v for v in environ if _CONFIG_ENV.fullmatch(v) and v not in known_env | NOT_CONFIG_ENV)
    )
    for variable in unknown_env:
        log.warning(
            "the environment variable %s looks like a configuration key but is not a known one; ignored",
            variable,
        )
    return LoadedConfig(
        values=values,
        origins=origins,
        unknown=unknown + unknown_env,
        listener_values=listener_values,
        sensitive=frozenset(k.name for k in declared if k.sensitive),
    )


_LISTENER_PREFIX = re.compile(r"listener\.name\.([A-Za-z0-9_\-]+)\.(.+)$")


def _listener_overrides(declared: list[ConfigKey], raw: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """``listener.name.<l>.<key>`` and ``listener.name.<l>.<mechanism>.<key>`` for per-listener keys."""
    per_listener = {k.name: k for k in declared if k.per_listener}
    found: dict[str, dict[str, Any]] = {}
    for name, text in raw.items():
        match = _LISTENER_PREFIX.match(name)
        if match is None:
            continue
        listener, rest = match.group(1).upper(), match.group(2)
        key = per_listener.get(rest)
        stored = rest
        if key is None:
            mechanism, _, base = rest.partition(".")
            key = per_listener.get(base) if base.startswith("sasl.") else None
            stored = f"{mechanism.lower()}.{base}"
        if key is not None:
            try:
                found.setdefault(listener, {})[stored] = key.convert(text)
            except ConfigError as exc:
                raise ConfigError(name, exc.reason) from None
    return found


# ---------------------------------------------------------------- listeners


def parse_listeners(key: str, items: Iterable[str]) -> list[Endpoint]:
    """Parse a ``listeners``-style list (``NAME://host:port``, as registered in ZooKeeper); names unique."""
    endpoints: list[Endpoint] = []
    for item in items:
        try:
            endpoint = Endpoint.parse(item.strip())
        except ValueError as exc:
            raise ConfigError(key, f"{item!r}: {exc}") from None
        if any(e.listener_name == endpoint.listener_name for e in endpoints):
            raise ConfigError(key, f"listener name {endpoint.listener_name} appears more than once")
        endpoints.append(endpoint)
    return endpoints


def listener_name(value: str) -> None:
    """A ConfigKey check for the ``*.listener.name`` keys (empty means unset)."""
    if value and not re.fullmatch(r"[A-Za-z0-9_.\-]+", value):
        raise ValueError("not a listener name")


WILDCARD_HOSTS = ("", "0.0.0.0", "::")


def advertised(endpoint: Endpoint, bound_port: int) -> Endpoint:
    """What to publish for a listener: a wildcard host becomes this machine's name, port 0 the bound one."""
    host = socket.getfqdn() if endpoint.host in WILDCARD_HOSTS else endpoint.host
    return Endpoint(endpoint.listener_name, host, endpoint.port or bound_port)


# ---------------------------------------------------------------- reference


def reference_table(keys: Iterable[ConfigKey]) -> str:
    """A Markdown table of ``keys``: name (with aliases and environment variable), default, meaning."""
    rows = ["| key | default | meaning |", "| --- | --- | --- |"]
    for key in keys:
        names = f"`{key.name}`" + "".join(f" (alias `{alias}`)" for alias in key.aliases)
        rows.append(f"| {names}<br>`{env_var_name(key.name)}` | {key.default_text()} | {key.doc} |")
    return "\n".join(rows)
