"""The broker daemon: its parts wired together, started and stopped in order, and its registration.

Start-up order: listeners (so the registration can advertise bound ports), ZooKeeper session,
registration (KIP-380: the czxid is the broker epoch), and only then the handler threads, so no
request is judged before the broker knows its epoch. After a session expiry the
broker registers again and takes the new epoch; requests for the old one are rejected from then on.
SIGTERM runs Kafka's controlled shutdown (ControlledShutdown to the active controller, retried
with the configured backoff), then closes the session so the registration disappears at once.

``inter.broker.protocol.version`` decides the control-plane wire (``protocol/ibp.py``): the dialect
every listener and the request handling read control requests in, and the AlterPartition and
ControlledShutdown versions sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import NoNodeError

from authorizer.acl_authorizer import AclAuthorizer
from broker.acl_apis import AclApis
from broker.admin_apis import AdminApis
from broker.alter_partition_manager import AlterPartitionManager
from broker.alter_partition_manager import Outcome as IsrOutcome
from broker.api_table import DataApis
from broker.apis import BrokerIdentity, KafkaApis
from broker.authorization import RequestAuthorizer
from broker.config import BrokerConfig
from broker.config_apis import ConfigApis
from broker.controlled_shutdown import ControlledShutdown
from broker.controller_address import ControllerAddress, controller_in_metadata
from broker.controller_guard import ControllerEpochGuard, ZkController
from broker.coordinators import Coordinators
from broker.fetch import FetchApi
from broker.fetch_versions import FlexibleFetch
from broker.forwarded_admin import ForwardedAdminApis
from broker.log import LogConfig
from broker.log_manager import LogManager
from broker.metadata_api import MetadataApis
from broker.metadata_cache import MetadataCache
from broker.metrics import BrokerMetrics
from broker.offsets_api import OffsetsApi
from broker.planes import ListenerServices, RequestPlanes
from broker.produce import ProduceApi
from broker.producer_ids import InitProducerIdApi
from broker.replica_fetcher import FetcherSettings
from broker.replica_manager import ReplicaManager
from broker.request_channel import Outcome, Request
from broker.topic_configs import TopicConfigStore, log_config_for
from daemon.config import advertised
from daemon.eventlog import EventLog
from daemon.metrics import Metrics
from daemon.supervision import start_supervised
from security.sasl import ScramCredential
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper, ConnectionEvent
from zkstore.batch_read import get_data_many
from zkstore.client_metrics import ZooKeeperClientMetrics
from zkstore.cluster_id import read_cluster_id
from zkstore.producer_id_blocks import ProducerIdManager
from zkstore.registration import register_broker
from zkstore.users import read_scram_credential
from zkstore.znodes import TopicPartition

log = logging.getLogger("broker")

PRODUCER_EXPIRATION_CHECK_S = 600.0
"""Kafka's producer.id.expiration.check.interval.ms (an internal setting)."""


def log_config(config: BrokerConfig) -> LogConfig:
    return LogConfig(
        segment_bytes=config.segment_bytes,
        segment_ms=config.segment_ms,
        index_interval_bytes=config.index_interval_bytes,
        retention_ms=config.retention_ms,
        retention_bytes=config.retention_bytes,
        max_batch_bytes=config.message_max_bytes,
        producer_id_expiration_ms=config.producer_id_expiration_ms,
        delete="delete" in config.cleanup_policy,
        compact="compact" in config.cleanup_policy,
        min_cleanable_ratio=config.min_cleanable_ratio,
        delete_retention_ms=config.delete_retention_ms,
        min_compaction_lag_ms=config.min_compaction_lag_ms,
        max_compaction_lag_ms=config.max_compaction_lag_ms,
    )


def fetcher_settings(config: BrokerConfig) -> FetcherSettings:
    """How this broker's replica fetchers dial their leaders and size their fetches."""
    return FetcherSettings(
        broker_id=config.broker_id,
        max_wait_ms=config.replica_fetch_wait_max_ms,
        min_bytes=config.replica_fetch_min_bytes,
        max_bytes=config.replica_fetch_response_max_bytes,
        partition_max_bytes=config.replica_fetch_max_bytes,
        backoff_s=config.replica_fetch_backoff_s,
        socket_timeout_s=config.replica_socket_timeout_s,
        security=config.dialing(config.security_protocols[config.inter_broker_listener_name]),
    )


