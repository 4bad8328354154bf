"""One advertised listener, ``LISTENER://host:port``: what configs, registrations and metadata share.

It sits on the bottom floor because both the config loader (``listeners``, ``advertised.listeners``)
and the znode formats (``/brokers/ids/N``, ``/controller``) read it.
"""

from __future__ import annotations

import re
import reprlib
from dataclasses import dataclass

__all__ = ["Endpoint"]

_LISTENER_NAME = re.compile(r"[A-Z0-9_.\-]+")
_ENDPOINT_TEXT = re.compile(
    r"(?P<name>[^:/]+)://(?:\[(?P<ipv6>[^\[\]]*)\]|(?P<host>[^\[\]]*)):(?P<port>[0-9]{1,5})"
)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One advertised listener. Kafka normalises listener names to upper case."""

    listener_name: str
    host: str
    port: int

    def __post_init__(self) -> None:
        if not _LISTENER_NAME.fullmatch(self.listener_name):
            raise ValueError(f"bad listener name {self.listener_name!r}")
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ValueError(f"port must be an integer in [0, 65535], got {reprlib.repr(self.port)}")

    @classmethod
    def parse(cls, text: str) -> Endpoint:
        """Read ``LISTENER://host:port``; an IPv6 host comes in brackets (unbracketed is tolerated)."""
        match = _ENDPOINT_TEXT.fullmatch(text)
        if match is None:
            raise ValueError(f"not LISTENER://host:port: {text!r}")
        host = match["ipv6"] if match["ipv6"] is not None else match["host"]
        return cls(match["name"].upper(), host, int(match["port"]))

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"
