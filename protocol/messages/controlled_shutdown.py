"""ControlledShutdown (key 7) v2: the broker names its epoch so a retry from a former life is fenced."""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Int64, KArray, KString, KStruct


def request(version: int) -> Construct:
    return KStruct("broker_id" / Int32, "broker_epoch" / Int64)


def response(version: int) -> Construct:
    return KStruct(
        "error_code" / Int16,
        "remaining_partitions" / KArray(KStruct("topic_name" / KString(), "partition_index" / Int32)),
    )


SPEC = ApiSpec(
    key=ApiKey.CONTROLLED_SHUTDOWN,
    name="ControlledShutdown",
    versions=(2,),
    flexible_versions=frozenset(),
    request=request,
    response=response,
)
