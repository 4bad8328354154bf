"""Which fault, on which node, after how long: a pure function of the seed and the cluster's nodes.

Keeping the choice apart from the doing makes a run reproducible (the same seed against the same
layout gives the same faults in the same order) and lets the safety rules be tested without a
cluster: a node is a target only if the cluster keeps working while it alone is down.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos import ChaosError
from daemon.config import ZOOKEEPER_SESSION_TIMEOUT_MS, ConfigError, parse_properties

PROCESS_FAULTS = ("kill", "bounce", "restart", "pause")
ENDING = frozenset({"kill", "bounce", "restart"})
"""Faults that end the target's process: it comes back as a new one (a broker with a new epoch)."""
NETWORK_FAULTS = (
    "isolate",
    "isolate-zookeeper",
    "isolate-controller",
    "isolate-followers",
    "bridge",
    "zookeeper-minority",
)
"""Cuts between nodes; they need a cluster started with ``--netns`` (see docs/chaos.md)."""
ZOOKEEPER_FAULTS = ("zookeeper-restart", "zookeeper-leader-kill", "quorum-loss")
FAULTS = PROCESS_FAULTS + NETWORK_FAULTS + ZOOKEEPER_FAULTS
DEFAULT_FAULTS = PROCESS_FAULTS
ROLES = ("broker", "controller", "zookeeper")
EXPIRING = frozenset({"pause", "isolate", "isolate-zookeeper"})
"""Faults that keep the target from ZooKeeper past its session timeout: a broker comes back from
them with a new registration (a new epoch)."""
QUORUM_BREAKING = frozenset({"quorum-loss"})
ZOOKEEPER_DOWN_S = 3.0
"""How long a restarted or killed ZooKeeper server stays down."""
QUORUM_LOSS_S = 8.0
"""How long two of three ZooKeeper servers stay down in a quorum loss."""
KILL_DOWN_S = 3.0
"""How long a killed node stays down before it is started again."""
PAUSE_FACTOR = 1.5
"""A pause lasts this many session timeouts, so that ZooKeeper surely expires the paused session."""
DEFAULT_SESSION_TIMEOUT_S = 6.0
"""For nodes whose session timeout is unknown (ZooKeeper servers); the launcher's daemons use 6 s."""


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    role: str
    session_timeout_s: float | None = None
    """The daemon's ``zookeeper.session.timeout.ms`` in seconds; None for ZooKeeper servers."""
    kafka: bool = False
    """An Apache Kafka broker, whose own controller also competes for ``/controller``."""


@dataclass(frozen=True, slots=True)
class Step:
    """One fault: wait ``wait_s``, do ``fault`` to ``target``, keep it so for ``hold_s``, then heal it.

    ``hold_s`` is 0 for faults that undo themselves (bounce, restart).
    """

    wait_s: float
    fault: str
    target: str
    role: str
    hold_s: float


def nodes_of(state: Mapping[str, Any]) -> list[Node]:
    """The nodes of a ``cluster.json`` state, with each daemon's session timeout read from its config."""
    nodes = []
    for process in state["processes"]:
        if process["role"] not in ROLES:  # a --monitor cluster's Prometheus is no node to break
            continue
        timeout = None
        if process["role"] != "zookeeper":
            timeout = _session_timeout_s(Path(process["config"]))
        nodes.append(Node(process["name"], process["role"], timeout, process.get("kind") == "kafka"))
    return nodes


def _session_timeout_s(config: Path) -> float:
    """The daemon's ``zookeeper.session.timeout.ms``, read as the daemon reads it, so that a pause
    outlasts the real session; a config that cannot be read is an error, not a guess."""
    key = ZOOKEEPER_SESSION_TIMEOUT_MS
    try:
        text = parse_properties(config.read_text(encoding="utf-8")).get(key.name)
        value = key.default if text is None else key.convert(text)
    except OSError as exc:
        raise ChaosError(f"cannot read {config}: {exc.strerror or exc}") from None
    except ConfigError as exc:
        raise ChaosError(f"{config}: {exc}") from None
    return value / 1000


def eligible_targets(nodes: Iterable[Node], roles: Iterable[str]) -> list[Node]:
    """Nodes of ``roles`` that may go down alone: a controller only when another candidate remains (one
    of ours, or a Kafka broker's controller), a ZooKeeper server only in an ensemble of three or more
    (the quorum survives), any broker."""
    nodes = list(nodes)
    wanted = set(roles)
    count = {role: sum(1 for n in nodes if n.role == role) for role in ROLES}
    count["controller"] += sum(1 for n in nodes if n.kafka)
    minimum = {"broker": 1, "controller": 2, "zookeeper": 3}
    return [n for n in nodes if n.role in wanted and count[n.role] >= minimum.get(n.role, 1)]


