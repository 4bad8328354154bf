"""CreatePartitions (key 37) v0-v3: raise topics' partition counts, optionally with the new
partitions' replicas. v2 is the first flexible version; v1 and v3 change no field."""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Bool, Int16, Int32, Layout


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 2)
    assignment = k.struct("broker_ids" / k.array(Int32))
    topic = k.struct("name" / k.string(), "count" / Int32, "assignments" / k.array(assignment, nullable=True))
    return k.struct("topics" / k.array(topic), "timeout_ms" / Int32, "validate_only" / Bool)


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 2)
    result = k.struct("name" / k.string(), "error_code" / Int16, "error_message" / k.string(nullable=True))
    return k.struct("throttle_time_ms" / Int32, "results" / k.array(result))


SPEC = ApiSpec(
    key=ApiKey.CREATE_PARTITIONS,
    name="CreatePartitions",
    versions=(0, 1, 2, 3),
    flexible_versions=frozenset({2, 3}),
    request=request,
    response=response,
)
