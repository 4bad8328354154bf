"""SaslAuthenticate (key 36) v0-v2: one SASL token each way, wrapped so a failure has a code and text.

v1 adds ``session_lifetime_ms`` (KIP-368 re-authentication; 0 means none); v2 is flexible.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int64, Layout, default, only


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 2)
    return k.struct("auth_bytes" / k.bytes())


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 2)
    return k.struct(
        "error_code" / Int16,
        "error_message" / k.string(nullable=True),
        "auth_bytes" / k.bytes(),
        *only(version >= 1, default("session_lifetime_ms" / Int64, 0)),
    )


SPEC = ApiSpec(
    key=ApiKey.SASL_AUTHENTICATE,
    name="SaslAuthenticate",
    versions=(0, 1, 2),
    flexible_versions=frozenset({2}),
    request=request,
    response=response,
)
