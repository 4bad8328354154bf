"""Run one controller candidate: its RPC listener, metrics endpoint, event log and the controller.

The RPC listener answers the requests brokers send the controller, ControlledShutdown and
AlterPartition, and the Admin API requests brokers forward to it (ElectLeaders and the reassignment
APIs), by turning them into controller events; it starts before the candidate competes, so the
endpoint it publishes in ``/controller`` is already serving. It answers ApiVersions too, with the
versions of those APIs it serves: Kafka's brokers ask it first on their channel to the controller.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from authorizer.acl_authorizer import AclAuthorizer
from controller.config import ControllerConfig
from controller.controller import Controller
from controller.metrics import ControllerMetrics
from daemon.config import advertised
from daemon.eventlog import EventLog
from daemon.metrics import Metrics
from network.connection_quotas import ConnectionQuotas, connections_closed_meter
from network.server import RequestServer, current_request
from protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    ErrorCode,
    RequestHeader,
    encode_response,
    error_response_body,
)
from security.acl import CLUSTER_NAME, AclOperation, ResourceType
from security.sasl import ScramCredential
from zkstore.client_metrics import ZooKeeperClientMetrics
from zkstore.users import read_scram_credential

FORWARDED_APIS = frozenset(
    {ApiKey.ELECT_LEADERS, ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.LIST_PARTITION_REASSIGNMENTS}
)
"""Admin API requests that brokers forward to the active controller."""
RPC_APIS = (
    frozenset({ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ALTER_PARTITION, ApiKey.API_VERSIONS}) | FORWARDED_APIS
)


def api_versions_body() -> dict[str, Any]:
    """ApiVersions' answer: every RPC API with the oldest and newest version served."""
    entries = [
        {
            "api_key": int(key),
            "min_version": min(SUPPORTED_VERSIONS[key]),
            "max_version": max(SUPPORTED_VERSIONS[key]),
        }
        for key in sorted(RPC_APIS)
    ]
    return {"error_code": ErrorCode.NONE, "api_keys": entries, "throttle_time_ms": 0}


def api_versions_frame(header: RequestHeader) -> bytes:
    """The whole ApiVersions response, as a SASL listener gives it before authentication."""
    return encode_response(header.api_key, header.api_version, header.correlation_id, api_versions_body())


class ControllerDaemon:
    def __init__(self, config: ControllerConfig) -> None:
        self.config = config
        events_path = Path(config.log_dir) / "events.jsonl" if config.log_dir else None
        self.event_log = EventLog(events_path, f"controller-{config.controller_id}")
        self.metrics = Metrics()
        self.controller_metrics = ControllerMetrics(self.metrics)
        self.controller = Controller(
            config, event_log=self.event_log, metrics=self.metrics, timings=self.controller_metrics
        )
        self.controller_metrics.bind(self.controller)
        ZooKeeperClientMetrics(self.metrics).watch(self.controller.zk)
        closed = connections_closed_meter(self.metrics)

        def count(listener: str, reason: str) -> None:
            closed.labels(listener=listener, reason=reason).inc()

        quotas = ConnectionQuotas(
            max_connections=config.max_connections,
            max_per_ip=config.max_connections_per_ip,
            exempt_listeners=(),
            on_refused=count,
        )
        self.rpc = RequestServer(
            self._handle,
            name="controller-rpc",
            api_keys=RPC_APIS,
            quotas=quotas,
            idle_s=config.connections_max_idle_ms / 1000,
            on_closed=count,
            security=config.listener_security,
            credentials=self._scram_credential,
            api_versions=api_versions_frame,
        )
        self.authorizer = AclAuthorizer(self.controller.zk, config.authorizer)
        self.denied = self.metrics.meter(
            "kafka.controller",
            "AuthorizerMetrics",
            "AuthorizationDeniedPerSec",
            "Requests the ACL authorizer refused",
            ("request",),
            addition=True,
        )
        self.metrics_port: int | None = None
        self.name = f"controller {config.controller_id}"

    def running(self) -> str:
        return f"rpc {self.controller.rpc_endpoint.connection_string}, metrics port {self.metrics_port}"

    async def _scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return await read_scram_credential(self.controller.zk, user, mechanism)

    def _refused(self, header: RequestHeader) -> bool:
        """Brokers' requests need ClusterAction on the cluster (Kafka's rule), when an authorizer is on."""
        if not self.config.authorizer.enabled:
            return False
        context = current_request.get()
        if self.authorizer.authorize(
            context.principal, context.host, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
        ):
            return False
        name = ApiKey(header.api_key).name
        self.denied.labels(request=name).inc()
        self.event_log.emit(
            "authorization_denied",
            api=name,
            principal=context.principal,
            host=context.host,
            operation=AclOperation.CLUSTER_ACTION.name,
            resource_type=ResourceType.CLUSTER.name,
            resource=CLUSTER_NAME,
        )
        return True

    async def _handle(self, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        if header.api_key == ApiKey.API_VERSIONS:  # no authorization, as in Kafka
            return api_versions_body()
        if self._refused(header):
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return error_response_body(header.api_key, header.api_version, code, body)
        if header.api_key == ApiKey.CONTROLLED_SHUTDOWN:
            return await self.controller.handle_controlled_shutdown(
                body["broker_id"], body["broker_epoch"], header.api_version
            )
        if header.api_key in FORWARDED_APIS:
            return await self.controller.handle_admin_request(
                ApiKey(header.api_key), body, header.api_version
            )
        return await self.controller.handle_alter_partition(body, header.api_version)

    async def start(self) -> None:
        listener = self.config.listener
        port = await self.rpc.start(listener.host or "0.0.0.0", listener.port)
        self.controller.set_rpc_endpoint(advertised(self.config.advertised, port))
        if self.config.metrics_port is not None:
            self.metrics_port = self.metrics.serve(self.config.metrics_port)
        self.event_log.emit(
            "controller_started",
            controller_id=self.config.controller_id,
            rpc_endpoint=self.controller.rpc_endpoint.connection_string,
            metrics_port=self.metrics_port,
            inter_broker_protocol_version=self.config.inter_broker_protocol_version,
            epoch_protocol=self.config.epoch_protocol.value,
        )
        await self.controller.start()
        if self.config.authorizer.enabled:
            await self.authorizer.start()

    async def stop(self) -> None:
        await self.rpc.close()
        if self.config.authorizer.enabled:
            await self.authorizer.stop()
        await self.controller.stop()
        self.metrics.stop()
