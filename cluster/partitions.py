"""Network partitions between the nodes of a ``--netns`` cluster: cut, heal, and what is cut now.

The cuts live in the namespaces themselves (see ``netns``), so what ``active`` reports is what the
kernel drops, whoever made the cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cluster import netns, state_file
from cluster.netns import Network
from cluster.state_file import ClusterError


def _network(directory: Path) -> Network:
    network = state_file.network_of(state_file.load_state(directory))
    if network is None:
        raise ClusterError(f"the cluster in {directory} was not started with --netns: nothing to cut")
    return network


def groups(network: Network, nodes: Sequence[str], others: Sequence[str]) -> tuple[list[str], list[str]]:
    """``nodes`` and the group they are cut from: ``others``, or every other node when empty."""
    for name in (*nodes, *others):
        network.node(name)
    if not nodes:
        raise ClusterError("name at least one node to cut off")
    rest = list(others) or [n for n in network.nodes if n not in nodes]
    if set(nodes) & set(rest):
        raise ClusterError(f"a node cannot be on both sides: {sorted(set(nodes) & set(rest))}")
    return list(nodes), rest


def partition(
    directory: Path, nodes: Sequence[str], others: Sequence[str] = (), *, one_way: bool = False
) -> list[tuple[str, str]]:
    """Cut ``nodes`` off from ``others`` (every other node by default), both ways unless ``one_way``
    (then only what ``others`` send to ``nodes`` is dropped); returns every cut now in force."""
    network = _network(directory)
    near, far = groups(network, nodes, others)
    try:
        netns.cut(network, to=near, sources=far)
        if not one_way:
            netns.cut(network, to=far, sources=near)
    except netns.NetnsError as exc:
        raise ClusterError(str(exc)) from None
    return netns.cuts(network)


def heal(directory: Path, nodes: Sequence[str] = ()) -> list[tuple[str, str]]:
    """Remove every cut (or those made in ``nodes``' namespaces and towards them); returns what is left."""
    network = _network(directory)
    if not nodes:
        netns.heal(network)
    else:
        for name in nodes:
            network.node(name)
        involved = {s for s, t in netns.cuts(network) if s in nodes or t in nodes}
        netns.heal(network, sorted(involved))
    return netns.cuts(network)


def active(directory: Path) -> list[tuple[str, str]]:
    """(from, to) for every cut in force; empty for a cluster without namespaces."""
    network = state_file.network_of(state_file.load_state(directory))
    return netns.cuts(network) if network is not None else []
