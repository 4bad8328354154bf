"""Which requests a principal may make: Kafka's per-API checks (§4.7 of the reference) before a handler runs.

Control requests, cluster operations and group operations are refused whole (CLUSTER_ / GROUP_
AUTHORIZATION_FAILED) and nothing of them is applied. Requests naming several topics (or configs,
groups) are split: the handler sees only what the principal may touch, and the refused resources are
answered with TOPIC_AUTHORIZATION_FAILED beside its answer, as Kafka does. Metadata for all topics
and ListGroups list only what the principal may describe.

Without an authorizer (``authorizer.class.name`` unset) every check passes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from authorizer.acl_authorizer import AclAuthorizer
from protocol import CONTROL_APIS, ApiKey, ErrorCode, error_entries, error_response_body
from security.acl import CLUSTER_NAME, AclOperation, ResourceType

__all__ = ["Denial", "Gate", "RequestAuthorizer"]

Body = dict[str, Any]
Op = AclOperation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID
_CONFIG_RESOURCE_TOPIC, _CONFIG_RESOURCE_BROKER = 2, 4


@dataclass(frozen=True, slots=True)
class Denial:
    """One refused (operation, resource), for the event log and the metric."""

    operation: AclOperation
    resource_type: ResourceType
    name: str


@dataclass
class Gate:
    """What to do with one request: refuse it whole, or run it on ``body`` and adjust the answer."""

    body: Body
    refusal: Body | None = None
    merge: tuple[str, list[Body]] | None = None
    """(response list field, refused entries) to add to the handler's answer."""
    keep: Callable[[Body], Body] | None = None
    """Filters the handler's answer (ListGroups)."""
    describable: Callable[[str], bool] | None = None
    """Which names the handler may list (Metadata for all topics, whose entries are encoded as they
    are built, so they cannot be filtered afterwards)."""
    denials: list[Denial] = field(default_factory=list)

    def finish(self, response: Body) -> Body:
        if self.merge is not None:
            name, entries = self.merge
            response[name] = [*response.get(name, []), *entries]
        return self.keep(response) if self.keep is not None else response


class RequestAuthorizer:
    """Applies the ACL authorizer to decoded requests on the broker's handler threads."""

    def __init__(self, authorizer: AclAuthorizer) -> None:
        self.authorizer = authorizer

    @property
    def enabled(self) -> bool:
        return self.authorizer.settings.enabled

    def gate(self, principal: str, host: str, api_key: int, version: int, body: Body) -> Gate:
        check = _Check(self.authorizer, principal, host, api_key, version, body)
        return check.run()


