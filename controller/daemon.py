"""Run one controller candidate: its listeners, metrics endpoint, event log and the controller.

The RPC listener answers the requests brokers send the controller, ControlledShutdown, AlterPartition
and AllocateProducerIds, and the Admin API requests brokers forward to it (ElectLeaders and the
reassignment APIs), by turning them into controller events; it starts before the candidate competes,
so the endpoint it publishes in ``/controller`` is already serving. It answers ApiVersions too, with
the versions of the APIs it serves: Kafka's brokers ask it first on their channel to the controller.
Every listener also answers clients that take the controller for a broker (``controller.client_apis``);
the client listeners, ``listeners`` after the first, are where Kafka's brokers send their clients.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from admin.topic_requests import TopicRequests
from authorizer.acl_authorizer import AclAuthorizer
from controller.client_apis import CLIENT_APIS, ClientApis, ContextView
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
from zkstore.producer_id_blocks import ProducerIdManager
from zkstore.users import read_scram_credential
from zkstore.znodes import Endpoint

FORWARDED_APIS = frozenset(
    {ApiKey.ELECT_LEADERS, ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.LIST_PARTITION_REASSIGNMENTS}
)
"""Admin API requests that brokers forward to the active controller."""
BROKER_APIS = frozenset({ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ALTER_PARTITION, ApiKey.ALLOCATE_PRODUCER_IDS})
"""What brokers ask the controller itself; with an authorizer on, ClusterAction is required."""
RPC_APIS = BROKER_APIS | FORWARDED_APIS | CLIENT_APIS | {ApiKey.API_VERSIONS}


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

        def server(name: str, served_as: str, security: Any) -> RequestServer:
            return RequestServer(
                partial(self._handle, served_as),
                name=f"controller-{name.lower()}",
                api_keys=RPC_APIS,
                quotas=quotas,
                idle_s=config.connections_max_idle_ms / 1000,
                on_closed=count,
                security=security,
                credentials=self._scram_credential,
                api_versions=api_versions_frame,
            )

        # the RPC listener answers clients as the inter-broker listener's (its name in UpdateMetadata)
        self.rpc = server("rpc", config.inter_broker_listener_name, config.listener_security)
        self.client_servers = {c.name: server(c.name, c.name, c.security) for c in config.client_listeners}
        self._client_endpoints: dict[str, Endpoint] = {}
        controller = self.controller
        self.clients = ClientApis(
            controller.context,
            controller.zk,
            lambda: controller.is_active,
            TopicRequests(
                lambda: controller.zk,
                ContextView(controller.context, controller.channel, controller.idle),
                self.event_log,
                config.topic_defaults,
            ),
            ProducerIdManager(controller.zk, config.controller_id, self.event_log),
            own_endpoints=lambda: self._client_endpoints,
            inter_broker_listener=config.inter_broker_listener_name,
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

    async def _handle(self, listener: str, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        key = ApiKey(header.api_key)
        if key == ApiKey.API_VERSIONS:  # no authorization, as in Kafka
            return api_versions_body()
        if (key in BROKER_APIS or self.config.authorizer.enabled) and self._refused(header):
            # Client requests are not authorized one by one here: with an authorizer on, only
            # principals allowed ClusterAction (brokers, operators) are served.
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return error_response_body(header.api_key, header.api_version, code, body)
        if key == ApiKey.CONTROLLED_SHUTDOWN:
            return await self.controller.handle_controlled_shutdown(
                body["broker_id"], body["broker_epoch"], header.api_version
            )
        if key == ApiKey.ALTER_PARTITION:
            return await self.controller.handle_alter_partition(body, header.api_version)
        if key == ApiKey.ALLOCATE_PRODUCER_IDS:
            return await self.controller.handle_allocate_producer_ids(body["broker_id"], body["broker_epoch"])
        if key in FORWARDED_APIS:
            return await self.controller.handle_admin_request(key, body, header.api_version)
        return await self.clients.handle(listener, key, header.api_version, body)

    async def start(self) -> None:
        listener = self.config.listener
        port = await self.rpc.start(listener.host or "0.0.0.0", listener.port)
        rpc = advertised(self.config.advertised, port)
        for name in self.config.broker_facing_listener_names:
            self._client_endpoints[name] = rpc
        clients = []
        for client in self.config.client_listeners:
            bound = await self.client_servers[client.name].start(
                client.listener.host or "0.0.0.0", client.listener.port
            )
            self._client_endpoints[client.name] = advertised(client.advertised, bound)
            clients.append((self._client_endpoints[client.name], client.protocol))
        self.controller.set_rpc_endpoint(rpc, tuple(clients))
        if self.config.metrics_port is not None:
            self.metrics_port = self.metrics.serve(self.config.metrics_port)
        self.event_log.emit(
            "controller_started",
            controller_id=self.config.controller_id,
            rpc_endpoint=self.controller.rpc_endpoint.connection_string,
            client_endpoints=[e.connection_string for e, _ in clients],
            metrics_port=self.metrics_port,
            inter_broker_protocol_version=self.config.inter_broker_protocol_version,
            epoch_protocol=self.config.epoch_protocol.value,
        )
        await self.controller.start()
        if self.config.authorizer.enabled:
            await self.authorizer.start()

    async def stop(self) -> None:
        await self.rpc.close()
        for server in self.client_servers.values():
            await server.close()
        if self.config.authorizer.enabled:
            await self.authorizer.stop()
        await self.controller.stop()
        self.metrics.stop()
