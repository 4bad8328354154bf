"""The Admin API requests that need the controller's state, relayed to the active controller:
ElectLeaders (KIP-460), AlterPartitionReassignments and ListPartitionReassignments (KIP-455).

ZooKeeper-mode Kafka runs them as events of the controller broker. Here the controller is a separate
daemon, so the broker that receives one sends it on to the RPC listener named in ``/controller`` and
answers with what the controller answered, retrying while no controller answers or the one asked
has just lost its office (NOT_CONTROLLER) until the request's timeout. As Kafka's DelayedElectLeader
does, an ElectLeaders answer then waits until this broker's metadata cache shows each elected
partition's new leader epoch, so a client that describes the topic next sees the new leader.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

from broker.controller_address import ControllerAddress, ControllerEndpoint
from broker.metadata_cache import MetadataCache, Snapshot
from broker.on_loop import answer_on_loop
from broker.request_channel import Request
from protocol import ApiKey, ErrorCode
from protocol.error_response import error_response_body
from zkstore.znodes import TopicPartition

log = logging.getLogger("broker.admin")

Body = dict[str, Any]

RETRY_S = 0.2
"""Pause before asking again when no controller answered."""
POLL_S = 0.05
"""How often an elected partition's leader epoch is looked for in the metadata cache."""
ELECT_LEADERS_VERSION = 2
"""ElectLeaders goes to the controller at its newest version (election type, top-level error code)
whatever the client spoke; the client's answer is written at the client's version."""


class ForwardedAdminApis:
    def __init__(
        self,
        controller_endpoint: ControllerEndpoint,
        loop: Callable[[], asyncio.AbstractEventLoop],
        cache: MetadataCache,
        *,
        broker_id: int,
        socket_timeout_s: float,
    ) -> None:
        self.controller_endpoint = controller_endpoint
        self.loop = loop
        self.cache = cache
        self.broker_id = broker_id
        self.socket_timeout_s = socket_timeout_s

    def _run(self, coro: Coroutine[Any, Any, Body], what: str) -> Future[Body]:
        return answer_on_loop(self.loop(), coro, lambda body: body, what)

    # ------------------------------------------------------------------ the three APIs

    def elect_leaders(self, request: Request, body: Body) -> Future[Body]:
        body = {**body, "election_type": body.get("election_type", 0)}
        return self._run(self._elect(body), "ElectLeaders")

    def alter_partition_reassignments(self, request: Request, body: Body) -> Future[Body]:
        forwarded = self._forward(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, body, body["timeout_ms"])
        return self._run(forwarded, "AlterPartitionReassignments")

    def list_partition_reassignments(self, request: Request, body: Body) -> Future[Body]:
        forwarded = self._forward(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, body, body["timeout_ms"])
        return self._run(forwarded, "ListPartitionReassignments")

    async def _elect(self, body: Body) -> Body:
        started = time.monotonic()
        before = self.cache.snapshot  # copy-on-write: this one stays as it is
        response = await self._forward(ApiKey.ELECT_LEADERS, ELECT_LEADERS_VERSION, body, body["timeout_ms"])
        elected = [
            TopicPartition(result["topic"], p["partition_id"])
            for result in response["replica_election_results"]
            for p in result["partition_result"]
            if p["error_code"] == ErrorCode.NONE
        ]
        deadline = started + max(body["timeout_ms"], 0) / 1000.0
        while elected and time.monotonic() < deadline:
            now = self.cache.snapshot
            elected = [tp for tp in elected if _leader_epoch(now, tp) <= _leader_epoch(before, tp)]
            if elected:
                await asyncio.sleep(POLL_S)
        # what is still not shown has been elected all the same: Kafka's answer on a timeout
        for result in response["replica_election_results"]:
            for p in result["partition_result"]:
                if TopicPartition(result["topic"], p["partition_id"]) in elected:
                    p["error_code"] = ErrorCode.REQUEST_TIMED_OUT
                    p["error_message"] = "elected; the new leader is not in this broker's metadata yet"
        return response

    # ------------------------------------------------------------------ relaying

    async def _forward(self, api_key: ApiKey, version: int, body: Body, timeout_ms: int) -> Body:
        """The active controller's answer; NOT_CONTROLLER (the whole request) if none answered in time."""
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000.0
        reason = "no controller is registered in ZooKeeper"
        while True:
            found = await self.controller_endpoint()
            if found is not None:
                try:
                    response = await self._send(found, api_key, version, body, deadline)
                except (OSError, TimeoutError, ConnectionError) as exc:
                    reason = (
                        f"controller {found.controller_id} at {found.host}:{found.port} did not answer: {exc}"
                    )
                else:
                    if not _not_controller(response):
                        return response
                    reason = f"controller {found.controller_id} is no longer the active controller"
            if time.monotonic() + RETRY_S >= deadline:
                log.warning("%s not forwarded: %s", api_key.name, reason)
                return error_response_body(api_key, version, ErrorCode.NOT_CONTROLLER, body, message=reason)
            await asyncio.sleep(RETRY_S)

    async def _send(
        self, controller: ControllerAddress, api_key: ApiKey, version: int, body: Body, deadline: float
    ) -> Body:
        timeout = max(min(self.socket_timeout_s, deadline - time.monotonic()), 0.1)
        connection = await controller.connect(f"broker-{self.broker_id}", timeout)
        try:
            _, response = await connection.send(api_key, version, body, timeout=timeout)
        finally:
            await connection.close()
        return response


def _not_controller(response: Body) -> bool:
    return response.get("error_code") == ErrorCode.NOT_CONTROLLER


def _leader_epoch(snapshot: Snapshot, tp: TopicPartition) -> int:
    state = snapshot.partition(tp)
    return -1 if state is None else state.leader_epoch
