"""What JoinGroup and SyncGroup hand the group coordinator and get back, as plain data.

The wire handlers (``broker/group/apis.py``) decode a request's version into a :class:`JoinRequest`
and encode the :class:`JoinResult` or :class:`SyncResult` the coordinator answers, at once or when
the rebalance phase a member is parked in completes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.group.state import Group
from protocol import ErrorCode


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool
    """JoinGroup v4+ (KIP-394): a new dynamic member first gets its id with MEMBER_ID_REQUIRED."""


@dataclass
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    """For the leader only: (member id, instance id, metadata for the chosen protocol)."""

    @classmethod
    def of_generation(cls, group: Group, member_id: str, *, with_members: bool) -> JoinResult:
        """The answer naming the group's current generation, with its members for the leader."""
        members = (
            [
                (m.member_id, m.group_instance_id, m.metadata_for(group.protocol))
                for m in group.members.values()
            ]
            if with_members
            else []
        )
        return cls(
            ErrorCode.NONE,
            member_id,
            group.generation,
            group.protocol_type,
            group.protocol,
            group.leader_id or "",
            members,
        )


@dataclass
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol: str | None = None
    assignment: bytes = b""
