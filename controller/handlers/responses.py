"""Brokers' answers to LeaderAndIsr and UpdateMetadata: logged, as Kafka does, and otherwise not acted
on (the channel already resends a request until it is answered; StopReplica responses drive topic
deletion and are handled there)."""

from __future__ import annotations

import logging

from controller import events
from protocol import ErrorCode

log = logging.getLogger("controller")


async def on_leader_and_isr_response(event: events.LeaderAndIsrResponseReceived) -> None:
    error = event.response.get("error_code", ErrorCode.NONE)
    if error:
        log.error("LeaderAndIsr to broker %d failed: %s", event.broker_id, ErrorCode(error).name)
        return
    failed = [p for p in event.response.get("partition_errors", []) if p.get("error_code")]
    for p in failed:
        log.warning(
            "broker %d: LeaderAndIsr for %s-%d failed: %s",
            event.broker_id,
            p.get("topic_name"),
            p.get("partition_index"),
            ErrorCode(p["error_code"]).name,
        )


async def on_update_metadata_response(event: events.UpdateMetadataResponseReceived) -> None:
    error = event.response.get("error_code", ErrorCode.NONE)
    if error:
        log.error("UpdateMetadata to broker %d failed: %s", event.broker_id, ErrorCode(error).name)
