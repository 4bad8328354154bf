"""The group admin requests: ListGroups, DescribeGroups and DeleteGroups over the groups cached here.

They read the groups the metadata manager keeps and change nothing but what DeleteGroups asks: an
Empty group is deleted with tombstones for its records, as Kafka's coordinator does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from broker.group.metadata_manager import GroupMetadataManager
from broker.group.state import GroupState
from protocol import ErrorCode


@dataclass(frozen=True)
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[dict[str, Any]]


class GroupAdmin:
    def __init__(self, manager: GroupMetadataManager) -> None:
        self.manager = manager

    async def list_groups(self, states: Iterable[str] = ()) -> tuple[ErrorCode, list[tuple[str, str, str]]]:
        """(error, [(group id, protocol type, state)]); LOAD_IN_PROGRESS while any partition loads."""
        wanted = {s.lower() for s in states}
        groups = [
            (g.group_id, g.protocol_type or "", g.state.value)
            for g in self.manager.groups.values()
            if not wanted or g.state.value.lower() in wanted
        ]
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.manager.loading else ErrorCode.NONE
        return error, sorted(groups)

    async def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        """Members' metadata and assignments only once the group is Stable, as Kafka answers."""
        error = self.manager.status_error(group_id, allow_empty=True)
        group = self.manager.group(group_id)
        if error or group is None:
            return error, GroupSummary(group_id, GroupState.DEAD.value, "", "", [])
        stable = group.is_in(GroupState.STABLE)
        members = [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata_for(group.protocol) if stable else b"",
                "member_assignment": m.assignment if stable else b"",
            }
            for m in group.members.values()
        ]
        return ErrorCode.NONE, GroupSummary(
            group_id,
            group.state.value,
            group.protocol_type or "",
            group.protocol or "" if stable else "",
            members,
        )

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        """One error per group: only an Empty group is deleted."""
        out: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            error = self.manager.status_error(group_id, allow_empty=True)
            group = self.manager.group(group_id)
            if error:
                out[group_id] = error
            elif group is None or group.is_in(GroupState.DEAD):
                out[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_in(GroupState.EMPTY):
                out[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                out[group_id] = ErrorCode.NONE
                self.manager.delete_group(group, "deleted by request")
        return out
