"""The group APIs on the wire: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
TxnOffsetCommit, OffsetFetch, ListGroups, DescribeGroups and DeleteGroups.

Handlers run on the data-plane threads; each decodes its version's fields, hands the decision to the
coordinator on the event loop and answers with a future, so a JoinGroup parked for a rebalance
holds no thread. (FindCoordinator is ``broker/find_coordinator.py``'s, for groups and transactions.)
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from broker.group.coordinator import GroupCoordinator
from broker.group.messages import JoinRequest, JoinResult
from broker.group.metadata_manager import OffsetFetchResult, now_ms
from broker.on_loop import answer_on_loop
from broker.request_channel import Request
from protocol import ErrorCode
from protocol.consumer_offsets import OffsetCommitRecord
from zkstore.znodes import TopicPartition

T = TypeVar("T")
Body = dict[str, Any]


def client_host(request: Request) -> str:
    """Kafka records the client's address as Java's ``InetAddress.toString``: ``/1.2.3.4``."""
    host = request.peer.rsplit(":", 1)[0].strip("[]") if request.peer else ""
    return f"/{host}"


class GroupApis:
    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator

    def _run(self, coro: Coroutine[Any, Any, T], answer: Callable[[T], Body]) -> Future[Body]:
        return answer_on_loop(self.coordinator.loop, coro, answer, "a group request")

    # ------------------------------------------------------------------ membership

    def join_group(self, request: Request, body: Body) -> Future[Body]:
        version = request.header.api_version
        join = JoinRequest(
            group_id=body["group_id"],
            member_id=body["member_id"],
            group_instance_id=body.get("group_instance_id"),
            client_id=request.header.client_id or "",
            client_host=client_host(request),
            session_timeout_ms=body["session_timeout_ms"],
            # v0 has no rebalance timeout: Kafka uses the session timeout
            rebalance_timeout_ms=body["rebalance_timeout_ms"] if version >= 1 else body["session_timeout_ms"],
            protocol_type=body["protocol_type"],
            protocols=[(p["name"], p["metadata"]) for p in body["protocols"]],
            require_known_member_id=version >= 4,
        )
        return self._run(self.coordinator.join_group(join), lambda r: _join_response(r, version))

    def sync_group(self, request: Request, body: Body) -> Future[Body]:
        coro = self.coordinator.sync_group(
            body["group_id"],
            body["generation_id"],
            body["member_id"],
            body.get("group_instance_id"),
            body.get("protocol_type"),
            body.get("protocol_name"),
            {a["member_id"]: a["assignment"] for a in body["assignments"]},
        )
        return self._run(
            coro,
            lambda r: {
                "throttle_time_ms": 0,
                "error_code": r.error,
                "protocol_type": r.protocol_type,
                "protocol_name": r.protocol,
                "assignment": r.assignment,
            },
        )

    def heartbeat(self, request: Request, body: Body) -> Future[Body]:
        coro = self.coordinator.heartbeat(
            body["group_id"], body["generation_id"], body["member_id"], body.get("group_instance_id")
        )
        return self._run(coro, lambda error: {"throttle_time_ms": 0, "error_code": error})

    def leave_group(self, request: Request, body: Body) -> Future[Body]:
        version = request.header.api_version
        leaving: list[tuple[str, str | None]] = (
            [(m["member_id"], m.get("group_instance_id")) for m in body["members"]]
            if version >= 3
            else [(body["member_id"], None)]
        )

        def answer(result: tuple[ErrorCode, list[ErrorCode]]) -> Body:
            error, errors = result
            if version < 3:
                return {
                    "throttle_time_ms": 0,
                    "error_code": error or (errors[0] if errors else ErrorCode.NONE),
                }
            return {
                "throttle_time_ms": 0,
                "error_code": error,
                "members": [
                    {"member_id": m, "group_instance_id": i, "error_code": e}
                    for (m, i), e in zip(leaving, errors, strict=False)
                ],
            }

        return self._run(self.coordinator.leave_group(body["group_id"], leaving), answer)

    # ------------------------------------------------------------------ offsets

    def offset_commit(self, request: Request, body: Body) -> Future[Body]:
        coro = self.coordinator.commit_offsets(
            body["group_id"],
            body["generation_id_or_member_epoch"],
            body["member_id"],
            body.get("group_instance_id"),
            _commit_records(body, body.get("retention_time_ms", -1)),
        )
        return self._run(coro, lambda errors: _commit_answer(body, errors))

    def txn_offset_commit(self, request: Request, body: Body) -> Future[Body]:
        """TxnOffsetCommit: offsets committed with the producer's transaction (visible at its commit)."""
        coro = self.coordinator.transactional.commit(
            body["group_id"],
            (body["producer_id"], body["producer_epoch"]),
            body.get("generation_id", -1),
            body.get("member_id", ""),
            body.get("group_instance_id"),
            _commit_records(body, -1),
        )
        return self._run(coro, lambda errors: _commit_answer(body, errors))

    def offset_fetch(self, request: Request, body: Body) -> Future[Body]:
        version = request.header.api_version
        topics = body["topics"]
        partitions = (
            None
            if topics is None
            else [TopicPartition(t["name"], p) for t in topics for p in t["partition_indexes"]]
        )
        coro = self.coordinator.fetch_offsets(
            body["group_id"], partitions, require_stable=bool(body.get("require_stable", False))
        )

        def answer(result: tuple[ErrorCode, dict[TopicPartition, OffsetFetchResult]]) -> Body:
            error, found = result
            by_topic: dict[str, list[Body]] = {}
            wanted = partitions if partitions is not None else sorted(found)
            for tp in wanted:
                got = found.get(tp)
                by_topic.setdefault(tp.topic, []).append(
                    {
                        "partition_index": tp.partition,
                        "committed_offset": got.offset if got else -1,
                        "committed_leader_epoch": got.leader_epoch if got else -1,
                        "metadata": got.metadata if got else "",
                        # before v2 there is no top-level error: each partition carries the group's
                        "error_code": got.error if got else (error if version < 2 else ErrorCode.NONE),
                    }
                )
            response: Body = {
                "throttle_time_ms": 0,
                "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
                "error_code": error,
            }
            return response

        return self._run(coro, answer)

    # ------------------------------------------------------------------ admin

    def list_groups(self, request: Request, body: Body) -> Future[Body]:
        def answer(result: tuple[ErrorCode, list[tuple[str, str, str]]]) -> Body:
            error, groups = result
            return {
                "throttle_time_ms": 0,
                "error_code": error,
                "groups": [
                    {"group_id": g, "protocol_type": t, "group_state": s, "group_type": "classic"}
                    for g, t, s in groups
                ],
            }

        return self._run(self.coordinator.list_groups(body.get("states_filter") or ()), answer)

    def describe_groups(self, request: Request, body: Body) -> Future[Body]:
        async def describe() -> list[Body]:
            out = []
            for group_id in body["groups"]:
                error, summary = await self.coordinator.describe_group(group_id)
                out.append(
                    {
                        "error_code": error,
                        "group_id": group_id,
                        "group_state": summary.state,
                        "protocol_type": summary.protocol_type,
                        "protocol_data": summary.protocol,
                        "members": summary.members,
                        "authorized_operations": -(2**31),
                    }
                )
            return out

        return self._run(describe(), lambda groups: {"throttle_time_ms": 0, "groups": groups})

    def delete_groups(self, request: Request, body: Body) -> Future[Body]:
        def answer(errors: dict[str, ErrorCode]) -> Body:
            return {
                "throttle_time_ms": 0,
                "results": [{"group_id": g, "error_code": e} for g, e in errors.items()],
            }

        return self._run(self.coordinator.delete_groups(list(body["groups_names"])), answer)


