"""FindCoordinator (key 10) v0-v4: which broker coordinates a group (or a transactional id).

v1 adds ``key_type`` (0 group, 1 transaction), ``throttle_time_ms`` and ``error_message``; v3 is the
first flexible version; v4 batches: ``coordinator_keys`` in the request, one ``coordinators`` entry
per key in the response, which then has no top-level fields but the throttle time.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int8, Int16, Int32, Layout, default, only


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 3)
    return k.struct(
        *only(version <= 3, "key" / k.string()),
        *only(version >= 1, "key_type" / Int8),
        *only(version >= 4, "coordinator_keys" / k.array(k.string())),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 3)
    if version >= 4:
        coordinator = k.struct(
            "key" / k.string(),
            default("node_id" / Int32, -1),
            "host" / k.string(),
            default("port" / Int32, -1),
            "error_code" / Int16,
            "error_message" / k.string(nullable=True),
        )
        return k.struct("throttle_time_ms" / Int32, "coordinators" / k.array(coordinator))
    return k.struct(
        *only(version >= 1, "throttle_time_ms" / Int32),
        "error_code" / Int16,
        *only(version >= 1, "error_message" / k.string(nullable=True)),
        default("node_id" / Int32, -1),
        "host" / k.string(),
        default("port" / Int32, -1),
    )


SPEC = ApiSpec(
    key=ApiKey.FIND_COORDINATOR,
    name="FindCoordinator",
    versions=tuple(range(0, 5)),
    flexible_versions=frozenset({3, 4}),
    request=request,
    response=response,
)
