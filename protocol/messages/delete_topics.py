"""DeleteTopics (key 20) v1-v5: delete topics by name.

(v0, without ``throttle_time_ms``, is not offered: current clients speak v1 or later.) v1 adds
``throttle_time_ms``; v4 is the first flexible version; v5 adds each result's
``error_message``. (v6, which may name topics by id, is not offered.)
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Layout, only


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 4)
    return k.struct("topic_names" / k.array(k.string()), "timeout_ms" / Int32)


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 4)
    result = k.struct(
        "name" / k.string(),
        "error_code" / Int16,
        *only(version >= 5, "error_message" / k.string(nullable=True)),
    )
    return k.struct(*only(version >= 1, "throttle_time_ms" / Int32), "responses" / k.array(result))


SPEC = ApiSpec(
    key=ApiKey.DELETE_TOPICS,
    name="DeleteTopics",
    versions=tuple(range(1, 6)),
    flexible_versions=frozenset({4, 5}),
    request=request,
    response=response,
)
