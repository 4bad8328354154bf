"""Request headers v0-v2 and response headers v0-v1, and which one each API version uses."""

from __future__ import annotations

from dataclasses import dataclass

from construct import Construct

from protocol.api import ApiKey, ApiSpec, WireDialect
from protocol.types import Int16, Int32, KString, KStruct, TaggedFields, only


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """The decoded request header; ``version`` is the header version the frame used."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    version: int


def request_header_schema(version: int) -> Construct:
    """v0: key, version, correlation id; v1 adds a nullable int16-length client id; v2 adds tags.

    The client id stays a classic string in v2, as Kafka keeps it for every header version.
    """
    return KStruct(
        "api_key" / Int16,
        "api_version" / Int16,
        "correlation_id" / Int32,
        *only(version >= 1, "client_id" / KString(nullable=True)),
        *only(version >= 2, TaggedFields),
    )


def response_header_schema(version: int) -> Construct:
    """v0: the correlation id; v1 adds a tagged-field section."""
    return KStruct("correlation_id" / Int32, *only(version >= 1, TaggedFields))


def request_header_version(spec: ApiSpec, api_version: int, dialect: WireDialect) -> int:
    """Flexible API versions use header v2; ControlledShutdown v0 alone uses v0; the rest v1."""
    if spec.is_flexible(api_version, dialect):
        return 2
    if spec.key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 1


def response_header_version(spec: ApiSpec, api_version: int, dialect: WireDialect) -> int:
    """Flexible API versions use header v1, except ApiVersions, which always answers with v0.

    (ApiVersions stays on v0 so a client that sent a version the server does not know can still
    read the error in the response.)
    """
    if spec.is_flexible(api_version, dialect) and spec.key != ApiKey.API_VERSIONS:
        return 1
    return 0
