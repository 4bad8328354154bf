"""Every node of a local cluster on its own network namespace and address, so links can be cut.

One bridge in the host's namespace holds the host's address (``.1``); each node gets a namespace with
one end of a veth pair on that bridge and an address of its own (``.2`` on). Clients on the host
reach the nodes at those addresses. Nothing outside what a run created is touched: the bridge, the
veth pairs and the namespaces carry the run's tag in their names, and ``destroy`` removes exactly
those (it is safe to call again, and after a launcher that crashed half-way).

A cut is a blackhole route inside the sending node's namespace: its packets to the other node's
address are dropped silently, as a partitioned network drops them (no reset, no ICMP error), so
TCP connections stall and time out. Cutting both directions is a route on each side; a one-way
cut leaves the other direction open, which for TCP still means no working connection but lets
either side's first packets arrive.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

BRIDGE_PREFIX = "kzbr"
NETWORK_BASE = ipaddress.IPv4Network("10.200.0.0/13")
"""Where run subnets (/24 each) are picked from: 10.200.0.0 to 10.207.255.0."""


class NetnsError(RuntimeError):
    """A namespace operation that cannot be done here; the message says why."""


@dataclass(frozen=True)
class Node:
    name: str
    namespace: str
    address: str
    host_link: str
    """The veth end on the bridge, in the host's namespace."""
    node_link: str
    """The veth end inside the node's namespace."""