def fault_targets(fault: str, nodes: Sequence[Node], roles: Iterable[str]) -> list[Node]:
    """The nodes ``fault`` may hit. Process faults and ``isolate`` take what ``eligible_targets``
    allows; the other cuts need a broker (and, for a bridge, two more brokers to split around it);
    ZooKeeper faults hit ZooKeeper servers whatever ``roles`` says, one alone in a standalone
    setup only by a restart."""
    count = {role: sum(1 for n in nodes if n.role == role) for role in ROLES}
    wanted = set(roles)
    if fault in PROCESS_FAULTS or fault == "isolate":
        return eligible_targets(nodes, roles)
    if fault == "isolate-zookeeper":
        return [n for n in eligible_targets(nodes, roles) if n.role != "zookeeper"]
    if fault in ("isolate-controller", "isolate-followers", "bridge"):
        enough = {"isolate-controller": count["controller"] >= 1, "isolate-followers": count["broker"] >= 2}
        if not enough.get(fault, count["broker"] >= 3) or "broker" not in wanted:
            return []
        return [n for n in nodes if n.role == "broker"]
    zookeepers = [n for n in nodes if n.role == "zookeeper"]
    if fault == "zookeeper-restart":
        return zookeepers
    return zookeepers if len(zookeepers) >= 3 else []


def hold_s(fault: str, node: Node) -> float:
    if fault == "kill":
        return KILL_DOWN_S
    if fault in ("zookeeper-restart", "zookeeper-leader-kill"):
        return ZOOKEEPER_DOWN_S
    if fault == "quorum-loss":
        return QUORUM_LOSS_S
    if fault == "pause" or fault in NETWORK_FAULTS:
        return round(PAUSE_FACTOR * (node.session_timeout_s or DEFAULT_SESSION_TIMEOUT_S), 3)
    return 0.0


class FaultSchedule:
    """An endless, seeded sequence of :class:`Step`; the pauses between faults average ``interval_s``.

    Steps are meant to be carried out one after the other, each healed before the next wait starts,
    so that no more than one node is ever down.
    """

    def __init__(
        self,
        nodes: Iterable[Node],
        *,
        faults: Sequence[str] = DEFAULT_FAULTS,
        roles: Sequence[str] = ("broker", "controller"),
        interval_s: float = 8.0,
        seed: int = 0,
        cuts: Collection[str] = (),
    ) -> None:
        """``cuts``: the network faults the cluster can make (all of them with ``--netns``, none on
        loopback, ``isolate`` in compose)."""
        unknown = sorted(set(faults) - set(FAULTS)) + sorted(set(roles) - set(ROLES))
        if unknown:
            raise ChaosError(f"unknown fault or role: {', '.join(unknown)}")
        if not faults:
            raise ChaosError("no fault kinds enabled")
        if interval_s <= 0:
            raise ChaosError("the interval between faults must be positive")
        impossible = [f for f in faults if f in NETWORK_FAULTS and f not in cuts]
        if impossible:
            possible = f"it can only {', '.join(cuts)}" if cuts else "it can cut none"
            raise ChaosError(
                f"{', '.join(impossible)} cut links between nodes, which this cluster cannot do "
                f"({possible}): a local cluster started with `python -m cluster up --netns` (root only) "
                "can make every cut"
            )
        nodes = list(nodes)
        self.targets_of = {f: fault_targets(f, nodes, roles) for f in faults}
        self.faults = tuple(f for f in faults if self.targets_of[f])
        if not self.faults:
            raise ChaosError(
                f"no node of {', '.join(roles)} can go down alone "
                "(a controller needs a second candidate, a ZooKeeper server an ensemble of 3)"
            )
        self.interval_s = interval_s
        self.seed = seed

    def __iter__(self) -> Iterator[Step]:
        rng = random.Random(self.seed)
        while True:
            wait = round(rng.uniform(0.5, 1.5) * self.interval_s, 3)
            fault = rng.choice(self.faults)
            node = rng.choice(self.targets_of[fault])
            yield Step(wait, fault, node.name, node.role, hold_s(fault, node))
