"""Planning a --netns cluster's namespaces, links, addresses and cuts (pure: no namespace is made)."""

from __future__ import annotations

import ipaddress

import pytest

from cluster import netns

NAMES = ["zookeeper-1", "controller-1", "broker-1", "broker-2"]


def test_every_node_gets_its_own_address_namespace_and_short_link_names() -> None:
    network = netns.plan("1a2b", NAMES)
    addresses = [n.address for n in network.nodes.values()]
    subnet = ipaddress.ip_interface(f"{network.host_address}/{network.prefix_length}").network
    assert len(set(addresses)) == len(NAMES) and network.host_address not in addresses
    assert all(ipaddress.ip_address(a) in subnet for a in addresses)
    assert subnet.subnet_of(netns.NETWORK_BASE)
    links = [network.bridge, *(n.host_link for n in network.nodes.values())]
    assert all(len(name) <= 15 for name in links), "Linux interface names are at most 15 characters"
    assert all(n.namespace.startswith("kz1a2b-") for n in network.nodes.values())
    assert network.prefix("broker-2") == ["ip", "netns", "exec", "kz1a2b-broker-2"]


def test_a_subnet_the_host_uses_is_never_picked() -> None:
    first = netns.plan("1a2b", NAMES)
    taken = ipaddress.ip_interface(f"{first.host_address}/{first.prefix_length}").network
    second = netns.plan("1a2b", NAMES, [taken])
    assert second.host_address != first.host_address
    assert ipaddress.ip_address(second.host_address) not in taken


def test_the_plan_survives_cluster_json() -> None:
    network = netns.plan("beef", NAMES)
    assert netns.Network.from_json(network.as_json()) == network


def test_a_cut_is_a_route_in_each_sending_namespace() -> None:
    network = netns.plan("1a2b", NAMES)
    routes = netns.cut_routes(network, to=["zookeeper-1"], sources=["broker-1", "broker-2"])
    assert routes == [
        ("kz1a2b-broker-1", network.node("zookeeper-1").address),
        ("kz1a2b-broker-2", network.node("zookeeper-1").address),
    ]


def test_an_unknown_node_is_a_clear_error() -> None:
    with pytest.raises(netns.NetnsError, match="no node 'broker-9'"):
        netns.plan("1a2b", NAMES).node("broker-9")