@dataclass(frozen=True)
class Network:
    tag: str
    bridge: str
    host_address: str
    prefix_length: int
    nodes: dict[str, Node]

    def node(self, name: str) -> Node:
        try:
            return self.nodes[name]
        except KeyError:
            raise NetnsError(f"no node {name!r} in this network (nodes: {', '.join(self.nodes)})") from None

    def prefix(self, name: str) -> list[str]:
        """The command prefix that runs a program in ``name``'s namespace."""
        return exec_in(self.node(name).namespace)

    def as_json(self) -> dict[str, Any]:
        return {
            "tag": self.tag,
            "bridge": self.bridge,
            "host_address": self.host_address,
            "prefix_length": self.prefix_length,
            "nodes": {
                n.name: [n.namespace, n.address, n.host_link, n.node_link] for n in self.nodes.values()
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Network:
        nodes = {name: Node(name, *values) for name, values in data["nodes"].items()}
        return cls(data["tag"], data["bridge"], data["host_address"], data["prefix_length"], nodes)


def exec_in(namespace: str | None) -> list[str]:
    """The command prefix that runs a program in ``namespace`` (none for the host's own)."""
    return ["ip", "netns", "exec", namespace] if namespace else []


# -- planning (pure)


def plan(tag: str, names: Sequence[str], taken: Iterable[ipaddress.IPv4Network] = ()) -> Network:
    """Names and addresses for ``names`` under run ``tag`` (a few hex digits), on a /24 of
    ``NETWORK_BASE`` that overlaps none of ``taken`` (the host's own networks)."""
    if len(names) > 250:
        raise NetnsError("at most 250 nodes fit on one bridge")
    subnets = list(NETWORK_BASE.subnets(new_prefix=24))
    start = int(hashlib.sha256(tag.encode()).hexdigest(), 16) % len(subnets)
    busy = list(taken)
    for i in range(len(subnets)):
        subnet = subnets[(start + i) % len(subnets)]
        if not any(subnet.overlaps(t) for t in busy):
            break
    else:
        raise NetnsError(f"no free /24 left in {NETWORK_BASE}")
    hosts = list(subnet.hosts())
    nodes = {
        name: Node(name, f"kz{tag}-{name}", str(hosts[i + 1]), f"kz{tag}h{i}", f"kz{tag}n{i}")
        for i, name in enumerate(names)
    }
    return Network(tag, f"{BRIDGE_PREFIX}{tag}", str(hosts[0]), subnet.prefixlen, nodes)


def cut_routes(network: Network, to: Sequence[str], sources: Sequence[str]) -> list[tuple[str, str]]:
    """(namespace of a source, address it must not reach) for cutting ``sources`` off from ``to``."""
    return [(network.node(s).namespace, network.node(t).address) for s in sources for t in to if s != t]


# -- the shell


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise NetnsError(f"`ip {' '.join(args)}` failed: {result.stderr.strip() or result.returncode}")
    return result


def unavailable() -> str | None:
    """Why namespaces cannot be made here, or None when they can (root, iproute2, the kernel)."""
    if os.geteuid() != 0:
        return "network namespaces need root (run as root, or without --netns)"
    if shutil.which("ip") is None:
        return "network namespaces need iproute2's `ip` (apt-get install iproute2)"
    probe = f"kzprobe{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"this machine does not allow network namespaces: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def host_networks() -> list[ipaddress.IPv4Network]:
    """The IPv4 networks the host's interfaces are on."""
    out = _ip("-4", "-o", "addr", "show").stdout
    return [
        ipaddress.IPv4Interface(fields[3]).network
        for fields in (line.split() for line in out.splitlines())
        if len(fields) > 3
    ]


def create(network: Network) -> None:
    """Make the bridge, then each node's namespace with its address and a default route."""
    bridge = network.bridge
    _ip("link", "add", bridge, "type", "bridge")
    _ip("addr", "add", f"{network.host_address}/{network.prefix_length}", "dev", bridge)
    _ip("link", "set", bridge, "up")
    for node in network.nodes.values():
        _ip("netns", "add", node.namespace)
        _ip("link", "add", node.host_link, "type", "veth", "peer", "name", node.node_link)
        _ip("link", "set", node.node_link, "netns", node.namespace)
        _ip("link", "set", node.host_link, "master", bridge, "up")
        ns = ("-n", node.namespace)
        _ip(*ns, "addr", "add", f"{node.address}/{network.prefix_length}", "dev", node.node_link)
        _ip(*ns, "link", "set", node.node_link, "up")
        _ip(*ns, "link", "set", "lo", "up")
        _ip(*ns, "route", "add", "default", "via", network.host_address)


def destroy(network: Network) -> None:
    """Remove the run's namespaces (their veth ends go with them) and its bridge; missing ones are
    fine."""
    for node in network.nodes.values():
        _ip("netns", "del", node.namespace, check=False)
        _ip("link", "del", node.host_link, check=False)
    _ip("link", "del", network.bridge, check=False)


def cut(network: Network, to: Sequence[str], sources: Sequence[str]) -> None:
    """Drop every packet from ``sources`` to ``to``."""
    for namespace, address in cut_routes(network, to, sources):
        _ip("-n", namespace, "route", "replace", "blackhole", f"{address}/32")


def heal(network: Network, names: Sequence[str] | None = None) -> None:
    """Remove the cuts made in ``names``' namespaces (every node's when None)."""
    for node in network.nodes.values() if names is None else [network.node(n) for n in names]:
        listed = _ip("-n", node.namespace, "route", "show", "type", "blackhole", check=False).stdout
        for line in listed.splitlines():
            fields = line.split()
            if len(fields) >= 2 and fields[0] == "blackhole":
                _ip("-n", node.namespace, "route", "del", "blackhole", fields[1], check=False)


def cuts(network: Network) -> list[tuple[str, str]]:
    """(from node, to node) for every cut in force, read from the namespaces themselves."""
    by_address = {n.address: n.name for n in network.nodes.values()}
    found = []
    for node in network.nodes.values():
        listed = _ip("-n", node.namespace, "route", "show", "type", "blackhole", check=False).stdout
        for line in listed.splitlines():
            fields = line.split()
            if len(fields) >= 2 and fields[1].split("/")[0] in by_address:
                found.append((node.name, by_address[fields[1].split("/")[0]]))
    return sorted(found)
