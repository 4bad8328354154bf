"""ApiVersions (key 18) v0-v2: how a client learns which versions of each API the broker speaks.

The request body is empty in these versions. The response header is always v0 (see
``headers.response_header_version``), so a client can read an UNSUPPORTED_VERSION answer to any
version it tried.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Layout, only


def request(version: int) -> Construct:
    return Layout(flexible=False).struct()


def response(version: int) -> Construct:
    k = Layout(flexible=False)
    return k.struct(
        "error_code" / Int16,
        "api_keys" / k.array(k.struct("api_key" / Int16, "min_version" / Int16, "max_version" / Int16)),
        *only(version >= 1, "throttle_time_ms" / Int32),
    )


SPEC = ApiSpec(
    key=ApiKey.API_VERSIONS,
    name="ApiVersions",
    versions=(0, 1, 2),
    flexible_versions=frozenset(),
    request=request,
    response=response,
)
