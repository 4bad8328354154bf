"""SaslHandshake (key 17) v0-v1: the client names a SASL mechanism; the server lists the enabled ones.

After v0 the tokens follow as bare size-prefixed frames; after v1 (KIP-152) they travel in
SaslAuthenticate requests, so failures can carry an error code and message. Never flexible.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Layout


def request(version: int) -> Construct:
    k = Layout(flexible=False)
    return k.struct("mechanism" / k.string())


def response(version: int) -> Construct:
    k = Layout(flexible=False)
    return k.struct("error_code" / Int16, "mechanisms" / k.array(k.string()))


SPEC = ApiSpec(
    key=ApiKey.SASL_HANDSHAKE,
    name="SaslHandshake",
    versions=(0, 1),
    flexible_versions=frozenset(),
    request=request,
    response=response,
)
