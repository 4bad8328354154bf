"""Which APIs and versions this project implements in each wire dialect, and the codec for each (built
once, on first use)."""

from __future__ import annotations

import functools
from typing import Literal

from protocol.api import DEFAULT_DIALECT, ApiSpec, WireDialect
from protocol.errors import ProtocolError
from protocol.headers import (
    request_header_schema,
    request_header_version,
    response_header_schema,
    response_header_version,
)
from protocol.message_codec import MessageCodec
from protocol.messages import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    allocate_producer_ids,
    alter_configs,
    alter_partition,
    alter_partition_reassignments,
    api_versions,
    controlled_shutdown,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_topics,
    describe_acls,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_transactions,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leader_and_isr,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    stop_replica,
    sync_group,
    txn_offset_commit,
    update_metadata,
    write_txn_markers,
)

APIS: dict[int, ApiSpec] = {
    spec.key: spec
    for spec in (
        leader_and_isr.SPEC,
        stop_replica.SPEC,
        update_metadata.SPEC,
        controlled_shutdown.SPEC,
        alter_partition.SPEC,
        produce.SPEC,
        fetch.SPEC,
        list_offsets.SPEC,
        metadata.SPEC,
        api_versions.SPEC,
        offset_for_leader_epoch.SPEC,
        find_coordinator.SPEC,
        join_group.SPEC,
        sync_group.SPEC,
        heartbeat.SPEC,
        leave_group.SPEC,
        offset_commit.SPEC,
        offset_fetch.SPEC,
        list_groups.SPEC,
        describe_groups.SPEC,
        delete_groups.SPEC,
        init_producer_id.SPEC,
        create_topics.SPEC,
        delete_topics.SPEC,
        create_partitions.SPEC,
        describe_cluster.SPEC,
        describe_configs.SPEC,
        alter_configs.SPEC,
        incremental_alter_configs.SPEC,
        describe_log_dirs.SPEC,
        elect_leaders.SPEC,
        alter_partition_reassignments.SPEC,
        list_partition_reassignments.SPEC,
        sasl_handshake.SPEC,
        sasl_authenticate.SPEC,
        describe_acls.SPEC,
        create_acls.SPEC,
        delete_acls.SPEC,
        allocate_producer_ids.SPEC,
        add_partitions_to_txn.SPEC,
        add_offsets_to_txn.SPEC,
        end_txn.SPEC,
        write_txn_markers.SPEC,
        txn_offset_commit.SPEC,
        describe_transactions.SPEC,
        list_transactions.SPEC,
    )
}

SUPPORTED_VERSIONS_BY_DIALECT: dict[WireDialect, dict[int, tuple[int, ...]]] = {
    dialect: {spec.key: spec.versions_in(dialect) for spec in APIS.values()} for dialect in WireDialect
}
"""Dialect -> API key -> the versions implemented in it, ascending."""

SUPPORTED_VERSIONS: dict[int, tuple[int, ...]] = SUPPORTED_VERSIONS_BY_DIALECT[DEFAULT_DIALECT]
"""API key -> the versions implemented in the default (SEED) dialect, for ApiVersions answers and
version negotiation."""

Kind = Literal["request", "response"]


def api_spec(api_key: int) -> ApiSpec:
    try:
        return APIS[api_key]
    except KeyError:
        raise ProtocolError(f"unknown API key {api_key}") from None


def supported_versions(dialect: WireDialect = DEFAULT_DIALECT) -> dict[int, tuple[int, ...]]:
    """API key -> the versions implemented in ``dialect``, ascending."""
    return SUPPORTED_VERSIONS_BY_DIALECT[dialect]


def is_supported(api_key: int, api_version: int, *, dialect: WireDialect = DEFAULT_DIALECT) -> bool:
    return api_version in SUPPORTED_VERSIONS_BY_DIALECT[dialect].get(api_key, ())


def layout_label(spec: ApiSpec, api_version: int, dialect: WireDialect) -> str:
    """``LeaderAndIsr v5`` for Kafka's layouts, ``LeaderAndIsr v5 (seed)`` for the seed's."""
    seed = " (seed)" if spec.is_seed_layout(api_version, dialect) else ""
    return f"{spec.name} v{api_version}{seed}"


@functools.cache
def message_codec(
    api_key: int, api_version: int, kind: Kind, dialect: WireDialect = DEFAULT_DIALECT
) -> MessageCodec:
    """The codec of one API version's request or response body in ``dialect``.

    A version that means the same in both dialects gets the same codec object in both.
    """
    spec = api_spec(api_key)
    supported = SUPPORTED_VERSIONS_BY_DIALECT[dialect][spec.key]
    if api_version not in supported:
        raise ProtocolError(
            f"{spec.name} v{api_version} is not supported in the {dialect.name} dialect"
            f" (supported: {supported})"
        )
    return _layout_codec(api_key, api_version, kind, spec.is_seed_layout(api_version, dialect))


@functools.cache
def _layout_codec(api_key: int, api_version: int, kind: Kind, seed: bool) -> MessageCodec:
    spec = APIS[api_key]
    dialect = WireDialect.SEED if seed else WireDialect.KAFKA
    schema = spec.schema(api_version, kind, dialect)
    return MessageCodec(f"{layout_label(spec, api_version, dialect)} {kind}", schema)


@functools.cache
def request_header_codec_for(version: int) -> MessageCodec:
    return MessageCodec(f"request header v{version}", request_header_schema(version))


@functools.cache
def response_header_codec_for(version: int) -> MessageCodec:
    return MessageCodec(f"response header v{version}", response_header_schema(version))


def request_header_codec(
    api_key: int, api_version: int, dialect: WireDialect = DEFAULT_DIALECT
) -> MessageCodec:
    return request_header_codec_for(request_header_version(api_spec(api_key), api_version, dialect))


def response_header_codec(
    api_key: int, api_version: int, dialect: WireDialect = DEFAULT_DIALECT
) -> MessageCodec:
    return response_header_codec_for(response_header_version(api_spec(api_key), api_version, dialect))