class _Check:
    def __init__(
        self, authorizer: AclAuthorizer, principal: str, host: str, api_key: int, version: int, body: Body
    ) -> None:
        self.authorizer, self.principal, self.host = authorizer, principal, host
        self.api_key, self.version, self.body = api_key, version, body
        self.denials: list[Denial] = []

    # -- decisions

    def allowed(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        if self.authorizer.authorize(self.principal, self.host, operation, resource_type, name):
            return True
        self.denials.append(Denial(operation, resource_type, name))
        return False

    def cluster(self, operation: AclOperation) -> bool:
        return self.allowed(operation, CLUSTER, CLUSTER_NAME)

    def quiet(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """A check whose failure is not a refusal (an alternative is tried next)."""
        return self.authorizer.snapshot.authorize(self.principal, self.host, operation, resource_type, name)

    # -- outcomes

    def gate(self, **kwargs: Any) -> Gate:
        return Gate(self.body, denials=self.denials, **kwargs)

    def refuse(self, code: ErrorCode) -> Gate:
        if self.api_key in CONTROL_APIS:  # the broker names every partition in it (control_error)
            return self.gate(refusal={"error_code": code})
        return self.gate(refusal=error_response_body(self.api_key, self.version, code, self.body))

    def whole(self, ok: bool, code: ErrorCode) -> Gate:
        return self.gate() if ok else self.refuse(code)

    def topics(self, operation: AclOperation, field_name: str = "topics", name: str = "name") -> Gate:
        """Split a request listing topics (with partitions) into what may run and what is refused."""
        listed = self.body.get(field_name) or []
        refused = [t for t in listed if not self.allowed(operation, TOPIC, t[name])]
        if not refused:
            return self.gate()
        body = {**self.body, field_name: [t for t in listed if t not in refused]}
        entries = error_response_body(
            self.api_key, self.version, ErrorCode.TOPIC_AUTHORIZATION_FAILED, {field_name: refused}
        )
        response_field = next(k for k, v in entries.items() if isinstance(v, list) and v)
        return Gate(body, merge=(response_field, entries[response_field]), denials=self.denials)

    def names(
        self,
        operation: AclOperation,
        resource_type: ResourceType,
        request_field: str,
        response_field: str,
        key: str,
        code: ErrorCode,
        name_of: Callable[[Any], str] = str,
    ) -> Gate:
        """Split a request listing named resources (bare names, or entries ``name_of`` names) whose
        answer has one result per name (CreateTopics, DeleteTopics, CreatePartitions, the group APIs)."""
        listed = self.body.get(request_field) or []
        refused = [r for r in listed if not self.allowed(operation, resource_type, name_of(r))]
        if not refused:
            return self.gate()
        body = {**self.body, request_field: [r for r in listed if r not in refused]}
        given = [{key: name_of(r)} for r in refused]
        entries = error_entries(self.api_key, self.version, response_field, given, code)
        return Gate(body, merge=(response_field, entries), denials=self.denials)

    def describable(self, resource_type: ResourceType) -> Callable[[str], bool]:
        """Whether the principal may describe a resource of ``resource_type`` by that name."""
        authorizer, principal, host = self.authorizer, self.principal, self.host
        return lambda name: authorizer.snapshot.authorize(principal, host, Op.DESCRIBE, resource_type, name)

    def keep_described(self, response_field: str, resource_type: ResourceType, key: str) -> Gate:
        """Run the request, then list only what the principal may describe (ListGroups)."""
        describable = self.describable(resource_type)

        def keep(response: Body) -> Body:
            response[response_field] = [e for e in response[response_field] if describable(e[key])]
            return response

        return self.gate(keep=keep)

    def run(self) -> Gate:
        rule = _RULES.get(self.api_key)
        return self.gate() if rule is None else rule(self)


# -- the rules, one per API ---------------------------------------------------------------------


def _control(c: _Check) -> Gate:
    return c.whole(c.cluster(Op.CLUSTER_ACTION), ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


def _produce(c: _Check) -> Gate:
    transactional_id = c.body.get("transactional_id")
    if transactional_id is not None and not c.allowed(Op.WRITE, TRANSACTIONAL_ID, transactional_id):
        return c.refuse(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    return c.topics(Op.WRITE, "topic_data")


def _fetch(c: _Check) -> Gate:
    if c.body.get("replica_id", -1) >= 0:  # a follower
        return c.whole(c.cluster(Op.CLUSTER_ACTION), ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return c.topics(Op.READ, name="topic")


def _describe_topics(c: _Check) -> Gate:
    return c.topics(Op.DESCRIBE)


def _offset_for_leader_epoch(c: _Check) -> Gate:
    if c.body.get("replica_id", -1) >= 0 and c.quiet(Op.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
        return c.gate()
    return c.topics(Op.DESCRIBE, name="topic")


def _metadata(c: _Check) -> Gate:
    if c.body.get("topics") is None:  # all topics: list only those the principal may describe
        return c.gate(describable=c.describable(TOPIC))
    gate = c.topics(Op.DESCRIBE)
    creates = c.quiet(Op.CREATE, CLUSTER, CLUSTER_NAME) or all(
        c.quiet(Op.CREATE, TOPIC, t["name"]) for t in gate.body.get("topics") or []
    )
    if not creates and gate.body.get("allow_auto_topic_creation", True):
        gate.body = {**gate.body, "allow_auto_topic_creation": False}
    return gate


def _group(operation: AclOperation) -> Callable[[_Check], Gate]:
    def rule(c: _Check) -> Gate:
        return c.whole(c.allowed(operation, GROUP, c.body["group_id"]), ErrorCode.GROUP_AUTHORIZATION_FAILED)

    return rule


def _offset_commit(c: _Check) -> Gate:
    if not c.allowed(Op.READ, GROUP, c.body["group_id"]):
        return c.refuse(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return c.topics(Op.READ)


def _find_coordinator(c: _Check) -> Gate:
    keys = c.body.get("coordinator_keys") or [c.body.get("key", "")]
    if c.body.get("key_type", 0) == 1:
        ok = all([c.allowed(Op.DESCRIBE, TRANSACTIONAL_ID, key) for key in keys])
        return c.whole(ok, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    ok = all([c.allowed(Op.DESCRIBE, GROUP, key) for key in keys])
    return c.whole(ok, ErrorCode.GROUP_AUTHORIZATION_FAILED)


def _transaction(*then: Callable[[_Check], Gate]) -> Callable[[_Check], Gate]:
    """Write on the request's transactional id first (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then
    ``then``'s checks in order, the first refusal answering."""

    def rule(c: _Check) -> Gate:
        if not c.allowed(Op.WRITE, TRANSACTIONAL_ID, c.body["transactional_id"]):
            return c.refuse(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        for check in then:
            gate = check(c)
            if gate.refusal is not None or gate.merge is not None:
                return gate
        return c.gate()

    return rule


def _all_topics(operation: AclOperation) -> Callable[[_Check], Gate]:
    """Every listed topic allowed, else the whole request refused (AddPartitionsToTxn)."""

    def rule(c: _Check) -> Gate:
        ok = all([c.allowed(operation, TOPIC, t["name"]) for t in c.body.get("topics") or []])
        return c.whole(ok, ErrorCode.TOPIC_AUTHORIZATION_FAILED)

    return rule


def _txn_offset_commit(c: _Check) -> Gate:
    if not c.allowed(Op.READ, GROUP, c.body["group_id"]):
        return c.refuse(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return c.topics(Op.READ)


def _describe_groups(c: _Check) -> Gate:
    return c.names(Op.DESCRIBE, GROUP, "groups", "groups", "group_id", ErrorCode.GROUP_AUTHORIZATION_FAILED)


def _delete_groups(c: _Check) -> Gate:
    return c.names(
        Op.DELETE, GROUP, "groups_names", "results", "group_id", ErrorCode.GROUP_AUTHORIZATION_FAILED
    )


def _list_groups(c: _Check) -> Gate:
    if c.quiet(Op.DESCRIBE, CLUSTER, CLUSTER_NAME):
        return c.gate()
    return c.keep_described("groups", GROUP, "group_id")


def _init_producer_id(c: _Check) -> Gate:
    transactional_id = c.body.get("transactional_id")
    if transactional_id is not None:
        ok = c.allowed(Op.WRITE, TRANSACTIONAL_ID, transactional_id)
        return c.whole(ok, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    ok = c.quiet(Op.IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME) or c.authorizer.authorize_any(
        c.principal, c.host, Op.WRITE, TOPIC
    )
    if not ok:
        c.denials.append(Denial(Op.IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME))
    return c.whole(ok, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


def _topic_name(entry: Body) -> str:
    return str(entry["name"])


def _create_topics(c: _Check) -> Gate:
    if c.quiet(Op.CREATE, CLUSTER, CLUSTER_NAME):
        return c.gate()
    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return c.names(Op.CREATE, TOPIC, "topics", "topics", "name", code, _topic_name)


def _delete_topics(c: _Check) -> Gate:
    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return c.names(Op.DELETE, TOPIC, "topic_names", "responses", "name", code)


def _create_partitions(c: _Check) -> Gate:
    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return c.names(Op.ALTER, TOPIC, "topics", "results", "name", code, _topic_name)


def _configs(operation: AclOperation, response_field: str) -> Callable[[_Check], Gate]:
    def rule(c: _Check) -> Gate:
        listed = c.body.get("resources") or []
        kept: list[Body] = []
        entries: list[Body] = []
        for resource in listed:
            kind, name = resource["resource_type"], resource["resource_name"]
            code = ErrorCode.NONE
            if kind == _CONFIG_RESOURCE_TOPIC and not c.allowed(operation, TOPIC, name):
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif kind == _CONFIG_RESOURCE_BROKER and not c.cluster(operation):
                code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            if code == ErrorCode.NONE:
                kept.append(resource)
                continue
            given = {"resource_type": kind, "resource_name": name}
            entries += error_entries(c.api_key, c.version, response_field, [given], code)
        if not entries:
            return c.gate()
        return Gate({**c.body, "resources": kept}, merge=(response_field, entries), denials=c.denials)

    return rule


def _acl_change(request_field: str, response_field: str, extra: Body) -> Callable[[_Check], Gate]:
    """CreateAcls, DeleteAcls: Alter on the cluster, else every entry refused (clients expect one
    result per creation or filter)."""

    def rule(c: _Check) -> Gate:
        if c.cluster(Op.ALTER):
            return c.gate()
        refused = {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None, **extra}
        entries = [dict(refused) for _ in c.body.get(request_field) or []]
        return c.gate(refusal={"throttle_time_ms": 0, response_field: entries})

    return rule


def _cluster_op(operation: AclOperation) -> Callable[[_Check], Gate]:
    def rule(c: _Check) -> Gate:
        return c.whole(c.cluster(operation), ErrorCode.CLUSTER_AUTHORIZATION_FAILED)

    return rule


_RULES: dict[int, Callable[[_Check], Gate]] = {
    **dict.fromkeys(CONTROL_APIS, _control),
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _describe_topics,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
    ApiKey.METADATA: _metadata,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _group(Op.DESCRIBE),
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.JOIN_GROUP: _group(Op.READ),
    ApiKey.HEARTBEAT: _group(Op.READ),
    ApiKey.LEAVE_GROUP: _group(Op.READ),
    ApiKey.SYNC_GROUP: _group(Op.READ),
    ApiKey.DESCRIBE_GROUPS: _describe_groups,
    ApiKey.LIST_GROUPS: _list_groups,
    ApiKey.DELETE_GROUPS: _delete_groups,
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.DESCRIBE_CONFIGS: _configs(Op.DESCRIBE_CONFIGS, "results"),
    ApiKey.ALTER_CONFIGS: _configs(Op.ALTER_CONFIGS, "responses"),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _configs(Op.ALTER_CONFIGS, "responses"),
    ApiKey.ELECT_LEADERS: _cluster_op(Op.ALTER),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _cluster_op(Op.ALTER),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: _cluster_op(Op.DESCRIBE),
    ApiKey.DESCRIBE_LOG_DIRS: _cluster_op(Op.DESCRIBE),
    ApiKey.DESCRIBE_ACLS: _cluster_op(Op.DESCRIBE),
    ApiKey.CREATE_ACLS: _acl_change("creations", "results", {}),
    ApiKey.DELETE_ACLS: _acl_change("filters", "filter_results", {"matching_acls": []}),
    ApiKey.ADD_PARTITIONS_TO_TXN: _transaction(_all_topics(Op.WRITE)),
    ApiKey.ADD_OFFSETS_TO_TXN: _transaction(_group(Op.READ)),
    ApiKey.END_TXN: _transaction(),
    ApiKey.TXN_OFFSET_COMMIT: _transaction(_txn_offset_commit),
    ApiKey.WRITE_TXN_MARKERS: _cluster_op(Op.CLUSTER_ACTION),
    ApiKey.DESCRIBE_TRANSACTIONS: lambda c: c.names(
        Op.DESCRIBE,
        TRANSACTIONAL_ID,
        "transactional_ids",
        "transaction_states",
        "transactional_id",
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ),
    ApiKey.LIST_TRANSACTIONS: lambda c: c.keep_described(
        "transaction_states", TRANSACTIONAL_ID, "transactional_id"
    ),
}
