"""Brokers' answers to LeaderAndIsr and UpdateMetadata: logged, as Kafka does, and otherwise not acted
on (the channel already resends a request until it is answered; StopReplica responses drive topic
deletion and are handled there).

LeaderAndIsr answers per partition by topic name up to v4 and, from v5 (Kafka 3.9 sends v7), grouped
by topic id; :func:`leader_and_isr_errors` reads both, naming topics from the controller's context.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from controller import events
from controller.context import ControllerContext
from protocol import ErrorCode

log = logging.getLogger("controller")


def leader_and_isr_errors(
    response: Mapping[str, Any], topic_names: Mapping[uuid.UUID, str]
) -> list[tuple[str, int, int]]:
    """``(topic, partition, error code)`` of every partition a LeaderAndIsr response refused; a topic id
    the controller does not know is named by the id itself."""
    failed = [
        (p["topic_name"], p["partition_index"], p["error_code"])
        for p in response.get("partition_errors", ())
        if p["error_code"]
    ]
    for topic in response.get("topics", ()):
        name = topic_names.get(topic["topic_id"], str(topic["topic_id"]))
        failed += [
            (name, p["partition_index"], p["error_code"])
            for p in topic["partition_errors"]
            if p["error_code"]
        ]
    return failed


FENCED = frozenset({ErrorCode.STALE_BROKER_EPOCH, ErrorCode.STALE_CONTROLLER_EPOCH})
"""Refusals that are the fences working (a request for a broker's earlier registration, or from a
deposed controller): expected after a bounce or a failover, so a warning, not an error."""


def _log_refusal(api: str, broker_id: int, error: int) -> None:
    if error in FENCED:
        log.warning("%s to broker %d refused by its fence: %s", api, broker_id, _error_name(error))
    else:
        log.error("%s to broker %d failed: %s", api, broker_id, _error_name(error))


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


async def on_leader_and_isr_response(
    context: ControllerContext, event: events.LeaderAndIsrResponseReceived
) -> None:
    error = event.response.get("error_code", ErrorCode.NONE)
    if error:
        _log_refusal("LeaderAndIsr", event.broker_id, error)
        return
    names = {topic_id: name for name, topic_id in context.topic_ids.items() if topic_id is not None}
    for topic, partition, code in leader_and_isr_errors(event.response, names):
        log.warning(
            "broker %d: LeaderAndIsr for %s-%d failed: %s",
            event.broker_id,
            topic,
            partition,
            _error_name(code),
        )


async def on_update_metadata_response(event: events.UpdateMetadataResponseReceived) -> None:
    error = event.response.get("error_code", ErrorCode.NONE)
    if error:
        _log_refusal("UpdateMetadata", event.broker_id, error)
