"""ControlledShutdown (key 7) v2-v3: the broker names its epoch so a retry from a former life is fenced.

v3, what Kafka 3.9 brokers send, is v2 made flexible.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Int64, Layout

FIRST_FLEXIBLE_VERSION = 3


def request(version: int) -> Construct:
    k = Layout(flexible=version >= FIRST_FLEXIBLE_VERSION)
    return k.struct("broker_id" / Int32, "broker_epoch" / Int64)


def response(version: int) -> Construct:
    k = Layout(flexible=version >= FIRST_FLEXIBLE_VERSION)
    remaining = k.struct("topic_name" / k.string(), "partition_index" / Int32)
    return k.struct("error_code" / Int16, "remaining_partitions" / k.array(remaining))


SPEC = ApiSpec(
    key=ApiKey.CONTROLLED_SHUTDOWN,
    name="ControlledShutdown",
    versions=(2, 3),
    flexible_versions=frozenset({3}),
    request=request,
    response=response,
)
