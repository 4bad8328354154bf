"""The simulator's judge: what must hold after every step, and what must have happened once the faults stop.

Safety, checked as it happens (every ZooKeeper transaction, every control request a broker applies,
every controller event):

* at most one controller is elected in each epoch, and the controller epoch never goes back;
* a partition's leader epoch never goes back, and moves forward whenever its leader changes;
* no replica joins an ISR unless it is registered, nor while the writing controller has accepted
  its controlled shutdown in its current registration (KIP-841);
* no broker applies a control request meant for an earlier registration of itself;
* with ``delete.topic.enable=false``, no topic is ever deleted.

Liveness, checked once the simulator has healed every fault and let the cluster settle:

* exactly one controller is active, and it owns ``/controller``;
* with every broker back, every requested topic deletion is done;
* every partition that has a live replica in its ISR is led by a live broker, and every live
  replica was told that leader epoch;
* every live broker's last UpdateMetadata lists exactly the live brokers;
* every request a broker sent the controller was answered, and no control request waits unanswered.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from controller.sim.brokers import Accepted, SimBroker
from controller.sim.zookeeper import Change, SimZooKeeper
from zkstore import znodes

__all__ = ["Invariants", "Violation"]


class Violation(AssertionError):
    """An invariant broken: the message says which and how."""


@dataclass(slots=True)
class _Candidate:
    """What the judge knows of one controller candidate's current term."""

    controller_id: int
    session: Callable[[], int | None]
    shutting_down: dict[int, int] = field(default_factory=dict)
    """Broker id -> the registration epoch whose controlled shutdown this term accepted."""


def _json(data: bytes | None) -> dict[str, Any] | None:
    if not data:
        return None
    value = json.loads(data)
    return value if isinstance(value, dict) else None


def _is_topic_path(path: str) -> bool:
    head, _, topic = path.rpartition("/")
    return head == znodes.BROKER_TOPICS and bool(topic)


