"""A simulated cluster and what can happen to it: the real controllers, simulated brokers and ZooKeeper,
and every action the scheduler may take next, each named by a label that replays it.

Labels name things by identity, never by position (``zk.apply controller-1001``, ``net.request
1001->2``, ``broker.bounce 3``), so a schedule with steps removed still means the same thing where
it can; an action that is not possible at its turn is skipped on replay.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from controller.config import load
from controller.controller import Controller
from controller.sim.brokers import SimBroker, SimNetwork
from controller.sim.invariants import Invariants
from controller.sim.loop import SimLoop
from controller.sim.zk_client import SimKazooClient
from controller.sim.zookeeper import SimZooKeeper
from daemon.eventlog import EventLog
from protocol import ApiKey, ErrorCode
from protocol.ibp import DEFAULT_IBP, control_wire
from protocol.registry import message_codec
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.topic_writes import create_topic, delete_topic

__all__ = ["Action", "SimSettings", "World"]

log = logging.getLogger("controller.sim")

CONTROLLER_IDS = (1001, 1002, 1003)


@dataclass(frozen=True, slots=True)
class SimSettings:
    """The cluster simulated and how often faults come."""

    brokers: int = 3
    controllers: int = 2
    topics: int = 2
    partitions: int = 2
    fault_weight: float = 1.0
    """Relative weight of each fault beside a delivery's 10."""
    max_topics: int = 4
    delete_topic_enable: bool = True
    ibp: str = DEFAULT_IBP


class Action(NamedTuple):
    """One thing that may happen next: its replayable label, how likely it is, and doing it."""

    label: str
    weight: float
    run: Callable[[], object]


class _SimEventLog(EventLog):
    """The controller's event log, kept in memory and shown to the judge (no JSON, no file)."""

    def __init__(self, node: str, hook: Callable[[str, dict[str, Any]], None]) -> None:
        super().__init__(None, node, keep_recent=50)
        self._hook = hook

    def emit(self, kind: str, /, **fields: Any) -> dict[str, Any]:
        event = {"kind": kind, **fields}
        self.count += 1
        self.recent.append(event)
        if len(self.recent) > self._keep:
            del self.recent[0]
        self._hook(kind, fields)
        return event

    def emit_many(self, kind: str, rows: Iterable[dict[str, Any]]) -> int:
        count = 0
        for fields in rows:
            self.emit(kind, **fields)
            count += 1
        return count