def _join_response(result: JoinResult, version: int) -> Body:
    return {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "generation_id": result.generation,
        "protocol_type": result.protocol_type,
        # before v7 the protocol name is not nullable: "" stands for none
        "protocol_name": result.protocol if result.protocol is not None or version >= 7 else "",
        "leader": result.leader,
        "skip_assignment": False,
        "member_id": result.member_id,
        "members": [{"member_id": m, "group_instance_id": i, "metadata": md} for m, i, md in result.members],
    }


def _commit_records(body: Body, retention_ms: int | None) -> dict[TopicPartition, OffsetCommitRecord]:
    """An OffsetCommit's or TxnOffsetCommit's offsets, stamped now (with an expiry if ``retention_ms``)."""
    now = now_ms()
    return {
        TopicPartition(topic["name"], p["partition_index"]): OffsetCommitRecord(
            offset=p["committed_offset"],
            metadata=p["committed_metadata"] or "",
            commit_timestamp=now,
            leader_epoch=p.get("committed_leader_epoch", -1),
            expire_timestamp=now + retention_ms if retention_ms is not None and retention_ms >= 0 else -1,
        )
        for topic in body["topics"]
        for p in topic["partitions"]
    }


def _commit_answer(body: Body, errors: dict[TopicPartition, ErrorCode]) -> Body:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": topic["name"],
                "partitions": [
                    {
                        "partition_index": p["partition_index"],
                        "error_code": errors[TopicPartition(topic["name"], p["partition_index"])],
                    }
                    for p in topic["partitions"]
                ],
            }
            for topic in body["topics"]
        ],
    }
