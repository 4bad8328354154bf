"""``sasl.jaas.config`` values: one JAAS login-module entry, as Kafka accepts it in a config property.

``org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="s"
user_alice="alice-secret";`` names the module, its control flag and its options. A listener reads its
PLAIN users from ``user_<name>`` options; a client (our daemons' inter-broker and controller
connections) reads its own identity from ``username`` and ``password``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import NamedTuple

__all__ = [
    "CONTROL_FLAGS",
    "PLAIN_LOGIN_MODULE",
    "SCRAM_LOGIN_MODULE",
    "JaasEntry",
    "client_identity",
    "parse_jaas_config",
    "plain_users",
]

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
CONTROL_FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})
_USER_PREFIX = "user_"

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
    | (?P<comment>//[^\n]*|/\*.*?\*/)
    | (?P<quoted>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<punct>[=;])
    | (?P<word>[^\s=;"']+)
    """,
    re.VERBOSE | re.DOTALL,
)
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


class JaasEntry(NamedTuple):
    """One login module: its class name, control flag and options (values unquoted)."""

    login_module: str
    control_flag: str
    options: dict[str, str]


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) pairs; quoted values lose their quotes and backslash escapes."""
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ValueError(f"sasl.jaas.config: unterminated quote or comment at character {pos}")
        kind = match.lastgroup
        assert kind is not None
        if kind == "quoted":
            out.append(("value", _ESCAPE.sub(r"\1", match.group()[1:-1])))
        elif kind == "punct":
            out.append((match.group(), match.group()))
        elif kind == "word":
            out.append(("word", match.group()))
        pos = match.end()
    return out


def parse_jaas_config(text: str) -> JaasEntry:
    """Exactly one ``<module> <flag> [key=value ...];`` entry, as Kafka requires of the property.

    ValueError names what is wrong: no entry, several, a missing ``;``, an unknown control flag, an
    option without a value, or the same option twice.
    """
    tokens = _tokens(text)
    if not tokens:
        raise ValueError("sasl.jaas.config is empty: expected '<LoginModule> <flag> [key=value ...];'")
    if sum(1 for kind, _ in tokens if kind == ";") > 1:
        raise ValueError("sasl.jaas.config must hold exactly one login module entry")
    words = iter(tokens)
    kind, module = next(words)
    if kind != "word":
        raise ValueError(f"sasl.jaas.config must start with a login module class name, not {module!r}")
    kind, flag = next(words, ("end", ""))
    if kind != "word" or flag.lower() not in CONTROL_FLAGS:
        found = repr(flag) if kind != "end" else "nothing"
        raise ValueError(
            f"sasl.jaas.config: {module} needs a control flag ({', '.join(sorted(CONTROL_FLAGS))}), "
            f"found {found}"
        )
    options = _options(words)
    trailing = next(words, None)
    if trailing is not None:
        raise ValueError(f"sasl.jaas.config: unexpected {trailing[1]!r} after the entry's ';'")
    return JaasEntry(module, flag.lower(), options)


def _options(words: Iterator[tuple[str, str]]) -> dict[str, str]:
    """``key=value`` pairs up to the entry's closing ``;``."""
    options: dict[str, str] = {}
    while True:
        kind, key = next(words, ("end", ""))
        if kind == ";":
            return options
        if kind == "end":
            raise ValueError("sasl.jaas.config: the login module entry must end with ';'")
        if kind != "word":
            raise ValueError(f"sasl.jaas.config: expected an option name, found {key!r}")
        if next(words, ("end", ""))[0] != "=":
            raise ValueError(f"sasl.jaas.config: option {key!r} has no '=value'")
        kind, value = next(words, ("end", ""))
        if kind not in ("word", "value"):
            raise ValueError(f"sasl.jaas.config: option {key!r} has no value")
        if key in options:
            raise ValueError(f"sasl.jaas.config: option {key!r} is given twice")
        options[key] = value


def plain_users(options: Mapping[str, str]) -> dict[str, str]:
    """The users a PLAIN listener accepts: ``user_<name>="<password>"`` options, name -> password."""
    return {
        key[len(_USER_PREFIX) :]: value
        for key, value in options.items()
        if key.startswith(_USER_PREFIX) and len(key) > len(_USER_PREFIX)
    }


def client_identity(options: Mapping[str, str]) -> tuple[str, str]:
    """(username, password) a client logs in with; ValueError naming the missing option."""
    missing = [key for key in ("username", "password") if key not in options]
    if missing:
        raise ValueError(f"sasl.jaas.config has no {' or '.join(missing)} option for the client side")
    return options["username"], options["password"]