class World:
    """The simulated cluster; ``actions()`` lists what may happen next."""

    def __init__(self, settings: SimSettings, loop: SimLoop) -> None:
        self.settings = settings
        self.loop = loop
        self.wire = control_wire(settings.ibp)
        self.server = SimZooKeeper(lambda: int(loop.time() * 1000))
        self.brokers = {
            i: SimBroker(i, self.server, self.wire.dialect) for i in range(1, settings.brokers + 1)
        }
        self.network = SimNetwork(self.brokers)
        for broker in self.brokers.values():
            broker.spawn = self.spawn
        self.judge = Invariants(self.server, self.brokers, deletion=settings.delete_topic_enable)
        self.admin_client = SimKazooClient(self.server, "admin")
        self.admin = AsyncZooKeeper("sim", client=self.admin_client)
        self.controllers: dict[int, Controller] = {}
        self.clients: dict[int, SimKazooClient] = {}
        self.pending: dict[asyncio.Task[Any], str] = {}
        """Tasks the simulator started (starts, RPCs, admin requests) that have not finished."""
        self.failures: list[str] = []
        """Those that ended with an exception."""
        self.topics: list[str] = []
        self.notes: list[str] = []
        """Controller events worth a line in a trace (elections, resignations, fenced writes)."""
        for controller_id in CONTROLLER_IDS[: settings.controllers]:
            self._add_controller(controller_id)

    def _add_controller(self, controller_id: int) -> None:
        environ = {
            "KAFKA_CONTROLLER_ID": str(controller_id),
            "KAFKA_ZOOKEEPER_CONNECT": "sim:2181",
            "KAFKA_DELETE_TOPIC_ENABLE": str(self.settings.delete_topic_enable).lower(),
            "KAFKA_INTER_BROKER_PROTOCOL_VERSION": self.settings.ibp,
        }
        client = SimKazooClient(self.server, f"controller-{controller_id}")
        zk = AsyncZooKeeper("sim", client=client)

        def hook(kind: str, fields: dict[str, Any]) -> None:
            self.judge.on_event(controller_id, kind, fields)
            if kind in ("controller_elected", "controller_resigned", "write_fenced", "failover_complete"):
                epoch = fields.get("controller_epoch", "")
                self.notes.append(f"controller {controller_id}: {kind} {epoch}".rstrip())

        controller = Controller(
            load(None, environ),
            event_log=_SimEventLog(f"controller-{controller_id}", hook),
            zk=zk,
            connect=self.network.connect,
        )
        self.controllers[controller_id] = controller
        self.clients[controller_id] = client
        self.judge.candidate(controller_id, lambda: client.session)

    # -- starting

    def spawn(self, label: str, coro: Any) -> asyncio.Task[Any]:
        task = self.loop.create_task(coro, name=label)
        self.pending[task] = label
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        label = self.pending.pop(task)
        if not task.cancelled() and task.exception() is not None:
            self.failures.append(f"{label}: {task.exception()!r}")

    def start(self) -> None:
        self.spawn("start admin", self.admin.start())
        for controller in self.controllers.values():
            self.spawn(f"start controller {controller.id}", controller.start())
        for broker in self.brokers.values():
            self.spawn(f"start broker {broker.broker_id}", broker.start())
        for index in range(self.settings.topics):
            self._create_topic(f"t{index}", self._assignment(index))

    def _assignment(self, index: int) -> dict[int, tuple[int, ...]]:
        """Every broker a replica of every partition, the preferred leader turning with the partition."""
        ids = sorted(self.brokers)
        return {
            p: tuple(ids[(index + p + k) % len(ids)] for k in range(len(ids)))
            for p in range(self.settings.partitions)
        }

    def _create_topic(self, topic: str, replicas: dict[int, tuple[int, ...]]) -> None:
        self.topics.append(topic)
        self.spawn(f"create {topic}", _quietly(create_topic(self.admin, topic, replicas)))

    # -- what can happen

    def zk_clients(self) -> list[tuple[str, SimKazooClient]]:
        named = [(f"controller-{cid}", client) for cid, client in self.clients.items()]
        named += [(b.host, b.client) for b in self.brokers.values() if b.client is not None]
        named.append(("admin", self.admin_client))
        return named

    def actions(self) -> list[Action]:
        found: list[Action] = []
        fault = self.settings.fault_weight
        for name, client in self.zk_clients():
            if client.can_apply():
                found.append(Action(f"zk.apply {name}", 10, client.apply_one))
            if client.can_deliver():
                found.append(Action(f"zk.deliver {name}", 10, client.deliver_one))
            if client.connected and not client.stopped:
                found.append(Action(f"zk.disconnect {name}", fault, client.disconnect))
            if not client.connected and not client.stopped:
                found.append(Action(f"zk.reconnect {name}", 3, client.reconnect))
            if not client.connected and self.server.alive(client.session):
                found.append(Action(f"zk.expire {name}", fault, self._expirer(client)))
        for connection in self.network.ordered():
            name = f"{connection.client_id.removeprefix('controller-')}->{connection.broker.broker_id}"
            if connection.can_request():
                found.append(Action(f"net.request {name}", 10, connection.deliver_request))
            if connection.can_respond():
                found.append(Action(f"net.response {name}", 10, connection.deliver_response))
        found.append(Action("time.tick", 2, lambda: self.loop.advance(0.1)))
        found.append(Action("time.jump", 1, self._jump))
        found.extend(self._broker_actions(fault))
        found.extend(self._admin_actions(fault))
        return found

    def _expirer(self, client: SimKazooClient) -> Callable[[], None]:
        return lambda: self.server.end_session(client.session or 0)

    def _jump(self) -> None:
        when = self.loop.next_timer()
        if when is not None:
            self.loop.advance(min(max(0.0, when - self.loop.time()), 30.0))

    def _broker_actions(self, fault: float) -> list[Action]:
        found: list[Action] = []
        for broker_id, broker in self.brokers.items():
            if broker.alive:
                found.append(Action(f"broker.crash {broker_id}", fault, self._crash(broker)))
                found.append(Action(f"broker.bounce {broker_id}", fault, self._bounce(broker)))
                if broker.controller_id in self.controllers:
                    found.append(Action(f"broker.shutdown {broker_id}", fault, self._shutdown(broker)))
                    found.extend(self._isr_proposals(broker, 3 * fault))
            elif not broker.registering and znodes.broker_path(broker_id) not in self.server.nodes:
                found.append(Action(f"broker.restart {broker_id}", 3, self._restart(broker)))
        return found

    def _crash(self, broker: SimBroker) -> Callable[[], None]:
        def run() -> None:
            broker.crash()
            self.network.broker_down(broker)

        return run

    def _restart(self, broker: SimBroker) -> Callable[[], None]:
        return lambda: self._spawn_start(broker)

    def _spawn_start(self, broker: SimBroker) -> None:
        self.spawn(f"start broker {broker.broker_id} life {broker.life + 1}", broker.start())

    def _bounce(self, broker: SimBroker) -> Callable[[], None]:
        def run() -> None:
            broker.stop()
            self.network.broker_down(broker)
            self._spawn_start(broker)

        return run

    def _shutdown(self, broker: SimBroker) -> Callable[[], object]:
        """ControlledShutdown to the controller the broker knows; on success the broker stops."""

        async def shut_down() -> None:
            controller = self.controllers[broker.controller_id]
            epoch = broker.epoch
            answer = await controller.handle_controlled_shutdown(
                broker.broker_id, epoch, self.wire.controlled_shutdown
            )
            done = answer["error_code"] == ErrorCode.NONE and not answer["remaining_partitions"]
            if done and broker.alive and broker.epoch == epoch:
                broker.stop()
                self.network.broker_down(broker)

        return lambda: self.spawn(f"shutdown {broker.broker_id}", shut_down())

    def _isr_proposals(self, broker: SimBroker, weight: float) -> list[Action]:
        """The AlterPartitions the broker may send as a leader: drop a follower, or take a replica back
        (any replica: the controller must refuse those that may not join)."""
        found: list[Action] = []
        for tp, view in sorted(broker.partitions.items()):
            if view.leader != broker.broker_id:
                continue
            changes = [
                ("shrink", r, tuple(m for m in view.isr if m != r)) for r in view.isr if r != view.leader
            ]
            changes += [("expand", r, (*view.isr, r)) for r in view.replicas if r not in view.isr]
            for verb, member, new_isr in changes:
                label = f"broker.isr {broker.broker_id} {tp} {verb} {member}"
                run = self._alterer(broker, tp, view.leader_epoch, view.partition_epoch, new_isr)
                found.append(Action(label, weight, run))
        return [Action(a.label, weight / len(found), a.run) for a in found]

    def _alterer(
        self, broker: SimBroker, tp: znodes.TopicPartition, leader_epoch: int, partition_epoch: int,
        new_isr: tuple[int, ...],
    ) -> Callable[[], None]:  # fmt: skip
        return lambda: self._alter_partition(broker, tp, leader_epoch, partition_epoch, new_isr)

    def _alter_partition(
        self, broker: SimBroker, tp: znodes.TopicPartition, leader_epoch: int, partition_epoch: int,
        new_isr: tuple[int, ...],
    ) -> None:  # fmt: skip
        node = self.server.nodes.get(znodes.topic_path(tp.topic))
        topic_id = json.loads(node.data).get("topic_id") if node is not None else None
        if topic_id is None:
            return  # the broker learns a topic's id from its znode; none yet
        version = self.wire.alter_partition
        partition = {
            "partition_index": tp.partition,
            "leader_epoch": leader_epoch,
            "new_isr": list(new_isr),
            "new_isr_with_epochs": [{"broker_id": r, "broker_epoch": -1} for r in new_isr],
            "partition_epoch": partition_epoch,
            "leader_recovery_state": 0,
        }
        body = {
            "broker_id": broker.broker_id,
            "broker_epoch": broker.epoch,
            "topics": [{"topic_id": znodes.parse_topic_id(topic_id), "partitions": [partition]}],
        }
        codec = message_codec(ApiKey.ALTER_PARTITION, version, "request", self.wire.dialect)
        request = codec.decode(codec.encode(body))
        controller = self.controllers[broker.controller_id]
        self.spawn(f"alter {tp} by {broker.broker_id}", controller.handle_alter_partition(request, version))

    def _admin_actions(self, fault: float) -> list[Action]:
        found: list[Action] = []
        if len(self.topics) < self.settings.max_topics:
            topic = f"t{len(self.topics)}"
            replicas = self._assignment(len(self.topics))
            found.append(
                Action(f"admin.create {topic}", fault / 2, lambda: self._create_topic(topic, replicas))
            )
        live = [t for t in self.topics if f"{znodes.BROKER_TOPICS}/{t}" in self.server.nodes]
        for topic in live:
            found.append(Action(f"admin.delete {topic}", fault / 2 / len(live), self._deleter(topic)))
        return found

    def _deleter(self, topic: str) -> Callable[[], object]:
        return lambda: self.spawn(f"delete {topic}", _quietly(delete_topic(self.admin, topic)))

    # -- the state a run ends in

    def unanswered(self) -> list[str]:
        """Requests still waiting: a broker's RPC, a start, or a control request in a channel."""
        waiting = sorted(self.pending.values())
        for controller in self.controllers.values():
            if controller.is_active and controller.channel.total_queue_size():
                waiting.append(
                    f"{controller.channel.total_queue_size()} control requests queued by {controller.id}"
                )
        waiting += [
            f"a request on {c.client_id}->{c.broker.broker_id}"
            for c in self.network.ordered()
            if c.requests or c.responses
        ]
        return waiting


async def _quietly(coro: Any) -> None:
    """An admin request whose refusal (already marked, no such topic) is an answer, not a failure."""
    try:
        await coro
    except Exception as exc:
        log.debug("admin request refused: %s", exc)
