"""Who is on the other end of a connection: Kafka principals and ``ssl.principal.mapping.rules``.

A principal is ``Type:Name`` (``User:alice``); PLAINTEXT connections and TLS peers without a
certificate are ``User:ANONYMOUS``. A TLS peer's name is its certificate subject in RFC 2253 form
(most specific attribute first, ``CN=broker-1,OU=cluster,O=kafka-zk``), rewritten by the first
mapping rule whose regular expression matches the whole of it (KIP-371).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "ANONYMOUS",
    "NoMatchingRule",
    "PrincipalMapper",
    "parse_mapping_rules",
    "rfc2253",
    "user",
]

ANONYMOUS = "User:ANONYMOUS"


def user(name: str) -> str:
    return f"User:{name}"


class NoMatchingRule(ValueError):
    """No ``ssl.principal.mapping.rules`` rule matched a certificate subject: the connection fails."""


_SHORT_NAMES = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def rfc2253(subject: Iterable[Sequence[tuple[str, str]]]) -> str:
    """A subject as ``ssl.SSLSocket.getpeercert()`` returns it, in RFC 2253 form (Java's ``getName()``).

    The certificate lists RDNs most general first; RFC 2253 writes them in reverse. Attributes
    without a short name keep the name Python gives them.
    """
    rdns = [
        "+".join(f"{_SHORT_NAMES.get(name, name)}={_escape(value)}" for name, value in rdn) for rdn in subject
    ]
    return ",".join(reversed(rdns))


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None
    """None for DEFAULT."""
    replacement: str = ""
    case: str = ""
    """``L``, ``U`` or empty."""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        groups = self.pattern.groups

        def backref(match: re.Match[str]) -> str:
            index = int(match.group(1))
            return f"\\g<{index}>" if index <= groups else match.group(0)

        template = re.sub(r"\$(\d)", backref, self.replacement.replace("\\", "\\\\"))
        result = self.pattern.sub(template, name)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


_RULE = re.compile(r"RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?)\s*(?:,|$)")


def parse_mapping_rules(text: str | Sequence[str]) -> tuple[_Rule, ...]:
    """Parse ``ssl.principal.mapping.rules``: ``DEFAULT`` and ``RULE:regex/replacement/[L|U]``, in order.

    ValueError names what could not be read. A list (as the config loader splits on commas) is
    joined back first, since a rule's regular expression may itself contain commas.
    """
    rest = (text if isinstance(text, str) else ",".join(text)).strip()
    rules: list[_Rule] = []
    while rest:
        if rest.startswith("DEFAULT"):
            rules.append(_Rule(None))
            rest = rest[len("DEFAULT") :].lstrip().removeprefix(",").lstrip()
            continue
        match = _RULE.match(rest)
        if match is None:
            raise ValueError(
                f"cannot read a rule at {rest[:40]!r}: expected DEFAULT or RULE:regex/replacement/"
            )
        regex, replacement = (part.replace("\\/", "/") for part in match.group(1, 2))
        try:
            rules.append(_Rule(re.compile(regex), replacement, match.group(3)))
        except re.error as exc:
            raise ValueError(f"bad regular expression {regex!r}: {exc}") from None
        rest = rest[match.end() :].lstrip()
    return tuple(rules) or (_Rule(None),)


class PrincipalMapper:
    """Turns a TLS peer certificate into a principal name, by the configured rules."""

    def __init__(self, rules: str | Sequence[str] = "DEFAULT") -> None:
        self.rules = parse_mapping_rules(rules)

    def name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            mapped = rule.apply(distinguished_name)
            if mapped is not None:
                return mapped
        raise NoMatchingRule(f"no ssl.principal.mapping.rules rule matches {distinguished_name!r}")

    def principal(self, peer_certificate: Mapping[str, object] | None) -> str:
        """The principal of a TLS peer (``getpeercert()``'s dict); ANONYMOUS without a certificate."""
        subject = (peer_certificate or {}).get("subject")
        if not subject:
            return ANONYMOUS
        return user(self.name(rfc2253(subject)))  # type: ignore[arg-type]
