"""``python -m cluster brokers|controller``: the live brokers with their epochs, and the active controller.

What ZooKeeper says (``zkstore.cluster_reads``): ``/brokers/ids/N`` with each registration's czxid,
the broker epoch of KIP-380, and ``/controller`` with ``/controller_epoch`` and its znode version.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from cluster.admin_cli import guarded, print_json, print_table, with_zookeeper
from zkstore import cluster_reads

__all__ = ["register"]


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add ``brokers`` and ``controller`` to ``python -m cluster``'s subparsers."""
    brokers = commands.add_parser(
        "brokers", parents=[common], help="live brokers: epochs (czxids), endpoints"
    )
    brokers.set_defaults(run=guarded(run_brokers))

    controller = commands.add_parser("controller", parents=[common], help="active controller and its epoch")
    controller.set_defaults(run=guarded(run_controller))


def run_brokers(args: argparse.Namespace) -> int:
    brokers = with_zookeeper(args, cluster_reads.broker_list)
    if args.json:
        print_json({"brokers": [asdict(b) for b in brokers]})
    else:
        rows = [(b.broker_id, b.epoch, f"0x{b.epoch:x}", b.endpoints, b.rack) for b in brokers]
        print_table(("ID", "EPOCH", "EPOCH-HEX", "ENDPOINTS", "RACK"), rows)
    return 0


def run_controller(args: argparse.Namespace) -> int:
    info = with_zookeeper(args, cluster_reads.controller_info)
    if args.json:
        print_json(asdict(info))
    else:
        row = (info.controller_id, info.epoch, info.epoch_zk_version, info.rpc_endpoint)
        print_table(("CONTROLLER-ID", "EPOCH", "EPOCH-ZK-VERSION", "RPC-ENDPOINT"), [row])
    return 0