class Invariants:
    """Checks one simulated cluster; every method raises :class:`Violation` when a rule breaks."""

    def __init__(self, server: SimZooKeeper, brokers: dict[int, SimBroker], *, deletion: bool) -> None:
        self.server = server
        self.brokers = brokers
        self.deletion = deletion
        self.candidates: dict[int, _Candidate] = {}
        self.elected: dict[int, int] = {}
        """Controller epoch -> the candidate elected in it."""
        self.controller_epoch = 0
        self.leader_epochs: dict[str, tuple[int, int]] = {}
        """Partition state path -> (leader epoch, leader) last written."""
        self._accepted_seen: dict[int, int] = {}
        server.observers.append(self.on_transaction)

    # -- what the simulator tells the judge

    def candidate(self, controller_id: int, session: Callable[[], int | None]) -> None:
        self.candidates[controller_id] = _Candidate(controller_id, session)

    def on_event(self, controller_id: int, kind: str, fields: dict[str, Any]) -> None:
        """A controller's event log line (elections, resignations, controlled shutdowns)."""
        candidate = self.candidates[controller_id]
        if kind == "controller_elected":
            epoch = fields["controller_epoch"]
            earlier = self.elected.setdefault(epoch, controller_id)
            if earlier != controller_id:
                raise Violation(
                    f"controllers {earlier} and {controller_id} were both elected in epoch {epoch}"
                )
            candidate.shutting_down.clear()
        elif kind == "controller_resigned":
            candidate.shutting_down.clear()
        elif kind == "controlled_shutdown_started":
            candidate.shutting_down[fields["broker"]] = fields["broker_epoch"]

    def on_transaction(self, changes: list[Change]) -> None:
        for change in changes:
            if change.path == znodes.CONTROLLER_EPOCH and change.after is not None:
                epoch = int(change.after)
                if epoch < self.controller_epoch:
                    raise Violation(f"/controller_epoch went back from {self.controller_epoch} to {epoch}")
                self.controller_epoch = epoch
            elif znodes.parse_partition_state_path(change.path) is not None:
                self._partition_state(change)
            elif not self.deletion and change.after is None and _is_topic_path(change.path):
                raise Violation(f"{change.path} was deleted although delete.topic.enable=false")

    def _partition_state(self, change: Change) -> None:
        if change.after is None:
            self.leader_epochs.pop(change.path, None)
            return
        state = _json(change.after)
        if state is None:
            return
        epoch, leader = state["leader_epoch"], state["leader"]
        before = self.leader_epochs.get(change.path)
        if before is not None:
            if epoch < before[0]:
                raise Violation(f"{change.path}: leader epoch went back from {before[0]} to {epoch}")
            if leader != before[1] and epoch == before[0]:
                raise Violation(f"{change.path}: leader {before[1]} -> {leader} kept leader epoch {epoch}")
        self.leader_epochs[change.path] = (epoch, leader)
        old_isr = set((_json(change.before) or {}).get("isr", ()))
        for member in state["isr"]:
            if member not in old_isr:
                self._may_join(change, member)

    def _may_join(self, change: Change, member: int) -> None:
        registration = self.server.nodes.get(znodes.broker_path(member))
        if registration is None:
            raise Violation(f"{change.path}: broker {member} joined the ISR while not registered")
        writer = next((c for c in self.candidates.values() if c.session() == change.session), None)
        if writer is not None and writer.shutting_down.get(member) == registration.czxid:
            raise Violation(
                f"{change.path}: controller {writer.controller_id} added broker {member} to the ISR after"
                f" accepting its controlled shutdown (epoch {registration.czxid})"
            )

    def after_step(self) -> None:
        """Every control request applied since the last step: none meant for an earlier registration."""
        for broker in self.brokers.values():
            seen = self._accepted_seen.get(broker.broker_id, 0)
            for accepted in broker.accepted[seen:]:
                self._fenced(accepted)
            self._accepted_seen[broker.broker_id] = len(broker.accepted)

    @staticmethod
    def _fenced(accepted: Accepted) -> None:
        stale = accepted.epoch < accepted.own_epoch
        if accepted.epoch_field == "broker_epoch" and accepted.epoch == -1:
            stale = False  # a controller older than KIP-380 (Kafka's rule for per-broker versions)
        if stale:
            raise Violation(
                f"broker {accepted.broker} (epoch {accepted.own_epoch}) applied {accepted.api}"
                f" v{accepted.version} with {accepted.epoch_field} {accepted.epoch}, meant for an earlier"
                " registration"
            )

    # -- once settled

    def settled(
        self, active: Iterable[tuple[int, bool, int | None]], unanswered: list[str], *, everyone_back: bool
    ) -> None:
        """``active``: per candidate (id, is_active, its session); ``unanswered``: what still waits;
        ``everyone_back``: every broker is up again, so every requested deletion must be done."""
        holders = [(controller_id, session) for controller_id, is_active, session in active if is_active]
        if len(holders) != 1:
            raise Violation(f"{len(holders)} active controllers once settled: {[h[0] for h in holders]}")
        node = self.server.nodes.get(znodes.CONTROLLER)
        if node is None or node.owner != holders[0][1]:
            raise Violation(f"controller {holders[0][0]} is active but does not own /controller")
        if unanswered:
            raise Violation("unanswered once settled: " + ", ".join(unanswered))
        self._partitions_led()
        self._metadata_converged()
        pending = self.server.nodes.get(znodes.DELETE_TOPICS)
        if everyone_back and self.deletion and pending is not None and pending.children:
            raise Violation(f"topic deletion never finished for {sorted(pending.children)}")

    def _up(self) -> dict[int, SimBroker]:
        """The brokers running and registered as they are now (the registration's czxid is their epoch)."""
        up = {}
        for broker_id, broker in self.brokers.items():
            node = self.server.nodes.get(znodes.broker_path(broker_id))
            if broker.alive and node is not None and node.czxid == broker.epoch:
                up[broker_id] = broker
        return up

    def _metadata_converged(self) -> None:
        live = set(self._up())
        for broker_id in sorted(live):
            listed = self.brokers[broker_id].live_brokers & set(self.brokers)
            if listed != live:
                told, truth = sorted(listed), sorted(live)
                raise Violation(f"broker {broker_id} was last told the live brokers are {told}, not {truth}")

    def _partitions_led(self) -> None:
        live = self._up()
        for path, node in sorted(self.server.nodes.items()):
            tp = znodes.parse_partition_state_path(path)
            if tp is None or self.server.nodes.get(znodes.delete_topic_path(tp.topic)) is not None:
                continue
            state = _json(node.data) or {}
            if not any(member in live for member in state.get("isr", ())):
                continue
            leader = state["leader"]
            if leader not in live:
                raise Violation(f"{tp} has live ISR members {state['isr']} but leader {leader} once settled")
            for broker_id in state["isr"]:
                view = live[broker_id].partitions.get(tp) if broker_id in live else None
                if broker_id in live and (view is None or view.leader_epoch != state["leader_epoch"]):
                    told = None if view is None else view.leader_epoch
                    raise Violation(
                        f"{tp}: live ISR member {broker_id} knows leader epoch {told},"
                        f" ZooKeeper has {state['leader_epoch']}"
                    )