class BrokerServer:
    """The broker's composition root: every part is given its collaborators and hooks when it is built.

    Where two parts need each other (the metrics read the planes and the replica manager, which feed
    them; the replica manager and the AlterPartition manager or the group coordinator call each
    other), the part built first is given a method of this class that reaches the other when called,
    never an attribute assigned afterwards; so is what is known only once started (the cluster id,
    the advertised endpoints, the producer-id manager).
    """

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.name = f"broker {config.broker_id}"
        self.identity = BrokerIdentity(config.broker_id)
        for directory in config.log_dirs:
            directory.mkdir(parents=True, exist_ok=True)
        self.events = EventLog(config.log_dir / "events.jsonl", f"broker-{config.broker_id}")
        self.metrics = Metrics()
        self.zk = AsyncZooKeeper(
            config.zookeeper_connect,
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            connect_timeout_s=config.zookeeper_connection_timeout_s,
            security=config.zk_security,
        )
        self.authorizer = AclAuthorizer(self.zk, config.authorizer)
        self.planes = RequestPlanes(config, self._handle)
        self.metadata_cache = MetadataCache()
        self.log_manager = LogManager(config.log_dir, log_config(config), self.events, config.cleaner)
        self.alter_partition = AlterPartitionManager(
            self.zk,
            config.broker_id,
            self._epoch,
            self._controller_endpoint,
            self._isr_outcome,
            timeout_s=config.controller_socket_timeout_s,
            version=config.control_wire.alter_partition,
        )
        self.replica_manager = ReplicaManager(
            config.broker_id,
            config.log_dir,
            self.events,
            log_manager=self.log_manager,
            metadata_cache=self.metadata_cache,
            fetcher_settings=fetcher_settings(config),
            checkpoint=self.planes.checkpoint or (lambda: None),
            min_insync_replicas=config.min_insync_replicas,
            on_isr_change=self._isr_changed,
            propose_isr=self.alter_partition.submit,
            on_elected=self._coordinator_partition_elected,
            on_resigned=self._coordinator_partition_resigned,
            on_topic_deleted=self.alter_partition.forget_topic,
        )
        meters = self.broker_metrics = BrokerMetrics(
            self.metrics,
            data=self.planes.data,
            control=self.planes.control,
            replicas=self.replica_manager,
            epoch=self._epoch,
        )
        ZooKeeperClientMetrics(self.metrics).watch(self.zk)  # after the broker's own, as docs list them
        produce = ProduceApi(self.replica_manager, on_append=meters.appended, on_result=meters.produced)
        self.coordinators = Coordinators(
            config,
            self.replica_manager,
            produce,
            self.metadata_cache,
            self.events,
            zk=lambda: self.zk,
            next_producer_id=self._next_producer_id,
        )
        self.data_apis = self._data_apis(produce, meters)
        self.apis = KafkaApis(
            self.identity,
            self.replica_manager,
            self.metadata_cache,
            self.events,
            handlers=self.data_apis.table(),
            guard=self._epoch_guard(),
            authorization=RequestAuthorizer(self.authorizer) if config.authorizer.enabled else None,
            on_handled=meters.request_handled,
            on_denied=meters.authorization_denied,
            dialect=config.control_wire.dialect,
        )
        self.cluster_id: str | None = None
        self.advertised: tuple[znodes.Endpoint, ...] = ()
        self.metrics_port: int | None = None
        self.producer_ids: InitProducerIdApi | None = None
        self.topic_configs: TopicConfigStore | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._registering = asyncio.Lock()

    def _data_apis(self, produce: ProduceApi, meters: BrokerMetrics) -> DataApis:
        """The objects behind the API table, each given what it works with (besides the parts built
        first: the replica manager, the metadata cache, the log manager and the planes)."""
        config, rm, cache, zk = self.config, self.replica_manager, self.metadata_cache, lambda: self.zk
        admin = AdminApis(
            zk,
            self._loop,
            cache,
            self.events,
            config.topics,
            broker_id=config.broker_id,
            cluster_id=lambda: self.cluster_id,
            create_internal=self.coordinators.create_topic,
            log_dir=config.log_dir,
            log_sizes=self.log_manager.sizes,
        )
        return DataApis(
            metadata=MetadataApis(
                config.broker_id,
                cache,
                lambda: {e.listener_name: (e.host, e.port) for e in self.advertised},
                lambda: self.cluster_id,
                lambda: self.apis.api_keys,
                checkpoint=self.planes.checkpoint,
                auto_create=admin.auto_create,
                dialect=config.control_wire.dialect,
            ),
            offsets=OffsetsApi(rm),
            produce=produce,
            fetch=FlexibleFetch(FetchApi(rm, on_read=meters.fetched), rm, cache),
            groups=self.coordinators.group_apis(),
            find_coordinator=self.coordinators.find_coordinator_api(),
            transactions=self.coordinators.transaction_apis(),
            write_txn_markers=self.coordinators.write_txn_markers_api(),
            init_producer_id=self._init_producer_id,
            admin=admin,
            configs=ConfigApis(
                config.broker_id, config.loaded, self.log_manager.config, zk, self._loop, cache
            ),
            acls=AclApis(lambda: self.authorizer, zk, self._loop),
            forwarded=ForwardedAdminApis(
                self._controller_endpoint,
                self._loop,
                cache,
                broker_id=config.broker_id,
                socket_timeout_s=config.controller_socket_timeout_s,
            ),
        )

    async def _next_producer_id(self) -> int:
        if self.producer_ids is None:
            raise RuntimeError("a producer id asked for before the broker started")
        return await self.producer_ids.manager.next_id()

    def _epoch_guard(self) -> ControllerEpochGuard | None:
        """With ``controller.epoch.confirmation``: new controller epochs confirmed in ZooKeeper."""
        if not self.config.controller_epoch_confirmation:
            return None
        timeout_s = self.config.zookeeper_session_timeout_ms / 1000
        return ControllerEpochGuard(self._controller_in_zookeeper, timeout_s=timeout_s)

    # -- what parts built before another reach it through

    def _handle(self, request: Request) -> Outcome:
        """The handler threads' entry point: the planes are built before the APIs, whose metrics read them."""
        return self.apis.handle(request)

    def _isr_changed(self, expanded: bool) -> None:
        self.broker_metrics.isr_changed(expanded)

    def _isr_outcome(self, outcome: IsrOutcome) -> None:
        self.replica_manager.isr_outcome(outcome)

    def _epoch(self) -> int:
        return self.identity.epoch

    # -- lifecycle

    async def start(self) -> None:
        bound = await self.planes.listen(
            ListenerServices(
                unsupported=self.apis.unsupported_version_response,
                api_versions=self.apis.api_versions_response,
                credentials=self._scram_credential,
                on_sent=self.broker_metrics.response_sent,
                on_closed=self.broker_metrics.connection_closed,
            )
        )
        self.advertised = tuple(advertised(e, bound[e.listener_name]) for e in self.config.advertised)
        if self.config.metrics_port is not None:
            self.metrics_port = self.metrics.serve(self.config.metrics_port)
        # Logs are recovered before the broker registers, as Kafka's LogManager does at start-up.
        await asyncio.get_running_loop().run_in_executor(None, self.log_manager.load)
        self.log_manager.start_cleaner(self.replica_manager.high_watermark)
        await self.zk.start()
        self.zk.on_connection_event(self._on_connection_event)
        if self.config.authorizer.enabled:
            await self.authorizer.start()
        self.cluster_id = await read_cluster_id(self.zk)
        loop = asyncio.get_running_loop()
        await self.coordinators.start(loop, self.zk)
        self.producer_ids = InitProducerIdApi(
            ProducerIdManager(self.zk, self.config.broker_id, self.events), loop
        )
        self.topic_configs = TopicConfigStore(self.zk, self._apply_topic_config)
        await self.topic_configs.start()
        await self.register()
        self.alter_partition.start()
        # Requests that arrived before registration wait in the queues until the epoch is known, as
        # Kafka only starts processing requests once the broker is registered.
        self.planes.start_handlers()
        self._tasks.append(start_supervised("offsets-expiry", self._expire_offsets))
        self._tasks.append(start_supervised("transaction-timers", self.coordinators.txn.run_timers))
        for name, interval, job in (
            (
                "hw-checkpoint",
                self.config.hw_checkpoint_interval_s,
                self.replica_manager.checkpoint_high_watermarks,
            ),
            ("recovery-checkpoint", self.config.recovery_checkpoint_interval_s, self.log_manager.checkpoint),
            ("log-retention", self.config.retention_check_interval_s, self._apply_retention),
            ("isr-expiration", self.config.replica_lag_time_max_ms / 2000.0, self._shrink_isrs),
            ("producer-expiration", PRODUCER_EXPIRATION_CHECK_S, self.log_manager.remove_expired_producers),
        ):
            self._tasks.append(asyncio.create_task(self._every(interval, job), name=name))
        self.events.emit(
            "broker_started",
            broker_id=self.config.broker_id,
            broker_epoch=self.identity.epoch,
            listeners=[e.connection_string for e in self.advertised],
            control_plane_listener=self.config.control_plane_listener_name,
            inter_broker_protocol_version=self.config.inter_broker_protocol_version,
            metrics_port=self.metrics_port,
            min_insync_replicas=self.config.min_insync_replicas,
        )

    async def _scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """A SASL/SCRAM client's stored credential, read from ZooKeeper at each authentication."""
        return await read_scram_credential(self.zk, user, mechanism)

    def running(self) -> str:
        endpoints = ", ".join(e.connection_string for e in self.advertised)
        return f"epoch {self.identity.epoch}, {endpoints}"

    async def stop(self) -> None:
        self.events.emit("shutdown_started", broker_epoch=self.identity.epoch)
        if self.config.controlled_shutdown_enable:
            await self.controlled_shutdown()
        await self.coordinators.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.alter_partition.stop()
        await self.planes.close_listeners()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.replica_manager.produce_purgatory.shutdown)
        await loop.run_in_executor(None, self.replica_manager.fetch_purgatory.shutdown)
        await self.planes.stop_handlers()
        await loop.run_in_executor(None, self.replica_manager.shutdown)
        self.replica_manager.checkpoint_high_watermarks()
        await self.zk.close()
        self.events.emit("shutdown_complete", broker_epoch=self.identity.epoch)
        self.metrics.stop()
        self.events.close()

    # -- registration

    def registration(self) -> znodes.BrokerRegistration:
        names = {e.listener_name for e in self.advertised}
        return znodes.BrokerRegistration(
            broker_id=self.config.broker_id,
            endpoints=self.advertised,
            listener_security_protocol_map={
                n: p for n, p in self.config.security_protocols.items() if n in names
            },
            timestamp=int(time.time() * 1000),
            rack=self.config.rack,
        )

    async def register(self) -> int:
        """Register (again) and adopt the new epoch; requests for the previous one are stale from now on."""
        async with self._registering:
            previous = self.identity.epoch
            epoch = await register_broker(
                self.zk,
                self.config.broker_id,
                self.registration().encode(),
                wait_for_owner_s=self.config.zookeeper_session_timeout_ms / 1000 + 5,
            )
            if epoch != previous:
                self.identity.epoch = epoch
                self.events.emit("registered", broker_epoch=epoch, previous_epoch=previous)
            return epoch

    def _on_connection_event(self, event: ConnectionEvent) -> None:
        if event is ConnectionEvent.RECONNECTED:
            self._tasks.append(start_supervised("re-register", self._ensure_registered))
        elif event is ConnectionEvent.EXPIRED:
            log.warning("broker %d: ZooKeeper session expired; registering again", self.config.broker_id)
            self.events.emit("session_expired", broker_epoch=self.identity.epoch)

    async def _ensure_registered(self) -> None:
        """After a reconnect: if our registration went with an expired session, register anew (run
        supervised: a failed attempt is logged and made again until one succeeds)."""
        try:
            _, stat = await self.zk.get(znodes.broker_path(self.config.broker_id))
            if stat.ephemeralOwner == self.zk.session_id and stat.czxid == self.identity.epoch:
                return
        except NoNodeError:
            pass
        await self.register()

    # -- high watermarks

    async def _every(self, interval_s: float, job: Callable[[], object]) -> None:
        """Run ``job`` off the loop every ``interval_s``; a failure is logged and the next run still comes."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval_s)
            try:
                await loop.run_in_executor(None, job)
            except Exception:
                log.exception("broker %d: periodic %s failed", self.config.broker_id, job)

    def _shrink_isrs(self) -> int:
        return self.replica_manager.shrink_isrs(self.config.replica_lag_time_max_ms)

    def _apply_retention(self) -> int:
        """Delete-retention below each high watermark; ``__consumer_offsets`` is stored with
        ``cleanup.policy=compact``, which turns it off (``topic_configs.log_config_for``), so no committed
        offset is ever lost to time."""
        return self.log_manager.apply_retention(self.replica_manager.high_watermark)

    # -- topic configs

    def _apply_topic_config(self, topic: str, overrides: dict[str, str]) -> None:
        """A topic's overrides as read from ZooKeeper (at start-up or after a change), applied now."""
        logs = self.log_manager.set_topic_config(topic, log_config_for(self.log_manager.config, overrides))
        minimum = overrides.get("min.insync.replicas")
        self.replica_manager.set_topic_min_insync(topic, int(minimum) if minimum is not None else None)
        self.events.emit("topic_config_applied", topic=topic, configs=overrides, logs=logs)

    # -- the group coordinator and producer ids

    def _coordinator_partition_elected(self, tp: TopicPartition, leader_epoch: int) -> None:
        self.coordinators.elected(tp, leader_epoch)

    def _coordinator_partition_resigned(self, tp: TopicPartition, leader_epoch: int | None) -> None:
        self.coordinators.resigned(tp, leader_epoch)

    def _loop(self) -> asyncio.AbstractEventLoop:
        return self.coordinators.loop

    async def _expire_offsets(self) -> None:
        while True:
            await asyncio.sleep(self.config.group.offsets_retention_check_interval_ms / 1000.0)
            expired = self.coordinators.group.expire_offsets()
            if expired:
                log.info("%d committed offsets expired", expired)

    def _init_producer_id(self, request: Request, body: dict[str, Any]) -> Any:
        if self.producer_ids is None:
            raise RuntimeError("InitProducerId before the broker started")
        if body["transactional_id"] is not None:
            return self.data_apis.transactions.init_producer_id(request, body)
        return self.producer_ids.handle(request, body)

    # -- controlled shutdown

    async def _controller_endpoint(self) -> ControllerAddress | None:
        """For AlterPartition and forwarded admin requests: the control-plane listener, else the
        inter-broker one, of a controller that is a live broker; else ``/controller``'s endpoint."""
        return await self._controller_on(
            self.config.control_plane_listener_name or self.config.inter_broker_listener_name
        )

    async def _controller_for_shutdown(self) -> ControllerAddress | None:
        """ControlledShutdown goes to the inter-broker listener (Kafka's ``KafkaServer``)."""
        return await self._controller_on(self.config.inter_broker_listener_name)

    async def _controller_on(self, listener: str) -> ControllerAddress | None:
        found = controller_in_metadata(self.metadata_cache.snapshot, listener)
        if found is not None:
            security = self.config.dialing(self.config.security_protocols[listener])
            return ControllerAddress(*found, security)
        with contextlib.suppress(NoNodeError):
            data, _ = await self.zk.get(znodes.CONTROLLER)
            registration = znodes.decode_controller_registration(data, znodes.CONTROLLER)
            if registration is not None and registration.host is not None and registration.port is not None:
                security = self.config.dialing(registration.security_protocol or "PLAINTEXT")
                return ControllerAddress(
                    registration.broker_id, registration.host, registration.port, security
                )
        return None

    def _controller_in_zookeeper(self) -> ZkController:
        """``/controller``'s id and ``/controller_epoch`` after a sync (blocking; a handler thread's
        call, run on the event loop)."""
        read = asyncio.run_coroutine_threadsafe(self._read_controller(), self._loop())
        return read.result(timeout=self.config.controller_socket_timeout_s)

    async def _read_controller(self) -> ZkController:
        await self.zk.sync(znodes.CONTROLLER_EPOCH)
        paths = [znodes.CONTROLLER, znodes.CONTROLLER_EPOCH]
        data: list[bytes | None] = []
        for result in await get_data_many(self.zk, paths):
            if isinstance(result, NoNodeError):
                data.append(None)
            elif isinstance(result, Exception):
                raise result
            else:
                data.append(result[0])
        registration = data[0] and znodes.decode_controller_registration(data[0], znodes.CONTROLLER)
        epoch = data[1] and znodes.decode_controller_epoch(data[1], znodes.CONTROLLER_EPOCH)
        return ZkController(registration.broker_id if registration else None, epoch if epoch else None)

    async def controlled_shutdown(self) -> bool:
        """Kafka's procedure: ask the active controller to move leadership away, retrying with backoff."""
        config = self.config
        return await ControlledShutdown(
            config.broker_id,
            self._epoch,
            self._controller_for_shutdown,
            self.events,
            max_retries=config.controlled_shutdown_max_retries,
            retry_backoff_s=config.controlled_shutdown_retry_backoff_s,
            timeout_s=config.controller_socket_timeout_s,
            version=config.control_wire.controlled_shutdown,
        ).run()
