"""Winning, keeping and giving up the controller role (Startup, ControllerChange, Reelect, Expire,
Resync, Shutdown).

A candidate wins by creating the ephemeral ``/controller`` and bumping ``/controller_epoch`` in one
multi-op; the epoch znode's version becomes the fencing token every later write checks, so a deposed
controller (a zombie after a pause or a partition) can no longer change the cluster. Losing the node,
the session, or a fenced write makes the controller resign: forget everything, stop sending.
"""

from __future__ import annotations

import gc
import logging
import time

from kazoo.exceptions import SessionExpiredError

from controller import events
from controller.handlers.brokers import BrokerChanges
from controller.handlers.failover import Failover
from controller.handlers.topics import TopicChanges
from controller.services import ControllerServices
from zkstore.fencing import ControllerMoved
from zkstore.znodes import ControllerRegistration, Endpoint

log = logging.getLogger("controller")

NO_CONTROLLER = -1


class ControllerElection:
    def __init__(
        self,
        services: ControllerServices,
        failover: Failover,
        brokers: BrokerChanges,
        topics: TopicChanges,
        rpc_endpoint: Endpoint,
    ) -> None:
        self.services = services
        self.context = services.context
        self.failover = failover
        self.brokers = brokers
        self.topics = topics
        self.rpc_endpoint = rpc_endpoint
        """Where brokers reach our RPC listener, published in ``/controller`` when we win."""
        self.active_controller_id = NO_CONTROLLER
        self.term_session: int | None = None
        """The ZooKeeper session the current term was won on."""

    @property
    def controller_id(self) -> int:
        return self.context.controller_id

    # -- events

    async def on_startup(self, _: events.Startup) -> None:
        await self.elect()

    async def on_controller_change(self, _: events.ControllerChange) -> None:
        await self.maybe_resign()

    async def on_reelect(self, _: events.Reelect) -> None:
        await self.maybe_resign()
        await self.elect()

    async def on_expire(self, _: events.Expire) -> None:
        """The session expired: resign, unless this term was won on the session that replaced it.

        An event in progress when the session expired carries on once a new session is up (its
        requests are sent again), and may win an election on it before this event is processed; that
        term owns ``/controller`` on the live session, and resigning it would leave the node held by
        a controller that is not active, for as long as the session lives.
        """
        if self.services.is_active and self.term_session == self.services.store.zk.session_id:
            log.info(
                "controller %d: ZooKeeper session expiry predates epoch %d, won on session %#x; still active",
                self.controller_id,
                self.context.epoch,
                self.term_session or 0,
            )
            return
        self.active_controller_id = NO_CONTROLLER
        if self.services.is_active:
            await self._resign("ZooKeeper session expired")

    async def on_resync(self, _: events.Resync) -> None:
        """After a reconnect, re-read what we watch: watches may have fired while we were away.

        kazoo drops every watch when the connection drops (firing each with EventType.NONE, which the
        handlers ignore). The per-znode watches are re-armed here; the global ones by the events queued.
        """
        await self.maybe_resign()
        if not self.services.is_active:
            await self.elect()
            return
        await self.brokers.rearm_watches()
        await self.topics.rearm_watches()
        for event in (
            events.BrokerChange(),
            events.TopicChange(),
            events.TopicDeletion(),
            events.IsrChangeNotification(),
            events.ZkPreferredReplicaElection(),
            events.ZkPartitionReassignment(),
        ):
            self.services.enqueue(event)

    async def on_shutdown(self, event: events.Shutdown) -> None:
        store = self.services.store
        token = store.token
        if token is not None:
            await self._resign("shutting down")
            try:
                await store.resign(token)
            except Exception:
                log.warning("could not delete /controller on shutdown", exc_info=True)
        event.finished()

    async def on_fenced_write(self, event: events.ControllerEvent, error: ControllerMoved) -> None:
        """A write failed its ``/controller_epoch`` check while handling ``event``: we are deposed."""
        log.warning(
            "controller %d: %s while processing %s; resigning",
            self.controller_id,
            error,
            type(event).__name__,
        )
        self.services.event_log.emit(
            "write_fenced", event=type(event).__name__, reason=str(error), epoch=self.context.epoch
        )
        await self.maybe_resign(force=True)

    # -- election

    async def elect(self) -> None:
        svc = self.services
        store = svc.store
        active = await store.controller_id(watch=svc.watches.controller)
        if active is not None:
            self.active_controller_id = active
            return
        endpoint = self.rpc_endpoint
        protocol = svc.config.listener_protocol
        payload = ControllerRegistration(
            self.controller_id,
            int(time.time() * 1000),
            endpoint.host,
            endpoint.port,
            None if protocol == "PLAINTEXT" else protocol,
        ).encode()
        token = await store.try_elect(self.controller_id, payload)
        if token is None:
            self.active_controller_id = (
                await store.controller_id(watch=svc.watches.controller)
            ) or NO_CONTROLLER
            log.info("controller %d: controller %d is active", self.controller_id, self.active_controller_id)
            return
        await store.controller_id(watch=svc.watches.controller)  # watch our own node
        store.fence(token)
        self.term_session = store.zk.session_id
        self.context.epoch, self.context.epoch_zk_version = token.epoch, token.zk_version
        self.active_controller_id = self.controller_id
        log.info("controller %d is active with epoch %d", self.controller_id, token.epoch)
        svc.event_log.emit(
            "controller_elected",
            controller_id=self.controller_id,
            controller_epoch=token.epoch,
            epoch_zk_version=token.zk_version,
            rpc_endpoint=endpoint.connection_string,
        )
        started = time.monotonic()
        try:
            await self.failover.run()
        except (ControllerMoved, SessionExpiredError):
            raise  # deposed, or the session is gone: the fenced-write and Expire handlers resign
        except Exception:
            log.exception("controller %d: failover failed; giving up leadership", self.controller_id)
            await self._resign("failover failed")
            await store.resign(token)
            return
        svc.event_log.emit(
            "failover_complete",
            controller_epoch=token.epoch,
            brokers=len(self.context.brokers),
            topics=len(self.context.assignments),
            partitions=len(self.context.leadership),
            duration_ms=round((time.monotonic() - started) * 1000, 3),
        )

    async def maybe_resign(self, *, force: bool = False) -> None:
        """Resign when ``/controller`` no longer names this session's node (or when ``force``d)."""
        svc = self.services
        was_active = svc.is_active
        self.active_controller_id, owned = await svc.store.controller_owner(watch=svc.watches.controller)
        still_ours = self.active_controller_id == self.controller_id and owned
        if was_active and (force or not still_ours):
            await self._resign(
                "controller moved"
                if not still_ours
                else "a fenced write failed: another controller was elected"
            )

    async def _resign(self, reason: str) -> None:
        epoch = self.context.epoch
        log.info("controller %d resigning (epoch %d): %s", self.controller_id, epoch, reason)
        await self.services.stop_acting()
        gc.unfreeze()  # what the last incarnation froze can be collected now
        self.services.event_log.emit(
            "controller_resigned", controller_id=self.controller_id, controller_epoch=epoch, reason=reason
        )
