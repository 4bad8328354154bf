"""The broker's one registration table: which handler serves each API beyond the control requests.

``KafkaApis`` serves LeaderAndIsr, UpdateMetadata and StopReplica itself (and answers SaslHandshake
and SaslAuthenticate after authentication with ILLEGAL_SASL_STATE). Every other API a broker serves
is listed here, once, next to the object that handles it; ApiVersions answers with these keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.acl_apis import AclApis
from broker.admin_apis import AdminApis
from broker.apis import Handler
from broker.config_apis import ConfigApis
from broker.fetch_versions import FlexibleFetch
from broker.find_coordinator import FindCoordinatorApi
from broker.forwarded_admin import ForwardedAdminApis
from broker.group.apis import GroupApis
from broker.metadata_api import MetadataApis
from broker.offsets_api import OffsetsApi
from broker.produce import ProduceApi
from broker.txn.apis import TransactionApis
from broker.txn.write_markers import WriteTxnMarkersApi
from protocol import ApiKey

__all__ = ["DataApis"]


@dataclass(frozen=True, slots=True)
class DataApis:
    """The objects handling the data-plane and admin APIs, built by the broker from their collaborators."""

    metadata: MetadataApis
    offsets: OffsetsApi
    produce: ProduceApi
    fetch: FlexibleFetch
    """Fetch of every version: v12+ (Kafka's followers) read into v11's form for ``FetchApi``."""
    groups: GroupApis
    find_coordinator: FindCoordinatorApi
    transactions: TransactionApis
    write_txn_markers: WriteTxnMarkersApi
    init_producer_id: Handler
    admin: AdminApis
    configs: ConfigApis
    acls: AclApis
    forwarded: ForwardedAdminApis

    def table(self) -> dict[int, Handler]:
        """API key -> its handler."""
        groups, admin, acls, txns = self.groups, self.admin, self.acls, self.transactions
        configs, forwarded = self.configs, self.forwarded
        return {
            # clients' data path
            ApiKey.API_VERSIONS: self.metadata.api_versions,
            ApiKey.METADATA: self.metadata.metadata,
            ApiKey.PRODUCE: self.produce.handle,
            ApiKey.FETCH: self.fetch.handle,
            ApiKey.LIST_OFFSETS: self.offsets.list_offsets,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self.offsets.offset_for_leader_epoch,
            ApiKey.INIT_PRODUCER_ID: self.init_producer_id,
            ApiKey.FIND_COORDINATOR: self.find_coordinator.handle,
            # the group coordinator
            ApiKey.JOIN_GROUP: groups.join_group,
            ApiKey.SYNC_GROUP: groups.sync_group,
            ApiKey.HEARTBEAT: groups.heartbeat,
            ApiKey.LEAVE_GROUP: groups.leave_group,
            ApiKey.OFFSET_COMMIT: groups.offset_commit,
            ApiKey.OFFSET_FETCH: groups.offset_fetch,
            ApiKey.LIST_GROUPS: groups.list_groups,
            ApiKey.DESCRIBE_GROUPS: groups.describe_groups,
            ApiKey.DELETE_GROUPS: groups.delete_groups,
            ApiKey.TXN_OFFSET_COMMIT: groups.txn_offset_commit,
            # the transaction coordinator, and the markers it sends to partition leaders
            ApiKey.ADD_PARTITIONS_TO_TXN: txns.add_partitions_to_txn,
            ApiKey.ADD_OFFSETS_TO_TXN: txns.add_offsets_to_txn,
            ApiKey.END_TXN: txns.end_txn,
            ApiKey.DESCRIBE_TRANSACTIONS: txns.describe_transactions,
            ApiKey.LIST_TRANSACTIONS: txns.list_transactions,
            ApiKey.WRITE_TXN_MARKERS: self.write_txn_markers.handle,
            # the Admin API: forwarded to the active controller
            ApiKey.ELECT_LEADERS: forwarded.elect_leaders,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: forwarded.alter_partition_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: forwarded.list_partition_reassignments,
            # the Admin API: written to ZooKeeper by this broker
            ApiKey.DESCRIBE_CONFIGS: configs.describe_configs,
            ApiKey.ALTER_CONFIGS: configs.alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: configs.incremental_alter_configs,
            ApiKey.CREATE_TOPICS: admin.create_topics,
            ApiKey.DELETE_TOPICS: admin.delete_topics,
            ApiKey.CREATE_PARTITIONS: admin.create_partitions,
            ApiKey.DESCRIBE_CLUSTER: admin.describe_cluster,
            ApiKey.DESCRIBE_LOG_DIRS: admin.describe_log_dirs,
            ApiKey.DESCRIBE_ACLS: acls.describe_acls,
            ApiKey.CREATE_ACLS: acls.create_acls,
            ApiKey.DELETE_ACLS: acls.delete_acls,
        }
