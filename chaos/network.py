"""Network faults on a ``--netns`` cluster: which links each fault cuts, and cutting them.

``cut_plan`` is pure: from the fault, its target and the cluster's nodes, the two groups whose links
are cut (both ways). ``NetworkFaults`` applies and heals them through ``cluster.partitions``, the
same code as ``python -m cluster partition``/``heal``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from chaos.schedule import Node, Step
from cluster import partitions


@dataclass(frozen=True)
class Cut:
    near: tuple[str, ...]
    far: tuple[str, ...]

    def describe(self) -> str:
        return f"cut {','.join(self.near)} from {','.join(self.far)} (both ways)"


def cut_plan(fault: str, target: str, nodes: Sequence[Node]) -> Cut:
    """The links ``fault`` cuts around ``target``:

    - ``isolate``: the target from every other node (a machine off the network);
    - ``isolate-zookeeper``: the target from every ZooKeeper server only, so it still talks to
      clients and the other brokers while its session expires (the classic zombie);
    - ``isolate-controller``: a broker from every controller only (no control requests reach it,
      its AlterPartition requests reach no controller), while its ZooKeeper session lives on;
    - ``isolate-followers``: a broker from the other brokers only: as a leader it keeps ZooKeeper
      and the controller, but its followers cannot fetch and its ISRs shrink;
    - ``bridge``: the other nodes split in two halves that cannot reach each other, both of which
      still reach the target;
    - ``zookeeper-minority``: one ZooKeeper server from the other servers: a minority that stops
      serving while the majority goes on.
    """
    others = [n for n in nodes if n.name != target]
    by_role = {
        role: [n.name for n in others if n.role == role] for role in ("zookeeper", "controller", "broker")
    }
    if fault == "isolate":
        return Cut((target,), tuple(n.name for n in others))
    if fault == "isolate-zookeeper":
        return Cut((target,), tuple(by_role["zookeeper"]))
    if fault == "isolate-controller":
        return Cut((target,), tuple(by_role["controller"]))
    if fault == "isolate-followers":
        return Cut((target,), tuple(by_role["broker"]))
    if fault == "zookeeper-minority":
        return Cut((target,), tuple(by_role["zookeeper"]))
    if fault == "bridge":
        names = [n.name for n in others]
        return Cut(tuple(names[0::2]), tuple(names[1::2]))
    raise ValueError(f"{fault} is not a network fault")


class NetworkFaults:
    def __init__(self, directory: Path, nodes: Sequence[Node]) -> None:
        self.directory = directory
        self.nodes = list(nodes)

    async def inject(self, step: Step) -> str:
        """Cut the links; returns what was cut, for the run's events."""
        cut = cut_plan(step.fault, step.target, self.nodes)
        await asyncio.to_thread(partitions.partition, self.directory, list(cut.near), list(cut.far))
        return cut.describe()

    async def heal(self) -> None:
        await asyncio.to_thread(partitions.heal, self.directory)
