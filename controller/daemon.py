"""Run one controller candidate: its RPC listener, metrics endpoint, event log and the controller.

The RPC listener answers the requests brokers send the controller, ControlledShutdown and
AlterPartition, and the Admin API requests brokers forward to it (ElectLeaders and the reassignment
APIs), by turning them into controller events; it starts before the candidate competes, so the
endpoint it publishes in ``/controller`` is already serving.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller.config import ControllerConfig
from controller.controller import Controller
from controller.metrics import ControllerMetrics
from daemon.config import advertised
from daemon.connection_quotas import ConnectionQuotas, connections_closed_meter
from daemon.eventlog import EventLog
from daemon.metrics import Metrics
from daemon.server import RequestServer
from protocol import ApiKey, RequestHeader

FORWARDED_APIS = frozenset(
    {ApiKey.ELECT_LEADERS, ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.LIST_PARTITION_REASSIGNMENTS}
)
"""Admin API requests that brokers forward to the active controller."""
RPC_APIS = frozenset({ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ALTER_PARTITION}) | FORWARDED_APIS


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
        )
        self.metrics_port: int | None = None
        self.name = f"controller {config.controller_id}"

    def running(self) -> str:
        return f"rpc {self.controller.rpc_endpoint.connection_string}, metrics port {self.metrics_port}"

    async def _handle(self, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        if header.api_key == ApiKey.CONTROLLED_SHUTDOWN:
            return await self.controller.handle_controlled_shutdown(body["broker_id"], body["broker_epoch"])
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

    async def stop(self) -> None:
        await self.rpc.close()
        await self.controller.stop()
        self.metrics.stop()
