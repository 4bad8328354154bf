"""DescribeLogDirs (key 35) v1-v4: a broker's log directories and the size of each partition in them.

``topics`` null asks for every partition. v2 is the first flexible version; v3 adds the top-level
``error_code``; v4 each directory's ``total_bytes`` and ``usable_bytes``. (v0, the same as v1, is not
offered: current clients speak v1 or later.)
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Bool, Int16, Int32, Int64, Layout, default, only


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 2)
    topic = k.struct("topic" / k.string(), "partitions" / k.array(Int32))
    return k.struct("topics" / k.array(topic, nullable=True))


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 2)
    partition = k.struct(
        "partition_index" / Int32, "partition_size" / Int64, "offset_lag" / Int64, "is_future_key" / Bool
    )
    result = k.struct(
        "error_code" / Int16,
        "log_dir" / k.string(),
        "topics" / k.array(k.struct("name" / k.string(), "partitions" / k.array(partition))),
        *only(version >= 4, default("total_bytes" / Int64, -1), default("usable_bytes" / Int64, -1)),
    )
    return k.struct(
        "throttle_time_ms" / Int32,
        *only(version >= 3, "error_code" / Int16),
        "results" / k.array(result),
    )


SPEC = ApiSpec(
    key=ApiKey.DESCRIBE_LOG_DIRS,
    name="DescribeLogDirs",
    versions=(1, 2, 3, 4),
    flexible_versions=frozenset({2, 3, 4}),
    request=request,
    response=response,
)
